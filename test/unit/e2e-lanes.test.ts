// The e2e lanes (test/e2e/suites.ts, test/support/lanes.ts): every e2e file placed once, the
// compatibility subsets per minor, and the runner on two real test files in two lanes.
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { compatPhases, E2E, placementProblems } from '../e2e/suites.ts';
import { closingReport, failed, failingTests, runPhases, summaryCounts } from '../support/lanes.ts';

const TEST = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const laneOf = (file: string) => E2E.flatMap((phase) => phase).find((lane) => lane.files.includes(file))?.name;

describe('test/e2e/suites.ts', () => {
  it('places every file of test/e2e/ in exactly one lane', () => {
    const files = readdirSync(join(TEST, 'e2e')).filter((f) => f.endsWith('.test.ts'));
    assert.deepEqual(placementProblems(files), []);
    assert.deepEqual(placementProblems([...files, 'new.test.ts']), ['new.test.ts is in no lane']);
  });

  it('keeps the files that install manifests/ or the chart in one lane', () => {
    const lanes = new Set(
      ['guard', 'helm', 'manifests', 'leader-election', 'watch-leader', 'node-force-delete', 'node-jobset', 'owners', 'owners-node'].map(
        (f) => laneOf(`${f}.test.ts`),
      ),
    );
    assert.equal(lanes.size, 1, [...lanes].join(', '));
  });

  it('runs the in-cluster CronJob, which sweeps every namespace, beside nothing a sweep could act on', () => {
    const phase = E2E.find((p) => p.some((lane) => lane.files.includes('node-cronjob.test.ts')))!;
    const beside = phase.flatMap((lane) => lane.files);
    assert.ok(beside.includes('node-helm-cronjob.test.ts'));
    for (const file of ['sweep.test.ts', 'watch.test.ts', 'node-fail.test.ts', 'guard.test.ts']) assert.ok(!beside.includes(file), file);
  });

  it('the compatibility subsets: the base, the watch and owners on the node; image volumes from 1.36', () => {
    const files = (minor: string) => compatPhases(minor).flatMap((phase) => phase.flatMap((lane) => lane.files));
    const base = ['kubernetes-versions', 'node-fail', 'node-sweep', 'guard', 'cronjob', 'cli', 'watch', 'owners-node'].map(
      (f) => `${f}.test.ts`,
    );
    for (const minor of ['1.34', '1.35']) assert.deepEqual(files(minor).sort(), [...base].sort(), minor);
    assert.deepEqual(files('1.36').sort(), [...base, 'node-image-volume.test.ts'].sort());
    assert.throws(() => compatPhases('1.33'), /no compatibility subset for Kubernetes 1.33/);
  });
});

describe('test/support/lanes.ts', () => {
  it("runs each lane's files, prints each file's report whole, and sums their summaries", { timeout: 60_000 }, async () => {
    let out = '';
    const t0 = Date.now();
    const runs = await runPhases(
      [
        [
          { name: 'a', files: ['passing.test.ts'] },
          { name: 'b', files: ['failing.test.ts'] },
        ],
      ],
      { dir: join(TEST, 'fixtures', 'lanes'), env: process.env, out: (text) => (out += text), log: () => undefined },
    );
    assert.deepEqual(
      runs.map((r) => [r.lane, r.file.split('/').at(-1), failed(r)]),
      [
        ['a', 'passing.test.ts', false],
        ['b', 'failing.test.ts', true],
      ],
    );
    // Each file's report is one block: its stderr line inside it, the other file's tests outside it.
    const blocks = out.split(/\n── /).filter(Boolean);
    assert.equal(blocks.length, 2, out);
    const passing = blocks.find((b) => b.includes('passing.test.ts (lane a'))!;
    assert.match(passing, /\[passing\] a line on stderr/);
    assert.doesNotMatch(passing, /✖ fails/);

    const report = closingReport(runs, Date.now() - t0);
    const lines = report.trimEnd().split('\n');
    assert.deepEqual(summaryCounts(report), { tests: 5, suites: 0, pass: 3, fail: 1, cancelled: 0, skipped: 1, todo: 0 });
    assert.match(lines.at(-1)!, /^ℹ duration_ms \d+$/);
    assert.match(report, /failed:\n {2}\S*failing\.test\.ts \(lane b\): pass 1, fail 1/);
    // The failed test's error, repeated at the end without its stack.
    const failures = report.slice(report.indexOf('failing.test.ts, its failing tests:'));
    assert.match(failures, /✖ fails \(\d/);
    assert.match(failures, /1 !== 2/);
    assert.doesNotMatch(failures, /^\s+at /m);
    assert.ok(report.indexOf('its failing tests:') < report.indexOf('ℹ tests'), report);
  });

  it('counts a file that ended without a summary as a failure', () => {
    const report = closingReport([{ file: 'x.test.ts', lane: 'a', exitCode: 137, ms: 1000, counts: undefined }], 1000);
    assert.equal(summaryCounts(report)?.fail, 1);
    assert.match(report, /x\.test\.ts \(lane a\): exit 137, no summary/);
  });

  it("keeps a failing test's error and drops its stack, at most 40 lines", () => {
    const frames = Array.from({ length: 10 }, (_, i) => `      at frame${i} (file:///x.ts:${i}:1)`);
    const error = Array.from({ length: 60 }, (_, i) => `  detail ${i}`);
    const report = [
      '✔ passes',
      'ℹ fail 1',
      '',
      '✖ failing tests:',
      '',
      '✖ fails (1ms)',
      '  AssertionError: 1 !== 2',
      ...frames,
      ...error,
    ].join('\n');
    const kept = failingTests(`\x1b[31m${report}\x1b[0m`).split('\n');
    assert.deepEqual(kept.slice(0, 3), ['✖ fails (1ms)', '  AssertionError: 1 !== 2', '  detail 0']);
    assert.equal(kept.length, 41);
    assert.equal(kept.at(-1), "… 22 more lines in the file's report above");
    assert.equal(failingTests('✔ passes\nℹ fail 0\n'), '');
  });
});
