// Which pods must be read in full, from the STATUS column alone (what `kubectl get pods` prints).
//
// The API server's pod printer starts from the phase (or status.reason) and overwrites it, in
// this order, with: the first unfinished init container (`Init:<reason>` when it waits with a
// reason other than PodInitializing, else `Init:<i>/<n>`); then, once init is done, the waiting
// reason of a regular container (the first one wins); and `Terminating` when the pod is being
// deleted. So only these STATUS values rule out every stuck container of a Pending pod:
// - `Pending`, `SchedulingGated`: no container waits with any reason;
// - `Init:<i>/<n>`: init container i runs; the kubelet starts the later init containers and the
//   regular ones only after it, so none of them can be pulling yet;
// - `Terminating`: the pod is being deleted, and deleted pods are never acted on.
// Anything else (`ImagePullBackOff`, `Init:ErrImagePull`, `ContainerCreating` — the `stalled`
// class, `PodInitializing` — which may hide a later container's reason, an unknown value) is a
// candidate and is decided on its full read.

const RULED_OUT = new Set(['Pending', 'SchedulingGated', 'Terminating']);
const INIT_RUNNING = /^Init:\d+\/\d+$/;

/** Pure: true unless the STATUS column proves the pod has no container stuck on its image. */
export function isCandidateStatus(status: string): boolean {
  return !(RULED_OUT.has(status) || INIT_RUNNING.test(status));
}
