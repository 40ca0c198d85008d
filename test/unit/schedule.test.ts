import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { describe, it } from 'node:test';
import { asUsageError, UsageError } from '../../src/cli/errors.ts';
import { RunOptionError } from '../../src/run/errors.ts';
import { createLogger } from '../../src/report/logger.ts';
import { parseListenAddress, SweepMetrics } from '../../src/run/metrics.ts';
import { parseSchedule, runOnSchedule } from '../../src/run/scheduler.ts';
import type { SweepResult } from '../../src/sweep.ts';

const T0 = new Date('2026-11-29T12:00:30Z');
const OK: SweepResult = { status: 'done', summary: undefined, results: [] };

/** A clock that only moves when the scheduler sleeps or a sweep takes time. */
function harness(sweepSeconds: number[], stopAfterSweeps: number) {
  let now = T0.getTime();
  const stop = new AbortController();
  const sweeps: Date[] = [];
  const out = new PassThrough();
  const lines: Record<string, unknown>[] = [];
  out.on('data', (c: Buffer) =>
    lines.push(
      ...c
        .toString()
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Record<string, unknown>),
    ),
  );
  const deps = {
    clock: () => new Date(now),
    logger: createLogger({ format: 'json', stream: out }),
    sleep: async (ms: number) => {
      now += ms;
    },
    sweepOnce: async () => {
      sweeps.push(new Date(now));
      now += (sweepSeconds[sweeps.length - 1] ?? 1) * 1000;
      if (sweeps.length >= stopAfterSweeps) stop.abort();
      return OK;
    },
  };
  return { deps, stop, sweeps, lines };
}

describe('parseSchedule', () => {
  it('takes 5 fields, or 6 with seconds, in a time zone', () => {
    assert.equal(parseSchedule('*/2 * * * *').next(T0).toISOString(), '2026-11-29T12:02:00.000Z');
    assert.equal(parseSchedule('*/10 * * * * *').next(T0).toISOString(), '2026-11-29T12:00:40.000Z');
    assert.equal(parseSchedule('0 9 * * *', 'Europe/Berlin').next(T0).toISOString(), '2026-11-30T08:00:00.000Z');
  });

  it('rejects bad expressions and zones with a usage error naming the flag', () => {
    assert.throws(
      () => parseSchedule('* * *'),
      (e: unknown) => e instanceof RunOptionError && /expected 5 cron fields/.test(e.message),
    );
    assert.throws(
      () => parseSchedule('61 * * * *'),
      (e: unknown) => e instanceof RunOptionError && /--schedule/.test(e.message),
    );
    assert.throws(
      () => parseSchedule('* * * * *', 'Mars/Olympus'),
      (e: unknown) => e instanceof RunOptionError && /--timezone/.test(e.message),
    );
  });

  it('is reported by the CLI as a usage error with the same message', () => {
    const error = new RunOptionError('--timezone Mars/Olympus: unknown time zone');
    const usage = asUsageError(error);
    assert.ok(usage instanceof UsageError);
    assert.equal(usage.message, error.message);
    assert.equal(asUsageError(new Error('other')), undefined);
  });
});

describe('runOnSchedule', () => {
  it('sweeps at each scheduled time and logs the next one', async () => {
    const h = harness([1, 1, 1], 3);
    await runOnSchedule(parseSchedule('* * * * *'), h.deps, h.stop.signal);
    assert.deepEqual(
      h.sweeps.map((d) => d.toISOString()),
      ['2026-11-29T12:01:00.000Z', '2026-11-29T12:02:00.000Z', '2026-11-29T12:03:00.000Z'],
    );
    assert.equal(h.lines.filter((l) => l.message === 'next sweep scheduled').length, 3);
  });

  it('never overlaps: an overrunning sweep delays the next and says how many runs were missed', async () => {
    const h = harness([150, 1], 2);
    await runOnSchedule(parseSchedule('* * * * *'), h.deps, h.stop.signal);
    assert.deepEqual(
      h.sweeps.map((d) => d.toISOString()),
      ['2026-11-29T12:01:00.000Z', '2026-11-29T12:04:00.000Z'],
    );
    const warning = h.lines.find((l) => l.message === 'sweep overran the schedule; missed runs are not made up');
    assert.equal(warning?.missedRuns, 2);
  });

  it('on stop, finishes the sweep in flight and starts no other', async () => {
    const h = harness([30], 1);
    await runOnSchedule(parseSchedule('* * * * *'), h.deps, h.stop.signal);
    assert.equal(h.sweeps.length, 1);
    assert.ok(h.lines.some((l) => l.message === 'stopping: no sweep in flight'));
  });

  it('keeps its schedule when a sweep throws', async () => {
    const h = harness([1, 1], 2);
    let calls = 0;
    const inner = h.deps.sweepOnce;
    h.deps.sweepOnce = async () => {
      calls += 1;
      const r = await inner();
      if (calls === 1) throw new Error('boom');
      return r;
    };
    await runOnSchedule(parseSchedule('* * * * *'), h.deps, h.stop.signal);
    assert.equal(h.sweeps.length, 2);
    const crash = h.lines.find((l) => l.message === 'sweep crashed');
    assert.equal(crash?.level, 'error');
    assert.equal(crash.error, 'boom');
    assert.match(String(crash.stack), /^Error: boom\n\s+at /, 'the log has the stack docs/metrics.md promises');
  });
});

describe('parseListenAddress', () => {
  it('accepts HOST:PORT, :PORT and [v6]:PORT', () => {
    assert.deepEqual(parseListenAddress('127.0.0.1:9090'), { host: '127.0.0.1', port: 9090 });
    assert.deepEqual(parseListenAddress(':9090'), { host: '0.0.0.0', port: 9090 });
    assert.deepEqual(parseListenAddress('[::1]:80'), { host: '::1', port: 80 });
    assert.throws(() => parseListenAddress('9090'), RunOptionError);
    assert.throws(() => parseListenAddress(':99999'), RunOptionError);
  });
});

describe('SweepMetrics', () => {
  it('counts sweeps on a missing policy ConfigMap: default (built-in defaults) and named (invalid)', async () => {
    const metrics = new SweepMetrics();
    const at = new Date('2026-11-30T12:00:00Z');
    metrics.record({ ...OK, policyMissing: 'default' }, 0.1, at);
    metrics.record({ ...OK, policyMissing: 'default' }, 0.1, at);
    metrics.record({ status: 'invalid-policy', summary: undefined, results: [], policyMissing: 'named' }, 0.1, at);
    metrics.record(OK, 0.1, at);
    const text = await metrics.registry.metrics();
    assert.match(text, /^imagepull_sweeper_policy_missing_total\{configmap="default"\} 2$/m);
    assert.match(text, /^imagepull_sweeper_policy_missing_total\{configmap="named"\} 1$/m);
    assert.match(text, /^imagepull_sweeper_sweeps_total\{result="invalid_policy"\} 1$/m);
  });
});
