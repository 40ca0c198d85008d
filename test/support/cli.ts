// Runs the built CLI as a user would: a child process, real argv, real exit status.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse } from 'yaml';

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
export const CLI = join(REPO, 'dist/src/cli/main.js');

function newestMtime(path: string): number {
  const st = statSync(path);
  if (!st.isDirectory()) return st.mtimeMs;
  let newest = 0;
  for (const entry of readdirSync(path)) newest = Math.max(newest, newestMtime(join(path, entry)));
  return newest;
}

/** Builds dist/ when it is missing or older than its inputs. */
export function ensureBuilt(): void {
  const inputs = ['src', 'scripts/build.ts', 'package.json', 'package-lock.json'].map((p) => join(REPO, p));
  if (existsSync(CLI) && statSync(CLI).mtimeMs >= Math.max(...inputs.filter(existsSync).map(newestMtime))) return;
  const result = spawnSync('npm', ['run', 'build'], { cwd: REPO, encoding: 'utf8' });
  if (result.status !== 0) throw new Error(`npm run build failed:\n${result.stdout}\n${result.stderr}`);
}

// Credentials that must never appear in any output of the CLI: the test cluster's (read from
// $IMAGEPULL_SWEEPER_TEST_KUBECONFIG) and any a test registers. Every run is checked.
const secrets = new Set<string>();

/** Adds a credential string (and its base64 form) that no CLI output may contain. */
export function registerSecret(secret: string): void {
  if (secret.length < 8) return;
  secrets.add(secret);
  secrets.add(Buffer.from(secret).toString('base64'));
}

/** Registers the tokens and key material of a kubeconfig file. */
export function registerKubeconfigSecrets(path: string): void {
  const cfg = parse(readFileSync(path, 'utf8')) as { users?: { user?: Record<string, unknown> }[] };
  for (const { user } of cfg.users ?? []) {
    for (const key of ['token', 'password', 'client-key-data']) {
      const value = user?.[key];
      if (typeof value !== 'string') continue;
      registerSecret(value);
      if (key === 'client-key-data') {
        // The PEM body lines of the key, each long enough to identify it.
        for (const line of Buffer.from(value, 'base64').toString('utf8').split('\n'))
          if (!line.startsWith('-----')) registerSecret(line.trim());
      }
    }
  }
}

const testKubeconfig = process.env.IMAGEPULL_SWEEPER_TEST_KUBECONFIG;
if (testKubeconfig && existsSync(testKubeconfig)) registerKubeconfigSecrets(testKubeconfig);

/** Throws when `text` holds a registered credential (naming only its last characters). */
export function assertNoSecrets(text: string, what = 'CLI output'): void {
  for (const secret of secrets) {
    if (text.includes(secret)) throw new Error(`${what} contains credential material (…${secret.slice(-4)})`);
  }
}

export interface Exec {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Runs a command to completion, collecting its output; never rejects on a non-zero exit. */
export function exec(
  command: string,
  args: string[],
  options: { cwd?: string; env?: NodeJS.ProcessEnv; timeoutMs?: number; input?: string } = {},
): Promise<Exec> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(command, args, {
      cwd: options.cwd ?? REPO,
      env: options.env ?? process.env,
      stdio: ['pipe', 'pipe', 'pipe'],
      timeout: options.timeoutMs ?? 120_000,
      killSignal: 'SIGKILL',
    });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code, signal) => {
      try {
        assertNoSecrets(stdout + stderr, `output of ${[command, ...args].join(' ').slice(0, 200)}`);
      } catch (error) {
        reject(error as Error);
        return;
      }
      resolvePromise({ code, signal, stdout, stderr });
    });
    child.stdin.end(options.input ?? '');
  });
}

/** The built CLI with a user's argv; KUBECONFIG points nowhere unless the test says otherwise. */
export function runCli(
  args: string[],
  opts: { input?: string; env?: Record<string, string>; timeoutMs?: number; cwd?: string } = {},
): Promise<Exec> {
  return exec(process.execPath, [CLI, ...args], {
    cwd: opts.cwd,
    input: opts.input,
    timeoutMs: opts.timeoutMs ?? 60_000,
    env: { ...process.env, KUBECONFIG: '/nonexistent-kubeconfig', ...opts.env },
  });
}

/** Starts the CLI and leaves it running (for `run`); output accumulates on the returned object. */
export function startCli(
  args: string[],
  env: Record<string, string> = {},
): { child: ChildProcess; output: () => string; exited: Promise<number | null> } {
  const child = spawn(process.execPath, [CLI, ...args], {
    cwd: REPO,
    env: { ...process.env, KUBECONFIG: '/nonexistent-kubeconfig', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise<number | null>((r, reject) =>
    child.on('close', (code) => {
      try {
        assertNoSecrets(out, `output of ${args.join(' ')}`);
        r(code);
      } catch (error) {
        reject(error as Error);
      }
    }),
  );
  return { child, output: () => out, exited };
}

export function jsonLines(text: string): Record<string, unknown>[] {
  return text
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}
