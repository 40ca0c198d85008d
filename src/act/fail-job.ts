// Fails a Job. By its own condition: one conditional patch of its status claims it and adds the
// FailureTarget at once. Where the API server refuses that write (RBAC, a policy engine), a
// fallback: the deadline path (one conditional patch claims and fails it at once) or the
// podFailurePolicy path (claim, mark the pod, delete it; when a pod step fails the claim is
// released, or, if that fails too, left for the confirmation rule to complete). A delete that may
// have landed keeps the claim: the Job controller may be failing the Job, and only the claim
// brings its Event.
import type { Decision } from '../judge/types.ts';
import type { KubeGateway } from '../kube/gateway.ts';
import { failureText, tryWrite } from '../kube/write-outcome.ts';
import { chooseMechanism, type MechanismChoice } from '../judge/mechanism.ts';
import { isRefusal, type ApiFailure } from '../kube/errors.ts';
import { claimAnnotations, claimJob, FAILURE_REASON, releaseClaim } from './claim.ts';
import { failedJobEvent, type Reporter } from './events.ts';
import { failPod } from './fail-pod.ts';
import { notLanded, refusedIf, type WriteResult } from './write-result.ts';

const CLAIM_KEPT = 'claim kept, completed after confirmWithin';

export async function failJob(gateway: KubeGateway, judged: Decision, reporter: Reporter, claim: string): Promise<WriteResult> {
  const job = judged.jobView!;
  let d = judged;
  let claimed = await claimJob(gateway, d, reporter.now, claim);
  let refusal: ApiFailure | undefined;
  // Refused for good (it did not land): the same claim by the fallback. Never after an answer that may have been lost.
  if (!claimed.landed && d.mechanism === 'condition' && claimed.why === 'failed' && isRefusal(claimed.failure)) {
    refusal = claimed.failure;
    d = withFallback(d, refusal);
    claimed = await claimJob(gateway, d, reporter.now, claim);
  }
  if (!claimed.landed) {
    const result = notLanded(claimed);
    return result.kind === 'changed' && refusal ? { ...result, refusal } : result;
  }
  if (d.mechanism === 'podFailurePolicy') {
    const steps = await failPod(gateway, d, reporter.now);
    if (steps.kind === 'unknown') {
      return { kind: 'failed', error: `${failureText(steps.failure)}; the pod may be deleted: ${CLAIM_KEPT}` };
    }
    if (steps.kind !== 'done') {
      const released = await releaseClaim(gateway, job, claim);
      const claimState = released ? 'claim released' : CLAIM_KEPT;
      if (steps.kind === 'changed') {
        const freshPod = { podUid: d.podUid, stuck: steps.stuck };
        return { kind: 'changed', error: `pod ${d.pod} kept changing; ${claimState}`, freshPod, ...(refusal ? { refusal } : {}) };
      }
      return { kind: 'failed', error: `${failureText(steps.failure)}; ${claimState}`, ...refusedIf(steps.failure) };
    }
  }
  // The pending label stays until a sweep sees the Job finished. Writing the Job again now would
  // race the Job controller: its status update would conflict after it had already deleted the
  // pod, and its next pass counts that pod as a failure first (BackoffLimitExceeded, not the
  // deadline), so nothing more is written to the Job in this sweep.
  const claimedJob = { ...job, annotations: { ...job.annotations, ...claimAnnotations(d, reporter.now, claim) } };
  const event = failedJobEvent(claimedJob, reporter, { name: d.pod, uid: d.podUid });
  const written = await tryWrite('create', () => gateway.createEvent(job.namespace, event));
  const error = written.landed ? undefined : `Job failed, but its Event was not written: ${written.failure.message}`;
  return d === judged ? { kind: 'done', error } : { kind: 'done', error, decision: d };
}

/** The decision carried out by its fallback, saying why: its pod failure policy where that fits, else its deadline. */
export function withFallback(d: Decision, refusal: ApiFailure, choice: MechanismChoice = chooseMechanism(d.jobView!)): Decision {
  const shadowed =
    choice.why && choice.mechanism === 'activeDeadlineSeconds' && d.jobView!.podFailureRules.length > 0 ? `; ${choice.why}` : '';
  const fallback = `the status write was refused (${failureText(refusal)})${shadowed}`;
  const warning =
    `the FailureTarget status write was refused, so the Job was failed by ${choice.mechanism} and does not carry the reason ` +
    `${FAILURE_REASON}: grant patch on jobs/status and allow it in the admission guard (docs/security.md)`;
  return {
    ...d,
    mechanism: choice.mechanism,
    failJobCondition: choice.conditionType,
    fallback,
    warnings: [...d.warnings, warning],
  };
}
