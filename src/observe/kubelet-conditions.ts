// What the sweep can tell about a node's kubelet from the pods it reads in full.
import type { V1Pod } from '@kubernetes/client-node';

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
