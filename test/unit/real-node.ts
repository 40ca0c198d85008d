// Pod statuses written by a real kubelet on the test node, recorded by `npm run
// record:node-statuses`, one file per runtime: test/fixtures/real-node-statuses.json (containerd
// 1.6) and real-node-statuses.<runtime>.json (e.g. containerd2). REAL_NODE is the containerd 1.6
// recording; REAL_NODES every recording.
import { readdirSync, readFileSync } from 'node:fs';
import type { V1ContainerStatus, V1Pod } from '@kubernetes/client-node';
import type { PullClass } from '../../src/model.ts';

export interface RecordedCase {
  id: string;
  title: string;
  expectedClass: PullClass;
  container: string;
  containerKind: 'regular' | 'init' | 'sidecar';
  image: string;
  /** The pod as first seen with each waiting reason (ErrImagePull, ImagePullBackOff, …). */
  pods: Record<string, V1Pod>;
}

export interface RealNodeFixture {
  /** The test node's runtime (test/support/runtimes.ts); absent in the first recording (containerd). */
  runtime?: string;
  /** The file it was read from (set on reading). */
  file: string;
  kubelet: string;
  containerRuntime: string;
  cases: RecordedCase[];
  /**
   * Pulls from a registry that never answers (class stalled). `pods` is keyed by state: the waiting
   * reason (ContainerCreating / PodInitializing) once the container's turn has come, and
   * `setup-running` while the init container before it still runs.
   */
  stalled: RecordedCase[];
  /** What the loopback registry stand-ins were asked. */
  registryRequests: Record<string, string[]>;
  /** Init container ran 4 s, then the regular container could not pull. */
  clock: V1Pod;
  running: V1Pod;
  /** A waiting Job pod deleted: what the kubelet leaves (phase Failed, 137 ContainerStatusUnknown). */
  deletedWaitingPod: { failedAfterMs: number; pod: V1Pod };
}

const FIXTURES = new URL('../fixtures/', import.meta.url);

function readFixture(file: string): RealNodeFixture {
  const f = JSON.parse(readFileSync(new URL(file, FIXTURES), 'utf8')) as Omit<RealNodeFixture, 'file'>;
  return { ...f, runtime: f.runtime ?? 'containerd', file: `test/fixtures/${file}` };
}

export const REAL_NODE = readFixture('real-node-statuses.json');

/** Every runtime's recording, containerd 1.6 first. */
export const REAL_NODES: RealNodeFixture[] = [
  REAL_NODE,
  ...readdirSync(FIXTURES)
    .filter((f) => /^real-node-statuses\.[a-z0-9]+\.json$/.test(f))
    .sort()
    .map(readFixture),
];

export function recordedCase(id: string, fixture: RealNodeFixture = REAL_NODE): RecordedCase {
  const c = [...fixture.cases, ...fixture.stalled].find((x) => x.id === id);
  if (!c) throw new Error(`no case ${id} in ${fixture.file}`);
  return c;
}

/** The recorded pod of case `id` when its container first waited with `reason` (or was in that state). */
export function recordedPod(id: string, reason: string, fixture: RealNodeFixture = REAL_NODE): V1Pod {
  const pod = recordedCase(id, fixture).pods[reason];
  if (!pod) throw new Error(`case ${id} has no recorded ${reason} pod in ${fixture.file}`);
  return structuredClone(pod);
}

/** The case container's status in that pod. */
export function recordedStatus(id: string, reason: string, fixture: RealNodeFixture = REAL_NODE): V1ContainerStatus {
  const c = recordedCase(id, fixture);
  const pod = recordedPod(id, reason, fixture);
  const list = c.containerKind === 'regular' ? pod.status?.containerStatuses : pod.status?.initContainerStatuses;
  const st = list?.find((s) => s.name === c.container);
  if (!st) throw new Error(`case ${id} ${reason}: no status for container ${c.container}`);
  return st;
}

/** The kubelet's waiting message of case `id` with `reason`. */
export function recordedMessage(id: string, reason: string, fixture: RealNodeFixture = REAL_NODE): string {
  const m = recordedStatus(id, reason, fixture).state?.waiting?.message;
  if (m === undefined) throw new Error(`case ${id} ${reason}: no waiting message`);
  return m;
}
