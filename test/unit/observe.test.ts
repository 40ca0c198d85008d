// The observe stage's own control flow (namespaces, paging, restart on an expired continue token,
// candidates read in full). What the API server returns is proven in test/e2e; here it is scripted.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ApiException, type V1Pod } from '@kubernetes/client-node';
import type { KubeGateway, PodRow } from '../../src/kube/gateway.ts';
import { isCandidateStatus } from '../../src/observe/candidates.ts';
import { observeStuckContainers, PENDING_PODS } from '../../src/observe/pods.ts';
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

function scripted(
  pages: (PodRow[] | 'expired')[],
  pods: Record<string, V1Pod | 'gone'> = {},
  namespaces = ['ns'],
): { gateway: KubeGateway; calls: Call[]; reads: string[]; lists: number } {
  const calls: Call[] = [];
  const reads: string[] = [];
  const counted = { lists: 0 };
  let served = 0;
  const rowsPage = async (opts: { namespace?: string; fieldSelector: string; limit: number; continueToken?: string }) => {
    calls.push({ continueToken: opts.continueToken, fieldSelector: opts.fieldSelector, scope: opts.namespace ?? '*' });
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
        (opts: { namespace: string; fieldSelector: string }) => {
          counted.lists += 1;
          assert.equal(opts.fieldSelector, PENDING_PODS);
          const rows = pages.flatMap((p) => (p === 'expired' ? [] : p)).filter((r) => r.namespace === opts.namespace);
          const listed = rows.map((r) => pods[r.name] ?? stuckPod(r.name, 'Pending', r.namespace));
          return { items: listed.filter((p): p is V1Pod => p !== 'gone' && p.status?.phase === 'Pending'), continueToken: undefined };
        },
      ],
    },
    { repeatLast: true },
  );
  return {
    gateway,
    calls,
    reads,
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
    assert.deepEqual([result.podsScanned, result.candidates, result.pages], [3, 2, 3], 'one page of namespace names, two of rows');
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
