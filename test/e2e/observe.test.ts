// Lean observation against the real API server: the Table rows' STATUS column picks the pods to
// read in full, and what it finds is exactly what classifying every full Pending pod finds.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CoreV1Api, type KubeConfig, type V1Container, type V1Pod } from '@kubernetes/client-node';
import { findStuckContainers } from '../../src/classify/index.ts';
import { createGateway } from '../../src/kube/gateway.ts';
import { withRetries } from '../../src/kube/retrying.ts';
import type { StuckContainer } from '../../src/model.ts';
import { observeStuckContainers } from '../../src/observe/pods.ts';
import { useTestCluster } from '../support/hooks.ts';
import { setImagePullStuck, setPodRunning, type WaitingOnImage } from '../support/kubelet.ts';
import { MISSING_IMAGE, NOT_FOUND_MESSAGE } from '../support/sweeper.ts';

const TIMEOUT = { timeout: 180_000 };
let kc: KubeConfig;
const env = useTestCluster((hooks) => {
  kc = hooks.kc;
});

const container = (name: string, extra: Partial<V1Container> = {}): V1Container => ({ name, image: MISSING_IMAGE, command: ['true'], ...extra });
const pull = (c: string, reason = 'ImagePullBackOff', init = false): WaitingOnImage => ({ container: c, reason, message: reason === 'ContainerCreating' ? '' : NOT_FOUND_MESSAGE, init });

/** Each pod: its spec and the kubelet-written state (none: unscheduled; running; or waiting containers). */
const PODS: { name: string; init?: V1Container[]; containers: V1Container[]; state: 'none' | 'running' | WaitingOnImage[] }[] = [
  { name: 'unscheduled', containers: [container('main')], state: 'none' },
  { name: 'running', containers: [container('main')], state: 'running' },
  { name: 'regular', containers: [container('main')], state: [pull('main')] },
  { name: 'second-behind-creating', containers: [container('a'), container('b')], state: [pull('a', 'ContainerCreating'), pull('b', 'ErrImagePull')] },
  { name: 'second-behind-running', containers: [container('a'), container('b')], state: [pull('b', 'ErrImagePull')] },
  { name: 'init', init: [container('setup')], containers: [container('main')], state: [pull('setup', 'ErrImagePull', true)] },
  { name: 'sidecar', init: [container('proxy', { restartPolicy: 'Always' })], containers: [container('main')], state: [pull('proxy', 'ImagePullBackOff', true)] },
  { name: 'creating', containers: [container('main')], state: [pull('main', 'ContainerCreating')] },
  { name: 'invalid-name', containers: [container('main')], state: [pull('main', 'InvalidImageName')] },
];

function key(c: StuckContainer): string {
  return JSON.stringify([c.namespace, c.pod, c.container, c.containerKind, c.reason, c.pullClass, c.stuckSince.getTime(), c.podUid, c.image, c.message]);
}

describe('lean observation (Table rows, then full reads of the candidates)', () => {
  it('finds exactly what classifying every full Pending pod finds, and reads only candidates', TIMEOUT, async () => {
    const ns = await env.namespace('observe');
    const core = kc.makeApiClient(CoreV1Api);
    const since = new Date(Date.now() - 3600_000);
    for (const p of PODS) {
      const body: V1Pod = { metadata: { name: p.name }, spec: { restartPolicy: 'Never', containers: p.containers, ...(p.init ? { initContainers: p.init } : {}) } };
      await core.createNamespacedPod({ namespace: ns, body });
      if (p.state === 'running') await setPodRunning(core, ns, p.name);
      else if (p.state !== 'none') await setImagePullStuck(core, ns, p.name, { since, stuck: p.state });
    }

    const full = await core.listNamespacedPod({ namespace: ns, fieldSelector: 'status.phase=Pending' });
    const expected = full.items.flatMap((pod) => findStuckContainers(pod)).map(key).sort();
    assert.ok(expected.length >= 6, `the fixtures hold stuck containers (found ${expected.length})`);

    const gateway = withRetries(createGateway(kc));
    const reads: string[] = [];
    const counting = { ...gateway, readPod: (n: string, name: string) => (reads.push(name), gateway.readPod(n, name)) };
    const scoped = await observeStuckContainers(counting, { namespaces: [ns], pageSize: 3 });
    assert.deepEqual(scoped.stuck.map(key).sort(), expected);
    assert.equal(scoped.podsScanned, PODS.length - 1, 'every Pending pod listed');
    assert.deepEqual(reads.sort(), PODS.filter((p) => p.state !== 'none' && p.state !== 'running').map((p) => p.name).sort(), 'only candidates read');

    const everywhere = await observeStuckContainers(gateway, { namespaces: [], pageSize: 500 });
    assert.deepEqual(everywhere.stuck.filter((c) => c.namespace === ns).map(key).sort(), expected);
  });
});
