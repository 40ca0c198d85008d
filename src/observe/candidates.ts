// Which pods must be read in full, from the STATUS column alone (what `kubectl get pods` prints).
//
// Pending pods. The API server's pod printer starts from the phase (or status.reason) and
// overwrites it, in this order, with: the first unfinished init container (`Init:<reason>` when it
// waits with a reason other than PodInitializing, else `Init:<i>/<n>`); then, once init is done,
// the waiting reason of a regular container (the first one wins); and `Terminating` when the pod
// is being deleted. So only these STATUS values rule out every stuck container of a Pending pod:
// - `Pending`, `SchedulingGated`: no container waits with any reason;
// - `Terminating`: the pod is being deleted, and deleted pods are never acted on.
// Anything else is a candidate and is decided on its full read: `ImagePullBackOff`,
// `Init:ErrImagePull`, `ContainerCreating` and `PodInitializing` (the `stalled` class; the
// latter may also hide a later container's reason), an unknown value, and `Init:<i>/<n>`: the
// real kubelet leaves an init container or sidecar whose image pull hangs waiting in
// `PodInitializing`, which the printer shows as `Init:<i>/<n>`, exactly as it shows that init
// container running. Only the full read tells the two apart.

import { isStuckReason } from '../model.ts';

const RULED_OUT = new Set(['Pending', 'SchedulingGated', 'Terminating']);

/** Pure: true unless the STATUS column proves the Pending pod has no container stuck on its image. */
export function isCandidateStatus(status: string): boolean {
  return !RULED_OUT.has(status);
}

// Running pods (a container restarted in place waits on its image): most show `Running`, which
// rules a stuck container out (the printer keeps `Running` only when no container has a waiting
// or terminated reason, or when the pod is Ready, which a waiting container never lets it be).
// A container waiting on its image names its reason, `ImagePullBackOff` or `Init:ErrImagePull`,
// unless a container before it in the spec has a reason of its own, which the printer shows
// instead:
// - `Completed` (a container that exited 0, which `OnFailure` never restarts) or `NotReady` (the
//   same with another container running): shown for good, so these are candidates;
// - `CrashLoopBackOff`, `Error` and other reasons of a container that is restarting: not read.
//   While a container of a Job's pod restarts, the Job controller counts its restarts against
//   `backoffLimit` (restartPolicy OnFailure) and ends the Job itself; once it runs again, the
//   STATUS names the waiting reason and the next sweep reads the pod.
const RUNNING_MAY_HIDE = new Set(['Completed', 'NotReady']);

/** Pure: true when the STATUS column of a Running pod may show, or hide for good, a container stuck on its image. */
export function isRunningCandidateStatus(status: string): boolean {
  return isStuckReason(status.startsWith('Init:') ? status.slice('Init:'.length) : status) || RUNNING_MAY_HIDE.has(status);
}
