import { createHash, randomBytes } from 'node:crypto';
import { V1MicroTime, type EventsV1Event } from '@kubernetes/client-node';
import type { Decision } from '../judge/types.ts';
import type { JobView } from '../model.ts';
import { ANNOTATIONS } from '../policy/annotations.ts';
import { formatClaimMessage } from '../judge/claim-message.ts';
import { truncate } from '../text.ts';

export const REPORTING_CONTROLLER = 'imagepull-sweeper';
export const EVENT_REASON_STUCK = 'ImagePullStuck';
export const EVENT_REASON_INVALID_POLICY = 'InvalidPolicy';
export const EVENT_REASON_HEALED = 'ImagePullHealed';
const NOTE_LIMIT = 1024;

export interface Reporter {
  /** Identifies this sweeper process (pod name or host name). */
  instance: string;
  now: Date;
}

/**
 * The Event of a stuck Job, named by Job uid, action and cause (container, image, reason): a
 * retried write, or a later sweep's after the annotation that records it was lost, is a 409, not a
 * second Event.
 */
export function stuckJobEvent(d: Decision, action: 'FailJob' | 'Report', reporter: Reporter): EventsV1Event {
  const job = d.jobView!;
  const verb = action === 'FailJob' ? 'Failing Job' : 'Job stuck (report only)';
  const digest = createHash('sha256').update(`${job.uid}/${action}/${d.container}/${d.image}/${d.reason}`).digest('hex').slice(0, 16);
  return warningEvent(reporter, {
    name: `${job.name.slice(0, 230)}.${digest}`,
    reason: EVENT_REASON_STUCK,
    action,
    note: `${verb}: ${formatClaimMessage(d)}`,
    regarding: { apiVersion: 'batch/v1', kind: 'Job', name: job.name, namespace: job.namespace, uid: job.uid },
    related: { apiVersion: 'v1', kind: 'Pod', name: d.pod, namespace: d.namespace, uid: d.podUid },
  });
}

/**
 * The FailJob Event of a Job the sweeper claimed, built from the claim's annotations only, so
 * every sweep that writes it (the claiming one, or a later one completing the failure) writes
 * the same Event under the same name: it exists at most once per claim.
 */
export function failedJobEvent(
  job: Pick<JobView, 'namespace' | 'name' | 'uid' | 'annotations'>,
  reporter: Reporter,
  related?: { name: string; uid: string },
): EventsV1Event {
  const claim = job.annotations[ANNOTATIONS.claim] ?? job.annotations[ANNOTATIONS.failedAt] ?? '';
  const digest = createHash('sha256').update(`${job.uid}/${claim}`).digest('hex').slice(0, 16);
  return warningEvent(reporter, {
    name: `${job.name.slice(0, 230)}.${digest}`,
    reason: EVENT_REASON_STUCK,
    action: 'FailJob',
    note: `Failing Job: ${job.annotations[ANNOTATIONS.message] ?? ''}`,
    regarding: { apiVersion: 'batch/v1', kind: 'Job', name: job.name, namespace: job.namespace, uid: job.uid },
    ...(related ? { related: { apiVersion: 'v1', kind: 'Pod', name: related.name, namespace: job.namespace, uid: related.uid } } : {}),
  });
}

/**
 * The Event of a pod force-deleted (docs/contract.md "How a Job is failed", step 4; action
 * FailJob: it completes the failure),
 * named by Job and pod uid, so a repeat is a 409.
 */
export function forceDeletedPodEvent(
  job: Pick<JobView, 'namespace' | 'name' | 'uid' | 'annotations'>,
  pod: { name: string; uid: string },
  what: string,
  reporter: Reporter,
): EventsV1Event {
  const digest = createHash('sha256').update(`${job.uid}/force-delete/${pod.uid}`).digest('hex').slice(0, 16);
  return warningEvent(reporter, {
    name: `${job.name.slice(0, 230)}.${digest}`,
    reason: EVENT_REASON_STUCK,
    action: 'FailJob',
    note: `Failing Job: ${what}; ${job.annotations[ANNOTATIONS.message] ?? ''}`,
    regarding: { apiVersion: 'batch/v1', kind: 'Job', name: job.name, namespace: job.namespace, uid: job.uid },
    related: { apiVersion: 'v1', kind: 'Pod', name: pod.name, namespace: job.namespace, uid: pod.uid },
  });
}

/**
 * The Normal Event of a pod recreated because its cause is gone (docs/contract.md "Healing"),
 * named by Job uid, pod uid and image: a repeat (a retry, a sweep completing an earlier one) is a 409.
 */
export function healedPodEvent(
  job: Pick<JobView, 'namespace' | 'name' | 'uid'>,
  pod: { name: string; uid: string },
  image: string,
  note: string,
  reporter: Reporter,
): EventsV1Event {
  const digest = createHash('sha256').update(`${job.uid}/heal/${pod.uid}/${image}`).digest('hex').slice(0, 16);
  return {
    ...warningEvent(reporter, {
      name: `${job.name.slice(0, 230)}.${digest}`,
      reason: EVENT_REASON_HEALED,
      action: 'Heal',
      note,
      regarding: { apiVersion: 'batch/v1', kind: 'Job', name: job.name, namespace: job.namespace, uid: job.uid },
      related: { apiVersion: 'v1', kind: 'Pod', name: pod.name, namespace: job.namespace, uid: pod.uid },
    }),
    type: 'Normal',
  };
}

export function invalidPolicyEvent(
  configMap: { namespace: string; name: string; uid: string | undefined },
  problems: string[],
  reporter: Reporter,
): EventsV1Event {
  const summary = `Policy is invalid, so the sweeper took no action (${problems.length} problem${problems.length === 1 ? '' : 's'}): `;
  const event = warningEvent(reporter, {
    reason: EVENT_REASON_INVALID_POLICY,
    action: 'ValidatePolicy',
    note: summary + problems.join('; '),
    regarding: { apiVersion: 'v1', kind: 'ConfigMap', name: configMap.name, namespace: configMap.namespace, uid: configMap.uid },
  });
  return { ...event, metadata: { ...event.metadata, name: invalidPolicyEventName(configMap, problems) } };
}

/**
 * Same ConfigMap (uid) and same problems → same name, so a second sweep's create is a 409 and
 * the Event is emitted once per distinct problem set (again once the API server expires it).
 */
export function invalidPolicyEventName(configMap: { name: string; uid: string | undefined }, problems: readonly string[]): string {
  const hash = createHash('sha256')
    .update(`${configMap.uid ?? '(no uid)'}\n${problems.join('\n')}`)
    .digest('hex');
  return `${configMap.name.slice(0, 200)}.invalid-policy.${hash.slice(0, 16)}`;
}

type ObjectRef = NonNullable<EventsV1Event['regarding']> & { name: string; namespace: string };

/** A Warning Event in the namespace of the object it is about. */
export function warningEvent(
  reporter: Reporter,
  e: { name?: string; reason: string; action: string; note: string; regarding: ObjectRef; related?: ObjectRef },
): EventsV1Event {
  return {
    apiVersion: 'events.k8s.io/v1',
    kind: 'Event',
    metadata: { name: e.name ?? eventName(e.regarding.name), namespace: e.regarding.namespace },
    eventTime: new V1MicroTime(reporter.now.getTime()),
    type: 'Warning',
    reason: e.reason,
    action: e.action,
    note: truncate(e.note, NOTE_LIMIT),
    regarding: e.regarding,
    related: e.related,
    reportingController: REPORTING_CONTROLLER,
    reportingInstance: truncate(reporter.instance, 128),
  };
}

function eventName(objectName: string): string {
  return `${objectName.slice(0, 230)}.${randomBytes(8).toString('hex')}`;
}

/** The Warning Event on a CronJob the sweeper suspended, related to the last Job it counted. */
export function suspendedCronJobEvent(
  cronJob: { namespace: string; name: string; uid: string },
  lastJob: string | undefined,
  message: string,
  reporter: Reporter,
): EventsV1Event {
  return warningEvent(reporter, {
    reason: EVENT_REASON_STUCK,
    action: 'SuspendCronJob',
    note: message,
    regarding: { apiVersion: 'batch/v1', kind: 'CronJob', name: cronJob.name, namespace: cronJob.namespace, uid: cronJob.uid },
    related: lastJob ? { apiVersion: 'batch/v1', kind: 'Job', name: lastJob, namespace: cronJob.namespace } : undefined,
  });
}
