// SPEC "How a Job is failed", step 4, pure: which pods of a pending Job are force-deleted. The pod
// statuses are the real kubelet's (test/fixtures/real-node-statuses.json, recorded on the test
// node by `npm run record:node-statuses`); only the metadata a deletion adds is set here.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1ContainerStatus, V1Pod } from '@kubernetes/client-node';
import { containerThatRan, describeTarget, planForceDeletes, terminatingSeconds } from '../../src/judge/force-delete.ts';
import { dueForForceDelete, judgePending } from '../../src/judge/pending.ts';
import type { JobView } from '../../src/model.ts';
import { job, NOW, secondsAgo } from './judge-fixtures.ts';
import { REAL_NODE } from './real-node.ts';

const JOB_UID = 'job-uid-1';

function stalled(id: string, state: string): V1Pod {
  const c = REAL_NODE.stalled.find((x) => x.id === id);
  assert.ok(c?.pods[state], `recorded stalled case ${id} ${state}`);
  return structuredClone(c.pods[state]);
}

/** A recorded pod as the Job controller's deletion leaves it: deletion requested `deletedAgo` s ago, grace 30 s. */
function terminating(pod: V1Pod, name: string, deletedAgo = 70, over: { grace?: number; owner?: string } = {}): V1Pod {
  const grace = over.grace ?? 30;
  const p = structuredClone(pod);
  p.metadata = {
    ...p.metadata,
    name,
    uid: `uid-${name}`,
    resourceVersion: `rv-${name}`,
    deletionTimestamp: new Date(secondsAgo(deletedAgo).getTime() + grace * 1000),
    deletionGracePeriodSeconds: grace,
    ownerReferences: [{ apiVersion: 'batch/v1', kind: 'Job', name: 'j', uid: over.owner ?? JOB_UID, controller: true }],
  };
  return p;
}

const NEVER_STARTED: [string, V1Pod][] = [
  ['regular container pulling (ContainerCreating)', stalled('stalled', 'ContainerCreating')],
  ['sandbox not ready yet', stalled('stalled', 'sandbox-not-ready')],
  ['init container pulling (PodInitializing)', stalled('stalled-init', 'PodInitializing')],
  ['sidecar pulling', stalled('stalled-sidecar', 'PodInitializing')],
  ['first of two init containers pulling', stalled('stalled-first-of-two-init', 'PodInitializing')],
  ['a pull that failed (ImagePullBackOff)', structuredClone(REAL_NODE.cases[0]!.pods.ImagePullBackOff!)],
];

describe('containerThatRan: real pod statuses', () => {
  for (const [what, pod] of NEVER_STARTED) {
    it(`none ran: ${what}`, () => assert.equal(containerThatRan(pod), undefined));
  }

  it('a container the kubelet never started and reported terminated (137, ContainerStatusUnknown, startedAt null) did not run', () => {
    const left = REAL_NODE.deletedWaitingPod.pod;
    assert.equal(left.status?.containerStatuses?.[0]?.state?.terminated?.reason, 'ContainerStatusUnknown');
    assert.equal(containerThatRan(left), undefined);
  });

  it('an init container that completed ran (then the regular container could not pull)', () => {
    assert.equal(containerThatRan(REAL_NODE.clock), 'init container setup');
    assert.equal(containerThatRan(stalled('stalled-after-init', 'PodInitializing')), 'init container setup');
  });

  it('an init container still running ran', () => {
    assert.equal(containerThatRan(stalled('stalled-second-init', 'setup-running')), 'init container setup');
  });

  it('a running regular container ran', () => {
    assert.match(containerThatRan(REAL_NODE.running) ?? '', /^container /);
  });

  it('any sign is enough: a container ID, started, a running or started terminated state, in state or lastState', () => {
    const base: V1ContainerStatus = {
      name: 'c',
      image: 'i',
      imageID: '',
      ready: false,
      restartCount: 0,
      state: { waiting: { reason: 'ContainerCreating' } },
    };
    const withStatus = (
      s: Partial<V1ContainerStatus>,
      list: 'initContainerStatuses' | 'containerStatuses' | 'ephemeralContainerStatuses' = 'containerStatuses',
    ): V1Pod => ({
      status: { [list]: [{ ...base, ...s }] },
    });
    const started = new Date(NOW.getTime() - 5000);
    assert.equal(containerThatRan(withStatus({})), undefined);
    assert.equal(containerThatRan(withStatus({ containerID: 'containerd://abc' })), 'container c');
    assert.equal(containerThatRan(withStatus({ started: true })), 'container c');
    assert.equal(containerThatRan(withStatus({ state: { running: { startedAt: started } } })), 'container c');
    assert.equal(containerThatRan(withStatus({ state: { terminated: { exitCode: 0, startedAt: started } } })), 'container c');
    assert.equal(containerThatRan(withStatus({ lastState: { terminated: { exitCode: 1, startedAt: started } } })), 'container c');
    assert.equal(
      containerThatRan(withStatus({ lastState: { terminated: { exitCode: 1, containerID: 'containerd://old' } } })),
      'container c',
    );
    assert.equal(containerThatRan(withStatus({ containerID: 'containerd://abc' }, 'initContainerStatuses')), 'init container c');
    assert.equal(containerThatRan(withStatus({ containerID: 'containerd://abc' }, 'ephemeralContainerStatuses')), 'ephemeral container c');
    assert.equal(containerThatRan({}), undefined, 'no status at all: nothing is known to have run');
  });
});

describe('planForceDeletes', () => {
  it('targets every terminating never-started pod of the Job, with how long it has been terminating', () => {
    const pods = NEVER_STARTED.map(([, pod], i) => terminating(pod, `p${i}`, 60 + i));
    const plan = planForceDeletes(pods, JOB_UID, NOW);
    assert.deepEqual(
      plan.targets.map((t) => [t.pod, t.uid, t.resourceVersion, t.terminatingSeconds]),
      pods.map((p, i) => [p.metadata!.name, `uid-p${i}`, `rv-p${i}`, 60 + i]),
    );
    assert.deepEqual(plan.spared, []);
    assert.equal(describeTarget(plan.targets[0]!), 'pod p0 (terminating 1m, no container ever started)');
  });

  it('never a pod one of whose containers ran, and says which', () => {
    const plan = planForceDeletes([terminating(REAL_NODE.clock, 'ran-init', 72)], JOB_UID, NOW);
    assert.deepEqual(plan.targets, []);
    assert.deepEqual(plan.spared, [
      { pod: 'ran-init', why: 'pod ran-init terminating 1m12s, not force-deleted: its init container setup has run' },
    ]);
  });

  it("leaves pods that are not terminating, not the Job's, already ended or already force-deleted", () => {
    const pending = stalled('stalled', 'ContainerCreating');
    pending.metadata = {
      ...pending.metadata,
      ownerReferences: [{ apiVersion: 'batch/v1', kind: 'Job', name: 'j', uid: JOB_UID, controller: true }],
    };
    const otherJob = terminating(pending, 'other', 90, { owner: 'another-job' });
    const ended = terminating(REAL_NODE.deletedWaitingPod.pod, 'ended');
    const forced = terminating(pending, 'forced', 90, { grace: 0 });
    const plan = planForceDeletes([pending, otherJob, ended, forced], JOB_UID, NOW);
    assert.deepEqual(plan.targets, []);
    assert.deepEqual(
      plan.spared.map((s) => s.why),
      [
        'pod ended terminating 1m10s, not force-deleted: the kubelet has ended it (phase Failed)',
        'pod forced terminating 1m30s, not force-deleted: already deleted with grace period 0 (held by a finalizer)',
      ],
    );
  });

  it('measures terminating from when the deletion was asked for, not from its deadline', () => {
    const pod = terminating(stalled('stalled', 'ContainerCreating'), 'p', 45, { grace: 30 });
    assert.equal(terminatingSeconds(pod, NOW), 45);
    // The gateway hands over plain JSON: RFC 3339 strings.
    pod.metadata!.deletionTimestamp = new Date(NOW.getTime() - 15_000).toISOString() as unknown as Date;
    assert.equal(terminatingSeconds(pod, NOW), 45);
  });
});

const MESSAGE =
  'regular container main of pod build-7-abcde waited 3m on image reg.example/app:nope (class permanent, rule ci, grace 2m): ImagePullBackOff: not found';

function claimed(name: string, failedSecondsAgo: number): JobView {
  return job(name, {
    uid: JOB_UID,
    annotations: {
      'imagepull-sweeper/failed-at': secondsAgo(failedSecondsAgo)
        .toISOString()
        .replace(/\.\d{3}Z$/, 'Z'),
      'imagepull-sweeper/reason': 'ImagePullBackOff',
      'imagepull-sweeper/message': MESSAGE,
      'imagepull-sweeper/claim': 'c-1',
    },
  });
}

describe('judgePending with forceDeleteAfter', () => {
  const hung = terminating(stalled('stalled', 'ContainerCreating'), 'hung-abcde', 70);
  const ran = terminating(REAL_NODE.clock, 'ran-abcde', 70);
  const base = { decisions: [], confirmWithinSeconds: 300, forceDeleteAfterSeconds: 60, now: NOW };

  it('a Job at FailureTarget, not yet Failed, stays pending (the label stays); a Failed one is settled', () => {
    const target = { ...claimed('target', 30), failed: true, finished: true, failing: true };
    const p = judgePending({ ...base, labelled: [target], podsByJob: new Map() });
    assert.deepEqual(p.finished, []);
    assert.equal(p.awaiting, 1);
    assert.equal(p.decisions[0]!.plan, 'skip');
    const done = { ...claimed('done', 30), failed: true, finished: true, failing: false };
    assert.deepEqual(
      judgePending({ ...base, labelled: [done] }).finished.map((j) => j.name),
      ['done'],
    );
    assert.deepEqual(
      dueForForceDelete({ ...base, labelled: [{ ...target, annotations: claimed('t', 61).annotations }] }).map((j) => j.name),
      ['target'],
    );
  });

  it('reads the pods of pending Jobs only once forceDeleteAfter has passed, and never with 0', () => {
    const early = claimed('early', 59);
    const due = { ...claimed('due', 60), uid: 'other-uid' };
    assert.deepEqual(
      dueForForceDelete({ ...base, labelled: [early, due] }).map((j) => j.name),
      ['due'],
    );
    assert.deepEqual(dueForForceDelete({ ...base, labelled: [early, due], forceDeleteAfterSeconds: 0 }), []);
    const finished = { ...claimed('finished', 600), finished: true };
    assert.deepEqual(dueForForceDelete({ ...base, labelled: [finished] }), []);
  });

  it('before confirmWithin: plan retry without the deadline, to force-delete the never-started pod', () => {
    const givenUp = { ...claimed('stalled-job', 75), failed: true, finished: true, failing: true }; // FailureTarget DeadlineExceeded
    const p = judgePending({ ...base, labelled: [givenUp], podsByJob: new Map([[JOB_UID, [hung]]]) });
    const d = p.decisions[0]!;
    assert.equal(d.plan, 'retry');
    assert.equal(d.mechanism, undefined, 'the Job already has its FailureTarget: only the pod is forced');
    assert.deepEqual(
      d.forceDelete?.map((t) => [t.pod, t.uid]),
      [['hung-abcde', 'uid-hung-abcde']],
    );
    assert.match(d.detail, /^failed by imagepull-sweeper at \S+; pods still terminating after forceDeleteAfter 1m$/);
    assert.equal(p.awaiting, 1);
  });

  it('a Job the controller has not given up on (failed by a fallback: podFailurePolicy waits for a Failed pod): the force-delete and its FailureTarget', () => {
    const d = judgePending({ ...base, labelled: [claimed('pfp', 75)], podsByJob: new Map([[JOB_UID, [hung]]]) }).decisions[0]!;
    assert.equal(d.plan, 'retry');
    assert.equal(d.mechanism, 'condition');
    assert.equal(d.forceDelete?.length, 1);
    assert.match(d.detail, /forceDeleteAfter 1m, and the Job controller has not given up on it .*: adding its FailureTarget too$/);
  });

  it('after confirmWithin: its FailureTarget again, and the force-delete', () => {
    const d = judgePending({ ...base, labelled: [claimed('overdue', 400)], podsByJob: new Map([[JOB_UID, [hung]]]) }).decisions[0]!;
    assert.equal(d.plan, 'retry');
    assert.equal(d.mechanism, 'condition');
    assert.equal(d.overdue, true);
    assert.equal(d.forceDelete?.length, 1);
  });

  it('a pod one of whose containers ran: waits, and the line says why it is not forced', () => {
    const d = judgePending({ ...base, labelled: [claimed('ran', 75)], podsByJob: new Map([[JOB_UID, [ran]]]) }).decisions[0]!;
    assert.equal(d.plan, 'skip');
    assert.deepEqual(d.forceDelete, []);
    assert.match(
      d.detail,
      /waiting for the Job controller \(1m15s of confirmWithin 5m\); pod ran-abcde terminating 1m10s, not force-deleted: its init container setup has run$/,
    );
  });

  it('forceDeleteAfter not passed, or 0: nothing forced even with the pods at hand', () => {
    const early = judgePending({ ...base, labelled: [claimed('early', 59)], podsByJob: new Map([[JOB_UID, [hung]]]) }).decisions[0]!;
    assert.equal(early.plan, 'skip');
    assert.deepEqual(early.forceDelete, []);
    const never = judgePending({
      ...base,
      forceDeleteAfterSeconds: 0,
      labelled: [claimed('never', 200)],
      podsByJob: new Map([[JOB_UID, [hung]]]),
    });
    assert.equal(never.decisions[0]!.plan, 'skip');
  });

  it('pods that could not be read: waits, and says so', () => {
    const d = judgePending({ ...base, labelled: [claimed('unread', 75)], podsByJob: new Map([[JOB_UID, 'Forbidden: no']]) }).decisions[0]!;
    assert.equal(d.plan, 'skip');
    assert.match(d.detail, /its pods could not be read for forceDeleteAfter \(Forbidden: no\)$/);
  });
});
