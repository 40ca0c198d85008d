// Telling a kubelet that writes no PodReadyToStartContainers from the pods it wrote. The real
// v1.34.4 kubelet with that gate off is run in test/e2e/kubernetes-versions.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { lacksSandboxCondition, sandboxNotReadySince } from '../../src/observe/kubelet-conditions.ts';
import { REAL_NODE } from './real-node.ts';

describe('lacksSandboxCondition', () => {
  it('is false for every pod the real kubelet (gate on) wrote in the recorded fixture', () => {
    const pods = [...REAL_NODE.cases, ...REAL_NODE.stalled].flatMap((c) => Object.values(c.pods));
    assert.ok(pods.length > 10);
    for (const pod of pods) assert.equal(lacksSandboxCondition(pod), false, pod.metadata?.name ?? '');
  });

  it('is true for a bound pod with Initialized and no PodReadyToStartContainers, false before a kubelet wrote anything', () => {
    const pod = (nodeName: string | undefined, types: string[]): V1Pod => ({
      spec: { containers: [], ...(nodeName ? { nodeName } : {}) },
      status: { phase: 'Pending', conditions: types.map((type) => ({ type, status: 'True' })) },
    });
    assert.equal(lacksSandboxCondition(pod('n1', ['Initialized', 'Ready', 'ContainersReady', 'PodScheduled'])), true);
    assert.equal(lacksSandboxCondition(pod('n1', ['PodScheduled'])), false);
    assert.equal(lacksSandboxCondition(pod('n1', [])), false);
    assert.equal(lacksSandboxCondition(pod(undefined, ['Initialized'])), false);
  });
});

describe('sandboxNotReadySince', () => {
  const pod = (ready: string, reason: string, at = '2026-11-30T10:00:00Z'): V1Pod =>
    ({
      spec: { nodeName: 'n1', containers: [{ name: 'main', image: 'x' }] },
      status: {
        phase: 'Pending',
        conditions: [{ type: 'PodReadyToStartContainers', status: ready, lastTransitionTime: at }],
        containerStatuses: [{ name: 'main', image: 'x', imageID: '', ready: false, restartCount: 0, state: { waiting: { reason } } }],
      },
    }) as unknown as V1Pod;

  it('is the time the sandbox condition went False while a container waits to be created', () => {
    assert.equal(sandboxNotReadySince(pod('False', 'ContainerCreating'))?.toISOString(), '2026-11-30T10:00:00.000Z');
    assert.equal(sandboxNotReadySince(pod('False', 'PodInitializing'))?.toISOString(), '2026-11-30T10:00:00.000Z');
  });

  it('is undefined once the sandbox is ready, for other waiting reasons, and for every recorded real-kubelet stalled pod', () => {
    assert.equal(sandboxNotReadySince(pod('True', 'ContainerCreating')), undefined);
    assert.equal(sandboxNotReadySince(pod('False', 'ErrImagePull')), undefined);
    for (const c of REAL_NODE.stalled) {
      for (const [state, p] of Object.entries(c.pods)) {
        if (state === 'ContainerCreating' || state === 'PodInitializing')
          assert.equal(sandboxNotReadySince(p), undefined, `${c.id} ${state}`);
      }
    }
  });
});
