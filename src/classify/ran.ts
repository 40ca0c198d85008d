// Whether any container of a pod has ever run: the one rule force-delete, an `owners` rule's
// deadline and healing share (docs/force-delete.md). Pure.
import type { V1ContainerStatus, V1Pod } from '@kubernetes/client-node';

/**
 * The first container (init, sidecar, regular or ephemeral) that has ever run, as
 * `init container fetch`, or undefined when none has: a container ID, a running state, a
 * terminated state with a start time, or `started`, in its state or its last state.
 */
export function containerThatRan(pod: V1Pod): string | undefined {
  const status = pod.status;
  const lists: [string, V1ContainerStatus[] | undefined][] = [
    ['init container', status?.initContainerStatuses],
    ['container', status?.containerStatuses],
    ['ephemeral container', status?.ephemeralContainerStatuses],
  ];
  for (const [kind, statuses] of lists) {
    const ran = (statuses ?? []).find(hasRun);
    if (ran) return `${kind} ${ran.name}`;
  }
  return undefined;
}

function hasRun(s: V1ContainerStatus): boolean {
  if (s.containerID || s.started) return true;
  // Plain JSON: a terminated state the kubelet made up for a container it never started has
  // `startedAt: null`.
  return [s.state, s.lastState].some((st) => st?.running != null || st?.terminated?.startedAt != null || !!st?.terminated?.containerID);
}
