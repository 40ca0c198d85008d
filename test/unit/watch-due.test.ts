import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { judge } from '../../src/judge/judge.ts';
import type { Decision } from '../../src/judge/types.ts';
import type { JobView, StuckContainer } from '../../src/model.ts';
import { parsePolicyYaml } from '../../src/policy/parse.ts';
import type { Policy } from '../../src/policy/types.ts';
import { ERROR_RETRY_MS, NOT_YET_RETRY_MS, TimerQueue, backOffMs, dueOf, leftBehindDue } from '../../src/watch/due.ts';
import { job, NOW, ownersFor, secondsAgo, stuckIn } from './judge-fixtures.ts';

function policyOf(yaml: string): Policy {
  const r = parsePolicyYaml(yaml);
  if (!r.ok) throw new Error(`bad test policy: ${JSON.stringify(r.problems)}`);
  return r.policy;
}

const DEFAULTS = policyOf('{}');
const nowMs = NOW.getTime();
const at = (secondsFromNow: number) => nowMs + secondsFromNow * 1000;

/** The judge's decision for one Job with these stuck containers, as a sweep (or a pre-judgement) makes it. */
function decide(j: JobView, stuck: StuckContainer[], policy: Policy = DEFAULTS, now = NOW): Decision {
  const { decisions } = judge({ stuck, ownerOf: ownersFor(stuck, [j]), namespaceLabels: new Map(), policy, now });
  assert.equal(decisions.length, 1);
  return decisions[0]!;
}

const ctx = (over: Partial<Parameters<typeof dueOf>[2]> = {}) => ({ nowMs, limits: DEFAULTS.limits, ...over });

describe('dueOf: a Job within its grace', () => {
  it('is due when its most overdue container reaches the grace of its class (2m permanent by default)', () => {
    const j = job('build-1');
    const d = decide(j, [stuckIn(j, { stuckSince: secondsAgo(30) })]);
    assert.equal(d.plan, 'skip');
    assert.deepEqual(dueOf(d, undefined, ctx()), { atMs: at(90), reason: 'grace' });
  });

  it('takes the grace of each class from the policy rule that matches the namespace', () => {
    const policy = policyOf('rules:\n  - name: ci\n    namespaces: ["ci-*"]\n    grace: { transient: 20s }\n');
    const j = job('build-2');
    const d = decide(j, [stuckIn(j, { pullClass: 'transient', stuckSince: secondsAgo(5) })], policy);
    assert.deepEqual(dueOf(d, undefined, ctx()), { atMs: at(15), reason: 'grace' });
  });

  it("honours the Job's grace annotation, which only a read of the Job shows", () => {
    const j = job('build-3', { annotations: { 'imagepull-sweeper/grace': '10s' } });
    const d = decide(j, [stuckIn(j, { stuckSince: secondsAgo(4) })]);
    assert.deepEqual(dueOf(d, undefined, ctx()), { atMs: at(6), reason: 'grace' });
  });

  it('uses the container due first when a Job has several stuck pods of different classes', () => {
    const j = job('build-4');
    const stuck = [stuckIn(j, { pullClass: 'transient', stuckSince: secondsAgo(3000) }), stuckIn(j, { stuckSince: secondsAgo(100) })];
    // transient: 1h − 3000 s = 600 s left; permanent: 2m − 100 s = 20 s left.
    assert.deepEqual(dueOf(decide(j, stuck), undefined, ctx()), { atMs: at(20), reason: 'grace' });
  });

  it('is tried again shortly when a sweep still found it within grace although our clock says its time came', () => {
    const j = job('build-5');
    const d = decide(j, [stuckIn(j, { stuckSince: secondsAgo(119.5) })]);
    assert.equal(d.plan, 'skip');
    const later = ctx({ nowMs: at(1) });
    assert.deepEqual(dueOf(d, 'skipped', later), { atMs: at(1) + NOT_YET_RETRY_MS, reason: 'grace' });
  });
});

describe('dueOf: a Job past its grace, before and after the sweep', () => {
  it('a pre-judgement past grace is due now', () => {
    const j = job('late');
    const d = decide(j, [stuckIn(j, { stuckSince: secondsAgo(600) })]);
    assert.equal(d.plan, 'fail');
    assert.deepEqual(dueOf(d, undefined, ctx()), { atMs: nowMs, reason: 'grace' });
  });

  it('once failed, it is due at forceDeleteAfter (60s) after its claim, the earliest timed rule left', () => {
    const j = job('failed');
    const d = decide(j, [stuckIn(j)]);
    assert.deepEqual(dueOf(d, 'failed', ctx({ claimedAtMs: at(-1) })), { atMs: at(59), reason: 'forceDeleteAfter' });
  });

  it('with forceDeleteAfter 0 (never), it is due at confirmWithin', () => {
    const policy = policyOf('limits: { forceDeleteAfter: 0s, confirmWithin: 2m }\n');
    const j = job('failed-2');
    const d = decide(j, [stuckIn(j)], policy);
    assert.deepEqual(dueOf(d, 'failed', { nowMs, limits: policy.limits, claimedAtMs: nowMs }), { atMs: at(120), reason: 'confirmWithin' });
  });

  it('a dry run sets no timer for what it would have failed: nothing changed, so it would only say it again', () => {
    const j = job('dry');
    const d = decide(j, [stuckIn(j)]);
    assert.equal(dueOf(d, 'would-fail', ctx({ dryRun: true, claimedAtMs: nowMs })), undefined);
  });

  it('a report-only Job is due once, until its Event is out', () => {
    const policy = policyOf('defaults: { action: report }\n');
    const j = job('rep');
    const d = decide(j, [stuckIn(j)], policy);
    assert.equal(d.plan, 'report');
    assert.deepEqual(dueOf(d, undefined, ctx()), { atMs: nowMs, reason: 'grace' });
    assert.equal(dueOf(d, 'reported', ctx()), undefined);
    const reported = job('rep2', { annotations: { 'imagepull-sweeper/reported-at': secondsAgo(10).toISOString() } });
    assert.equal(dueOf(decide(reported, [stuckIn(reported)], policy), undefined, ctx()), undefined);
  });

  it('a Job deferred by the limits has no timer: it waits for the next period (the backstop sweep opens it)', () => {
    const policy = policyOf('limits: { maxJobsPerSweep: 1 }\n');
    const [a, b] = [job('a'), job('b')];
    const stuck = [stuckIn(a, { stuckSince: secondsAgo(700) }), stuckIn(b)];
    const { decisions } = judge({ stuck, ownerOf: ownersFor(stuck, [a, b]), namespaceLabels: new Map(), policy, now: NOW });
    const deferred = decisions.find((d) => d.plan === 'defer')!;
    assert.equal(deferred.job, 'b');
    assert.deepEqual(dueOf(deferred, undefined, ctx()), { atMs: nowMs, reason: 'deferred' });
    assert.equal(dueOf(deferred, 'deferred', ctx()), undefined);
  });

  it('a Job whose action failed is tried again after its back-off', () => {
    const j = job('err');
    assert.deepEqual(dueOf(decide(j, [stuckIn(j)]), 'error', ctx()), { atMs: nowMs + ERROR_RETRY_MS, reason: 'error' });
    assert.deepEqual(dueOf(decide(j, [stuckIn(j)]), 'error', { ...ctx(), errorDelayMs: 40_000 }), {
      atMs: nowMs + 40_000,
      reason: 'error',
    });
  });

  it('backs off from the first delay, doubling, up to the most', () => {
    assert.deepEqual(
      [1, 2, 3, 4, 5, 6, 7].map((n) => backOffMs(n, 5_000, 120_000)),
      [5_000, 10_000, 20_000, 40_000, 80_000, 120_000, 120_000],
    );
  });
});

describe('dueOf: Jobs the sweeper failed earlier (pending)', () => {
  const failed = (secondsAgoFailed: number, over: Partial<JobView> = {}) =>
    job('pending', {
      annotations: {
        'imagepull-sweeper/failed-at': secondsAgo(secondsAgoFailed)
          .toISOString()
          .replace(/\.\d{3}Z$/, 'Z'),
      },
      ...over,
    });

  it('is due at forceDeleteAfter, then at confirmWithin, from its failed-at annotation', () => {
    const early = failed(10);
    assert.deepEqual(dueOf(decide(early, [stuckIn(early)]), undefined, ctx()), { atMs: at(50), reason: 'forceDeleteAfter' });
    const later = failed(90);
    assert.deepEqual(dueOf(decide(later, [stuckIn(later)]), 'skipped', ctx()), { atMs: at(210), reason: 'confirmWithin' });
  });

  it('has no timer left once both times passed, or once it finished', () => {
    const old = failed(400);
    assert.equal(dueOf(decide(old, [stuckIn(old)]), 'retried', ctx()), undefined);
    const done = failed(10, { finished: true, failed: true });
    assert.equal(dueOf(decide(done, [stuckIn(done)]), undefined, ctx()), undefined);
  });

  it('still counts a Job at FailureTarget (finished but failing) as pending', () => {
    const failing = failed(10, { finished: true, failed: true, failing: true });
    assert.deepEqual(dueOf(decide(failing, [stuckIn(failing)]), undefined, ctx()), { atMs: at(50), reason: 'forceDeleteAfter' });
  });
});

describe('leftBehindDue: a Job an earlier leader failed, found by its pending label on taking the lead', () => {
  const failedAt = (secondsAgo: number) => new Date(at(-secondsAgo)).toISOString();
  it("is due when that leader's timer was: forceDeleteAfter (60s) after its failed-at", () => {
    assert.deepEqual(leftBehindDue(failedAt(10), ctx()), { atMs: at(50), reason: 'forceDeleteAfter' });
  });
  it('is due now, not at a later rule, once that time passed: that leader never acted on it', () => {
    assert.deepEqual(leftBehindDue(failedAt(90), ctx()), { atMs: nowMs, reason: 'forceDeleteAfter' });
    assert.deepEqual(leftBehindDue(failedAt(3600), ctx()), { atMs: nowMs, reason: 'forceDeleteAfter' });
  });
  it('with forceDeleteAfter 0 (never), is due at confirmWithin (5m)', () => {
    const limits = policyOf('limits: { forceDeleteAfter: 0s }').limits;
    assert.deepEqual(leftBehindDue(failedAt(10), ctx({ limits })), { atMs: at(290), reason: 'confirmWithin' });
  });
  it('is due now without a readable failed-at, and never in a dry run', () => {
    assert.deepEqual(leftBehindDue(undefined, ctx()), { atMs: nowMs, reason: 'confirmWithin' });
    assert.deepEqual(leftBehindDue('yesterday', ctx()), { atMs: nowMs, reason: 'confirmWithin' });
    assert.equal(leftBehindDue(failedAt(10), ctx({ dryRun: true })), undefined);
  });
});

describe('dueOf: Jobs no timed rule applies to', () => {
  for (const [name, over, policy] of [
    ['ignored by annotation', { annotations: { 'imagepull-sweeper/ignore': 'true' } }, DEFAULTS],
    ['managed by another controller', { managedBy: 'kueue.x-k8s.io/multikueue' }, DEFAULTS],
    ['suspended', { suspended: true }, DEFAULTS],
    ['being deleted', { deleting: true }, DEFAULTS],
    ['in a namespace whose rule ignores it', {}, policyOf('rules:\n  - name: off\n    namespaces: ["ci-*"]\n    action: ignore\n')],
  ] as const) {
    it(name, () => {
      const j = job('left-alone', over as Partial<JobView>);
      assert.equal(dueOf(decide(j, [stuckIn(j, { stuckSince: secondsAgo(30) })], policy), undefined, ctx()), undefined);
    });
  }

  it('a pod without a Job (never acted on)', () => {
    const c = stuckIn(undefined);
    const { decisions } = judge({ stuck: [c], ownerOf: ownersFor([c], []), namespaceLabels: new Map(), policy: DEFAULTS, now: NOW });
    assert.equal(dueOf(decisions[0]!, undefined, ctx()), undefined);
  });
});

describe('TimerQueue', () => {
  it('gives the earliest time, and takes everything due by a time in one batch, earliest first', () => {
    const timers = new TimerQueue();
    timers.set('a', { atMs: 300, reason: 'grace' });
    timers.set('b', { atMs: 100, reason: 'grace' });
    timers.set('c', { atMs: 100, reason: 'confirmWithin' });
    timers.set('d', undefined);
    assert.equal(timers.size, 3);
    assert.equal(timers.earliest()?.atMs, 100);
    assert.deepEqual([...timers.takeDue(100).keys()].sort(), ['b', 'c']);
    assert.equal(timers.size, 1);
    assert.deepEqual(timers.earliest(), { atMs: 300, reason: 'grace' });
  });

  it('keeps one time per key: a key set again or deleted leaves nothing behind', () => {
    const timers = new TimerQueue();
    timers.set('a', { atMs: 100, reason: 'grace' });
    timers.set('a', { atMs: 500, reason: 'error' });
    timers.set('b', { atMs: 200, reason: 'grace' });
    timers.delete('b');
    assert.deepEqual(timers.earliest(), { atMs: 500, reason: 'error' });
    assert.deepEqual([...timers.takeDue(1_000)], [['a', { atMs: 500, reason: 'error' }]]);
    assert.equal(timers.earliest(), undefined);
  });

  it('orders many keys as a sort would, with at most a batch taken', () => {
    const timers = new TimerQueue();
    const times = Array.from({ length: 2_000 }, (_, i) => (i * 7919) % 2_003);
    times.forEach((t, i) => timers.set(`k${i}`, { atMs: t, reason: 'grace' }));
    // Half of them set again later: the old entries are skipped.
    times.forEach((t, i) => i % 2 === 0 && timers.set(`k${i}`, { atMs: t + 5_000, reason: 'grace' }));
    const taken = [...timers.takeDue(Infinity, 300).values()].map((d) => d.atMs);
    const expected = times
      .map((t, i) => (i % 2 === 0 ? t + 5_000 : t))
      .sort((a, b) => a - b)
      .slice(0, 300);
    assert.deepEqual(taken, expected);
  });
});
