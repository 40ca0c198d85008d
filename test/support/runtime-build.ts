// Builds a runtime of test/runtimes/ with its build.sh (cached there); for the runtime drivers.
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const RUNTIMES_BUILD = path.join(REPO_ROOT, 'test', 'runtimes', 'build.sh');

/** Runs test/runtimes/build.sh NAME (cached); returns the directory holding the binaries. */
export async function buildRuntime(name: string, bins: string[]): Promise<string> {
  const child = spawn('bash', [RUNTIMES_BUILD, name], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (d: string) => (out += d));
  const code = await new Promise<number | null>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', resolve);
  });
  if (code !== 0) throw new Error(`${RUNTIMES_BUILD} ${name} failed with exit code ${code}`);
  const dir = out.trim().split('\n').pop() ?? '';
  for (const b of bins) {
    if (!fs.existsSync(path.join(dir, b))) throw new Error(`${RUNTIMES_BUILD} ${name} printed ${dir}, which has no ${b}`);
  }
  return dir;
}
