// The test tools built from their pinned Go modules by test/tools/build.sh (Helm, JobSet, Kueue,
// kube-state-metrics), each built on first use: minutes cold, instant warm.
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { REPO } from './cli.ts';

const TOOLS_BUILD = path.join(REPO, 'test', 'tools', 'build.sh');

/** The path of `binary` from test/tools/<tool>, built if needed. */
export function toolBinary(tool: string, binary: string): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', [TOOLS_BUILD, tool], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    child.on('error', reject);
    child.on('close', (code) => {
      const bin = path.join(out.trim().split('\n').pop() ?? '', binary);
      if (code === 0 && fs.existsSync(bin)) resolve(bin);
      else reject(new Error(`${TOOLS_BUILD} ${tool} failed (exit ${code})`));
    });
  });
}
