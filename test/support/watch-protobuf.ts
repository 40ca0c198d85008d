// The watch's protobuf pods (src/kube/pod-schema.ts) against the API server's JSON of the same
// pods, as a real kubelet wrote them: a page of the list and a watch's ADDED events each read as
// the JSON cut down to the schema, and reduce to the same stuck containers, capacity and sandbox
// facts. What proves the schema's field numbers; the unit tests prove the decoder on recordings.
import assert from 'node:assert/strict';
import type { KubeConfig, V1Pod } from '@kubernetes/client-node';
import { findStuckContainers } from '../../src/classify/index.ts';
import { containerThatRan } from '../../src/classify/ran.ts';
import { POD } from '../../src/kube/pod-schema.ts';
import { createWatchGateway, podCollection } from '../../src/kube/watch.ts';
import { lacksSandboxCondition, sandboxNotReadySince } from '../../src/observe/kubelet-conditions.ts';
import { podCapacity } from '../../src/observe/pod-requests.ts';
import { PENDING_PODS } from '../../src/observe/pods.ts';
import { project } from './protobuf.ts';

const byName = (a: V1Pod, b: V1Pod) => (a.metadata?.name ?? '').localeCompare(b.metadata?.name ?? '');

function reduced(pod: V1Pod) {
  return [findStuckContainers(pod), lacksSandboxCondition(pod), sandboxNotReadySince(pod), podCapacity(pod), containerThatRan(pod)];
}

/** Lists and watches the Pending pods of `namespace` in both encodings; returns how many stuck containers they hold. */
export async function assertProtobufReadsAsJson(kc: KubeConfig, namespace: string): Promise<number> {
  const gateway = createWatchGateway(kc);
  const protobuf = podCollection(namespace, PENDING_PODS);
  const json = { ...protobuf, protobuf: undefined };
  const asJson = [...(await gateway.list<V1Pod>(json, {})).items].sort(byName);
  const page = await gateway.list<V1Pod>(protobuf, {});
  assert.ok(asJson.length > 0, `Pending pods in ${namespace}`);
  const expected = asJson.map((p) => project(p as Record<string, unknown>, POD));
  assert.ok(/^\d+$/.test(page.resourceVersion), `a list resourceVersion: ${page.resourceVersion}`);
  // A pod that moved on between the two reads (a back-off rewrite) is compared in the next read.
  const sameRead = (p: V1Pod) =>
    asJson.findIndex((q) => q.metadata?.uid === p.metadata?.uid && q.metadata?.resourceVersion === p.metadata?.resourceVersion);
  let compared = 0;
  let stuck = 0;
  for (const pod of page.items) {
    const i = sameRead(pod);
    if (i < 0) continue;
    assert.deepEqual(pod, expected[i], `${namespace}/${pod.metadata?.name} listed in protobuf`);
    assert.deepEqual(reduced(pod), reduced(asJson[i]!), `${namespace}/${pod.metadata?.name}: what the cache keeps`);
    stuck += findStuckContainers(pod).length;
    compared += 1;
  }
  assert.ok(compared >= asJson.length / 2, `${compared} of ${asJson.length} pods compared (the rest moved on between the reads)`);

  // A watch from resourceVersion 0 begins with an ADDED event for every pod.
  const stop = new AbortController();
  const added: V1Pod[] = [];
  await gateway
    .watch<V1Pod>(protobuf, { resourceVersion: '0', timeoutSeconds: 30, idleTimeoutMs: 30_000, signal: stop.signal }, (e) => {
      if (e.type === 'ADDED') added.push(e.object);
      if (added.length >= asJson.length) stop.abort();
    })
    .catch((error: unknown) => {
      if (!stop.signal.aborted) throw error;
    });
  let watched = 0;
  for (const pod of added) {
    const i = sameRead(pod);
    if (i < 0) continue;
    assert.deepEqual(pod, expected[i], `${namespace}/${pod.metadata?.name} watched in protobuf`);
    watched += 1;
  }
  assert.ok(watched >= 1, `${watched} of ${added.length} watched pods compared`);
  return stuck;
}
