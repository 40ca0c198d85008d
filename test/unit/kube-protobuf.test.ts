import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { findStuckContainers } from '../../src/classify/index.ts';
import { containerThatRan } from '../../src/classify/ran.ts';
import { POD } from '../../src/kube/pod-schema.ts';
import {
  decodeList,
  decodeMessage,
  decodeStatus,
  decodeWatchEvent,
  FrameSplitter,
  ProtobufError,
  unwrap,
  type Schema,
} from '../../src/kube/protobuf.ts';
import { lacksSandboxCondition, sandboxNotReadySince } from '../../src/observe/kubelet-conditions.ts';
import { podCapacity } from '../../src/observe/pod-requests.ts';
import { encode, envelope, frame, listOf, project, statusBytes } from '../support/protobuf.ts';
import { REAL_NODES } from './real-node.ts';

/** Every pod a real kubelet wrote on the test node, in every recording. */
const RECORDED: { name: string; pod: V1Pod }[] = REAL_NODES.flatMap((f) => [
  ...[...f.cases, ...f.stalled].flatMap((c) =>
    Object.entries(c.pods).map(([state, pod]) => ({ name: `${f.runtime} ${c.id} ${state}`, pod })),
  ),
  { name: `${f.runtime} clock`, pod: f.clock },
  { name: `${f.runtime} running`, pod: f.running },
  { name: `${f.runtime} deleted waiting pod`, pod: f.deletedWaitingPod.pod },
]);

const decodePod = (pod: V1Pod): V1Pod => decodeMessage(Buffer.from(encode(pod as Record<string, unknown>, POD)), POD) as V1Pod;

/** What the watch's cache reads of a pod (src/watch/pod-cache.ts). */
function reduced(pod: V1Pod) {
  return {
    stuck: findStuckContainers(pod),
    lacks: lacksSandboxCondition(pod),
    sandboxSince: sandboxNotReadySince(pod),
    capacity: podCapacity(pod),
    ran: containerThatRan(pod),
    phase: pod.status?.phase,
    deleting: pod.metadata?.deletionTimestamp,
    node: pod.spec?.nodeName,
  };
}

/** A recorded stuck pod given what the recordings lack: requests, overhead, an image volume, a sidecar, owner and annotations. */
function fullPod(): V1Pod {
  const recorded = REAL_NODES[0]!.cases.find((c) => c.id === 'tag-missing')!.pods.ErrImagePull!;
  const pod = structuredClone(recorded);
  pod.metadata = {
    ...pod.metadata,
    annotations: { 'imagepull-sweeper/grace': '2m', 'batch.kubernetes.io/job-index-failure-count': '2', other: '' },
    ownerReferences: [
      { apiVersion: 'v1', kind: 'PodGroup', name: 'g', uid: 'uid-g' },
      { apiVersion: 'batch/v1', kind: 'Job', name: 'j', uid: 'uid-j', controller: true, blockOwnerDeletion: true },
    ],
    deletionTimestamp: undefined,
  };
  const main = pod.spec!.containers[0]!;
  pod.spec = {
    ...pod.spec!,
    serviceAccountName: 'builder',
    imagePullSecrets: [{ name: 'pull' }, { name: '' }],
    volumes: [
      { name: 'data', emptyDir: {} },
      { name: 'model', image: { reference: 'models.example/m:1', pullPolicy: 'IfNotPresent' } },
    ],
    initContainers: [{ name: 'proxy', image: 'proxy:1', restartPolicy: 'Always', resources: { requests: { cpu: '50m' } } }],
    containers: [
      { ...main, resources: { limits: { memory: '1Gi' }, requests: { cpu: '1500m' } }, volumeMounts: [{ name: 'model', mountPath: '/m' }] },
    ],
    overhead: { cpu: '10m' },
  };
  return pod;
}

describe('kube/protobuf: a pod read as far as the watch needs', () => {
  it(`gives every recorded pod (${RECORDED.length}) as its JSON holds the schema's fields`, () => {
    assert.ok(RECORDED.length > 40);
    for (const { name, pod } of RECORDED) assert.deepEqual(decodePod(pod), project(pod as Record<string, unknown>, POD), name);
  });

  it('leaves out nothing the cache reads: every recorded pod reduces as its full JSON does', () => {
    let stuck = 0;
    for (const { name, pod } of RECORDED) {
      const full = reduced(pod);
      stuck += full.stuck.length;
      assert.deepEqual(reduced(decodePod(pod)), full, name);
    }
    assert.ok(stuck > 30, `${stuck} stuck containers among the recordings`);
  });

  it('keeps requests, overhead, image volumes, owners, sweeper annotations, pull secrets and the service account', () => {
    const pod = fullPod();
    const decoded = decodePod(pod);
    assert.deepEqual(reduced(decoded), reduced(pod));
    assert.deepEqual(decoded.spec?.volumes, [{ name: 'data' }, { name: 'model', image: { reference: 'models.example/m:1' } }]);
    assert.deepEqual(decoded.spec?.overhead, { cpu: '10m' });
    assert.deepEqual(decoded.spec?.imagePullSecrets, [{ name: 'pull' }, {}]);
    assert.equal(decoded.metadata?.annotations?.other, '');
    const [stuck] = findStuckContainers(decoded);
    assert.equal(stuck?.controller?.uid, 'uid-j');
    assert.deepEqual(stuck?.podAnnotations, { 'imagepull-sweeper/grace': '2m' });
    assert.equal(podCapacity(decoded).requests.cpu, 1.5 + 0.05 + 0.01);
  });

  it('reads a zero time as null, a negative exit code, and numbers past 32 bits', () => {
    const schema: Schema = {
      1: { name: 'at', type: 'time' },
      2: { name: 'code', type: 'int' },
      3: { name: 'big', type: 'int' },
      4: { name: 'on', type: 'bool' },
    };
    const bytes = Buffer.from(encode({ at: null, code: -1, big: 2 ** 40 + 3, on: false }, schema));
    assert.deepEqual(decodeMessage(bytes, schema), { at: null, code: -1, big: 2 ** 40 + 3, on: false });
    const later = Buffer.from(encode({ at: '2026-12-08T00:30:05Z' }, schema));
    assert.deepEqual(decodeMessage(later, schema), { at: '2026-12-08T00:30:05Z' });
  });

  it('skips the fields the schema does not name, of every wire type', () => {
    const schema: Schema = { 9: { name: 'kept', type: 'string' } };
    const bytes = Buffer.from([
      ...[0x08, 0x96, 0x01], // 1: varint 150
      ...[0x11, 1, 2, 3, 4, 5, 6, 7, 8], // 2: 64-bit
      ...[0x1a, 0x03, 0x61, 0x62, 0x63], // 3: bytes "abc"
      ...[0x25, 1, 2, 3, 4], // 4: 32-bit
      ...[0x4a, 0x02, 0x6f, 0x6b], // 9: "ok"
    ]);
    assert.deepEqual(decodeMessage(bytes, schema), { kept: 'ok' });
  });

  it('refuses bytes that run past their message, and a wire type it does not know, with a ProtobufError', () => {
    const schema: Schema = { 1: { name: 'a', type: 'string' } };
    assert.throws(() => decodeMessage(Buffer.from([0x0a, 0x05, 0x61]), schema), ProtobufError);
    assert.throws(() => decodeMessage(Buffer.from([0x10, 0x80]), schema), /truncated varint/);
    assert.throws(() => decodeMessage(Buffer.from([0x13]), schema), /unknown wire type 3/);
    assert.throws(() => decodeMessage(Buffer.from([0x08, 0x01]), schema), /a: expected a length-delimited field/);
    assert.throws(() => unwrap(Buffer.from('{"kind":"PodList"}')), /no k8s envelope/);
  });

  it('reads a page of a list: its pods, continue token and resourceVersion', () => {
    const [a, b] = RECORDED.slice(0, 2).map(({ pod }) => encode(pod as Record<string, unknown>, POD));
    const page = decodeList<V1Pod>(listOf('PodList', [a!, b!], { resourceVersion: '4242', continue: 'next' }), POD);
    assert.deepEqual(page.metadata, { resourceVersion: '4242', continue: 'next' });
    assert.equal(page.count, 2);
    assert.deepEqual(
      [...page.items],
      RECORDED.slice(0, 2).map(({ pod }) => project(pod as Record<string, unknown>, POD)),
    );
    const empty = decodeList(listOf('PodList', []), POD);
    assert.deepEqual([empty.count, [...empty.items], empty.metadata], [0, [], {}]);
  });

  it('reads an error answer as its Status', () => {
    const bytes = envelope('Status', statusBytes({ message: 'pods "nope" not found', reason: 'NotFound', code: 404 }));
    const inner = unwrap(bytes);
    assert.equal(inner.kind, 'Status');
    assert.deepEqual(decodeStatus(bytes, inner.start, inner.end), {
      kind: 'Status',
      status: 'Failure',
      message: 'pods "nope" not found',
      reason: 'NotFound',
      code: 404,
    });
  });

  it('splits a watch stream into frames however its chunks fall, and reads ADDED, BOOKMARK and ERROR as the JSON watch does', () => {
    const pod = RECORDED[0]!.pod;
    const bookmark = { metadata: { resourceVersion: '77', annotations: { 'k8s.io/initial-events-end': 'true' } } };
    const stream = Buffer.concat([
      frame('ADDED', 'Pod', encode(pod as Record<string, unknown>, POD)),
      frame('BOOKMARK', 'Pod', encode(bookmark, POD)),
      frame('ERROR', 'Status', statusBytes({ message: 'too old resource version: 1 (77)', reason: 'Expired', code: 410 })),
    ]);
    const expected = [
      { type: 'ADDED', object: project(pod as Record<string, unknown>, POD) },
      { type: 'BOOKMARK', object: bookmark },
      {
        type: 'ERROR',
        object: { kind: 'Status', status: 'Failure', message: 'too old resource version: 1 (77)', reason: 'Expired', code: 410 },
      },
    ];
    for (const size of [1, 3, 64, stream.length]) {
      const frames = new FrameSplitter();
      const events: unknown[] = [];
      for (let i = 0; i < stream.length; i += size) frames.push(stream.subarray(i, i + size), (f) => events.push(decodeWatchEvent(f, POD)));
      assert.deepEqual(events, expected, `chunks of ${size} bytes`);
    }
  });
});
