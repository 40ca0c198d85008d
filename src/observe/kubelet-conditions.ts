// What the sweep can tell about a node's kubelet from the pods it reads in full.
import type { V1Pod } from '@kubernetes/client-node';
import { isStalledReason } from '../model.ts';
import { toDate } from '../time.ts';

/**
 * True when the pod's kubelet writes no `PodReadyToStartContainers` condition: it has taken the
 * pod on (it wrote `Initialized`, in the same status update) but not that one. Such a kubelet
 * runs with the PodReadyToStartContainersCondition feature gate off (beta, so switchable, before
 * Kubernetes 1.37), and the sweep cannot tell a hung pull from a sandbox still being set up.
 */
export function lacksSandboxCondition(pod: V1Pod): boolean {
  if (!pod.spec?.nodeName) return false;
  const types = new Set((pod.status?.conditions ?? []).map((c) => c.type));
  return types.has('Initialized') && !types.has('PodReadyToStartContainers');
}

/**
 * Since when the pod has waited for its sandbox (`PodReadyToStartContainers` False) with a
 * container waiting to be created, or undefined. Kubelets before 1.36 turn the condition True
 * only on the sync after the image pulls (1.36 added a callback right after sandbox creation,
 * kubernetes/kubernetes#134460), so on them a pull that hangs looks exactly like this, and
 * cannot be told from a sandbox that does not come up.
 */
export function sandboxNotReadySince(pod: V1Pod): Date | undefined {
  const condition = pod.status?.conditions?.find((c) => c.type === 'PodReadyToStartContainers');
  if (condition?.status !== 'False') return undefined;
  const statuses = [...(pod.status?.initContainerStatuses ?? []), ...(pod.status?.containerStatuses ?? [])];
  // The reasons of a container not created yet: the stalled reasons.
  if (!statuses.some((s) => isStalledReason(s.state?.waiting?.reason))) return undefined;
  return toDate(condition.lastTransitionTime ?? pod.status?.startTime);
}
