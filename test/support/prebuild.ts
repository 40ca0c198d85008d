// Builds, in the background while a test run uses the machine, at idle CPU and IO priority, the
// test tools the run will need (Helm, JobSet, kube-state-metrics, Kueue) and then the control planes of other Kubernetes minors, so
// the tests and the compatibility runs that follow in `npm test` find them built: on a new machine
// these builds were a quarter of CI's time, while the e2e suite leaves much of the 2 cores idle
// (docs/kubernetes-versions.md "CI's time"). Stopped when the run ends; Go's build cache keeps
// every package compiled so far, so the next build starts from there.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

/** Comma-separated minors to build in the background during a run (`npm test` sets it). */
export const PREBUILD_ENV = 'IMAGEPULL_SWEEPER_PREBUILD_VERSIONS';
/** Comma-separated test tools (test/tools/<name>) to build first (`npm test` sets it for the e2e suite). */
export const PREBUILD_TOOLS_ENV = 'IMAGEPULL_SWEEPER_PREBUILD_TOOLS';

const TEST_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const BUILD_SCRIPT = path.join(TEST_DIR, 'controlplane', 'build.sh');
const TOOLS_BUILD_SCRIPT = path.join(TEST_DIR, 'tools', 'build.sh');

/** The entries of a comma-separated list, trimmed, in order, each once. */
function entries(list: string | undefined, normalize: (entry: string) => string = (e) => e): string[] {
  return [
    ...new Set(
      (list ?? '')
        .split(',')
        .map((e) => normalize(e.trim()))
        .filter((e) => e !== ''),
    ),
  ];
}

/** The tools of `list`, in order, each once. */
export function prebuildTools(list: string | undefined): string[] {
  return entries(list);
}

/** The minors of `list` other than the run's own, in order, each once. */
export function prebuildMinors(list: string | undefined, ownMinor: string): string[] {
  const own = ownMinor.replace(/^v/, '');
  return entries(list, (m) => m.replace(/^v/, '')).filter((m) => m !== own);
}

/** `chrt --idle 0 ionice -c3` where both exist (the build runs only on CPU nothing else wants), else `nice -n 19`. */
function idlePriority(): string[] {
  const has = (cmd: string) => spawnSync('sh', ['-c', `command -v ${cmd}`], { stdio: 'ignore' }).status === 0;
  if (has('chrt') && has('ionice')) return ['chrt', '--idle', '0', 'ionice', '-c3'];
  return ['nice', '-n', '19'];
}

export interface Prebuild {
  /** Stops the builds still running and says how they ended. */
  stop(): Promise<void>;
}

export function startPrebuild(tools: readonly string[], minors: readonly string[], log: (line: string) => void): Prebuild | undefined {
  if (tools.length === 0 && minors.length === 0) return undefined;
  const logFile = path.join(os.tmpdir(), `imagepull-sweeper-prebuild-${process.pid}.log`);
  const out = fs.openSync(logFile, 'w');
  // A tool that fails here is built again by the test that needs it, which reports the error.
  const script = [
    ...tools.map(
      (t) => `bash ${JSON.stringify(TOOLS_BUILD_SCRIPT)} ${JSON.stringify(t)} || echo "prebuild: tool ${t} failed (exit $?)" >&2`,
    ),
    ...minors.map((m) => `bash ${JSON.stringify(BUILD_SCRIPT)} --version ${m} || exit $?`),
  ].join('\n');
  const priority = idlePriority();
  // Its own process group, so stop() ends the build script and the go commands under it.
  const child: ChildProcess = spawn(priority[0]!, [...priority.slice(1), 'bash', '-c', script], {
    detached: true,
    stdio: ['ignore', out, out],
  });
  fs.closeSync(out);
  const what = [...tools, ...minors.map((m) => `control plane ${m}`)].join(', ');
  log(`building ${what} in the background (${priority.join(' ')}); log ${logFile}`);
  const exited = new Promise<number | null>((resolve) => {
    child.on('error', () => resolve(null));
    child.on('exit', (code, signal) => resolve(signal ? null : code));
  });
  return {
    async stop() {
      const running = child.exitCode === null && child.signalCode === null;
      if (running && child.pid !== undefined) {
        try {
          process.kill(-child.pid, 'SIGTERM');
        } catch {
          // Already gone.
        }
        const killed = await Promise.race([exited, new Promise((r) => setTimeout(r, 10_000, 'late'))]);
        if (killed === 'late') process.kill(-child.pid, 'SIGKILL');
      }
      const code = running ? undefined : await exited;
      log(
        `background builds ${running ? 'stopped at the end of the run' : code === 0 ? 'finished' : `failed (exit ${code})`} (log ${logFile})`,
      );
      if (code !== undefined && code !== 0) process.stderr.write(fs.readFileSync(logFile, 'utf8').split('\n').slice(-40).join('\n') + '\n');
    },
  };
}
