// Fails a Job. Deadline path: one conditional patch claims and fails it at once. podFailurePolicy
// path: claim, mark the pod, delete it; when a pod step fails the claim is released (or, if that
// fails too, left for the confirmation rule to complete). A delete that may have landed keeps the
// claim: the Job controller may be failing the Job, and only the claim brings its Event.
import type { Decision } from '../judge/types.ts';
import type { KubeGateway } from '../kube/gateway.ts';
import { failureText, tryWrite } from '../kube/write-outcome.ts';
import { claimAnnotations, claimJob, releaseClaim } from './claim.ts';
import { failedJobEvent, type Reporter } from './events.ts';
import { failPod } from './fail-pod.ts';
import { notLanded, type WriteResult } from './write-result.ts';

const CLAIM_KEPT = 'claim kept, completed after confirmWithin';

export async function failJob(gateway: KubeGateway, d: Decision, reporter: Reporter, claim: string): Promise<WriteResult> {
  const job = d.jobView!;
  const claimed = await claimJob(gateway, d, reporter.now, claim);
  if (!claimed.landed) return notLanded(claimed);
  if (d.mechanism === 'podFailurePolicy') {
    const steps = await failPod(gateway, d, reporter.now);
    if (steps.kind === 'unknown') {
      return { kind: 'failed', error: `${failureText(steps.failure)}; the pod may be deleted: ${CLAIM_KEPT}` };
    }
    if (steps.kind !== 'done') {
      const released = await releaseClaim(gateway, job, claim);
      const claimState = released ? 'claim released' : CLAIM_KEPT;
      if (steps.kind === 'changed') {
        return { kind: 'changed', error: `pod ${d.pod} kept changing; ${claimState}`, freshPod: { podUid: d.podUid, stuck: steps.stuck } };
      }
      return { kind: 'failed', error: `${failureText(steps.failure)}; ${claimState}` };
    }
  }
  // The pending label stays until a sweep sees the Job finished. Writing the Job again now would
  // race the Job controller: its status update would conflict after it had already deleted the
  // pod, and its next pass counts that pod as a failure first (BackoffLimitExceeded, not the
  // deadline), so nothing more is written to the Job in this sweep.
  const claimedJob = { ...job, annotations: { ...job.annotations, ...claimAnnotations(d, reporter.now, claim) } };
  const event = failedJobEvent(claimedJob, reporter, { name: d.pod, uid: d.podUid });
  const written = await tryWrite('create', () => gateway.createEvent(job.namespace, event));
  return { kind: 'done', error: written.landed ? undefined : `Job failed, but its Event was not written: ${written.failure.message}` };
}
