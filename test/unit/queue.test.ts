// Jobs Kueue queues (judge/queue.ts, judge/queued.ts, observe/kueue-timeout.ts): the time stuck
// carried across admissions, the known permanent cause, the FailureTarget written while a Job
// waits suspended, and Kueue's timeout. Kueue and the Job controller themselves: test/e2e/kueue.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { formatClaimMessage } from '../../src/judge/claim-message.ts';
import { judge } from '../../src/judge/judge.ts';
import { policyKueueWarnings, readStuckMemory, type StuckMemory } from '../../src/judge/queue.ts';
import { judgeQueued } from '../../src/judge/queued.ts';
import type { JobView } from '../../src/model.ts';
import { parseKueueConfiguration } from '../../src/observe/kueue-timeout.ts';
import { ANNOTATIONS, PENDING } from '../../src/policy/annotations.ts';
import { parsePolicyYaml } from '../../src/policy/parse.ts';
import type { Policy } from '../../src/policy/types.ts';
import { job, NOW, ownersFor, secondsAgo, stuckIn } from './judge-fixtures.ts';

function policy(yaml = '{}'): Policy {
  const parsed = parsePolicyYaml(yaml);
  assert.ok(parsed.ok);
  return parsed.policy;
}

const CAUSE = { image: 'registry.example/app:missing', pullClass: 'permanent' as const };

function memory(over: Partial<StuckMemory> = {}): StuckMemory {
  return {
    ...CAUSE,
    reason: 'ImagePullBackOff',
    container: 'main',
    containerKind: 'regular',
    pod: 'q-earlier-admission',
    message: 'Back-off pulling image "registry.example/app:missing": ErrImagePull: not found',
    stuckSeconds: 0,
    evictions: 0,
    ...over,
  };
}

/** A Job in Kueue's queue `lq`, remembering `m` (and labelled queued when it does), suspended since `suspendedAgo` s. */
function queuedJob(name: string, m?: StuckMemory, suspendedAgo?: number, over: Partial<JobView> = {}): JobView {
  return job(name, {
    annotations: m ? { [ANNOTATIONS.stuck]: JSON.stringify(m) } : {},
    queue: { name: 'lq', suspendedSince: suspendedAgo === undefined ? undefined : secondsAgo(suspendedAgo) },
    suspended: suspendedAgo !== undefined,
    ...(m ? { pendingLabel: PENDING.queued } : {}),
    ...over,
  });
}

function judgeOne(j: JobView, stuckAgo: number, p = policy(), kueueTimeout?: { seconds: number; source: string }) {
  const stuck = [stuckIn(j, { stuckSince: secondsAgo(stuckAgo), ...CAUSE })];
  const { decisions } = judge({ stuck, ownerOf: ownersFor(stuck, [j]), namespaceLabels: new Map(), policy: p, now: NOW, kueueTimeout });
  return { d: decisions[0]!, c: stuck[0]! };
}

describe('a Job Kueue queues, while its pods are stuck', () => {
  it('within grace: remembers the cause once per admission, on the Job', () => {
    const { d, c } = judgeOne(queuedJob('q'), 30);
    assert.equal(d.plan, 'skip');
    const written = readStuckMemory(d.remember);
    assert.deepEqual(
      [written?.image, written?.pullClass, written?.stuckSeconds, written?.evictions, written?.since],
      [CAUSE.image, 'permanent', 0, 0, c.stuckSince.toISOString()],
    );
    assert.equal(written?.seen, NOW.toISOString());
    // The same admission seen again: nothing to write.
    const again = judgeOne(queuedJob('q', written), 30).d;
    assert.equal(again.remember, undefined);
    // A Job Kueue does not queue: nothing remembered.
    assert.equal(judgeOne(job('plain'), 30).d.remember, undefined);
  });

  it('admitted again on the same cause: has only the rest of its grace, and says what its earlier admissions carried', () => {
    const p = policy('defaults: { grace: { unknown: 5m } }');
    const cause = { image: CAUSE.image, pullClass: 'unknown' as const };
    const closed = memory({ ...cause, stuckSeconds: 200, evictions: 2 });
    const stuck = (j: JobView, ago: number) => {
      const s = [stuckIn(j, { stuckSince: secondsAgo(ago), ...cause })];
      return judge({ stuck: s, ownerOf: ownersFor(s, [j]), namespaceLabels: new Map(), policy: p, now: NOW }).decisions[0]!;
    };
    const within = stuck(queuedJob('q', closed), 60);
    assert.equal(within.plan, 'skip');
    assert.equal(within.stuckSeconds, 260);
    assert.equal(within.detail, 'within grace (4m20s of 5m from defaults); stuck 3m20s in 2 earlier admission(s) Kueue ended');
    assert.equal(readStuckMemory(within.remember)?.stuckSeconds, 200, 'this admission opened, the earlier ones kept');
    const past = stuck(queuedJob('q', closed), 120);
    assert.equal(past.plan, 'fail');
    assert.equal(past.stuckSeconds, 320);
    assert.match(formatClaimMessage(past), /waited 5m20s .*grace 5m from defaults, stuck 3m20s in 2 earlier admission\(s\) Kueue ended\)/);
    // Another image: a new cause, a full grace.
    const other = stuck(queuedJob('q', { ...closed, image: 'registry.example/other:1' }), 60);
    assert.equal(other.stuckSeconds, 60);
  });

  it('an admission whose end the sweeper missed counts no more than it surely lasted: until the sweeper saw it stuck', () => {
    const p = policy('defaults: { grace: { unknown: 5m } }');
    const open = memory({ pullClass: 'unknown', since: secondsAgo(500).toISOString(), seen: secondsAgo(460).toISOString() });
    const j = queuedJob('q', open);
    const s = [stuckIn(j, { pod: 'q-pod-next', stuckSince: secondsAgo(30), image: CAUSE.image, pullClass: 'unknown' })];
    const d = judge({ stuck: s, ownerOf: ownersFor(s, [j]), namespaceLabels: new Map(), policy: p, now: NOW }).decisions[0]!;
    assert.equal(d.stuckSeconds, 70);
    assert.deepEqual([readStuckMemory(d.remember)?.stuckSeconds, readStuckMemory(d.remember)?.evictions], [40, 1]);
  });

  it('the same pod with its stuck clock moved (its sandbox recreated): the same admission, its time not carried twice', () => {
    const p = policy('defaults: { grace: { unknown: 5m } }');
    const open = memory({ pullClass: 'unknown', pod: 'q-moved', since: secondsAgo(100).toISOString(), seen: secondsAgo(60).toISOString() });
    const j = queuedJob('q', open);
    const s = [stuckIn(j, { pod: 'q-moved', stuckSince: secondsAgo(80), image: CAUSE.image, pullClass: 'unknown' })];
    const d = judge({ stuck: s, ownerOf: ownersFor(s, [j]), namespaceLabels: new Map(), policy: p, now: NOW }).decisions[0]!;
    assert.equal(d.stuckSeconds, 80);
    const kept = readStuckMemory(d.remember);
    assert.deepEqual([kept?.stuckSeconds, kept?.evictions, kept?.since], [0, 0, secondsAgo(80).toISOString()]);
  });

  it('a permanent cause already known when Kueue ended an admission: failed at once, whatever grace is left', () => {
    const { d } = judgeOne(queuedJob('q', memory({ stuckSeconds: 20, evictions: 1 })), 5);
    assert.equal(d.plan, 'fail');
    assert.equal(d.mechanism, 'condition');
    assert.match(d.detail, /^its permanent cause is known \(stuck 20s in 1 earlier admission\(s\) Kueue ended\): failed at once/);
  });

  it("warns when the grace is not shorter than Kueue's timeout", () => {
    const timeout = { seconds: 120, source: 'waitForPodsReady.timeout in ConfigMap kueue-system/kueue-manager-config' };
    const { d } = judgeOne(queuedJob('q'), 30, policy(), timeout);
    assert.match(
      d.warnings.join('\n'),
      /the permanent grace 2m \(defaults\) is not shorter than Kueue's timeout 2m \(waitForPodsReady\.timeout/,
    );
    assert.deepEqual(judgeOne(queuedJob('q'), 30, policy(), { ...timeout, seconds: 121 }).d.warnings, []);
    assert.deepEqual(judgeOne(job('plain'), 30, policy(), timeout).d.warnings, [], 'only a Job Kueue queues');
  });
});

describe('a Job Kueue suspended while stuck (judgeQueued)', () => {
  const run = (labelled: JobView[], p = policy()) =>
    judgeQueued({ labelled, decisions: [], policy: p, namespaceLabels: new Map(), now: NOW });

  it('a permanent cause: its admission closed and its FailureTarget written while it waits, in one write', () => {
    const open = memory({ since: secondsAgo(100).toISOString(), seen: secondsAgo(90).toISOString() });
    const [d] = run([queuedJob('q', open, 40)]);
    assert.equal(d?.plan, 'fail');
    assert.equal(d?.mechanism, 'condition');
    assert.equal(d?.stuckSeconds, 60, 'stuck from 100 s ago until suspended 40 s ago');
    assert.deepEqual([readStuckMemory(d?.remember)?.stuckSeconds, readStuckMemory(d?.remember)?.evictions], [60, 1]);
    assert.equal(readStuckMemory(d?.remember)?.since, undefined);
    assert.match(
      d!.detail,
      /^suspended by Kueue while stuck, stuck 1m in 1 earlier admission\(s\) Kueue ended; its permanent cause is known: failed while it waits/,
    );
    assert.match(
      formatClaimMessage(d!),
      /^regular container main of pod q-earlier-admission waited 1m on image registry\.example\/app:missing \(class permanent/,
    );
  });

  it('another class: closed and kept; failed while it waits only once its grace is spent; transient and auth wait for live pods', () => {
    const p = policy('defaults: { grace: { unknown: 2m, auth: 1m } }');
    const open = (pullClass: StuckMemory['pullClass']) =>
      memory({ pullClass, since: secondsAgo(100).toISOString(), seen: secondsAgo(90).toISOString() });
    const [kept] = run([queuedJob('a', open('unknown'), 40)], p);
    assert.deepEqual([kept?.plan, readStuckMemory(kept?.remember)?.stuckSeconds], ['skip', 60]);
    assert.match(kept!.detail, /stuck 1m in 1 earlier admission\(s\) Kueue ended of grace 2m from defaults: waits in its queue$/);
    const [spent] = run([queuedJob('b', { ...open('unknown'), stuckSeconds: 90 }, 40)], p);
    assert.equal(spent?.plan, 'fail');
    const [auth] = run([queuedJob('c', { ...open('auth'), stuckSeconds: 90 }, 40)], p);
    assert.equal(auth?.plan, 'skip');
    assert.match(auth!.detail, /the auth class is judged while its pods are stuck, where the outage breaker sees them$/);
  });

  it('leaves alone what it has closed already, what is admitted, ignored, finished or claimed', () => {
    const closed = memory({ pullClass: 'unknown', stuckSeconds: 30, evictions: 1 });
    const open = memory({ since: secondsAgo(100).toISOString(), seen: secondsAgo(90).toISOString() });
    assert.deepEqual(run([queuedJob('closed', closed, 40)]), []);
    assert.deepEqual(run([queuedJob('admitted', open)]), []);
    assert.deepEqual(
      run([queuedJob('ignored', open, 40, { annotations: { [ANNOTATIONS.stuck]: JSON.stringify(open), [ANNOTATIONS.ignore]: 'true' } })]),
      [],
    );
    assert.deepEqual(run([queuedJob('done', open, 40, { finished: true })]), []);
    assert.deepEqual(run([queuedJob('claimed', open, 40, { pendingLabel: PENDING.claimed })]), []);
    assert.deepEqual(run([queuedJob('ignore-rule', open, 40)], policy('rules: [{ name: all, action: ignore }]')), []);
  });
});

describe("Kueue's timeout", () => {
  it('is read from its Configuration, v1beta2 or v1beta1, and says so when waitForPodsReady is off', () => {
    const v2 = parseKueueConfiguration(
      'apiVersion: config.kueue.x-k8s.io/v1beta2\nkind: Configuration\nwaitForPodsReady:\n  timeout: 5m\n',
    );
    assert.deepEqual(v2.timeout, { seconds: 300, source: 'waitForPodsReady.timeout in ConfigMap kueue-system/kueue-manager-config' });
    const v1 = parseKueueConfiguration(
      'apiVersion: config.kueue.x-k8s.io/v1beta1\nkind: Configuration\nwaitForPodsReady:\n  enable: true\n',
    );
    assert.equal(v1.timeout?.seconds, 300, "v1beta1's default");
    const disabled = parseKueueConfiguration(
      'apiVersion: config.kueue.x-k8s.io/v1beta1\nwaitForPodsReady:\n  enable: false\n  timeout: 1m\n',
    );
    assert.equal(disabled.timeout, undefined);
    assert.match(disabled.said, /waitForPodsReady is off/);
    assert.match(parseKueueConfiguration('apiVersion: config.kueue.x-k8s.io/v1beta2\n').said, /waitForPodsReady is off/);
    assert.match(parseKueueConfiguration('waitForPodsReady: { timeout: soon }\n').said, /waitForPodsReady\.timeout .*"soon"/);
  });

  it('is checked against every grace of the policy once, at start-up', () => {
    const p = policy(
      'defaults: { grace: { auth: 20m } }\nrules:\n  - { name: ci, namespaces: ["ci-*"], grace: { permanent: 30s, unknown: 30m } }\n  - { name: off, namespaces: [kube-system], action: ignore, grace: { unknown: 1h } }\n',
    );
    const warnings = policyKueueWarnings(p, { seconds: 900, source: 'x' });
    assert.deepEqual(
      warnings.map((w) => w.split(' is not shorter')[0]),
      [
        'the auth grace 20m (defaults)',
        'the transient grace 1h (defaults)',
        'the unknown grace 15m (defaults)',
        'the stalled grace 30m (defaults)',
        'the unknown grace 30m (rule ci)',
      ],
    );
  });
});
