// docs/contract.md "How a Job is failed", step 4, pure: which pods of a Job the sweeper failed are deleted
// with grace period 0 — those still terminating none of whose containers has ever run — and why
// each other terminating pod is left to the kubelet.
import type { V1Pod } from '@kubernetes/client-node';
import { containerThatRan } from '../classify/ran.ts';
import { formatDuration } from '../policy/duration.ts';

export { containerThatRan } from '../classify/ran.ts';

/** A pod to delete with grace period 0, as it was judged (uid and resourceVersion preconditions). */
export interface ForceDeleteTarget {
  pod: string;
  uid: string;
  resourceVersion: string | undefined;
  /** Since its deletion was requested (deletionTimestamp minus its grace period). */
  terminatingSeconds: number;
}

/** A terminating pod that is not force-deleted, and why. */
export interface SparedPod {
  pod: string;
  why: string;
}

export interface ForceDeletePlan {
  targets: ForceDeleteTarget[];
  spared: SparedPod[];
}

/** Seconds since the pod's deletion was requested. */
export function terminatingSeconds(pod: V1Pod, now: Date): number {
  const deletion = new Date(pod.metadata!.deletionTimestamp!).getTime();
  const requested = deletion - (pod.metadata?.deletionGracePeriodSeconds ?? 0) * 1000;
  return Math.max(0, Math.floor((now.getTime() - requested) / 1000));
}

/**
 * The Job's pods (by its controller-uid label) judged one by one. Only terminating pods the Job
 * controls are considered; the caller decides whether `forceDeleteAfter` has passed.
 */
export function planForceDeletes(pods: readonly V1Pod[], jobUid: string, now: Date): ForceDeletePlan {
  const plan: ForceDeletePlan = { targets: [], spared: [] };
  for (const pod of pods) {
    const name = pod.metadata?.name ?? '';
    const uid = pod.metadata?.uid;
    if (!pod.metadata?.deletionTimestamp || !uid) continue;
    if (!(pod.metadata.ownerReferences ?? []).some((r) => r.controller && r.uid === jobUid)) continue;
    const since = terminatingSeconds(pod, now);
    const spare = (why: string) =>
      plan.spared.push({ pod: name, why: `pod ${name} terminating ${formatDuration(since)}, not force-deleted: ${why}` });
    const ran = containerThatRan(pod);
    const phase = pod.status?.phase;
    if (ran) spare(`its ${ran} has run`);
    else if (phase === 'Succeeded' || phase === 'Failed') spare(`the kubelet has ended it (phase ${phase})`);
    else if (pod.metadata.deletionGracePeriodSeconds === 0) spare('already deleted with grace period 0 (held by a finalizer)');
    else plan.targets.push({ pod: name, uid, resourceVersion: pod.metadata.resourceVersion, terminatingSeconds: since });
  }
  return plan;
}

/** `pod P (terminating 1m12s, no container ever started)`, for audit lines and Events. */
export function describeTarget(t: ForceDeleteTarget): string {
  return `pod ${t.pod} (terminating ${formatDuration(t.terminatingSeconds)}, no container ever started)`;
}
