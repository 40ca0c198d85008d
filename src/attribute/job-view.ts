import type { V1Job, V1ObjectMeta, V1PodFailurePolicy } from '@kubernetes/client-node';
import { controllerRefOf } from '../classify/index.ts';
import type { JobBudget, JobView, OwnerRef, PodFailureRule, QueueMembership } from '../model.ts';
import { KUEUE_QUEUE_LABEL, LABELS } from '../policy/annotations.ts';
import { JOBSET_GROUP, jobSetMembership } from './jobset.ts';

/** Conditions that mean the Job has ended or is on its way to an end it cannot leave. */
const TERMINAL_CONDITIONS = new Set(['Complete', 'Failed', 'FailureTarget', 'SuccessCriteriaMet']);

/** Pure: what every view of a namespaced object carries to find it again and write to it safely. */
export function objectIdentity(meta: V1ObjectMeta): {
  namespace: string;
  name: string;
  uid: string;
  resourceVersion: string;
  annotations: Record<string, string>;
} {
  return {
    namespace: meta.namespace ?? '',
    name: meta.name ?? '',
    uid: meta.uid ?? '',
    resourceVersion: meta.resourceVersion ?? '',
    annotations: { ...(meta.annotations ?? {}) },
  };
}

/** Pure: the parts of a V1Job the judge needs. */
export function toJobView(job: V1Job): JobView {
  const meta = job.metadata ?? {};
  const finished =
    job.status?.completionTime !== undefined ||
    (job.status?.conditions ?? []).some((c) => TERMINAL_CONDITIONS.has(c.type) && c.status === 'True');
  const controller = controllerRefOf(meta);
  const cronJob = controller?.kind === 'CronJob' && controller.apiVersion.startsWith('batch/') ? controller : undefined;
  const isTrue = (type: string) => (job.status?.conditions ?? []).some((c) => c.type === type && c.status === 'True');
  const failed = isTrue('Failed') || isTrue('FailureTarget');
  const failing = isTrue('FailureTarget') && !isTrue('Failed') && job.status?.completionTime === undefined;
  const podSpec = job.spec?.template?.spec;
  const jobSet = jobSetMembership(meta);
  const queue = queueMembership(job);
  const pendingLabel = meta.labels?.[LABELS.pending];
  const { namespace, name, uid, resourceVersion, annotations } = objectIdentity(meta);
  // Named, not spread: a literal that opens with a spread gets a hidden class of its own, about
  // 500 bytes a Job in a sweep of thousands (docs/performance.md).
  return {
    namespace,
    name,
    uid,
    resourceVersion,
    annotations,
    finished,
    deleting: meta.deletionTimestamp !== undefined && meta.deletionTimestamp !== null,
    managedBy: job.spec?.managedBy ?? undefined,
    suspended: job.spec?.suspend === true,
    failed,
    failing,
    podFailureRules: podFailureRules(job.spec?.podFailurePolicy),
    containerNames: [...(podSpec?.initContainers ?? []), ...(podSpec?.containers ?? [])].map((c) => c.name),
    cronJob: cronJob?.name,
    cronJobUid: cronJob?.uid,
    owners: controller ? [controller] : [],
    startTime: job.status?.startTime ? new Date(job.status.startTime) : undefined,
    ...(jobSet ? { jobSet } : {}),
    ...(queue ? { queue } : {}),
    ...(pendingLabel !== undefined ? { pendingLabel } : {}),
    budget: jobBudget(job),
    templatePullSecrets: (podSpec?.imagePullSecrets ?? []).length > 0,
  };
}

/** The Job controller's own default for spec.backoffLimit. */
const DEFAULT_BACKOFF_LIMIT = 6;

function jobBudget(job: V1Job): JobBudget {
  const perIndex = job.spec?.backoffLimitPerIndex;
  return {
    backoffLimit: job.spec?.backoffLimit ?? DEFAULT_BACKOFF_LIMIT,
    ...(typeof perIndex === 'number' ? { backoffLimitPerIndex: perIndex } : {}),
    failed: (job.status?.failed ?? 0) + (job.status?.uncountedTerminatedPods?.failed?.length ?? 0),
    terminating: job.status?.terminating ?? 0,
  };
}

/** The Kueue LocalQueue of a Job, and since when it is suspended (Kueue's eviction), if it is. */
function queueMembership(job: V1Job): QueueMembership | undefined {
  const name = job.metadata?.labels?.[KUEUE_QUEUE_LABEL];
  if (name === undefined) return undefined;
  const suspended = (job.status?.conditions ?? []).find((c) => c.type === 'Suspended' && c.status === 'True');
  const since = suspended?.lastTransitionTime ? new Date(suspended.lastTransitionTime) : undefined;
  return { name, suspendedSince: job.spec?.suspend === true && since && !Number.isNaN(since.getTime()) ? since : undefined };
}

/** The rules of spec.podFailurePolicy, reduced to what decides which rule matches a pod. */
function podFailureRules(policy: V1PodFailurePolicy | undefined): PodFailureRule[] {
  return (policy?.rules ?? []).map((rule) => {
    const out: PodFailureRule = { action: rule.action };
    if (rule.onExitCodes) {
      const { containerName, operator, values } = rule.onExitCodes;
      out.onExitCodes = { operator, values: [...values], ...(containerName ? { containerName } : {}) };
    }
    if (rule.onPodConditions) out.onPodConditions = rule.onPodConditions.map((p) => ({ type: p.type, status: p.status ?? 'True' }));
    return out;
  });
}

export { jobOwner } from '../model.ts';

/** The label selector of a Job's pods: the Job controller labels each with the Job's uid. */
export function jobPodsSelector(jobUid: string): string {
  return `batch.kubernetes.io/controller-uid=${jobUid}`;
}

/** True for a reference to a JobSet (jobset.x-k8s.io, any version). */
export function isJobSet(ref: Pick<OwnerRef, 'apiVersion' | 'kind'>): boolean {
  return ref.kind === 'JobSet' && ref.apiVersion.split('/')[0] === JOBSET_GROUP;
}
