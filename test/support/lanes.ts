// Runs e2e files in the phases and lanes of test/e2e/suites.ts: the lanes of a phase side by side,
// each file in its own `node --test` process. A file's report is printed whole once it ends, so
// lanes never interleave; a line says when each file starts. At the end: each file's time, then
// the node test runner's summary lines, summed over every file.
import { spawn, type ChildProcess } from 'node:child_process';
import * as path from 'node:path';
import type { Lane, Phase } from '../e2e/suites.ts';

const COUNTS = ['tests', 'suites', 'pass', 'fail', 'cancelled', 'skipped', 'todo'] as const;
type Counts = Record<(typeof COUNTS)[number], number>;

export interface FileRun {
  file: string;
  lane: string;
  exitCode: number;
  ms: number;
  /** From the file's own summary; undefined when it printed none (it crashed or was killed). */
  counts: Counts | undefined;
  /** Its reporter's `failing tests:` section, without stack frames; empty when none. */
  failures?: string;
}

const ANSI = /\x1b\[[0-9;]*m/g; // eslint-disable-line no-control-regex

const FAILURE_LINES = 40;

/**
 * The `✖ failing tests:` section the spec reporter ends a failed run with: each failed test and its
 * error, without the stack frames, at most FAILURE_LINES lines. Repeated in the closing report, so
 * a failure is read at the end of a long log.
 */
export function failingTests(report: string): string {
  const text = report.replace(ANSI, '');
  const start = text.search(/^✖ failing tests:$/m);
  if (start < 0) return '';
  const lines = text
    .slice(start)
    .split('\n')
    .slice(1)
    .filter((l) => l.trim() !== '' && !/^\s+at /.test(l));
  const kept = lines.slice(0, FAILURE_LINES);
  if (lines.length > kept.length) kept.push(`… ${lines.length - kept.length} more lines in the file's report above`);
  return kept.join('\n');
}

/** The summary lines (`ℹ pass 3`) the spec reporter ends a run with, or undefined. */
export function summaryCounts(report: string): Counts | undefined {
  const text = report.replace(ANSI, '');
  const counts = {} as Counts;
  for (const key of COUNTS) {
    const all = [...text.matchAll(new RegExp(`^ℹ ${key} (\\d+)$`, 'gm'))];
    if (all.length === 0) return undefined;
    counts[key] = Number(all.at(-1)![1]);
  }
  return counts;
}

export interface RunLanesOptions {
  /** Directory the file names are in. */
  dir: string;
  env: NodeJS.ProcessEnv;
  out: (text: string) => void;
  /** Progress lines (a file started). */
  log: (line: string) => void;
}

/** Runs every phase; resolves to one FileRun per file. */
export async function runPhases(phases: readonly Phase[], opts: RunLanesOptions): Promise<FileRun[]> {
  const running = new Map<string, Running>();
  // Killed (CI's time limit, ^C): the running files are stopped, and what they said so far is shown.
  const onSignal = (signal: NodeJS.Signals): void => {
    for (const [file, { chunks, child }] of running) {
      child.kill('SIGTERM');
      opts.out(`\n── ${file}: stopped by ${signal} ──\n${Buffer.concat(chunks).toString()}`);
    }
    process.kill(process.pid, signal);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    const runs: FileRun[] = [];
    for (const phase of phases) {
      const lanes = await Promise.all(phase.map((lane) => runLane(lane, opts, running)));
      runs.push(...lanes.flat());
    }
    return runs;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}

interface Running {
  chunks: Buffer[];
  child: ChildProcess;
}

async function runLane(lane: Lane, opts: RunLanesOptions, running: Map<string, Running>): Promise<FileRun[]> {
  const runs: FileRun[] = [];
  for (const name of lane.files) {
    const file = path.join(opts.dir, name);
    const shown = path.relative(process.cwd(), file);
    opts.log(`${lane.name}: ${shown}`);
    const chunks: Buffer[] = [];
    const t0 = Date.now();
    // The reporter colours as it would on our terminal. NODE_TEST_CONTEXT (set when this runs under
    // a test runner itself) would turn its report into the runner's protocol.
    const { NODE_TEST_CONTEXT: _runner, ...env } = opts.env;
    if (process.stdout.isTTY && !('NO_COLOR' in env)) env.FORCE_COLOR ??= '1';
    const child = spawn(process.execPath, ['--import', 'tsx', '--test', '--test-reporter=spec', file], {
      env,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    running.set(shown, { chunks, child });
    child.stdout.on('data', (c: Buffer) => chunks.push(c));
    child.stderr.on('data', (c: Buffer) => chunks.push(c));
    const drained = Promise.all([child.stdout, child.stderr].map((s) => new Promise((resolve) => s.once('close', resolve))));
    const exitCode = await new Promise<number>((resolve) => {
      child.on('error', (e) => {
        chunks.push(Buffer.from(`could not run ${file}: ${e.message}\n`));
        resolve(127);
      });
      child.on('exit', (code, signal) => resolve(code ?? (signal ? 128 : 1)));
    });
    // The rest of its output; not waiting on a process it left behind holding the pipes.
    await Promise.race([drained, new Promise((resolve) => setTimeout(resolve, 5_000).unref())]);
    running.delete(shown);
    const report = Buffer.concat(chunks).toString();
    const run: FileRun = {
      file: shown,
      lane: lane.name,
      exitCode,
      ms: Date.now() - t0,
      counts: summaryCounts(report),
      failures: failingTests(report),
    };
    runs.push(run);
    opts.out(`\n── ${shown} (lane ${lane.name}, ${seconds(run.ms)}, ${verdict(run)}) ──\n${report}`);
  }
  return runs;
}

const seconds = (ms: number): string => `${Math.round(ms / 1000)} s`;

function verdict(run: FileRun): string {
  if (!run.counts) return `exit ${run.exitCode}, no summary`;
  const { pass, fail, skipped } = run.counts;
  return `pass ${pass}, fail ${fail}${skipped ? `, skipped ${skipped}` : ''}${run.exitCode !== 0 && fail === 0 ? `, exit ${run.exitCode}` : ''}`;
}

/** A file that failed: non-zero exit or failed tests. */
export const failed = (run: FileRun): boolean => run.exitCode !== 0 || (run.counts?.fail ?? 1) > 0;

/**
 * The closing report: each file's lane and time, the files that failed and their failing tests,
 * then the node test runner's summary lines summed over all files (a file that ended without a
 * summary counts as one failed test).
 */
export function closingReport(runs: readonly FileRun[], wallMs: number): string {
  const width = Math.max(...runs.map((r) => r.file.length));
  const lines = ['', `e2e files, by lane (${runs.length} files, ${seconds(wallMs)} wall):`];
  const lanes = [...new Set(runs.map((r) => r.lane))];
  for (const lane of lanes) {
    const mine = runs.filter((r) => r.lane === lane);
    lines.push(`  lane ${lane}: ${seconds(mine.reduce((s, r) => s + r.ms, 0))}`);
    for (const r of mine) lines.push(`    ${r.file.padEnd(width)}  ${seconds(r.ms).padStart(6)}  ${verdict(r)}`);
  }
  const bad = runs.filter(failed);
  if (bad.length > 0) lines.push('', 'failed:', ...bad.map((r) => `  ${r.file} (lane ${r.lane}): ${verdict(r)}`));
  for (const r of bad.filter((b) => b.failures))
    lines.push('', `${r.file}, its failing tests:`, ...r.failures!.split('\n').map((l) => `  ${l}`));
  const total = Object.fromEntries(COUNTS.map((k) => [k, 0])) as Counts;
  for (const r of runs) {
    if (!r.counts) {
      total.tests += 1;
      total.fail += 1;
      continue;
    }
    for (const k of COUNTS) total[k] += r.counts[k];
    if (r.exitCode !== 0 && r.counts.fail === 0) total.fail += 1;
  }
  lines.push('', ...COUNTS.map((k) => `ℹ ${k} ${total[k]}`), `ℹ duration_ms ${wallMs}`);
  return `${lines.join('\n')}\n`;
}
