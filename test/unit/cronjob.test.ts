import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { toCronJobView } from '../../src/attribute/cronjob-view.ts';
import { judgeCronJob, readStreak, type CronJobVerdict } from '../../src/judge/cronjob.ts';
import type { CronJobView } from '../../src/model.ts';
import { parsePolicyYaml } from '../../src/policy/parse.ts';
import { summaryOf } from './report-fixtures.ts';

const AT = '2026-11-30T12:00:00Z';
const IMAGE = 'registry.example/app:gone';

function cron(over: Partial<CronJobView> = {}): CronJobView {
  return {
    namespace: 'ci',
    name: 'nightly',
    uid: 'u1',
    resourceVersion: '7',
    annotations: {},
    suspended: false,
    lastSuccessfulTime: undefined,
    ...over,
  };
}

const fail = (job: string, image = IMAGE, minute = Number(job.replace(/\D/g, '')) || 0) => ({
  job,
  image,
  stuckSince: new Date(Date.UTC(2026, 10, 30, 11, minute)),
});

/** The CronJob as it reads after the verdict's merge patch. */
function applied(view: CronJobView, verdict: CronJobVerdict): CronJobView {
  if (verdict.kind === 'skip') return view;
  const annotations = { ...view.annotations };
  for (const [k, v] of Object.entries(verdict.annotations)) {
    if (v === null) delete annotations[k];
    else annotations[k] = v;
  }
  return { ...view, annotations, suspended: view.suspended || verdict.kind === 'suspend' };
}

/** One sweep per failure, each on the CronJob as the previous one left it. */
function sweeps(
  start: CronJobView,
  failures: ReturnType<typeof fail>[][],
  suspendAfter = 3,
): { view: CronJobView; verdicts: CronJobVerdict[] } {
  let view = start;
  const verdicts: CronJobVerdict[] = [];
  for (const f of failures) {
    const v = judgeCronJob(view, f, { suspendAfter, at: AT });
    verdicts.push(v);
    view = applied(view, v);
  }
  return { view, verdicts };
}

describe('cronJobs.suspendAfter in the policy', () => {
  it('defaults to 0 (off) and accepts 0 or a positive integer', () => {
    const parse = (text: string) => parsePolicyYaml(text);
    const d = parse('{}');
    assert.ok(d.ok);
    assert.deepEqual(d.policy.cronJobs, { suspendAfter: 0 });
    const three = parse('cronJobs: { suspendAfter: 3 }\n');
    assert.ok(three.ok);
    assert.equal(three.policy.cronJobs.suspendAfter, 3);
    for (const bad of ['-1', '1.5', '"3"']) {
      const r = parse(`cronJobs: { suspendAfter: ${bad} }\n`);
      assert.ok(!r.ok, bad);
      assert.equal(r.problems[0]!.path, 'cronJobs.suspendAfter');
      assert.match(r.problems[0]!.message, /expected 0 or a positive integer/);
    }
    const unknown = parse('cronJobs: { suspendAftr: 3 }\n');
    assert.ok(!unknown.ok);
  });
});

describe('judgeCronJob', () => {
  it('does nothing when off', () => {
    assert.equal(judgeCronJob(cron(), [fail('nightly-1')], { suspendAfter: 0, at: AT }).kind, 'skip');
  });

  it('counts each failed Job in annotations on the CronJob, and suspends at N', () => {
    const { view, verdicts } = sweeps(cron(), [[fail('nightly-1')], [fail('nightly-2')], [fail('nightly-3')]]);
    assert.deepEqual(
      verdicts.map((v) => v.kind),
      ['count', 'count', 'suspend'],
    );
    assert.deepEqual(readStreak(view.annotations), {
      count: 3,
      image: IMAGE,
      jobs: ['nightly-1', 'nightly-2', 'nightly-3'],
      lastSuccess: 'none',
    });
    const last = verdicts[2]!;
    assert.ok(last.kind === 'suspend');
    assert.equal(view.suspended, true);
    assert.equal(view.annotations['imagepull-sweeper/suspended-at'], AT);
    assert.match(
      last.message,
      new RegExp(`3 Jobs in a row failed, stuck pulling image ${IMAGE.replace(/[.]/g, '\\.')} \\(nightly-1, nightly-2, nightly-3\\)`),
    );
    assert.match(last.message, /kubectl -n ci patch cronjob nightly -p '\{"spec":\{"suspend":false\}\}'/);
    assert.equal(view.annotations['imagepull-sweeper/message'], last.message);
  });

  it('stays suspended: later failures (Jobs created before) change nothing', () => {
    const { view } = sweeps(cron(), [[fail('nightly-1')], [fail('nightly-2')], [fail('nightly-3')]]);
    const later = judgeCronJob(view, [fail('nightly-4')], { suspendAfter: 3, at: AT });
    assert.equal(later.kind, 'skip');
    assert.match(later.detail, /already suspended by imagepull-sweeper/);
  });

  it('suspends in one sweep when N Jobs fail at once, counting oldest first', () => {
    const v = judgeCronJob(cron(), [fail('nightly-3'), fail('nightly-1'), fail('nightly-2')], { suspendAfter: 3, at: AT });
    assert.equal(v.kind, 'suspend');
    assert.deepEqual(v.streak?.jobs, ['nightly-1', 'nightly-2', 'nightly-3']);
  });

  it('never counts one Job twice (a retried failure, a second sweeper)', () => {
    const { view } = sweeps(cron(), [[fail('nightly-1')], [fail('nightly-2')]]);
    const again = judgeCronJob(view, [fail('nightly-2')], { suspendAfter: 3, at: AT });
    assert.equal(again.kind, 'skip');
    assert.equal(readStreak(view.annotations)?.count, 2);
  });

  it('starts again on another image', () => {
    const { view, verdicts } = sweeps(cron(), [
      [fail('nightly-1')],
      [fail('nightly-2')],
      [fail('nightly-3', 'registry.example/app:other')],
    ]);
    assert.deepEqual(
      verdicts.map((v) => v.kind),
      ['count', 'count', 'count'],
    );
    assert.deepEqual(readStreak(view.annotations), {
      count: 1,
      image: 'registry.example/app:other',
      jobs: ['nightly-3'],
      lastSuccess: 'none',
    });
  });

  it('starts again when a run succeeded in between (status.lastSuccessfulTime moved)', () => {
    const first = sweeps(cron(), [[fail('nightly-1')], [fail('nightly-2')]]);
    const recovered = { ...first.view, lastSuccessfulTime: '2026-11-30T11:30:00.000Z' };
    const { view, verdicts } = sweeps(recovered, [[fail('nightly-4')], [fail('nightly-5')]]);
    assert.deepEqual(
      verdicts.map((v) => v.kind),
      ['count', 'count'],
    );
    assert.equal(view.suspended, false);
    assert.deepEqual(readStreak(view.annotations), {
      count: 2,
      image: IMAGE,
      jobs: ['nightly-4', 'nightly-5'],
      lastSuccess: '2026-11-30T11:30:00.000Z',
    });
  });

  it('starts again when the owner resumed a CronJob the sweeper suspended', () => {
    const suspended = sweeps(cron(), [[fail('nightly-1')], [fail('nightly-2')], [fail('nightly-3')]]).view;
    const resumed = { ...suspended, suspended: false };
    const next = judgeCronJob(resumed, [fail('nightly-7')], { suspendAfter: 3, at: AT });
    assert.equal(next.kind, 'count');
    assert.match(next.detail, /resumed by its owner/);
    assert.ok(next.kind === 'count');
    assert.equal(next.annotations['imagepull-sweeper/suspended-at'], null);
    const after = applied(resumed, next);
    assert.deepEqual(readStreak(after.annotations)?.jobs, ['nightly-7']);
    assert.equal(judgeCronJob(after, [fail('nightly-8')], { suspendAfter: 3, at: AT }).streak?.count, 2);
  });

  it('never suspends (nor writes to) a CronJob annotated imagepull-sweeper/ignore: "true"', () => {
    const ignored = cron({ annotations: { 'imagepull-sweeper/ignore': 'true' } });
    const v = judgeCronJob(ignored, [fail('nightly-1'), fail('nightly-2'), fail('nightly-3')], { suspendAfter: 1, at: AT });
    assert.equal(v.kind, 'skip');
    assert.match(v.detail, /imagepull-sweeper\/ignore=true/);
  });

  it('leaves alone a CronJob its owner suspended', () => {
    const v = judgeCronJob(cron({ suspended: true }), [fail('nightly-1')], { suspendAfter: 1, at: AT });
    assert.equal(v.kind, 'skip');
    assert.match(v.detail, /already suspended by its owner/);
  });

  it('reads no run from missing or malformed annotations', () => {
    assert.equal(readStreak({}), undefined);
    assert.equal(
      readStreak({
        'imagepull-sweeper/failed-in-a-row': 'x',
        'imagepull-sweeper/failed-image': IMAGE,
        'imagepull-sweeper/last-success-seen': 'none',
      }),
      undefined,
    );
    const v = judgeCronJob(cron({ annotations: { 'imagepull-sweeper/failed-in-a-row': '-4' } }), [fail('nightly-1')], {
      suspendAfter: 3,
      at: AT,
    });
    assert.equal(v.streak?.count, 1);
  });
});

describe('toCronJobView', () => {
  it('reads suspend, annotations and lastSuccessfulTime', () => {
    const view = toCronJobView({
      metadata: { namespace: 'ci', name: 'n', uid: 'u', resourceVersion: '3', annotations: { a: 'b' } },
      spec: { schedule: '* * * * *', suspend: true, jobTemplate: {} },
      status: { lastSuccessfulTime: new Date('2026-11-30T10:00:00Z') },
    });
    assert.deepEqual(view, {
      namespace: 'ci',
      name: 'n',
      uid: 'u',
      resourceVersion: '3',
      annotations: { a: 'b' },
      suspended: true,
      lastSuccessfulTime: '2026-11-30T10:00:00.000Z',
    });
    assert.equal(toCronJobView({ metadata: {}, spec: { schedule: '', jobTemplate: {} } }).lastSuccessfulTime, undefined);
  });
});

describe('CronJob audit lines', () => {
  it('render as text with the run, and count in the summary (errors make exit 1)', async () => {
    const { PassThrough } = await import('node:stream');
    const { cronJobAuditLine } = await import('../../src/report/audit.ts');
    const { createLogger, logCronJob, logSummary } = await import('../../src/report/logger.ts');
    const stream = new PassThrough();
    const chunks: string[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c.toString()));
    const logger = createLogger({ format: 'text', stream });
    const suspended = {
      namespace: 'ci',
      cronJob: 'nightly',
      image: IMAGE,
      failedInARow: 3,
      jobs: ['n-1', 'n-2', 'n-3'],
      outcome: 'would-suspend' as const,
      detail: 'd',
      error: undefined,
    };
    logCronJob(logger, cronJobAuditLine('s', suspended, 3, true));
    const broken = { ...suspended, outcome: 'error' as const, error: 'Forbidden: no' };
    const base = { startedAt: new Date(0), finishedAt: new Date(0), podsScanned: 0, stuckContainers: 0 };
    logSummary(logger, summaryOf({ ...base, dryRun: true, cronJobs: [suspended] }));
    const text = chunks.join('');
    assert.match(text, /WOULD SUSPEND\s+ci\/cronjob\/nightly\s+3\/3 failed in a row on registry\.example\/app:gone/);
    assert.match(text, /Jobs: n-1, n-2, n-3/);
    assert.match(text, /1 CronJob\(s\) would be suspended\./);
    const live = summaryOf({ ...base, dryRun: false, cronJobs: [broken] });
    assert.deepEqual(live.cronJobs, { error: 1 });
    assert.equal(live.exitCode, 1);
  });
});
