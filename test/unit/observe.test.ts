// The observe stage's own control flow (namespaces, paging, restart on an expired continue token,
// candidates read in full). What the API server returns is proven in test/e2e; here it is scripted.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ApiException, type V1Pod } from '@kubernetes/client-node';
import type { KubeGateway, PodRow } from '../../src/kube/gateway.ts';
import { isCandidateStatus, isRunningCandidateStatus } from '../../src/observe/candidates.ts';
import { FULL_PAGE_SIZE, observeStuckContainers, PENDING_PODS, RUNNING_PODS } from '../../src/observe/pods.ts';
import { scriptedGateway } from '../support/scripted-gateway.ts';

function stuckPod(name: string, phase = 'Pending', namespace = 'ns'): V1Pod {
  return {
    metadata: { name, namespace, uid: `uid-${name}`, creationTimestamp: new Date('2026-11-29T10:00:00Z') },
    spec: { containers: [{ name: 'main', image: 'x:1' }] },
    status: {
      phase,
      containerStatuses: [
        {
          name: 'main',
          image: 'x:1',
          imageID: '',
          ready: false,
          restartCount: 0,
          state: { waiting: { reason: 'ErrImagePull', message: 'not found' } },
        },
      ],
    },
  };
}

const row = (name: string, status = 'ErrImagePull', namespace = 'ns'): PodRow => ({ namespace, name, status });

interface Call {
  continueToken?: string;
  fieldSelector: string;
  /** The namespace listed, or '*' for the cluster-wide list. */
  scope: string;
}

/**
 * `pages` are the Pending lists' pages, served in order across namespaces; `running` the Running
 * lists' pages, likewise (none: every Running list is empty). `calls` holds the Pending lists only,
 * `runningCalls` the Running ones.
 */
function scripted(
  pages: (PodRow[] | 'expired')[],
  pods: Record<string, V1Pod | 'gone'> = {},
  namespaces = ['ns'],
  running: PodRow[][] = [],
): { gateway: KubeGateway; calls: Call[]; runningCalls: Call[]; reads: string[]; lists: number; fullLimits: number[] } {
  const calls: Call[] = [];
  const fullLimits: number[] = [];
  const runningCalls: Call[] = [];
  const reads: string[] = [];
  const counted = { lists: 0 };
  let served = 0;
  let servedRunning = 0;
  const rowsPage = async (opts: { namespace?: string; fieldSelector: string; limit: number; continueToken?: string }) => {
    const call = { continueToken: opts.continueToken, fieldSelector: opts.fieldSelector, scope: opts.namespace ?? '*' };
    if (opts.fieldSelector === RUNNING_PODS) {
      runningCalls.push(call);
      const page = running[servedRunning++] ?? [];
      return { items: page, continueToken: servedRunning < running.length ? `r${servedRunning}` : undefined };
    }
    calls.push(call);
    const page = pages[served++];
    if (page === 'expired')
      throw new ApiException(410, 'Gone', JSON.stringify({ reason: 'Expired', message: 'continue token expired' }), {});
    return { items: page ?? [], continueToken: served < pages.length ? `t${served}` : undefined };
  };
  const { gateway } = scriptedGateway(
    {
      listNamespaceNames: [
        (opts: { limit: number }) => ({
          items: namespaces.slice(0, opts.limit),
          continueToken: namespaces.length > opts.limit ? 'more' : undefined,
        }),
      ],
      listPodRows: [rowsPage],
      listAllPodRows: [rowsPage],
      readPod: [
        (namespace: string, name: string) => {
          reads.push(namespace === 'ns' ? name : `${namespace}/${name}`);
          const pod = pods[name] ?? stuckPod(name, 'Pending', namespace);
          if (pod === 'gone') throw new ApiException(404, 'Not Found', JSON.stringify({ reason: 'NotFound', message: 'gone' }), {});
          return pod;
        },
      ],
      listPods: [
        (opts: { namespace: string; fieldSelector: string; limit: number }) => {
          counted.lists += 1;
          fullLimits.push(opts.limit);
          const phase = opts.fieldSelector === PENDING_PODS ? 'Pending' : 'Running';
          const script = phase === 'Pending' ? pages : running;
          const rows = script.flatMap((p) => (p === 'expired' ? [] : p)).filter((r) => r.namespace === opts.namespace);
          const listed = rows.map((r) => pods[r.name] ?? stuckPod(r.name, phase, r.namespace));
          return { items: listed.filter((p): p is V1Pod => p !== 'gone' && p.status?.phase === phase), continueToken: undefined };
        },
      ],
    },
    { repeatLast: true },
  );
  return {
    gateway,
    calls,
    runningCalls,
    reads,
    fullLimits,
    get lists() {
      return counted.lists;
    },
  };
}

describe('observeStuckContainers', () => {
  it('asks only for Pending pods, follows continue tokens and reads the candidates', async () => {
    const { gateway, calls, reads } = scripted([[row('a')], [row('b'), row('quiet', 'Pending')], [row('c')]]);
    const result = await observeStuckContainers(gateway, { namespaces: [], pageSize: 2 });
    assert.deepEqual(result.stuck.map((c) => c.pod).sort(), ['a', 'b', 'c']);
    assert.equal(result.podsScanned, 4);
    assert.equal(result.candidates, 3);
    assert.deepEqual(reads.sort(), ['a', 'b', 'c']);
    assert.deepEqual(
      calls.map((c) => c.continueToken),
      [undefined, 't1', 't2'],
    );
    assert.ok(calls.every((c) => c.fieldSelector === PENDING_PODS));
  });

  it('judges a candidate on its full read: gone, or no longer Pending, is not stuck', async () => {
    const { gateway } = scripted([[row('gone'), row('running'), row('still')]], { gone: 'gone', running: stuckPod('running', 'Running') });
    const result = await observeStuckContainers(gateway, { namespaces: ['ns'], pageSize: 10 });
    assert.deepEqual(
      result.stuck.map((c) => c.pod),
      ['still'],
    );
  });

  it('starts the list again, dropping what it had, when the continue token expires', async () => {
    const restarts: number[] = [];
    const { gateway, calls } = scripted([[row('a')], 'expired', [row('a')], [row('b')]]);
    const result = await observeStuckContainers(gateway, { namespaces: [], pageSize: 1, onRestart: (_ns, n) => restarts.push(n) });
    assert.deepEqual(
      result.stuck.map((c) => c.pod),
      ['a', 'b'],
    );
    assert.deepEqual(restarts, [1]);
    assert.equal(calls[2]!.continueToken, undefined);
  });

  it('reads many candidates of a namespace with one LIST instead of a GET each', async () => {
    const rows = [...Array.from({ length: 10 }, (_, i) => row(`s${i}`)), ...Array.from({ length: 30 }, (_, i) => row(`q${i}`, 'Pending'))];
    const many = scripted([rows], { s3: 'gone', s4: stuckPod('s4', 'Running') });
    const result = await observeStuckContainers(many.gateway, { namespaces: ['ns'], pageSize: 500 });
    assert.deepEqual(many.reads, []);
    assert.equal(many.lists, 1);
    assert.equal(result.candidates, 10);
    assert.deepEqual(result.stuck.map((c) => c.pod).sort(), ['s0', 's1', 's2', 's5', 's6', 's7', 's8', 's9']);
  });

  it('lists full pods in pages of at most FULL_PAGE_SIZE, whatever the page of rows', async () => {
    const rows = Array.from({ length: 10 }, (_, i) => row(`s${i}`));
    const large = scripted([rows]);
    await observeStuckContainers(large.gateway, { namespaces: ['ns'], pageSize: 500 });
    const small = scripted([rows]);
    await observeStuckContainers(small.gateway, { namespaces: ['ns'], pageSize: 50 });
    assert.deepEqual([large.fullLimits, small.fullLimits], [[FULL_PAGE_SIZE], [50]]);
    assert.ok(FULL_PAGE_SIZE < 500);
  });

  it('keeps GETs when candidates are few, or a small share of the namespace', async () => {
    const few = scripted([Array.from({ length: 9 }, (_, i) => row(`s${i}`))]);
    await observeStuckContainers(few.gateway, { namespaces: ['ns'], pageSize: 500 });
    assert.equal(few.lists, 0);
    assert.equal(few.reads.length, 9);
    const diluted = scripted([
      [...Array.from({ length: 10 }, (_, i) => row(`s${i}`)), ...Array.from({ length: 31 }, (_, i) => row(`q${i}`, 'Pending'))],
    ]);
    await observeStuckContainers(diluted.gateway, { namespaces: ['ns'], pageSize: 500 });
    assert.equal(diluted.lists, 0);
    assert.equal(diluted.reads.length, 10);
  });

  it('lists a cluster of many namespaces at once, and reads each candidate in its namespace', async () => {
    const many = Array.from({ length: 5000 }, (_, i) => `team-${i}`);
    const { gateway, calls, reads } = scripted(
      [[row('a', 'ErrImagePull', 'team-7'), row('q', 'Pending', 'team-7')], [row('b', 'ImagePullBackOff', 'team-4000')]],
      {},
      many,
    );
    const result = await observeStuckContainers(gateway, { namespaces: [], pageSize: 2 });
    assert.deepEqual(
      calls.map((c) => [c.scope, c.continueToken, c.fieldSelector]),
      [
        ['*', undefined, PENDING_PODS],
        ['*', 't1', PENDING_PODS],
      ],
    );
    assert.deepEqual(reads.sort(), ['team-4000/b', 'team-7/a']);
    assert.deepEqual(result.stuck.map((c) => `${c.namespace}/${c.pod}`).sort(), ['team-4000/b', 'team-7/a']);
    assert.deepEqual(
      [result.podsScanned, result.candidates, result.pages],
      [3, 2, 4],
      'one page of namespace names, two of Pending rows, one of Running rows',
    );
  });

  it('lists few namespaces one by one, and uses --namespace as given', async () => {
    const few = scripted([[row('a', 'ErrImagePull', 'x')]], {}, ['x', 'y']);
    await observeStuckContainers(few.gateway, { namespaces: [], pageSize: 500, listConcurrency: 1 });
    assert.deepEqual(
      few.calls.map((c) => c.scope),
      ['x', 'y'],
    );
    const forced = scripted([[row('a', 'ErrImagePull', 'x')]], {}, ['x', 'y']);
    await observeStuckContainers(forced.gateway, { namespaces: [], pageSize: 500, walkNamespacesUpTo: 0 });
    assert.deepEqual(
      forced.calls.map((c) => c.scope),
      ['*'],
    );
    const named = scripted(
      [[row('a', 'ErrImagePull', 'z')]],
      {},
      Array.from({ length: 100 }, (_, i) => `n${i}`),
    );
    await observeStuckContainers(named.gateway, { namespaces: ['z', 'z'], pageSize: 500 });
    assert.deepEqual(
      named.calls.map((c) => c.scope),
      ['z'],
    );
  });

  it('reads many candidates of one namespace of the cluster-wide list with one LIST of that namespace', async () => {
    const rows = [
      ...Array.from({ length: 10 }, (_, i) => row(`s${i}`, 'ErrImagePull', 'busy')),
      row('lone', 'ErrImagePull', 'calm'),
      row('q', 'Pending', 'calm'),
    ];
    const busy = scripted([rows], {}, []);
    const result = await observeStuckContainers(busy.gateway, { namespaces: [], pageSize: 500, walkNamespacesUpTo: 0 });
    assert.deepEqual(busy.reads, ['calm/lone']);
    assert.equal(busy.lists, 1);
    assert.equal(result.stuck.filter((c) => c.namespace === 'busy').length, 10);
  });

  it('starts the cluster-wide list again when its continue token expires', async () => {
    const restarts: (string | undefined)[] = [];
    const { gateway } = scripted(
      [[row('a', 'ErrImagePull', 'x')], 'expired', [row('a', 'ErrImagePull', 'x')], [row('b', 'ErrImagePull', 'y')]],
      {},
      [],
    );
    const result = await observeStuckContainers(gateway, {
      namespaces: [],
      pageSize: 1,
      walkNamespacesUpTo: 0,
      onRestart: (ns) => restarts.push(ns),
    });
    assert.deepEqual(result.stuck.map((c) => c.pod).sort(), ['a', 'b']);
    assert.equal(result.podsScanned, 2);
    assert.deepEqual(restarts, [undefined]);
  });

  it('gives up after maxRestarts and surfaces the error', async () => {
    const { gateway } = scripted(['expired', 'expired', 'expired']);
    await assert.rejects(
      observeStuckContainers(gateway, { namespaces: [], pageSize: 1, maxRestarts: 2 }),
      (e: unknown) => e instanceof ApiException && e.code === 410,
    );
  });
});

describe('observeStuckContainers: Running pods', () => {
  /** A Running pod whose container exited and waits on its image for the restart. */
  const restartedPod = (name: string, reason = 'ImagePullBackOff', namespace = 'ns'): V1Pod => {
    const p = stuckPod(name, 'Running', namespace);
    const status = p.status!.containerStatuses![0]!;
    status.state = { waiting: { reason, message: 'not found' } };
    status.lastState = { terminated: { exitCode: 1, finishedAt: new Date('2026-11-29T10:05:00Z') } };
    return p;
  };

  it('lists them with their own field selector and reads only those whose STATUS may show or hide a stuck container', async () => {
    const running = [
      row('r-stuck', 'ImagePullBackOff'),
      row('r-ok', 'Running'),
      row('r-crash', 'CrashLoopBackOff'),
      row('r-error', 'Error'),
      row('r-done', 'Completed'),
      row('r-init', 'Init:ErrImagePull'),
      row('r-notready', 'NotReady'),
    ];
    const pods = {
      'r-stuck': restartedPod('r-stuck'),
      'r-done': restartedPod('r-done'),
      'r-init': stuckPod('r-init', 'Running'),
      'r-notready': restartedPod('r-notready', 'CrashLoopBackOff'),
    };
    const { gateway, runningCalls, reads } = scripted([[row('p')]], pods, ['ns'], [running]);
    const result = await observeStuckContainers(gateway, { namespaces: ['ns'], pageSize: 50 });
    assert.deepEqual(
      runningCalls.map((c) => [c.scope, c.fieldSelector]),
      [['ns', RUNNING_PODS]],
    );
    assert.deepEqual(reads.sort(), ['p', 'r-done', 'r-init', 'r-notready', 'r-stuck']);
    assert.deepEqual(result.stuck.map((c) => c.pod).sort(), ['p', 'r-done', 'r-init', 'r-stuck']);
    assert.deepEqual([result.podsScanned, result.runningPodsScanned, result.candidates], [1, 7, 5]);
  });

  it('cluster-wide: one paged list of Running rows beside the Pending one', async () => {
    const many = Array.from({ length: 500 }, (_, i) => `team-${i}`);
    const { gateway, calls, runningCalls } = scripted(
      [[row('a', 'ErrImagePull', 'team-1')]],
      { b: restartedPod('b', 'ErrImagePull', 'team-2') },
      many,
      [[row('b', 'ErrImagePull', 'team-2')], [row('c', 'Running', 'team-3')]],
    );
    const result = await observeStuckContainers(gateway, { namespaces: [], pageSize: 1 });
    assert.deepEqual(
      calls.map((c) => c.scope),
      ['*'],
    );
    assert.deepEqual(
      runningCalls.map((c) => [c.scope, c.continueToken]),
      [
        ['*', undefined],
        ['*', 'r1'],
      ],
    );
    assert.deepEqual(result.stuck.map((c) => `${c.namespace}/${c.pod}`).sort(), ['team-1/a', 'team-2/b']);
  });

  it('a Running candidate that is Pending again, or gone, by its read is not judged under Running', async () => {
    const { gateway } = scripted(
      [],
      { back: stuckPod('back', 'Pending'), gone: 'gone' },
      ['ns'],
      [[row('back', 'ErrImagePull'), row('gone', 'ErrImagePull')]],
    );
    const result = await observeStuckContainers(gateway, { namespaces: ['ns'], pageSize: 50 });
    assert.deepEqual(result.stuck, []);
  });

  it('a pod seen by both lists (its phase changed between them) is judged once', async () => {
    const { gateway } = scripted([[row('moved')]], {}, ['ns'], [[row('moved', 'ImagePullBackOff')]]);
    let n = 0;
    const flipping: KubeGateway = Object.assign(Object.create(gateway) as KubeGateway, {
      readPod: async (_ns: string, name: string) => (n++ === 0 ? stuckPod(name, 'Pending') : restartedPod(name)),
    });
    const result = await observeStuckContainers(flipping, { namespaces: ['ns'], pageSize: 50, listConcurrency: 1 });
    assert.equal(n, 2);
    assert.deepEqual(
      result.stuck.map((c) => c.pod),
      ['moved'],
    );
  });
});

describe('isRunningCandidateStatus', () => {
  it('reads a Running pod whose STATUS names a stuck reason, bare or of an init container', () => {
    for (const s of [
      'ErrImagePull',
      'ImagePullBackOff',
      'InvalidImageName',
      'ErrImageNeverPull',
      'Init:ImagePullBackOff',
      'Init:ErrImagePull',
    ]) {
      assert.equal(isRunningCandidateStatus(s), true, s);
    }
  });
  it('reads Completed and NotReady: a container that finished for good hides the later ones for good', () => {
    for (const s of ['Completed', 'NotReady']) assert.equal(isRunningCandidateStatus(s), true, s);
  });
  it('leaves Running, and containers that are restarting, unread', () => {
    for (const s of [
      'Running',
      'CrashLoopBackOff',
      'Error',
      'OOMKilled',
      'ContainerCreating',
      'Terminating',
      'Init:1/2',
      'Signal:9',
      'ExitCode:1',
      '',
    ]) {
      assert.equal(isRunningCandidateStatus(s), false, s);
    }
  });
});

describe('isCandidateStatus', () => {
  it('rules out only the STATUS values that exclude a stuck container', () => {
    for (const s of ['Pending', 'SchedulingGated', 'Terminating']) assert.equal(isCandidateStatus(s), false, s);
  });

  it('keeps Init:<i>/<n>: an init container whose pull hangs shows it, as a running one does', () => {
    for (const s of ['Init:0/1', 'Init:0/2', 'Init:1/3']) assert.equal(isCandidateStatus(s), true, s);
  });

  it('keeps pull errors, init pull errors, ContainerCreating and anything unknown', () => {
    for (const s of [
      'ErrImagePull',
      'ImagePullBackOff',
      'Init:ErrImagePull',
      'Init:ImagePullBackOff',
      'InvalidImageName',
      'ContainerCreating',
      'Init:ContainerCreating',
      'PodInitializing',
      'Completed',
      'Unknown',
      '',
    ]) {
      assert.equal(isCandidateStatus(s), true, s);
    }
  });
});
