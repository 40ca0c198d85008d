// The `owners` of a rule (docs/contract.md, "Owners other than a Job"): which pods, other than a
// Job's, a rule applies to, named as kubectl names kinds (`Kind.group`), or `Pod` for a pod with
// no controller. Failing such a pod sets its own activeDeadlineSeconds, so an owner that recreates
// its pods for ever would only start another: those kinds are refused.

/** A pod with no controller. */
export const BARE_POD = 'Pod';

/** Kinds that recreate their pods for ever, and what to do instead. */
export const RECREATING_OWNERS: Readonly<Record<string, string>> = {
  'ReplicaSet.apps': 'a ReplicaSet',
  'Deployment.apps': 'a Deployment',
  'StatefulSet.apps': 'a StatefulSet',
  'DaemonSet.apps': 'a DaemonSet',
  ReplicationController: 'a ReplicationController',
};

const KIND = /^[A-Z][A-Za-z0-9]*$/;
const GROUP = /^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*$/;

/** The problem with one `owners` entry, or undefined. */
export function ownerKindError(entry: string): string | undefined {
  const recreating = RECREATING_OWNERS[entry] ?? RECREATING_OWNERS[`${entry}.apps`];
  if (recreating) {
    return `${JSON.stringify(entry)}: ${recreating} recreates its pods for ever, so failing a pod only starts another; fix its image or scale it down instead`;
  }
  if (entry === BARE_POD) return undefined;
  if (entry === 'Job.batch' || entry === 'Job') {
    return `${JSON.stringify(entry)}: a Job's pods follow the rules without "owners"; leave it out`;
  }
  const dot = entry.indexOf('.');
  const kind = dot < 0 ? entry : entry.slice(0, dot);
  const group = dot < 0 ? '' : entry.slice(dot + 1);
  if (!KIND.test(kind) || !GROUP.test(group) || group.length > 253) {
    return `${JSON.stringify(entry)} is not Kind.group (as kubectl names kinds, e.g. "SparkApplication.sparkoperator.k8s.io"), nor "Pod" for a pod with no controller`;
  }
  return undefined;
}

/** How a pod's controller is named in `owners`: `Kind.group` (`Kind` for the core group), `Pod` without one. */
export function ownerKindOf(controller: { apiVersion: string; kind: string } | undefined): string {
  if (!controller) return BARE_POD;
  const slash = controller.apiVersion.indexOf('/');
  return slash < 0 ? controller.kind : `${controller.kind}.${controller.apiVersion.slice(0, slash)}`;
}
