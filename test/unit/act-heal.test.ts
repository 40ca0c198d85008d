// The heal's write path (src/act/heal-job.ts) against the scripted gateway: recorded on the Job
// first, then each pod recreated conditionally, then its Event; every branch. The same path against
// the real API server and kubelet: test/e2e/node-heal.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { EventsV1Event, V1Pod } from '@kubernetes/client-node';
import { act, type ActOptions } from '../../src/act/act.ts';
import { judge } from '../../src/judge/judge.ts';
import { readHealMemory } from '../../src/judge/heal-memory.ts';
import type { Decision } from '../../src/judge/types.ts';
import { dryRunGateway, type RecordedWrites } from '../../src/kube/dry-run-gateway.ts';
import { withRetries } from '../../src/kube/retrying.ts';
import type { JobView, PodFailureRule } from '../../src/model.ts';
import { ANNOTATIONS } from '../../src/policy/annotations.ts';
import { parsePolicyYaml } from '../../src/policy/parse.ts';
import { wordResult } from '../../src/report/wording.ts';
import { apiError, lostAnswer, scriptedGateway } from '../support/scripted-gateway.ts';
import { job, NOW, ownersFor, secondsAgo, stuckIn } from './judge-fixtures.ts';

const IGNORE_DISRUPTION: PodFailureRule[] = [{ action: 'Ignore', onPodConditions: [{ type: 'DisruptionTarget', status: 'True' }] }];

function healDecision(name: string, over: Partial<JobView> = {}, pods = 1): Decision {
  const j = job(name, { budget: { backoffLimit: 6, failed: 0, terminating: 0 }, templatePullSecrets: false, ...over });
  const stuck = Array.from({ length: pods }, (_, i) =>
    stuckIn(j, { pod: `${name}-pod-${i}`, pullClass: 'auth', stuckSince: secondsAgo(300 - i), heal: {} }),
  );
  const parsed = parsePolicyYaml('defaults: { heal: true }\n');
  assert.ok(parsed.ok);
  const reads = { serviceAccounts: new Map([['ci-a/default', { pullSecrets: ['regcred'] }]]), secrets: new Map(), pulled: new Map() };
  const d = judge({
    stuck,
    ownerOf: ownersFor(stuck, [j]),
    namespaceLabels: new Map(),
    policy: parsed.policy,
    now: NOW,
    heal: { reads, holds: [] },
  }).decisions[0]!;
  assert.equal(d.plan, 'heal', d.detail);
  return d;
}

const options = (over: Partial<ActOptions> = {}): ActOptions => ({
  concurrency: 1,
  now: NOW,
  instance: 'unit',
  claim: 'claim-1',
  rejudge: () => assert.fail('no rejudge expected'),
  ...over,
});

const pod = (d: Decision, over: { resourceVersion?: string; deleting?: boolean; ran?: boolean; uid?: string } = {}): V1Pod => ({
  metadata: {
    name: d.pod,
    namespace: d.namespace,
    uid: over.uid ?? d.podUid,
    resourceVersion: over.resourceVersion ?? '9',
    ownerReferences: [{ apiVersion: 'batch/v1', kind: 'Job', name: d.job!, uid: d.jobView!.uid, controller: true }],
    ...(over.deleting ? { deletionTimestamp: new Date(NOW) } : {}),
  },
  spec: { containers: [{ name: 'main', image: d.image }] },
  status: {
    phase: 'Pending',
    startTime: secondsAgo(400),
    containerStatuses: [
      over.ran
        ? {
            name: 'main',
            image: d.image,
            imageID: 'x',
            ready: false,
            restartCount: 1,
            containerID: 'containerd://abc',
            state: { waiting: { reason: 'ImagePullBackOff' } },
          }
        : {
            name: 'main',
            image: d.image,
            imageID: '',
            ready: false,
            restartCount: 0,
            state: { waiting: { reason: 'ImagePullBackOff', message: 'unauthorized' } },
          },
    ],
  },
});

describe('healing a Job', () => {
  it('records the heal on the Job (conditional), evicts the pod as judged, then writes its Normal Event', async () => {
    const d = healDecision('a', { podFailureRules: IGNORE_DISRUPTION });
    const { gateway, calls, methods } = scriptedGateway();
    const [r] = await act(gateway, [d], options());
    assert.deepEqual([r!.outcome, r!.error], ['healed', undefined]);
    assert.deepEqual(methods(), ['mergePatchJob', 'evictPod', 'createEvent']);
    const patch = calls[0]!.args[2] as { metadata: { resourceVersion: string; annotations: Record<string, string> } };
    assert.equal(patch.metadata.resourceVersion, '100');
    assert.equal(patch.metadata.annotations[ANNOTATIONS.healedAt], '2026-11-29T12:00:00Z');
    const memory = readHealMemory({ annotations: { [ANNOTATIONS.healed]: patch.metadata.annotations[ANNOTATIONS.healed]! } });
    assert.deepEqual(memory[0]!.pods, [d.podUid]);
    assert.deepEqual(calls[1]!.args, [d.namespace, d.pod, d.podUid, d.podResourceVersion]);
    const event = calls[2]!.args[1] as EventsV1Event;
    assert.deepEqual([event.type, event.reason, event.action, event.related?.name], ['Normal', 'ImagePullHealed', 'Heal', d.pod]);
    assert.match(
      event.note ?? '',
      /^Recreating pod a-pod-0 \(the Eviction API\): its cause is gone: ServiceAccount default now lists pull secret regcred/,
    );
    assert.deepEqual(wordResult(r!, false).decision.detail.split('; ').at(-1), `evicted pod ${d.pod}`);
  });

  it('without an Ignore rule: deletes the pod with its own grace period (uid and resourceVersion)', async () => {
    const d = healDecision('b');
    const { gateway, calls, methods } = scriptedGateway();
    const [r] = await act(gateway, [d], options());
    assert.equal(r!.outcome, 'healed');
    assert.deepEqual(methods(), ['mergePatchJob', 'deletePod', 'createEvent']);
    assert.deepEqual(calls[1]!.args, [d.namespace, d.pod, d.podUid, d.podResourceVersion]);
  });

  it('several pods: each recreated and each its own Event, named per pod (a repeat is a 409)', async () => {
    const d = healDecision('c', { podFailureRules: IGNORE_DISRUPTION }, 2);
    const { gateway, calls, methods } = scriptedGateway({ createEvent: [undefined, apiError(409, 'AlreadyExists', 'exists')] });
    const [r] = await act(gateway, [d], options());
    assert.deepEqual([r!.outcome, r!.error], ['healed', undefined]);
    assert.deepEqual(methods(), ['mergePatchJob', 'evictPod', 'createEvent', 'evictPod', 'createEvent']);
    const names = calls.filter((c) => c.method === 'createEvent').map((c) => (c.args[1] as EventsV1Event).metadata?.name);
    assert.equal(new Set(names).size, 2);
  });

  it('the Job changed since it was judged: nothing recreated, judged again', async () => {
    const d = healDecision('d');
    const { gateway, methods } = scriptedGateway({
      mergePatchJob: [apiError(409, 'Conflict', 'modified')],
      readJob: [{ metadata: { name: d.job, namespace: d.namespace, uid: d.jobView!.uid, resourceVersion: '101', annotations: {} } }],
    });
    const rejudged: JobView[] = [];
    const [r] = await act(
      gateway,
      [d],
      options({ rejudge: (_, fresh) => (rejudged.push(fresh), { ...d, plan: 'skip', detail: 'judged again' }) }),
    );
    assert.deepEqual([r!.outcome, r!.decision.detail], ['skipped', 'judged again']);
    assert.equal(rejudged[0]!.resourceVersion, '101');
    assert.deepEqual(methods(), ['mergePatchJob', 'readJob']);
  });

  it('the kubelet rewrote the pod in between: recreated as it is now, still stuck and never started', async () => {
    const d = healDecision('e', { podFailureRules: IGNORE_DISRUPTION });
    const { gateway, calls, methods } = scriptedGateway({
      evictPod: [apiError(409, 'Conflict', 'precondition failed'), undefined],
      readPod: [pod(d, { resourceVersion: '12' })],
    });
    const [r] = await act(gateway, [d], options());
    assert.equal(r!.outcome, 'healed');
    assert.deepEqual(methods(), ['mergePatchJob', 'evictPod', 'readPod', 'evictPod', 'createEvent']);
    assert.equal(calls[3]!.args[3], '12');
  });

  it('a container of it ran since it was judged: not recreated, and the heal is spent (skipped, says why)', async () => {
    const d = healDecision('f', { podFailureRules: IGNORE_DISRUPTION });
    const { gateway, methods } = scriptedGateway({
      evictPod: [apiError(409, 'Conflict', 'precondition failed')],
      readPod: [pod(d, { ran: true })],
    });
    const [r] = await act(gateway, [d], options());
    assert.equal(r!.outcome, 'skipped');
    assert.match(r!.decision.detail, /^not healed: pod f-pod-0 changed: its container main has run since it was judged: not recreated$/);
    assert.deepEqual(methods(), ['mergePatchJob', 'evictPod', 'readPod']);
  });

  it('already gone (404): nothing recreated, no Event', async () => {
    const d = healDecision('g');
    const { gateway, methods } = scriptedGateway({ deletePod: [apiError(404, 'NotFound', 'gone')] });
    const [r] = await act(gateway, [d], options());
    assert.equal(r!.outcome, 'skipped');
    assert.match(r!.decision.detail, /pod g-pod-0 was already gone/);
    assert.deepEqual(methods(), ['mergePatchJob', 'deletePod']);
  });

  it("a 409 on a pod terminating with the Eviction API's mark (a retried eviction that had landed): its own", async () => {
    const d = healDecision('h', { podFailureRules: IGNORE_DISRUPTION });
    const evicted = pod(d, { deleting: true });
    evicted.status!.conditions = [{ type: 'DisruptionTarget', status: 'True', reason: 'EvictionByEvictionAPI' }];
    const { gateway, methods } = scriptedGateway({ evictPod: [apiError(409, 'Conflict', 'precondition failed')], readPod: [evicted] });
    const [r] = await act(gateway, [d], options());
    assert.equal(r!.outcome, 'healed');
    assert.deepEqual(methods(), ['mergePatchJob', 'evictPod', 'readPod', 'createEvent']);
  });

  it('a 409 on a pod another is deleting: not counted as a heal, no Event', async () => {
    const d = healDecision('h2');
    const { gateway, methods } = scriptedGateway({
      deletePod: [apiError(409, 'Conflict', 'precondition failed')],
      readPod: [pod(d, { deleting: true })],
    });
    const [r] = await act(gateway, [d], options());
    assert.equal(r!.outcome, 'skipped');
    assert.match(r!.decision.detail, /pod h2-pod-0 was already terminating/);
    assert.deepEqual(methods(), ['mergePatchJob', 'deletePod', 'readPod']);
  });

  it('an eviction refused (a PodDisruptionBudget, the guard): error, the heal stays recorded', async () => {
    const d = healDecision('i', { podFailureRules: IGNORE_DISRUPTION });
    const { gateway, methods } = scriptedGateway({ evictPod: [apiError(403, 'Forbidden', 'imagepull-sweeper guard: no')] });
    const [r] = await act(gateway, [d], options());
    assert.equal(r!.outcome, 'healed');
    assert.match(r!.error ?? '', /^pod i-pod-0 could not be evicted: Forbidden: imagepull-sweeper guard: no$/);
    assert.deepEqual(methods(), ['mergePatchJob', 'evictPod']);
  });

  it('an eviction whose answer was lost and that may still land: said so, never tried again as if it had not', async () => {
    const d = healDecision('j', { podFailureRules: IGNORE_DISRUPTION });
    const { gateway, methods } = scriptedGateway(
      { evictPod: [lostAnswer(), lostAnswer(), lostAnswer(), lostAnswer()], readPod: [apiError(500, 'InternalError', 'down')] },
      { repeatLast: true },
    );
    const [r] = await act(withRetries(gateway, { sleep: async () => {} }), [d], options());
    assert.match(r!.error ?? '', /could not be evicted: .*the request may still land: the heal is recorded, it is not tried again/);
    assert.equal(methods().filter((m) => m === 'mergePatchJob').length, 1);
  });

  it('a retried eviction answered 404: its own earlier attempt deleted the pod', async () => {
    const d = healDecision('k', { podFailureRules: IGNORE_DISRUPTION });
    const { gateway, methods } = scriptedGateway({ evictPod: [lostAnswer(), apiError(404, 'NotFound', 'gone')] });
    const [r] = await act(withRetries(gateway, { sleep: async () => {} }), [d], options());
    assert.deepEqual([r!.outcome, r!.error], ['healed', undefined]);
    assert.deepEqual(methods(), ['mergePatchJob', 'evictPod', 'evictPod', 'createEvent']);
  });

  it('the record on the Job lost its answer and landed: read back, the heal goes on', async () => {
    const d = healDecision('l');
    const recorded = () => ({
      metadata: { name: d.job, namespace: d.namespace, uid: d.jobView!.uid, annotations: { [ANNOTATIONS.healed]: d.heal!.memory } },
    });
    const { gateway, methods } = scriptedGateway({ mergePatchJob: [lostAnswer()], readJob: [recorded] });
    const [r] = await act(gateway, [d], options());
    assert.equal(r!.outcome, 'healed');
    assert.deepEqual(methods(), ['mergePatchJob', 'readJob', 'deletePod', 'createEvent']);
  });

  it('a dry run walks the same path, sends nothing and says would-heal / would evict', async () => {
    const d = healDecision('m', { podFailureRules: IGNORE_DISRUPTION });
    const { gateway, calls } = scriptedGateway();
    const recorded: RecordedWrites = { methods: [] };
    const [r] = await act(dryRunGateway(gateway, recorded), [d], options());
    assert.deepEqual(recorded.methods, ['mergePatchJob', 'evictPod', 'createEvent']);
    assert.equal(calls.length, 0);
    const worded = wordResult(r!, true);
    assert.equal(worded.outcome, 'would-heal');
    assert.match(worded.decision.detail, /; would evict pod m-pod-0$/);
  });
});

describe('reporting a Job the breaker holds, healing on', () => {
  it('writes the host it is held for with reported-at, and alone when reported earlier', async () => {
    const j = job('held', { budget: { backoffLimit: 6, failed: 0, terminating: 0 } });
    const stuck = [
      stuckIn(j, { pullClass: 'transient', image: 'registry.example/x:1', stuckSince: secondsAgo(7200), heal: {} }),
      stuckIn(job('other'), { pullClass: 'transient', image: 'registry.example/y:1', stuckSince: secondsAgo(7200), heal: {} }),
    ];
    const parsed = parsePolicyYaml('defaults: { heal: true }\nlimits: { outage: { minStuckPods: 2, minImages: 2 } }\n');
    assert.ok(parsed.ok);
    const decide = (jv: JobView) =>
      judge({
        stuck,
        ownerOf: ownersFor(stuck, [jv, job('other')]),
        namespaceLabels: new Map(),
        policy: parsed.policy,
        now: NOW,
      }).decisions.find((d) => d.job === 'held')!;
    const fresh = decide(j);
    const first = scriptedGateway();
    await act(first.gateway, [fresh], options());
    assert.deepEqual(first.methods(), ['createEvent', 'mergePatchJob']);
    assert.deepEqual((first.calls[1]!.args[2] as { metadata: { annotations: Record<string, string> } }).metadata.annotations, {
      [ANNOTATIONS.reportedAt]: '2026-11-29T12:00:00Z',
      [ANNOTATIONS.outageHeld]: 'registry.example 2026-11-29T12:00:00Z',
    });
    const reported = decide({ ...j, annotations: { [ANNOTATIONS.reportedAt]: '2026-11-29T11:00:00Z' } });
    const second = scriptedGateway();
    await act(second.gateway, [reported], options());
    assert.deepEqual(second.methods(), ['mergePatchJob']);
  });
});
