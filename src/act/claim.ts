// The claim: the annotations (with a claim id unique to the sweep) and the pending label that
// mark a Job as failed by the sweeper, written in one conditional patch; and taking it back.
import type { Decision } from '../judge/types.ts';
import { formatClaimMessage } from '../judge/claim-message.ts';
import { describeApiError, isRefusal } from '../kube/errors.ts';
import type { KubeGateway } from '../kube/gateway.ts';
import { tryWrite, type WriteOutcome } from '../kube/write-outcome.ts';
import type { JobView } from '../model.ts';
import { ANNOTATIONS, LABELS, PENDING } from '../policy/annotations.ts';
import { truncate } from '../text.ts';

/** The claim's annotations: who failed the Job (the claim id), when, why. */
export function claimAnnotations(d: Decision, now: Date, claim: string): Record<string, string> {
  return {
    [ANNOTATIONS.failedAt]: rfc3339Seconds(now),
    [ANNOTATIONS.reason]: d.reason,
    [ANNOTATIONS.message]: truncate(formatClaimMessage(d), 4096),
    [ANNOTATIONS.claim]: claim,
  };
}

/**
 * Claims the Job, conditional on the resourceVersion it was judged at, and fails it in the same
 * write: by its own condition, one patch of its status subresource (which keeps the patch's
 * metadata: the claim); on the deadline path, one merge patch with the deadline. On the
 * podFailurePolicy path the claim comes first and the pod steps follow. When the answer is lost
 * and the retries fail, a read tells whether it landed.
 */
export function claimJob(gateway: KubeGateway, d: Decision, now: Date, claim: string): Promise<WriteOutcome> {
  const job = d.jobView!;
  // A queued Job's closed admission rides along (judge/queued.ts).
  const remembered = d.remember === undefined ? {} : { [ANNOTATIONS.stuck]: d.remember };
  const metadata = {
    resourceVersion: job.resourceVersion,
    annotations: { ...claimAnnotations(d, now, claim), ...remembered },
    labels: { [LABELS.pending]: PENDING.claimed },
  };
  const { namespace, name } = job;
  const send =
    d.mechanism === 'condition'
      ? () => gateway.patchJobStatus(namespace, name, { metadata, status: { conditions: [failureTarget(formatClaimMessage(d), now)] } })
      : () =>
          gateway.mergePatchJob(
            namespace,
            name,
            d.mechanism === 'podFailurePolicy'
              ? { metadata }
              : { metadata, spec: { activeDeadlineSeconds: passedDeadlineSeconds(job, now) } },
          );
  // A refusal (RBAC, admission) is an answer: nothing to read back.
  let refused = false;
  const write = () =>
    send().catch((error: unknown) => {
      refused = isRefusal(describeApiError(error));
      throw error;
    });
  const landed = async () => !refused && (await gateway.readJob(namespace, name)).metadata?.annotations?.[ANNOTATIONS.claim] === claim;
  return tryWrite('update', write, landed);
}

/** The Job condition reason of a Job the sweeper failed (docs/contract.md "Names"). */
export const FAILURE_REASON = 'ImagePullStuck';
/** What a condition's message may hold (metav1.Condition's limit, which Kueue's Workload copies it into). */
export const CONDITION_MESSAGE_LIMIT = 32_768;
/** Starts every message the sweeper puts in a Job's condition: what a JobSet failurePolicy rule matches (docs/jobset.md). */
export const CONDITION_MESSAGE_PREFIX = 'imagepull-sweeper: ';

/** The `FailureTarget` condition: the Job controller removes the Job's pods and sets `Failed` with this reason and message. */
export function failureTarget(message: string, now: Date): object {
  const at = rfc3339Seconds(now);
  return {
    type: 'FailureTarget',
    status: 'True',
    reason: FAILURE_REASON,
    message: truncate(`${CONDITION_MESSAGE_PREFIX}${message}`, CONDITION_MESSAGE_LIMIT),
    lastTransitionTime: at,
    lastProbeTime: at,
  };
}

/**
 * Adds the `FailureTarget` to a Job already claimed (the confirmation rule re-sends it), from the
 * message its claim recorded, conditional on the Job as it was read.
 */
export function resendFailureTarget(gateway: KubeGateway, job: JobView, now: Date): Promise<WriteOutcome> {
  const patch = {
    metadata: { resourceVersion: job.resourceVersion },
    status: { conditions: [failureTarget(job.annotations[ANNOTATIONS.message] ?? '', now)] },
  };
  return tryWrite('update', () => gateway.patchJobStatus(job.namespace, job.name, patch));
}

/** Takes the claim back, only if it is still this sweep's (a JSON patch `test`). Resolves to whether it is no longer held. */
export async function releaseClaim(gateway: KubeGateway, job: JobView, claim: string): Promise<boolean> {
  const path = (kind: 'annotations' | 'labels', key: string) => `/metadata/${kind}/${key.replaceAll('~', '~0').replaceAll('/', '~1')}`;
  const keys = [ANNOTATIONS.failedAt, ANNOTATIONS.reason, ANNOTATIONS.message, ANNOTATIONS.claim];
  const operations = [
    { op: 'test', path: path('annotations', ANNOTATIONS.claim), value: claim },
    ...keys.map((key) => ({ op: 'remove', path: path('annotations', key) })),
    { op: 'remove', path: path('labels', LABELS.pending) },
  ];
  const released = await tryWrite(
    'update',
    () => gateway.jsonPatchJob(job.namespace, job.name, operations),
    async () => (await gateway.readJob(job.namespace, job.name)).metadata?.annotations?.[ANNOTATIONS.claim] !== claim,
    { confirmConflicts: true },
  );
  return released.landed;
}

/** An activeDeadlineSeconds that has already run out, counted from the Job's start. */
export function passedDeadlineSeconds(job: Pick<JobView, 'startTime'>, now: Date): number {
  if (!job.startTime) return 1;
  return Math.max(1, Math.floor((now.getTime() - job.startTime.getTime()) / 1000));
}

export function rfc3339Seconds(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}
