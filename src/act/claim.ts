// The claim: the annotations (with a claim id unique to the sweep) and the pending label that
// mark a Job as failed by the sweeper, written in one conditional patch; and taking it back.
import type { Decision } from '../judge/types.ts';
import { formatClaimMessage } from '../judge/claim-message.ts';
import type { KubeGateway } from '../kube/gateway.ts';
import { tryWrite, type WriteOutcome } from '../kube/write-outcome.ts';
import type { JobView } from '../model.ts';
import { ANNOTATIONS, LABELS } from '../policy/annotations.ts';
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
 * Claims the Job, conditional on the resourceVersion it was judged at; on the deadline path the
 * same patch fails it. When the answer is lost and the retries fail, a read tells whether it landed.
 */
export function claimJob(gateway: KubeGateway, d: Decision, now: Date, claim: string): Promise<WriteOutcome> {
  const job = d.jobView!;
  const metadata = {
    resourceVersion: job.resourceVersion,
    annotations: claimAnnotations(d, now, claim),
    labels: { [LABELS.pending]: 'true' },
  };
  const patch =
    d.mechanism === 'podFailurePolicy' ? { metadata } : { metadata, spec: { activeDeadlineSeconds: passedDeadlineSeconds(job, now) } };
  return tryWrite(
    'update',
    () => gateway.mergePatchJob(job.namespace, job.name, patch),
    async () => (await gateway.readJob(job.namespace, job.name)).metadata?.annotations?.[ANNOTATIONS.claim] === claim,
  );
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
