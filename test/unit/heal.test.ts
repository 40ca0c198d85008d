// Healing, pure: the evidence, the budget, the memory on the Job, and the judge's verdict.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { affordable, healWay } from '../../src/judge/heal-budget.ts';
import {
  evidenceNeeds,
  findEvidence,
  NO_READS,
  outageHolds,
  type HealReads,
  type OutageHold,
  type PulledImages,
} from '../../src/judge/heal-evidence.ts';
import { formatHealMemory, readHealMemory, rememberHeal, withHealedTime } from '../../src/judge/heal-memory.ts';
import { addHealNeeds, emptyNeeds } from '../../src/judge/heal.ts';
import { judge, rejudgeJob, type JudgeInput } from '../../src/judge/judge.ts';
import { assessOutage } from '../../src/judge/outage.ts';
import type { Decision, OutageAssessment } from '../../src/judge/types.ts';
import type { HealFacts, JobView, PodFailureRule, StuckContainer } from '../../src/model.ts';
import { parsePolicyYaml } from '../../src/policy/parse.ts';
import type { Policy } from '../../src/policy/types.ts';
import { NOW, job, ownersFor, secondsAgo, stuckIn } from './judge-fixtures.ts';

function policy(yaml: string): Policy {
  const parsed = parsePolicyYaml(yaml);
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.problems));
  return parsed.policy;
}

const HEAL = policy('defaults: { heal: true }\n');
const BUDGET = { backoffLimit: 6, failed: 0, terminating: 0 };
const IGNORE_DISRUPTION: PodFailureRule = { action: 'Ignore', onPodConditions: [{ type: 'DisruptionTarget', status: 'True' }] };

function healJob(name: string, over: Partial<JobView> = {}): JobView {
  return job(name, { budget: BUDGET, templatePullSecrets: false, ...over });
}

function authPod(j: JobView, over: Partial<StuckContainer> = {}, facts: HealFacts = {}): StuckContainer {
  return stuckIn(j, {
    pullClass: 'auth',
    image: 'registry.example/team/app:1',
    message: 'failed to authorize: 401 Unauthorized',
    stuckSince: secondsAgo(300),
    heal: facts,
    ...over,
  });
}

function transientPod(j: JobView, over: Partial<StuckContainer> = {}): StuckContainer {
  return stuckIn(j, {
    pullClass: 'transient',
    image: 'registry.example/team/app:1',
    message: 'dial tcp 10.0.0.1:443: connect: connection refused',
    stuckSince: secondsAgo(300),
    heal: {},
    ...over,
  });
}

function reads(over: Partial<HealReads> = {}): HealReads {
  return { ...NO_READS, ...over };
}

const saListing = (...secrets: string[]) => new Map([['ci-a/default', { pullSecrets: secrets }]]);
const pulled = (image: string, startedAt: Date, partial = false): Map<string, PulledImages> =>
  new Map([['ci-a', { byImage: new Map([[image, { pod: 'other-pod', startedAt }]]), partial }]]);

function run(stuck: StuckContainer[], jobs: JobView[], p: Policy = HEAL, heal?: JudgeInput['heal']) {
  const input: JudgeInput = {
    stuck,
    ownerOf: ownersFor(stuck, jobs),
    namespaceLabels: new Map(),
    policy: p,
    now: NOW,
    ...(heal ? { heal } : {}),
  };
  return { input, decisions: judge(input).decisions };
}

function only(decisions: Decision[]): Decision {
  assert.equal(decisions.length, 1, `expected one decision, got ${decisions.length}`);
  return decisions[0]!;
}

const QUIET: OutageAssessment = assessOutage([], { minStuckPods: 20, minImages: 5, transientFraction: 0.6, authFraction: 0.6 });

describe('heal evidence: auth', () => {
  const j = healJob('build');
  const context = { holds: [], outage: QUIET };

  it('the ServiceAccount now lists a pull secret the pod lacks, and the template names none: evidence', () => {
    const e = findEvidence(authPod(j), j, reads({ serviceAccounts: saListing('regcred') }), context);
    assert.equal(e.found, true);
    assert.match(e.text, /^ServiceAccount default now lists pull secret regcred, which pod build-pod-\d+ lacks: a new pod gets it$/);
  });

  it('a ServiceAccount named by the pod is the one read', () => {
    const c = authPod(j, {}, { serviceAccount: 'builder' });
    assert.deepEqual(evidenceNeeds(c, j, []), { serviceAccount: 'builder', secrets: [] });
    const e = findEvidence(c, j, reads({ serviceAccounts: new Map([['ci-a/builder', { pullSecrets: ['regcred'] }]]) }), context);
    assert.match(e.text, /^ServiceAccount builder now lists pull secret regcred/);
  });

  it('the pod has every secret its ServiceAccount lists: no evidence', () => {
    const c = authPod(j, {}, { pullSecrets: ['regcred'] });
    const e = findEvidence(c, j, reads({ serviceAccounts: saListing('regcred') }), context);
    assert.equal(e.found, false);
    assert.match(e.text, /ServiceAccount default lists no pull secret pod .* lacks/);
  });

  it('the template names its own pull secrets: the ServiceAccount is not even read (a new pod would not get its secrets)', () => {
    const own = healJob('own', { templatePullSecrets: true });
    const c = authPod(own, {}, { pullSecrets: ['mine'] });
    assert.deepEqual(evidenceNeeds(c, own, []), { secrets: ['mine'] });
    const e = findEvidence(c, own, reads({ serviceAccounts: saListing('regcred') }), context);
    assert.equal(e.found, false);
    assert.match(e.text, /pod template names its own pull secrets/);
  });

  it('a ServiceAccount that does not exist, or could not be read (a warning)', () => {
    const gone = findEvidence(authPod(j), j, reads({ serviceAccounts: new Map([['ci-a/default', { pullSecrets: undefined }]]) }), context);
    assert.deepEqual([gone.found, /does not exist/.test(gone.text)], [false, true]);
    const forbidden = findEvidence(
      authPod(j),
      j,
      reads({ serviceAccounts: new Map([['ci-a/default', { error: 'Forbidden: no' }]]) }),
      context,
    );
    assert.equal(forbidden.found, false);
    assert.ok(!forbidden.found && forbidden.warning?.includes('ServiceAccount default could not be read (Forbidden: no)'));
  });

  it('a named pull Secret created after the pod got stuck: evidence', () => {
    const c = authPod(j, { stuckSince: secondsAgo(300) }, { pullSecrets: ['regcred'] });
    const secrets = new Map([['ci-a/regcred', { exists: true, created: secondsAgo(60), changed: secondsAgo(60) }]]);
    const e = findEvidence(c, j, reads({ serviceAccounts: saListing(), secrets }), context);
    assert.equal(e.found, true);
    assert.match(e.text, /^pull secret regcred was created at 2026-11-29T11:59:00Z, after pod .* got stuck at 2026-11-29T11:55:00Z$/);
  });

  it('a named pull Secret changed after the pod got stuck: evidence', () => {
    const c = authPod(j, {}, { pullSecrets: ['regcred'] });
    const secrets = new Map([['ci-a/regcred', { exists: true, created: secondsAgo(9000), changed: secondsAgo(10) }]]);
    const e = findEvidence(c, j, reads({ secrets }), context);
    assert.match(e.text, /^pull secret regcred was changed at 2026-11-29T11:59:50Z/);
  });

  it('a named pull Secret unchanged since, or missing: no evidence', () => {
    const c = authPod(j, {}, { pullSecrets: ['old', 'gone'] });
    const secrets = new Map<string, { exists: boolean; created?: Date; changed?: Date }>([
      ['ci-a/old', { exists: true, created: secondsAgo(9000), changed: secondsAgo(400) }],
      ['ci-a/gone', { exists: false }],
    ]);
    const e = findEvidence(c, j, reads({ serviceAccounts: saListing('old'), secrets }), context);
    assert.equal(e.found, false);
    assert.match(e.text, /pull secret gone does not exist/);
    assert.match(e.text, /pull secret\(s\) old unchanged since it got stuck/);
  });

  it('reads at most 8 pull secrets of a pod', () => {
    const names = Array.from({ length: 12 }, (_, i) => `s${i}`);
    assert.equal(evidenceNeeds(authPod(j, {}, { pullSecrets: names }), j, []).secrets.length, 8);
  });
});

describe('heal evidence: transient and stalled', () => {
  const j = healJob('build');
  const holds: OutageHold[] = [{ host: 'registry.example', at: '2026-11-29T11:00:00Z', job: 'held' }];

  it('the breaker held the host and no longer trips for it: evidence, and nothing to read', () => {
    const c = transientPod(j);
    assert.deepEqual(evidenceNeeds(c, j, holds), { secrets: [] });
    const e = findEvidence(c, j, NO_READS, { holds, outage: QUIET });
    assert.equal(e.found, true);
    assert.equal(
      e.text,
      'the outage breaker held registry registry.example (Job held, since 2026-11-29T11:00:00Z) and reads it healthy now',
    );
  });

  it('the breaker still trips for the host: no evidence from it', () => {
    const many = Array.from({ length: 25 }, (_, i) => transientPod(healJob(`j${i}`), { image: `registry.example/team/app${i % 6}:1` }));
    const outage = assessOutage(many, { minStuckPods: 20, minImages: 5, transientFraction: 0.6, authFraction: 0.6 });
    const e = findEvidence(transientPod(j), j, NO_READS, { holds, outage });
    assert.equal(e.found, false);
    assert.match(e.text, /the outage breaker still holds registry registry.example/);
  });

  it('a hold for another host says nothing about this one', () => {
    const other = [{ ...holds[0]!, host: 'quay.example' }];
    assert.deepEqual(evidenceNeeds(transientPod(j), j, other), { secrets: [], pulledIn: 'ci-a' });
    assert.equal(findEvidence(transientPod(j), j, NO_READS, { holds: other, outage: QUIET }).found, false);
  });

  it('a Running pod started the same reference after this one got stuck: evidence', () => {
    const c = transientPod(j, { stuckSince: secondsAgo(300) });
    const e = findEvidence(c, j, reads({ pulled: pulled(c.image, secondsAgo(30)) }), { holds: [], outage: QUIET });
    assert.equal(e.found, true);
    assert.match(
      e.text,
      /^pod other-pod started registry.example\/team\/app:1 at 2026-11-29T11:59:30Z, after pod .* got stuck at .*: registry registry.example serves it$/,
    );
  });

  it('started before it got stuck, or another reference: no evidence', () => {
    const c = transientPod(j, { stuckSince: secondsAgo(300) });
    const before = findEvidence(c, j, reads({ pulled: pulled(c.image, secondsAgo(301)) }), { holds: [], outage: QUIET });
    assert.equal(before.found, false);
    const other = findEvidence(c, j, reads({ pulled: pulled('registry.example/team/app:2', secondsAgo(1), true) }), {
      holds: [],
      outage: QUIET,
    });
    assert.equal(other.found, false);
    assert.match(other.text, /no Running pod in ci-a \(of those read\) started/);
  });

  it('stalled is judged the same way', () => {
    const c = transientPod(j, { pullClass: 'stalled', reason: 'ContainerCreating', message: '' });
    assert.equal(findEvidence(c, j, reads({ pulled: pulled(c.image, secondsAgo(1)) }), { holds: [], outage: QUIET }).found, true);
  });

  it('an image volume: only the breaker speaks for its registry', () => {
    const c = transientPod(j, { volume: 'models' });
    assert.deepEqual(evidenceNeeds(c, j, []), { secrets: [] });
    const e = findEvidence(c, j, reads({ pulled: pulled(c.image, secondsAgo(1)) }), { holds: [], outage: QUIET });
    assert.equal(e.found, false);
    assert.match(e.text, /image volume models: only the outage breaker/);
  });

  it('holds are read from the Jobs of the sweep; a malformed one is none', () => {
    const jobs = [
      job('a', { annotations: { 'imagepull-sweeper/outage-held': 'registry.example 2026-11-29T11:00:00Z' } }),
      job('b', { annotations: { 'imagepull-sweeper/outage-held': 'nonsense' } }),
      job('c'),
    ];
    assert.deepEqual(outageHolds(jobs), [{ host: 'registry.example', at: '2026-11-29T11:00:00Z', job: 'a' }]);
  });
});

describe('heal budget', () => {
  const names = { containerNames: ['main'] };

  it('a podFailurePolicy that ignores DisruptionTarget: the Eviction API, nothing spent', () => {
    const way = healWay({ ...names, podFailureRules: [IGNORE_DISRUPTION], budget: { ...BUDGET, backoffLimit: 0 } });
    assert.equal(way.way, 'evict');
    assert.match(
      way.why,
      /^through the Eviction API: podFailurePolicy rule 1 \(Ignore on DisruptionTarget=True\) ignores the evicted pod, nothing spent$/,
    );
  });

  it('an earlier rule that matches the evicted pod (exit code 137) comes first: no eviction', () => {
    const rules: PodFailureRule[] = [{ action: 'FailJob', onExitCodes: { operator: 'In', values: [137] } }, IGNORE_DISRUPTION];
    const way = healWay({ ...names, podFailureRules: rules, budget: BUDGET });
    assert.equal(way.way, 'none');
    assert.match(way.why, /a deletion would match podFailurePolicy rule 1 \(FailJob on exit code In \[137\]\)/);
  });

  it('a Count rule on DisruptionTarget: a deletion that spends', () => {
    const rules: PodFailureRule[] = [{ action: 'Count', onPodConditions: [{ type: 'DisruptionTarget', status: 'True' }] }];
    const way = healWay({ ...names, podFailureRules: rules, budget: BUDGET });
    assert.deepEqual([way.way, way.way === 'delete' && way.spends], ['delete', true]);
    assert.match(way.why, /the Eviction API would not help \(podFailurePolicy rule 1 \(Count on DisruptionTarget=True\) comes first/);
  });

  it('a FailJob rule that may match the deleted pod forbids a deletion', () => {
    const rules: PodFailureRule[] = [{ action: 'FailJob', onPodConditions: [{ type: 'DisruptionTarget', status: 'True' }] }];
    const way = healWay({ ...names, podFailureRules: rules, budget: BUDGET });
    assert.equal(way.way, 'none');
    assert.match(way.why, /a deletion could match podFailurePolicy rule 1/);
  });

  it('an Ignore rule on exit code 137: a deletion spends nothing', () => {
    const rules: PodFailureRule[] = [{ action: 'Ignore', onExitCodes: { operator: 'In', values: [137] } }];
    const way = healWay({ ...names, podFailureRules: rules, budget: BUDGET });
    assert.equal(way.way, 'evict', 'the evicted pod ends 137 too: the same rule ignores it');
  });

  it('no podFailurePolicy: a deletion, within backoffLimit only', () => {
    const way = healWay({ ...names, podFailureRules: [], budget: BUDGET });
    assert.ok(way.way === 'delete' && way.spends);
    const pod = (n: number) => ({ pod: `p${n}`, facts: {} });
    const zero = affordable({ budget: { backoffLimit: 0, failed: 0, terminating: 0 } }, way, [pod(1)]);
    assert.deepEqual(zero.pods, []);
    assert.match(
      zero.why,
      /^a deletion would spend one of its retries \(0 failed \+ 1 > backoffLimit 0\), and no podFailurePolicy rule ignores DisruptionTarget/,
    );
    const one = affordable({ budget: { backoffLimit: 1, failed: 0, terminating: 0 } }, way, [pod(1)]);
    assert.deepEqual(
      one.pods.map((p) => p.pod),
      ['p1'],
    );
    assert.match(one.why, /^by deletion, spending 1 of its retries \(0 failed of backoffLimit 1\)$/);
    const spent = affordable({ budget: { backoffLimit: 3, failed: 2, terminating: 1 } }, way, [pod(1)]);
    assert.deepEqual(spent.pods, []);
    assert.match(spent.why, /2 failed \+ 1 terminating \+ 1 > backoffLimit 3/);
    const some = affordable({ budget: { backoffLimit: 3, failed: 1, terminating: 0 } }, way, [pod(1), pod(2), pod(3)]);
    assert.deepEqual(
      some.pods.map((p) => p.pod),
      ['p1', 'p2'],
    );
    assert.match(some.why, /1 more pod\(s\) would not fit/);
  });

  it('backoffLimitPerIndex: each pod within its index', () => {
    const way = healWay({ ...names, podFailureRules: [], budget: BUDGET });
    assert.ok(way.way === 'delete');
    const budget = { backoffLimit: 2147483647, backoffLimitPerIndex: 1, failed: 3, terminating: 0 };
    const out = affordable({ budget }, way, [
      { pod: 'fresh', facts: {} },
      { pod: 'spent', facts: { indexFailures: 1 } },
    ]);
    assert.deepEqual(
      out.pods.map((p) => p.pod),
      ['fresh'],
    );
    const none = affordable({ budget }, way, [{ pod: 'spent', facts: { indexFailures: 1 } }]);
    assert.match(none.why, /^a deletion would fail its index \(its failures \+ 1 > backoffLimitPerIndex 1\)/);
  });

  it('retries that cannot be counted: no deletion', () => {
    const way = healWay({ ...names, podFailureRules: [], budget: undefined });
    assert.equal(way.way, 'none');
  });
});

describe('heal memory', () => {
  it('round-trips, merges the pods of one cause and keeps its longest time', () => {
    const first = rememberHeal([], { image: 'i', pullClass: 'auth', pods: ['a'], stuckSeconds: 30, evidence: 'e1', at: 't1' });
    const both = rememberHeal(first, { image: 'i', pullClass: 'auth', pods: ['b'], stuckSeconds: 10, evidence: 'e2', at: 't2' });
    const read = readHealMemory({ annotations: { 'imagepull-sweeper/healed': formatHealMemory(both) } });
    assert.deepEqual(read, [{ image: 'i', pullClass: 'auth', pods: ['a', 'b'], stuckSeconds: 30, evidence: 'e2', at: 't2' }]);
  });

  it('keeps 16 causes, the oldest dropped; cuts the evidence', () => {
    let memory = readHealMemory({ annotations: {} });
    for (let i = 0; i < 20; i++) {
      memory = rememberHeal(memory, {
        image: `i${i}`,
        pullClass: 'transient',
        pods: [],
        stuckSeconds: i,
        evidence: 'x'.repeat(1000),
        at: '',
      });
    }
    assert.equal(memory.length, 16);
    assert.equal(memory[0]!.image, 'i4');
    assert.ok(memory[0]!.evidence.length <= 256);
  });

  for (const raw of ['not json', '{}', '[1, {"image": 3}]', '[{"image": "i", "pullClass": "nope"}]']) {
    it(`an unreadable memory is none: ${raw}`, () => {
      assert.deepEqual(readHealMemory({ annotations: { 'imagepull-sweeper/healed': raw } }), []);
    });
  }

  it('a pod stuck again on a healed cause counts the time before the heal; the healed pod itself does not count twice', () => {
    const memory = [{ image: 'img', pullClass: 'auth' as const, pods: ['uid-old'], stuckSeconds: 500, evidence: '', at: '' }];
    const j = healJob('b');
    const fresh = authPod(j, { image: 'img', podUid: 'uid-new', stuckSince: secondsAgo(100) });
    assert.equal(withHealedTime(memory, fresh).stuckSince.getTime(), secondsAgo(600).getTime());
    const old = authPod(j, { image: 'img', podUid: 'uid-old', stuckSince: secondsAgo(100) });
    assert.equal(withHealedTime(memory, old), old);
    const other = authPod(j, { image: 'other', podUid: 'uid-new', stuckSince: secondsAgo(100) });
    assert.equal(withHealedTime(memory, other), other);
  });
});

describe('judge: healing', () => {
  const saReads = (...secrets: string[]) => ({ reads: reads({ serviceAccounts: saListing(...secrets) }), holds: [] });

  it('heals a Job whose cause is gone, within grace, through the eviction when its policy ignores DisruptionTarget', () => {
    const j = healJob('build', { podFailureRules: [IGNORE_DISRUPTION], budget: { ...BUDGET, backoffLimit: 0 } });
    const c = authPod(j, { stuckSince: secondsAgo(60) });
    const d = only(run([c], [j], HEAL, saReads('regcred')).decisions);
    assert.equal(d.plan, 'heal');
    assert.equal(d.heal?.way, 'evict');
    assert.deepEqual(
      d.heal?.pods.map((p) => [p.pod, p.uid, p.resourceVersion]),
      [[c.pod, c.podUid, c.podResourceVersion]],
    );
    assert.match(
      d.detail,
      /^cause gone \(ServiceAccount default now lists pull secret regcred.*\): recreating pod\(s\) build-pod-\d+ through the Eviction API/,
    );
    assert.match(d.healNote ?? '', /^ServiceAccount default now lists pull secret regcred/);
    assert.equal(d.graceSeconds, 600);
    const memory = readHealMemory({ annotations: { 'imagepull-sweeper/healed': d.heal!.memory } });
    assert.deepEqual(
      memory.map((m) => [m.image, m.pullClass, m.pods, m.stuckSeconds, m.at]),
      [[c.image, 'auth', [c.podUid], 60, '2026-11-29T12:00:00Z']],
    );
  });

  it('heals a Job past its grace instead of failing it', () => {
    const j = healJob('late');
    const d = only(run([authPod(j, { stuckSince: secondsAgo(3600) })], [j], HEAL, saReads('regcred')).decisions);
    assert.equal(d.plan, 'heal');
    assert.equal(d.heal?.way, 'delete');
    assert.match(d.detail, /by deletion, spending 1 of its retries \(0 failed of backoffLimit 6\)/);
  });

  it('off by default: no heal, nothing said', () => {
    const j = healJob('build');
    const d = only(run([authPod(j, { stuckSince: secondsAgo(3600) })], [j], policy('{}'), saReads('regcred')).decisions);
    assert.equal(d.plan, 'fail');
    assert.equal(d.healNote, undefined);
  });

  it('a rule turns it on or off for its namespaces', () => {
    const p = policy('defaults: { heal: true }\nrules:\n  - name: strict\n    namespaces: ["ci-*"]\n    heal: false\n');
    const j = healJob('build');
    assert.equal(only(run([authPod(j, { stuckSince: secondsAgo(3600) })], [j], p, saReads('regcred')).decisions).plan, 'fail');
  });

  it('never on permanent or unknown: nothing to say about healing', () => {
    for (const pullClass of ['permanent', 'unknown'] as const) {
      const j = healJob(pullClass);
      const d = only(run([stuckIn(j, { pullClass, stuckSince: secondsAgo(3600), heal: {} })], [j], HEAL, saReads('regcred')).decisions);
      assert.equal(d.plan, 'fail', pullClass);
      assert.equal(d.healNote, undefined);
    }
  });

  it('a pod one of whose containers is stuck permanent is not healed, and says so', () => {
    const j = healJob('mixed');
    const auth = authPod(j, { pod: 'p', podUid: 'u', container: 'a', stuckSince: secondsAgo(60) });
    const perm = stuckIn(j, { pod: 'p', podUid: 'u', container: 'b', pullClass: 'permanent', stuckSince: secondsAgo(60) });
    const d = only(run([auth, perm], [j], HEAL, saReads('regcred')).decisions);
    assert.equal(d.plan, 'skip');
    assert.match(d.healNote ?? '', /^not healed: pod p: b is stuck permanent, which no heal fixes$/);
  });

  it('a pod a container of which has run is never healed', () => {
    const j = healJob('ran');
    const d = only(run([authPod(j, {}, { ran: 'init container setup' })], [j], HEAL, saReads('regcred')).decisions);
    assert.equal(d.plan, 'skip');
    assert.match(d.healNote ?? '', /its init container setup has run/);
  });

  it('backoffLimit 0 and no podFailurePolicy: not healed, and the audit says why', () => {
    const j = healJob('zero', { budget: { backoffLimit: 0, failed: 0, terminating: 0 } });
    const d = only(run([authPod(j, { stuckSince: secondsAgo(60) })], [j], HEAL, saReads('regcred')).decisions);
    assert.equal(d.plan, 'skip');
    assert.equal(
      d.healNote,
      'not healed: a deletion would spend one of its retries (0 failed + 1 > backoffLimit 0), and no podFailurePolicy rule ignores DisruptionTarget (for the Eviction API)',
    );
  });

  it('no evidence yet: within grace it waits, and says what it found', () => {
    const j = healJob('waiting');
    const d = only(run([authPod(j, { stuckSince: secondsAgo(60) })], [j], HEAL, saReads()).decisions);
    assert.equal(d.plan, 'skip');
    assert.match(d.healNote ?? '', /^waiting for evidence its cause is gone: ServiceAccount default lists no pull secret/);
  });

  it('a read that failed: a warning, not an error', () => {
    const j = healJob('forbidden');
    const heal = { reads: reads({ serviceAccounts: new Map([['ci-a/default', { error: 'Forbidden: nope' }]]) }), holds: [] };
    const d = only(run([authPod(j, { stuckSince: secondsAgo(60) })], [j], HEAL, heal).decisions);
    assert.equal(d.plan, 'skip');
    assert.ok(
      d.warnings.some((w) => w.includes('ServiceAccount default could not be read (Forbidden: nope)')),
      d.warnings.join(),
    );
  });

  it('once per cause: a Job healed on it is judged on its whole time stuck and fails at its grace', () => {
    const memory = formatHealMemory([
      {
        image: 'registry.example/team/app:1',
        pullClass: 'auth',
        pods: ['uid-old'],
        stuckSeconds: 500,
        evidence: 'x',
        at: '2026-11-29T11:50:00Z',
      },
    ]);
    const j = healJob('again', {
      annotations: { 'imagepull-sweeper/healed': memory, 'imagepull-sweeper/healed-at': '2026-11-29T11:50:00Z' },
    });
    const d = only(run([authPod(j, { stuckSince: secondsAgo(120) })], [j], HEAL, saReads('regcred')).decisions);
    assert.equal(d.plan, 'fail', d.detail);
    assert.equal(d.stuckSeconds, 620);
    assert.match(d.healNote ?? '', /was healed once already, at 2026-11-29T11:50:00Z/);
  });

  it('another cause after a heal may be healed once too', () => {
    const memory = formatHealMemory([
      { image: 'registry.example/team/app:1', pullClass: 'auth', pods: ['uid-old'], stuckSeconds: 500, evidence: 'x', at: 't' },
    ]);
    const j = healJob('next', { annotations: { 'imagepull-sweeper/healed': memory } });
    const c = transientPod(j, { stuckSince: secondsAgo(60) });
    const d = only(run([c], [j], HEAL, { reads: reads({ pulled: pulled(c.image, secondsAgo(5)) }), holds: [] }).decisions);
    assert.equal(d.plan, 'heal');
    const after = readHealMemory({ annotations: { 'imagepull-sweeper/healed': d.heal!.memory } });
    assert.deepEqual(
      after.map((m) => m.pullClass),
      ['auth', 'transient'],
    );
  });

  it('a transient Job held by the breaker records the host when healing is on, and only then', () => {
    const p = policy('defaults: { heal: true, grace: { transient: 1m } }\nlimits: { outage: { minStuckPods: 2, minImages: 2 } }\n');
    const jobs = [healJob('a'), healJob('b')];
    const stuck = [
      transientPod(jobs[0]!, { image: 'registry.example/x:1', stuckSince: secondsAgo(120) }),
      transientPod(jobs[1]!, { image: 'registry.example/y:1', stuckSince: secondsAgo(120) }),
    ];
    const held = run(stuck, jobs, p, { reads: NO_READS, holds: [] }).decisions;
    assert.deepEqual(
      held.map((d) => [d.plan, d.outageHold]),
      [
        ['report', 'registry.example 2026-11-29T12:00:00Z'],
        ['report', 'registry.example 2026-11-29T12:00:00Z'],
      ],
    );
    const off = run(
      stuck,
      jobs,
      policy('defaults: { grace: { transient: 1m } }\nlimits: { outage: { minStuckPods: 2, minImages: 2 } }\n'),
    ).decisions;
    assert.deepEqual(
      off.map((d) => d.outageHold),
      [undefined, undefined],
    );
    const already = jobs.map((j) => ({ ...j, annotations: { 'imagepull-sweeper/outage-held': 'registry.example 2026-11-29T11:00:00Z' } }));
    assert.deepEqual(
      run(stuck, already, p, { reads: NO_READS, holds: [] }).decisions.map((d) => d.outageHold),
      [undefined, undefined],
    );
  });

  it('the breaker clears: the Jobs it held are healed, not failed', () => {
    const j = healJob('held', { annotations: { 'imagepull-sweeper/outage-held': 'registry.example 2026-11-29T11:00:00Z' } });
    const stuck = [transientPod(j, { stuckSince: secondsAgo(7200) })];
    const holds = outageHolds([j]);
    const d = only(run(stuck, [j], HEAL, { reads: NO_READS, holds }).decisions);
    assert.equal(d.plan, 'heal');
    assert.match(d.detail, /the outage breaker held registry registry.example \(Job held/);
  });

  it('heals only the pods with evidence, most overdue first, as many as the budget allows', () => {
    const j = healJob('many', { budget: { backoffLimit: 2, failed: 1, terminating: 0 } });
    const stuck = [
      authPod(j, { pod: 'young', podUid: 'u-young', stuckSince: secondsAgo(100) }),
      authPod(j, { pod: 'old', podUid: 'u-old', stuckSince: secondsAgo(200) }),
    ];
    const d = only(run(stuck, [j], HEAL, saReads('regcred')).decisions);
    assert.deepEqual(
      d.heal?.pods.map((p) => p.pod),
      ['old'],
    );
    assert.equal(d.pod, 'old');
  });

  it('the limits bound heals with failures; a deferred heal says so and writes nothing', () => {
    const p = policy('defaults: { heal: true }\nlimits: { maxJobsPerSweep: 1 }\n');
    const a = healJob('a');
    const b = healJob('b');
    const stuck = [authPod(a, { stuckSince: secondsAgo(500) }), authPod(b, { stuckSince: secondsAgo(100) })];
    const decisions = run(stuck, [a, b], p, saReads('regcred')).decisions;
    assert.deepEqual(
      decisions.map((d) => [d.job, d.plan, d.heal === undefined]),
      [
        ['a', 'heal', false],
        ['b', 'defer', true],
      ],
    );
    assert.match(decisions[1]!.healNote ?? '', /not healed this sweep: maxJobsPerSweep \(1\) reached/);
  });

  it('leaves alone what it always leaves alone (ignored, suspended, already failed)', () => {
    const cases: Partial<JobView>[] = [
      { annotations: { 'imagepull-sweeper/ignore': 'true' } },
      { suspended: true },
      { annotations: { 'imagepull-sweeper/failed-at': '2026-11-29T11:00:00Z' } },
    ];
    for (const over of cases) {
      const j = healJob('x', over);
      assert.equal(only(run([authPod(j)], [j], HEAL, saReads('regcred')).decisions).plan, 'skip');
    }
  });

  it('a re-judged Job (a conflict) keeps its evidence', () => {
    const j = healJob('conflict');
    const c = authPod(j);
    const { input, decisions } = run([c], [j], HEAL, saReads('regcred'));
    const fresh = { ...j, resourceVersion: '101' };
    const again = rejudgeJob(input, decisions[0]!, fresh);
    assert.equal(again.plan, 'heal');
    assert.equal(again.jobView?.resourceVersion, '101');
  });
});

describe('heal needs: only what a heal-enabled, affordable Job of a healable class needs', () => {
  const add = (j: JobView, containers: StuckContainer[], heal = true, holds: OutageHold[] = []) => {
    const needs = emptyNeeds();
    addHealNeeds(needs, j, { heal }, containers, holds);
    return { serviceAccounts: [...needs.serviceAccounts], secrets: [...needs.secrets], pulledIn: [...needs.pulledIn] };
  };

  it('auth: the ServiceAccount and the named secrets', () => {
    const j = healJob('a');
    assert.deepEqual(add(j, [authPod(j, {}, { pullSecrets: ['s1', 's2'] })]), {
      serviceAccounts: ['ci-a/default'],
      secrets: ['ci-a/s1', 'ci-a/s2'],
      pulledIn: [],
    });
  });

  it('transient: the namespace’s Running pods, unless the breaker held its host', () => {
    const j = healJob('t');
    assert.deepEqual(add(j, [transientPod(j)]).pulledIn, ['ci-a']);
    assert.deepEqual(add(j, [transientPod(j)], true, [{ host: 'registry.example', at: 't', job: 'x' }]).pulledIn, []);
  });

  it('nothing when off, permanent, unaffordable, already healed or started', () => {
    const j = healJob('n');
    const none = { serviceAccounts: [], secrets: [], pulledIn: [] };
    assert.deepEqual(add(j, [authPod(j)], false), none);
    assert.deepEqual(add(j, [stuckIn(j, { pullClass: 'permanent', heal: {} })]), none);
    const broke = healJob('broke', { budget: { backoffLimit: 0, failed: 0, terminating: 0 } });
    assert.deepEqual(add(broke, [authPod(broke)]), none);
    const healed = healJob('healed', {
      annotations: {
        'imagepull-sweeper/healed': formatHealMemory([
          { image: 'registry.example/team/app:1', pullClass: 'auth', pods: [], stuckSeconds: 1, evidence: '', at: '' },
        ]),
      },
    });
    assert.deepEqual(add(healed, [authPod(healed)]), none);
    assert.deepEqual(add(j, [authPod(j, {}, { ran: 'container main' })]), none);
  });
});
