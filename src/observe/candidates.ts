// Which pods must be read in full, from the STATUS column alone (what `kubectl get pods` prints).
//
// The API server's pod printer starts from the phase (or status.reason) and overwrites it, in
// this order, with: the first unfinished init container (`Init:<reason>` when it waits with a
// reason other than PodInitializing, else `Init:<i>/<n>`); then, once init is done, the waiting
// reason of a regular container (the first one wins); and `Terminating` when the pod is being
// deleted. So only these STATUS values rule out every stuck container of a Pending pod:
// - `Pending`, `SchedulingGated`: no container waits with any reason;
// - `Terminating`: the pod is being deleted, and deleted pods are never acted on.
// Anything else is a candidate and is decided on its full read: `ImagePullBackOff`,
// `Init:ErrImagePull`, `ContainerCreating` and `PodInitializing` (the `stalled` class; the
// latter may also hide a later container's reason), an unknown value, and `Init:<i>/<n>`: the
// real kubelet leaves an init container or sidecar whose image pull hangs waiting in
// `PodInitializing`, which the printer shows as `Init:<i>/<n>`, exactly as it shows that init
// container running. Only the full read tells the two apart.

const RULED_OUT = new Set(['Pending', 'SchedulingGated', 'Terminating']);

/** Pure: true unless the STATUS column proves the pod has no container stuck on its image. */
export function isCandidateStatus(status: string): boolean {
  return !RULED_OUT.has(status);
}
