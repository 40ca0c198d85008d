// Pod statuses written by a real kubelet on the test node (test/fixtures/real-node-statuses.json,
// recorded by `npm run record:node-statuses`), for the unit tests.
import { readFileSync } from 'node:fs';
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

export const REAL_NODE = JSON.parse(
  readFileSync(new URL('../fixtures/real-node-statuses.json', import.meta.url), 'utf8'),
) as RealNodeFixture;

export function recordedCase(id: string): RecordedCase {
  const c = [...REAL_NODE.cases, ...REAL_NODE.stalled].find((x) => x.id === id);
  if (!c) throw new Error(`no case ${id} in test/fixtures/real-node-statuses.json`);
  return c;
}

/** The recorded pod of case `id` when its container first waited with `reason` (or was in that state). */
export function recordedPod(id: string, reason: string): V1Pod {
  const pod = recordedCase(id).pods[reason];
  if (!pod) throw new Error(`case ${id} has no recorded ${reason} pod`);
  return structuredClone(pod);
}

/** The case container's status in that pod. */
export function recordedStatus(id: string, reason: string): V1ContainerStatus {
  const c = recordedCase(id);
  const pod = recordedPod(id, reason);
  const list = c.containerKind === 'regular' ? pod.status?.containerStatuses : pod.status?.initContainerStatuses;
  const st = list?.find((s) => s.name === c.container);
  if (!st) throw new Error(`case ${id} ${reason}: no status for container ${c.container}`);
  return st;
}

/** The kubelet's waiting message of case `id` with `reason`. */
export function recordedMessage(id: string, reason: string): string {
  const m = recordedStatus(id, reason).state?.waiting?.message;
  if (m === undefined) throw new Error(`case ${id} ${reason}: no waiting message`);
  return m;
}
