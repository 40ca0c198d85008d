// Telling a kubelet that writes no PodReadyToStartContainers from the pods it wrote. The real
// v1.34.4 kubelet with that gate off is run in test/e2e/kubernetes-versions.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { lacksSandboxCondition } from '../../src/observe/kubelet-conditions.ts';
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
