// The observe stage's own control flow (restart on an expired continue token, page by page).
// What the API server returns is proven in test/e2e; here the pages are scripted.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ApiException, type V1Pod } from '@kubernetes/client-node';
import type { KubeGateway } from '../../src/kube/gateway.ts';
import { observeStuckContainers, PENDING_PODS } from '../../src/observe/pods.ts';

function stuckPod(name: string): V1Pod {
  return {
    metadata: { name, namespace: 'ns', uid: `uid-${name}`, creationTimestamp: new Date('2026-11-29T10:00:00Z') },
    spec: { containers: [{ name: 'main', image: 'x:1' }] },
    status: {
      phase: 'Pending',
      containerStatuses: [{ name: 'main', image: 'x:1', imageID: '', ready: false, restartCount: 0, state: { waiting: { reason: 'ErrImagePull', message: 'not found' } } }],
    },
  };
}

function scripted(pages: (V1Pod[] | 'expired')[]): { gateway: KubeGateway; calls: { continueToken?: string; fieldSelector: string }[] } {
  const calls: { continueToken?: string; fieldSelector: string }[] = [];
  let served = 0;
  const gateway = {
    async listPods(opts: { fieldSelector: string; limit: number; continueToken?: string }) {
      calls.push({ continueToken: opts.continueToken, fieldSelector: opts.fieldSelector });
      const page = pages[served++];
      if (page === 'expired') throw new ApiException(410, 'Gone', JSON.stringify({ reason: 'Expired', message: 'continue token expired' }), {});
      return { items: page ?? [], continueToken: served < pages.length ? `t${served}` : undefined };
    },
  } as unknown as KubeGateway;
  return { gateway, calls };
}

describe('observeStuckContainers', () => {
  it('asks only for Pending pods and follows continue tokens', async () => {
    const { gateway, calls } = scripted([[stuckPod('a')], [stuckPod('b')], [stuckPod('c')]]);
    const result = await observeStuckContainers(gateway, { namespaces: [], pageSize: 1 });
    assert.deepEqual(result.stuck.map((c) => c.pod), ['a', 'b', 'c']);
    assert.equal(result.pages, 3);
    assert.deepEqual(calls.map((c) => c.continueToken), [undefined, 't1', 't2']);
    assert.ok(calls.every((c) => c.fieldSelector === PENDING_PODS));
  });

  it('starts the list again, dropping what it had, when the continue token expires', async () => {
    const restarts: number[] = [];
    const { gateway, calls } = scripted([[stuckPod('a')], 'expired', [stuckPod('a')], [stuckPod('b')]]);
    const result = await observeStuckContainers(gateway, { namespaces: [], pageSize: 1, onRestart: (_ns, n) => restarts.push(n) });
    assert.deepEqual(result.stuck.map((c) => c.pod), ['a', 'b']);
    assert.deepEqual(restarts, [1]);
    assert.equal(calls[2]!.continueToken, undefined);
  });

  it('gives up after maxRestarts and surfaces the error', async () => {
    const { gateway } = scripted(['expired', 'expired', 'expired']);
    await assert.rejects(observeStuckContainers(gateway, { namespaces: [], pageSize: 1, maxRestarts: 2 }), (e: unknown) => e instanceof ApiException && e.code === 410);
  });
});
