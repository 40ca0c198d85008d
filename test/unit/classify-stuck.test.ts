import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Container, V1ContainerStatus, V1Pod, V1PodCondition } from '@kubernetes/client-node';
import { controllerOf, findStuckContainers, isActivePod, toDate } from '../../src/classify/index.ts';
import { MAX_CRASH_BACK_OFF_MS, SANDBOX_SET_UP_BOUND_MS } from '../../src/classify/stuck.ts';
import { REAL_NODE, REAL_NODES, recordedPod, recordedMessage } from './real-node.ts';

const T = (minute: number): Date => new Date(Date.UTC(2025, 0, 1, 12, minute, 0));
/** `seconds` after the test pods' start (status.startTime T(1)). */
const AFTER_START = (seconds: number): Date => new Date(T(1).getTime() + seconds * 1000);
/** The latest the clock trusts a sandbox's set-up: SANDBOX_SET_UP_BOUND_MS after T(1). */
const BOUND = new Date(T(1).getTime() + SANDBOX_SET_UP_BOUND_MS);

// What the real kubelet wrote on the test node (test/fixtures/real-node-statuses.json).
const NOT_FOUND = recordedMessage('tag-missing', 'ErrImagePull');

function waiting(name: string, reason: string, extra: Partial<V1ContainerStatus> = {}, message?: string): V1ContainerStatus {
  return {
    name,
    image: `docker.io/library/${name}:1`,
    imageID: '',
    ready: false,
    restartCount: 0,
    state: { waiting: { reason, ...(message === undefined ? {} : { message }) } },
    ...extra,
  };
}

function terminated(name: string, finishedAt: Date | undefined): V1ContainerStatus {
  return {
    name,
    image: `docker.io/library/${name}:1`,
    imageID: 'sha256:1',
    ready: false,
    restartCount: 0,
    state: { terminated: { exitCode: 0, reason: 'Completed', ...(finishedAt ? { finishedAt, startedAt: finishedAt } : {}) } },
  };
}

function running(name: string, startedAt: Date, restartCount = 0): V1ContainerStatus {
  return {
    name,
    image: `docker.io/library/${name}:1`,
    imageID: 'sha256:1',
    ready: true,
    restartCount,
    started: true,
    state: { running: { startedAt } },
  };
}

function cond(type: string, at: Date, status = 'True'): V1PodCondition {
  return { type, status, lastTransitionTime: at };
}

interface PodOpts {
  containers?: V1Container[];
  initContainers?: V1Container[];
  statuses?: V1ContainerStatus[];
  initStatuses?: V1ContainerStatus[];
  conditions?: V1PodCondition[];
  startTime?: Date;
  creationTimestamp?: Date;
  phase?: string;
  deletionTimestamp?: Date;
}

function pod(o: PodOpts = {}): V1Pod {
  return {
    metadata: {
      name: 'job-a-x7k2p',
      namespace: 'ci-1',
      uid: 'pod-uid-1',
      resourceVersion: '42',
      creationTimestamp: 'creationTimestamp' in o ? o.creationTimestamp : T(0),
      ...(o.deletionTimestamp ? { deletionTimestamp: o.deletionTimestamp } : {}),
      ownerReferences: [
        { apiVersion: 'batch/v1', kind: 'Job', name: 'job-a', uid: 'job-uid-1', controller: true, blockOwnerDeletion: true },
      ],
    },
    spec: {
      containers: o.containers ?? [{ name: 'main', image: 'docker.io/library/nope:1' }],
      ...(o.initContainers ? { initContainers: o.initContainers } : {}),
    },
    status: {
      phase: o.phase ?? 'Pending',
      ...('startTime' in o ? { startTime: o.startTime } : { startTime: T(1) }),
      conditions: o.conditions ?? [],
      containerStatuses: o.statuses ?? [waiting('main', 'ErrImagePull', {}, NOT_FOUND)],
      ...(o.initStatuses ? { initContainerStatuses: o.initStatuses } : {}),
    },
  };
}

describe('findStuckContainers: what is stuck', () => {
  it('reports a regular container in ErrImagePull with every field', () => {
    const [s, ...rest] = findStuckContainers(pod({ conditions: [cond('Initialized', T(2))] }));
    assert.equal(rest.length, 0);
    assert.deepEqual(s, {
      namespace: 'ci-1',
      pod: 'job-a-x7k2p',
      podUid: 'pod-uid-1',
      podResourceVersion: '42',
      container: 'main',
      containerKind: 'regular',
      image: 'docker.io/library/main:1',
      reason: 'ErrImagePull',
      message: NOT_FOUND,
      pullClass: 'permanent',
      stuckSince: T(2),
      controller: { apiVersion: 'batch/v1', kind: 'Job', name: 'job-a', uid: 'job-uid-1', controller: true },
    });
  });

  for (const reason of [
    'ErrImagePull',
    'ImagePullBackOff',
    'InvalidImageName',
    'ErrImageNeverPull',
    'RegistryUnavailable',
    'SignatureValidationFailed',
    'ImageInspectError',
  ]) {
    it(`counts ${reason} as stuck`, () => {
      const found = findStuckContainers(pod({ statuses: [waiting('main', reason)] }));
      assert.equal(found.length, 1);
      assert.equal(found[0]?.reason, reason);
    });
  }

  for (const reason of [
    'ContainerCreating',
    'CrashLoopBackOff',
    'PodInitializing',
    'CreateContainerConfigError',
    'CreateContainerError',
    '',
  ]) {
    it(`ignores waiting reason ${JSON.stringify(reason)} without a ready sandbox`, () => {
      assert.deepEqual(findStuckContainers(pod({ statuses: [waiting('main', reason)] })), []);
    });
  }

  it('ignores running and terminated containers and missing state', () => {
    const noState: V1ContainerStatus = { name: 'c', image: 'c', imageID: '', ready: false, restartCount: 0 };
    const statuses = [running('a', T(1)), terminated('b', T(2)), noState];
    assert.deepEqual(findStuckContainers(pod({ statuses })), []);
  });

  it('skips a terminating pod', () => {
    assert.deepEqual(findStuckContainers(pod({ deletionTimestamp: T(5) })), []);
  });

  for (const phase of ['Succeeded', 'Failed']) {
    it(`skips a ${phase} pod`, () => {
      assert.deepEqual(findStuckContainers(pod({ phase })), []);
    });
  }

  it('counts a Running pod whose restarted container cannot pull', () => {
    const status = waiting('main', 'ImagePullBackOff', { restartCount: 0, lastState: { terminated: { exitCode: 1, finishedAt: T(30) } } });
    const found = findStuckContainers(pod({ phase: 'Running', statuses: [status], conditions: [cond('Initialized', T(2))] }));
    assert.equal(found.length, 1);
    assert.deepEqual(found[0]?.stuckSince, T(30), 'its first exit: the kubelet restarts it at once');
  });

  it('ignores ephemeral containers', () => {
    const p = pod({ statuses: [running('main', T(1))] });
    p.status!.ephemeralContainerStatuses = [waiting('debugger', 'ErrImagePull')];
    assert.deepEqual(findStuckContainers(p), []);
  });

  it('reports several stuck containers of one pod, init ones first', () => {
    const p = pod({
      initContainers: [{ name: 'setup', image: 'setup:1' }],
      containers: [
        { name: 'a', image: 'a:1' },
        { name: 'b', image: 'b:1' },
        { name: 'c', image: 'c:1' },
      ],
      initStatuses: [terminated('setup', T(3))],
      statuses: [waiting('a', 'ErrImagePull'), running('b', T(4)), waiting('c', 'ImagePullBackOff')],
      conditions: [cond('Initialized', T(3))],
    });
    assert.deepEqual(
      findStuckContainers(p).map((s) => [s.container, s.containerKind, s.reason]),
      [
        ['a', 'regular', 'ErrImagePull'],
        ['c', 'regular', 'ImagePullBackOff'],
      ],
    );

    const q = pod({
      initContainers: [{ name: 'setup', image: 'setup:1' }],
      initStatuses: [waiting('setup', 'ErrImagePull')],
      statuses: [waiting('main', 'PodInitializing')],
    });
    assert.deepEqual(
      findStuckContainers(q).map((s) => [s.container, s.containerKind]),
      [['setup', 'init']],
    );
  });

  it('falls back to the spec image when the status has none', () => {
    const found = findStuckContainers(
      pod({
        containers: [{ name: 'main', image: 'registry.example.com/app:2' }],
        statuses: [waiting('main', 'ErrImagePull', { image: '' })],
      }),
    );
    assert.equal(found[0]?.image, 'registry.example.com/app:2');
    const none = findStuckContainers(pod({ containers: [{ name: 'main' }], statuses: [waiting('main', 'ErrImagePull', { image: '' })] }));
    assert.equal(none[0]?.image, '');
  });

  it('classifies with the image stripped from an unquoted message', () => {
    const message = 'initializing source docker://acme/denied-app:1: reading manifest 1 in docker.io/acme/denied-app: manifest unknown';
    const found = findStuckContainers(pod({ statuses: [waiting('main', 'ErrImagePull', { image: 'acme/denied-app:1' }, message)] }));
    assert.equal(found[0]?.pullClass, 'permanent');
  });

  it('a missing message is empty and classified from the reason', () => {
    const found = findStuckContainers(pod({ statuses: [waiting('main', 'ErrImageNeverPull')] }));
    assert.equal(found[0]?.message, '');
    assert.equal(found[0]?.pullClass, 'permanent');
    assert.equal(findStuckContainers(pod({ statuses: [waiting('main', 'ImagePullBackOff')] }))[0]?.pullClass, 'unknown');
  });
});

describe('findStuckContainers: container kinds', () => {
  it('an init container with restartPolicy Always is a sidecar', () => {
    const p = pod({
      initContainers: [
        { name: 'proxy', image: 'proxy:1', restartPolicy: 'Always' },
        { name: 'setup', image: 'setup:1' },
      ],
      initStatuses: [waiting('proxy', 'ImagePullBackOff'), waiting('setup', 'PodInitializing')],
      statuses: [waiting('main', 'PodInitializing')],
    });
    assert.deepEqual(
      findStuckContainers(p).map((s) => [s.container, s.containerKind]),
      [['proxy', 'sidecar']],
    );
  });

  it('an init container with restartPolicy Never or unset is init', () => {
    const p = pod({
      initContainers: [{ name: 'setup', image: 'setup:1', restartPolicy: 'Never' }],
      initStatuses: [waiting('setup', 'ErrImagePull')],
    });
    assert.equal(findStuckContainers(p)[0]?.containerKind, 'init');
  });
});

describe('findStuckContainers: stuckSince for a regular container', () => {
  const since = (o: PodOpts): Date | undefined => findStuckContainers(pod(o))[0]?.stuckSince;

  it('uses Initialized True', () => {
    assert.deepEqual(since({ conditions: [cond('PodScheduled', T(0)), cond('Initialized', T(2))] }), T(2));
  });
  it('no container pulls before its sandbox is up: the later of Initialized and PodReadyToStartContainers', () => {
    const conditions = [cond('Initialized', T(1)), cond('PodReadyToStartContainers', AFTER_START(6))];
    assert.deepEqual(since({ conditions }), AFTER_START(6));
    assert.deepEqual(since({ conditions: [cond('PodReadyToStartContainers', T(2)), cond('Initialized', T(4))] }), T(4));
  });
  it('a sandbox up later than the bound after the start (recreated, or slow) counts from the bound', () => {
    assert.equal(SANDBOX_SET_UP_BOUND_MS, 30_000);
    assert.deepEqual(since({ conditions: [cond('Initialized', T(1)), cond('PodReadyToStartContainers', T(3))] }), BOUND);
    assert.deepEqual(since({ conditions: [cond('Initialized', T(1)), cond('PodReadyToStartContainers', AFTER_START(30))] }), BOUND);
    assert.deepEqual(
      since({ conditions: [cond('Initialized', T(1)), cond('PodReadyToStartContainers', AFTER_START(29))] }),
      AFTER_START(29),
    );
  });
  it('a sandbox that is not up (the condition False, or a kubelet without it) does not move the clock', () => {
    const down = [cond('Initialized', T(1)), cond('PodReadyToStartContainers', AFTER_START(20), 'False')];
    assert.deepEqual(since({ conditions: down }), T(1));
    assert.deepEqual(since({ conditions: [cond('Initialized', T(1))] }), T(1));
  });
  it('without Initialized True falls back to startTime, or the sandbox within its bound', () => {
    assert.deepEqual(since({ conditions: [cond('Initialized', T(9), 'False'), cond('PodReadyToStartContainers', T(3))] }), BOUND);
    assert.deepEqual(since({ conditions: [cond('Initialized', T(9), 'False')] }), T(1));
  });
  it('an Initialized reset and set again does not move it: a regular container already started then', () => {
    const earlier = running('sidecar-ish', T(3));
    const statuses = [earlier, waiting('main', 'ErrImagePull', {}, NOT_FOUND)];
    const containers = [
      { name: 'sidecar-ish', image: 'a:1' },
      { name: 'main', image: 'docker.io/library/nope:1' },
    ];
    assert.deepEqual(since({ containers, statuses, conditions: [cond('Initialized', T(40))] }), T(3));
  });
  it('falls back to status.startTime without usable conditions', () => {
    assert.deepEqual(since({ conditions: [cond('Initialized', T(9), 'False')], startTime: T(1) }), T(1));
  });
  it('falls back to creationTimestamp without startTime', () => {
    assert.deepEqual(since({ startTime: undefined }), T(0));
  });
  it('leaves the container out when no time at all is known', () => {
    assert.deepEqual(findStuckContainers(pod({ startTime: undefined, creationTimestamp: undefined })), []);
  });
  it('accepts ISO strings as well as Dates', () => {
    const p = pod({ startTime: undefined });
    p.status!.conditions = [{ type: 'Initialized', status: 'True', lastTransitionTime: '2025-01-01T12:07:00Z' as unknown as Date }];
    assert.deepEqual(findStuckContainers(p)[0]?.stuckSince, T(7));
  });
  it('skips an unparseable timestamp to the next level', () => {
    const p = pod({ startTime: T(1) });
    p.status!.conditions = [{ type: 'Initialized', status: 'True', lastTransitionTime: 'not a time' as unknown as Date }];
    assert.deepEqual(findStuckContainers(p)[0]?.stuckSince, T(1));
  });
  it('is never before its own last termination', () => {
    const status = waiting('main', 'ErrImagePull', { lastState: { terminated: { exitCode: 1, finishedAt: T(20) } } });
    assert.deepEqual(since({ statuses: [status], conditions: [cond('Initialized', T(2))] }), T(20));
    const older = waiting('main', 'ErrImagePull', { lastState: { terminated: { exitCode: 1, finishedAt: T(1) } } });
    assert.deepEqual(since({ statuses: [older], conditions: [cond('Initialized', T(2))] }), T(2));
  });
  it('returns a copy, not the pod status Date', () => {
    const at = T(2);
    const found = findStuckContainers(pod({ conditions: [cond('Initialized', at)] }));
    assert.notEqual(found[0]?.stuckSince, at);
  });
});

describe('findStuckContainers: stuckSince for init and sidecar containers', () => {
  const initPod = (o: PodOpts): V1Pod =>
    pod({
      initContainers: [
        { name: 'first', image: 'first:1' },
        { name: 'second', image: 'second:1' },
      ],
      statuses: [waiting('main', 'PodInitializing')],
      ...o,
    });
  const sinceOf = (p: V1Pod, name: string): Date | undefined => findStuckContainers(p).find((s) => s.container === name)?.stuckSince;

  it('the first init container starts when the sandbox is up, trusted up to the bound after the start', () => {
    const initStatuses = [waiting('first', 'ErrImagePull'), waiting('second', 'PodInitializing')];
    const up = (at: Date) => [cond('Initialized', T(9), 'False'), cond('PodReadyToStartContainers', at)];
    assert.deepEqual(sinceOf(initPod({ initStatuses, conditions: up(AFTER_START(5)) }), 'first'), AFTER_START(5));
    assert.deepEqual(sinceOf(initPod({ initStatuses, conditions: up(T(2)) }), 'first'), BOUND);
  });
  it('the first init container falls back to startTime, then creationTimestamp', () => {
    const initStatuses = [waiting('first', 'ErrImagePull'), waiting('second', 'PodInitializing')];
    assert.deepEqual(sinceOf(initPod({ initStatuses, startTime: T(1) }), 'first'), T(1));
    assert.deepEqual(sinceOf(initPod({ initStatuses, startTime: undefined }), 'first'), T(0));
  });
  it('a later init container starts when the previous one finished', () => {
    const p = initPod({
      initStatuses: [terminated('first', T(6)), waiting('second', 'ImagePullBackOff')],
      conditions: [cond('PodReadyToStartContainers', T(2))],
    });
    assert.deepEqual(sinceOf(p, 'second'), T(6));
  });
  it('a later init container falls back when the previous one has no finishedAt', () => {
    const p = initPod({
      initStatuses: [terminated('first', undefined), waiting('second', 'ErrImagePull')],
      conditions: [cond('PodReadyToStartContainers', T(2))],
    });
    assert.deepEqual(sinceOf(p, 'second'), BOUND);
    const q = initPod({ initStatuses: [terminated('first', undefined), waiting('second', 'ErrImagePull')], startTime: undefined });
    assert.deepEqual(sinceOf(q, 'second'), T(0));
  });
  it('uses spec order, not status order, to find the previous init container', () => {
    const p = initPod({
      initStatuses: [waiting('second', 'ErrImagePull'), terminated('first', T(7))],
      conditions: [cond('PodReadyToStartContainers', T(2))],
    });
    assert.deepEqual(sinceOf(p, 'second'), T(7));
  });
  it('after a sidecar: the sidecar startedAt', () => {
    const p = pod({
      initContainers: [
        { name: 'proxy', image: 'proxy:1', restartPolicy: 'Always' },
        { name: 'setup', image: 'setup:1' },
      ],
      initStatuses: [running('proxy', T(4)), waiting('setup', 'ErrImagePull')],
      statuses: [waiting('main', 'PodInitializing')],
      conditions: [cond('PodReadyToStartContainers', T(2))],
    });
    assert.deepEqual(
      findStuckContainers(p).map((s) => [s.container, s.containerKind, s.stuckSince]),
      [['setup', 'init', T(4)]],
    );
  });
  it('after a restarted sidecar: falls back to the start or the sandbox, its startedAt is too late', () => {
    const p = pod({
      initContainers: [
        { name: 'proxy', image: 'proxy:1', restartPolicy: 'Always' },
        { name: 'setup', image: 'setup:1' },
      ],
      initStatuses: [running('proxy', T(40), 3), waiting('setup', 'ErrImagePull')],
      statuses: [waiting('main', 'PodInitializing')],
      conditions: [cond('PodReadyToStartContainers', T(2))],
    });
    assert.deepEqual(findStuckContainers(p)[0]?.stuckSince, BOUND);
  });
  it('a sidecar after an init container starts when that one finished', () => {
    const p = pod({
      initContainers: [
        { name: 'setup', image: 'setup:1' },
        { name: 'proxy', image: 'proxy:1', restartPolicy: 'Always' },
      ],
      initStatuses: [terminated('setup', T(5)), waiting('proxy', 'ImagePullBackOff')],
      statuses: [waiting('main', 'PodInitializing')],
      conditions: [cond('PodReadyToStartContainers', T(2))],
    });
    assert.deepEqual(
      findStuckContainers(p).map((s) => [s.container, s.containerKind, s.stuckSince]),
      [['proxy', 'sidecar', T(5)]],
    );
  });
  it('init statuses without init specs are not judged', () => {
    const p = pod({
      initStatuses: [terminated('first', T(8)), waiting('second', 'ErrImagePull')],
      statuses: [waiting('main', 'PodInitializing')],
      conditions: [cond('PodReadyToStartContainers', T(2))],
    });
    assert.deepEqual(findStuckContainers(p), []);
  });
});

describe('findStuckContainers: only containers the spec names', () => {
  const READY = [cond('PodReadyToStartContainers', T(2)), cond('Initialized', T(2))];
  it('a waiting status of a container the spec does not have is never judged', () => {
    const healthy = running('main', T(3));
    for (const reason of ['ImagePullBackOff', 'ErrImagePull', 'ContainerCreating']) {
      assert.deepEqual(
        findStuckContainers(pod({ conditions: READY, statuses: [healthy, waiting('ghost', reason, {}, NOT_FOUND)] })),
        [],
        reason,
      );
      const ghostInit = pod({ conditions: READY, statuses: [healthy], initStatuses: [waiting('ghost', reason, {}, NOT_FOUND)] });
      assert.deepEqual(findStuckContainers(ghostInit), [], `init ${reason}`);
    }
  });
  it('a status in the wrong list (a regular container listed as init, and back) is not judged', () => {
    const p = pod({
      initContainers: [{ name: 'setup', image: 'setup:1' }],
      initStatuses: [terminated('setup', T(3)), waiting('main', 'ErrImagePull')],
      statuses: [waiting('setup', 'ErrImagePull')],
      conditions: READY,
    });
    assert.deepEqual(findStuckContainers(p), []);
  });
  it('the spec containers next to a ghost are still judged', () => {
    const found = findStuckContainers(
      pod({ conditions: READY, statuses: [waiting('ghost', 'ErrImagePull'), waiting('main', 'ImagePullBackOff', {}, NOT_FOUND)] }),
    );
    assert.deepEqual(
      found.map((c) => [c.container, c.reason]),
      [['main', 'ImagePullBackOff']],
    );
  });
});

describe('controllerOf', () => {
  it('takes the owner reference with controller=true', () => {
    const p = pod();
    p.metadata!.ownerReferences = [
      { apiVersion: 'v1', kind: 'ConfigMap', name: 'cm', uid: 'u0' },
      { apiVersion: 'batch/v1', kind: 'Job', name: 'job-b', uid: 'u1', controller: true },
    ];
    assert.deepEqual(controllerOf(p), { apiVersion: 'batch/v1', kind: 'Job', name: 'job-b', uid: 'u1', controller: true });
  });
  it('is undefined without a controller owner', () => {
    const p = pod();
    p.metadata!.ownerReferences = [{ apiVersion: 'batch/v1', kind: 'Job', name: 'job-b', uid: 'u1', controller: false }];
    assert.equal(controllerOf(p), undefined);
    delete p.metadata!.ownerReferences;
    assert.equal(controllerOf(p), undefined);
    assert.equal(findStuckContainers(p)[0]?.controller, undefined, 'a bare pod is still reported');
  });
  it('reports a non-Job controller as is', () => {
    const p = pod();
    p.metadata!.ownerReferences = [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'rs', uid: 'u2', controller: true }];
    assert.equal(findStuckContainers(p)[0]?.controller?.kind, 'ReplicaSet');
  });
});

describe('isActivePod and toDate', () => {
  it('isActivePod', () => {
    assert.equal(isActivePod(pod()), true);
    assert.equal(isActivePod(pod({ phase: 'Running' })), true);
    assert.equal(isActivePod(pod({ phase: 'Unknown' })), true);
    assert.equal(isActivePod(pod({ phase: 'Succeeded' })), false);
    assert.equal(isActivePod(pod({ deletionTimestamp: T(1) })), false);
    assert.equal(isActivePod({}), true);
  });
  it('toDate', () => {
    assert.deepEqual(toDate(T(3)), T(3));
    assert.deepEqual(toDate('2025-01-01T12:03:00Z'), T(3));
    assert.equal(toDate(''), undefined);
    assert.equal(toDate('garbage'), undefined);
    assert.equal(toDate(new Date(NaN)), undefined);
    assert.equal(toDate(null), undefined);
    assert.equal(toDate(undefined), undefined);
  });
});

describe('findStuckContainers on pods recorded from the real node', () => {
  const trueAt = (p: V1Pod, type: string): Date => {
    const c = p.status?.conditions?.find((x) => x.type === type && x.status === 'True');
    assert.ok(c?.lastTransitionTime, `${type} True`);
    return new Date(c.lastTransitionTime);
  };

  for (const c of REAL_NODE.cases) {
    for (const reason of Object.keys(c.pods)) {
      it(`${c.title} (${reason}): one ${c.containerKind} container, stuck since the pod could pull`, () => {
        const p = recordedPod(c.id, reason);
        const [s, ...more] = findStuckContainers(p);
        assert.equal(more.length, 0);
        assert.equal(s!.container, c.container);
        assert.equal(s!.containerKind, c.containerKind);
        assert.equal(s!.reason, reason);
        assert.equal(s!.image, c.image);
        assert.equal(s!.pullClass, c.expectedClass);
        // No init container ran before it: the clock starts when the sandbox was up, its set-up
        // (seconds, within the bound) after the kubelet took the pod on.
        const started = c.containerKind === 'regular' ? trueAt(p, 'Initialized') : new Date(p.status!.startTime!);
        const sandbox = trueAt(p, 'PodReadyToStartContainers');
        assert.deepEqual(s!.stuckSince, sandbox);
        const setUp = sandbox.getTime() - started.getTime();
        assert.ok(setUp >= 0 && setUp <= 20_000, `the sandbox took ${setUp} ms`);
      });
    }
  }

  it('a regular container after a 4 s init container: the clock starts at Initialized, not at the sandbox', () => {
    const p = structuredClone(REAL_NODE.clock);
    const sandbox = trueAt(p, 'PodReadyToStartContainers');
    const initialized = trueAt(p, 'Initialized');
    assert.ok(initialized.getTime() - sandbox.getTime() >= 3000, 'the real kubelet stamps them apart');
    const [s] = findStuckContainers(p);
    assert.equal(s!.container, 'main');
    assert.deepEqual(s!.stuckSince, initialized);
  });

  it('a running pod and the pod the kubelet leaves after deleting a waiting one are not stuck', () => {
    assert.deepEqual(findStuckContainers(structuredClone(REAL_NODE.running)), []);
    const left = structuredClone(REAL_NODE.deletedWaitingPod.pod);
    assert.equal(left.status?.phase, 'Failed');
    const term = left.status?.containerStatuses?.[0]?.state?.terminated;
    assert.equal(term?.exitCode, 137);
    assert.equal(term?.reason, 'ContainerStatusUnknown');
    assert.equal(isActivePod(left), false);
    assert.deepEqual(findStuckContainers(left), []);
  });
});

describe('findStuckContainers: class stalled, on pods recorded from the real node (a registry that never answers)', () => {
  const trueAt = (p: V1Pod, type: string): Date => {
    const c = p.status?.conditions?.find((x) => x.type === type && x.status === 'True');
    assert.ok(c?.lastTransitionTime, `${type} True`);
    return new Date(c.lastTransitionTime);
  };
  const finishedAt = (p: V1Pod, name: string): Date => {
    const t = p.status?.initContainerStatuses?.find((s) => s.name === name)?.state?.terminated?.finishedAt;
    assert.ok(t, `${name} terminated`);
    return new Date(t);
  };
  /** When each recorded container's turn came: the clock the SPEC gives stalled. */
  const CLOCK: Record<string, (p: V1Pod) => Date> = {
    stalled: (p) => trueAt(p, 'PodReadyToStartContainers'),
    'stalled-init': (p) => trueAt(p, 'PodReadyToStartContainers'),
    'stalled-sidecar': (p) => trueAt(p, 'PodReadyToStartContainers'),
    'stalled-first-of-two-init': (p) => trueAt(p, 'PodReadyToStartContainers'),
    'stalled-after-init': (p) => trueAt(p, 'Initialized'),
    'stalled-second-init': (p) => finishedAt(p, 'setup'),
  };
  /** The state named after the waiting reason: the container's turn has come. */
  const stalledState = (c: { pods: Record<string, V1Pod> }): string => {
    const s = Object.keys(c.pods).find((k) => k === 'ContainerCreating' || k === 'PodInitializing');
    assert.ok(s, 'a ContainerCreating or PodInitializing state was recorded');
    return s;
  };

  it('every case the recording script runs is here', () => {
    assert.deepEqual(REAL_NODE.stalled.map((c) => c.id).sort(), Object.keys(CLOCK).sort());
  });

  for (const c of REAL_NODE.stalled) {
    const state = stalledState(c);
    it(`${c.title} (${state}): one ${c.containerKind} container, stalled, no message, clock from its turn`, () => {
      const p = recordedPod(c.id, state);
      const [s, ...more] = findStuckContainers(p);
      assert.equal(more.length, 0, 'containers still waiting for their turn are not reported');
      assert.deepEqual(
        [s!.container, s!.containerKind, s!.reason, s!.pullClass, s!.message, s!.image],
        [c.container, c.containerKind, state, 'stalled', '', c.image],
      );
      assert.deepEqual(s!.stuckSince, CLOCK[c.id]!(p));
    });
  }

  it('a regular container after an init container: the clock is Initialized, stamped after the sandbox', () => {
    const p = recordedPod('stalled-after-init', 'PodInitializing');
    assert.ok(trueAt(p, 'Initialized').getTime() - trueAt(p, 'PodReadyToStartContainers').getTime() >= 3000);
  });

  it('not stalled while the init container before it runs (regular: Initialized False; init: its turn has not come)', () => {
    for (const id of ['stalled-after-init', 'stalled-second-init']) {
      const p = recordedPod(id, 'setup-running');
      assert.equal(p.status?.initContainerStatuses?.find((s) => s.name === 'setup')?.state?.running !== undefined, true, id);
      assert.deepEqual(findStuckContainers(p), [], id);
    }
  });

  it('not stalled before the sandbox is ready (the kubelet first writes ContainerCreating, PodReadyToStartContainers False)', () => {
    const p = recordedPod('stalled', 'sandbox-not-ready');
    assert.equal(p.status?.containerStatuses?.[0]?.state?.waiting?.reason, 'ContainerCreating');
    assert.deepEqual(findStuckContainers(p), []);
    // The same with the condition gone (an older kubelet without it).
    const noCondition = recordedPod('stalled', 'ContainerCreating');
    noCondition.status!.conditions = noCondition.status!.conditions!.filter((x) => x.type !== 'PodReadyToStartContainers');
    assert.deepEqual(findStuckContainers(noCondition), []);
  });

  it('other waiting reasons with the sandbox up are not stalled', () => {
    for (const reason of ['CrashLoopBackOff', 'CreateContainerConfigError', 'CreateContainerError', 'RunContainerError']) {
      const p = recordedPod('stalled', 'ContainerCreating');
      p.status!.containerStatuses![0]!.state = { waiting: { reason } };
      assert.deepEqual(findStuckContainers(p), [], reason);
    }
  });

  it('a pull error wins over stalled: recorded pull failures have the sandbox up and keep their class', () => {
    const p = recordedPod('tag-missing', 'ErrImagePull');
    assert.ok(trueAt(p, 'PodReadyToStartContainers'));
    assert.deepEqual(
      findStuckContainers(p).map((s) => s.pullClass),
      ['permanent'],
    );
  });

  it('a terminating pod is never stalled', () => {
    const p = recordedPod('stalled', 'ContainerCreating');
    p.metadata!.deletionTimestamp = T(9);
    assert.deepEqual(findStuckContainers(p), []);
  });
});

describe('the stuck clock survives a reset (a condition set False, then True again, later)', () => {
  const later = (at: string | Date | undefined, ms: number): Date => new Date(new Date(at as string).getTime() + ms);
  const HOUR = 3_600_000;
  /** What the kubelet writes when it recreates the sandbox: PodReadyToStartContainers True again, its time moved. */
  const sandboxRecreated = (p: V1Pod, ms: number): V1Pod => {
    const q = structuredClone(p);
    const c = q.status!.conditions!.find((x) => x.type === 'PodReadyToStartContainers')!;
    c.lastTransitionTime = later(c.lastTransitionTime, ms);
    return q;
  };

  for (const fixture of REAL_NODES) {
    for (const id of ['tag-missing', 'init-container', 'sidecar', 'auth-no-secret']) {
      it(`${fixture.runtime}: ${id}, PodReadyToStartContainers moved an hour later: the clock stays at the bound`, () => {
        const p = recordedPod(id, 'ImagePullBackOff', fixture);
        const before = findStuckContainers(p)[0]!.stuckSince;
        const after = findStuckContainers(sandboxRecreated(p, HOUR))[0]!.stuckSince;
        const bound = new Date(new Date(p.status!.startTime!).getTime() + SANDBOX_SET_UP_BOUND_MS);
        assert.deepEqual(after, bound);
        assert.ok(after.getTime() - before.getTime() <= SANDBOX_SET_UP_BOUND_MS, 'moved less than the bound');
      });
    }
  }

  it('after the init containers ran again in the new sandbox (Initialized moved too): the first run still counts, up to the bound', () => {
    const p = structuredClone(REAL_NODE.clock);
    const before = findStuckContainers(p)[0]!.stuckSince;
    const q = sandboxRecreated(p, HOUR);
    q.status!.conditions!.find((x) => x.type === 'Initialized')!.lastTransitionTime = later(before, HOUR + 4_000);
    const setup = q.status!.initContainerStatuses![0]!;
    setup.lastState = { terminated: { ...setup.state!.terminated!, exitCode: 0 } };
    setup.state = {
      terminated: { exitCode: 0, reason: 'Completed', startedAt: later(before, HOUR), finishedAt: later(before, HOUR + 4_000) },
    };
    setup.restartCount = 1;
    const after = findStuckContainers(q);
    assert.equal(after[0]?.container, 'main');
    const bound = new Date(p.status!.startTime!).getTime() + SANDBOX_SET_UP_BOUND_MS;
    assert.equal(after[0]!.stuckSince.getTime(), Math.max(before.getTime(), bound));
  });

  it('a reset while the pod is stuck moves the clock less than the bound, however far the condition moves, and never earlier', () => {
    const p = recordedPod('tag-missing', 'ErrImagePull');
    const before = findStuckContainers(p)[0]!.stuckSince.getTime();
    const bound = new Date(p.status!.startTime!).getTime() + SANDBOX_SET_UP_BOUND_MS;
    for (const ms of [1, 1_000, 60_000, 24 * HOUR]) {
      const after = findStuckContainers(sandboxRecreated(p, ms))[0]!.stuckSince.getTime();
      assert.ok(after >= before && after <= bound, String(ms));
    }
  });
});

describe('Running pods: a container restarted in place that cannot pull its image', () => {
  const EXITED = T(30);
  const restarted = (name: string, reason: string, restartCount: number): V1ContainerStatus =>
    waiting(
      name,
      reason,
      { restartCount, lastState: { terminated: { exitCode: 1, reason: 'Error', startedAt: T(20), finishedAt: EXITED } } },
      NOT_FOUND,
    );
  const runningPod = (o: PodOpts): V1Pod =>
    pod({ phase: 'Running', conditions: [cond('Initialized', T(2)), cond('PodReadyToStartContainers', T(2))], ...o });

  it('its first exit: measured from the exit (the kubelet restarts it at once)', () => {
    const [s] = findStuckContainers(runningPod({ statuses: [restarted('main', 'ErrImagePull', 0)] }));
    assert.equal(s?.pullClass, 'permanent');
    assert.deepEqual(s?.stuckSince, EXITED);
  });

  it('a later exit: measured from the exit plus the longest crash back-off (5 min), never earlier', () => {
    for (const restartCount of [1, 2, 7]) {
      const [s] = findStuckContainers(runningPod({ statuses: [restarted('main', 'ImagePullBackOff', restartCount)] }));
      assert.deepEqual(s?.stuckSince, new Date(EXITED.getTime() + MAX_CRASH_BACK_OFF_MS), String(restartCount));
    }
  });

  it('merely restarting is not stuck: CrashLoopBackOff, an exit waiting for its restart, a container that fails to start', () => {
    for (const reason of ['CrashLoopBackOff', 'RunContainerError', 'CreateContainerError', 'CreateContainerConfigError']) {
      assert.deepEqual(findStuckContainers(runningPod({ statuses: [restarted('main', reason, 3)] })), [], reason);
    }
    const exited: V1ContainerStatus = {
      ...terminated('main', EXITED),
      state: { terminated: { exitCode: 1, reason: 'Error', startedAt: T(20), finishedAt: EXITED } },
    };
    assert.deepEqual(findStuckContainers(runningPod({ statuses: [exited] })), []);
  });

  it('counted while another regular container runs: the pod cannot complete without it', () => {
    const containers = [
      { name: 'proxy', image: 'proxy:1' },
      { name: 'main', image: 'docker.io/library/nope:1' },
    ];
    const found = findStuckContainers(
      runningPod({ containers, statuses: [running('proxy', T(3)), restarted('main', 'ImagePullBackOff', 0)] }),
    );
    assert.deepEqual(
      found.map((s) => [s.container, s.containerKind, s.stuckSince]),
      [['main', 'regular', EXITED]],
    );
  });

  it('a sidecar is never counted in a Running pod: the pod completes without it', () => {
    const p = runningPod({
      initContainers: [{ name: 'proxy', image: 'proxy:1', restartPolicy: 'Always' }],
      initStatuses: [restarted('proxy', 'ImagePullBackOff', 0)],
      statuses: [running('main', T(3))],
    });
    assert.deepEqual(findStuckContainers(p), []);
    // The same sidecar while the pod is still Pending (initializing) holds it up: stuck.
    p.status!.phase = 'Pending';
    assert.deepEqual(
      findStuckContainers(p).map((s) => [s.container, s.containerKind]),
      [['proxy', 'sidecar']],
    );
  });

  it('a regular container stuck beside a stuck sidecar: only the regular one', () => {
    const p = runningPod({
      initContainers: [{ name: 'proxy', image: 'proxy:1', restartPolicy: 'Always' }],
      initStatuses: [restarted('proxy', 'ImagePullBackOff', 0)],
      statuses: [restarted('main', 'ErrImagePull', 0)],
    });
    assert.deepEqual(
      findStuckContainers(p).map((s) => s.container),
      ['main'],
    );
  });
});
