// A stuck pod under an `owners` rule (docs/contract.md, "Owners other than a Job"): failed by
// lowering its own spec.activeDeadlineSeconds so that the deadline has passed (the kubelet then
// fails it, DeadlineExceeded, whoever owns it), with the annotations and Event a Job would get;
// or, report only, its Event and `reported-at`. Each patch is conditional on the pod as read
// just before, so a pod that started, recovered or was replaced in between is never touched.
import { createHash } from 'node:crypto';
import type { V1Pod } from '@kubernetes/client-node';
import { findStuckContainers, toDate } from '../classify/index.ts';
import { formatClaimMessage } from '../judge/claim-message.ts';
import { containerThatRan } from '../judge/force-delete.ts';
import { standDown } from '../judge/stand-down.ts';
import type { ActResult, Decision } from '../judge/types.ts';
import { describeApiError } from '../kube/errors.ts';
import type { KubeGateway } from '../kube/gateway.ts';
import { failureText, tryWrite } from '../kube/write-outcome.ts';
import { OUTCOME_OF_PLAN } from '../outcomes.ts';
import { ANNOTATIONS } from '../policy/annotations.ts';
import { rfc3339Seconds } from './claim.ts';
import { truncate } from '../text.ts';
import { EVENT_REASON_STUCK, warningEvent, type Reporter } from './events.ts';

const ATTEMPTS = 3;

/** The deadline, counted from the pod's start, that has already passed (never raised: the API server refuses that). */
export function passedPodDeadline(pod: V1Pod, now: Date): number {
  const start = toDate(pod.status?.startTime);
  const passed = start ? Math.max(1, Math.floor((now.getTime() - start.getTime()) / 1000)) : 1;
  const current = pod.spec?.activeDeadlineSeconds;
  return typeof current === 'number' && current > 0 ? Math.min(current, passed) : passed;
}

/** The Event on the pod, named by pod uid and claim: a second write of it is a 409, not a second Event. */
export function stuckPodEvent(d: Decision, action: 'FailPod' | 'Report', reporter: Reporter, claim: string) {
  const digest = createHash('sha256').update(`${d.podUid}/${action}/${claim}`).digest('hex').slice(0, 16);
  const verb = action === 'FailPod' ? 'Failing pod' : 'Pod stuck (report only)';
  return warningEvent(reporter, {
    name: `${d.pod.slice(0, 230)}.${digest}`,
    reason: EVENT_REASON_STUCK,
    action,
    note: `${verb}: ${formatClaimMessage(d)}`,
    regarding: { apiVersion: 'v1', kind: 'Pod', name: d.pod, namespace: d.namespace, uid: d.podUid },
  });
}

async function readPod(gateway: KubeGateway, d: Decision): Promise<V1Pod | 'gone' | { error: string }> {
  try {
    const pod = await gateway.readPod(d.namespace, d.pod);
    return pod.metadata?.uid === d.podUid ? pod : 'gone';
  } catch (error) {
    const f = describeApiError(error);
    return f.status === 404 ? 'gone' : { error: `${f.reason}: ${f.message}` };
  }
}

/** Why this pod, as read now, must not be written; undefined when it still is what was judged. */
function changedSince(pod: V1Pod, d: Decision): string | undefined {
  if (pod.metadata?.deletionTimestamp) return 'pod is being deleted';
  const annotations = pod.metadata?.annotations ?? {};
  if (d.plan === 'fail' && annotations[ANNOTATIONS.failedAt] !== undefined) return `already failed at ${annotations[ANNOTATIONS.failedAt]}`;
  if (!findStuckContainers(pod).some((c) => c.container === d.container)) return 'pod no longer stuck';
  // What the guard allows (docs/security.md): a workload that has started is never cut short here.
  const ran = containerThatRan(pod);
  if (ran !== undefined) return `${ran} of the pod has run: an owners rule fails only pods none of whose containers ever ran`;
  return undefined;
}

/** Carries out a fail or report decision on a pod without a Job. */
export async function actOnOwnedPod(gateway: KubeGateway, d: Decision, reporter: Reporter, claim: string): Promise<ActResult> {
  /** An error is the action's failure, unless `partly`: done, but a later part (its Event) failed. */
  const result = (decision: Decision, error?: string, partly = false): ActResult => ({
    decision,
    outcome: error && !partly ? 'error' : OUTCOME_OF_PLAN[decision.plan].live,
    error,
  });
  for (let attempt = 1; ; attempt += 1) {
    const pod = await readPod(gateway, d);
    if (pod === 'gone') return result(standDown(d, 'skip', 'pod no longer exists'));
    if ('error' in pod) return result(d, `could not read the pod: ${pod.error}`);
    const changed = changedSince(pod, d);
    if (changed) return result(standDown(d, 'skip', changed));
    const annotations =
      d.plan === 'fail'
        ? {
            [ANNOTATIONS.failedAt]: rfc3339Seconds(reporter.now),
            [ANNOTATIONS.reason]: d.reason,
            [ANNOTATIONS.message]: truncate(formatClaimMessage(d), 4096),
            [ANNOTATIONS.claim]: claim,
          }
        : { [ANNOTATIONS.reportedAt]: rfc3339Seconds(reporter.now) };
    if (d.plan === 'report' && pod.metadata?.annotations?.[ANNOTATIONS.reportedAt] !== undefined) return result(d);
    if (d.plan === 'report') {
      const event = await tryWrite('create', () => gateway.createEvent(d.namespace, stuckPodEvent(d, 'Report', reporter, claim)));
      if (!event.landed) return result(d, failureText(event.failure));
    }
    const metadata = { resourceVersion: pod.metadata?.resourceVersion, annotations };
    const patch = d.plan === 'fail' ? { metadata, spec: { activeDeadlineSeconds: passedPodDeadline(pod, reporter.now) } } : { metadata };
    const readBack = async () => {
      const now = await readPod(gateway, d);
      return typeof now === 'object' && !('error' in now) && now.metadata?.annotations?.[ANNOTATIONS.claim] === claim;
    };
    const written = await tryWrite(
      'update',
      () => gateway.mergePatchPod(d.namespace, d.pod, patch),
      d.plan === 'fail' ? readBack : undefined,
    );
    if (!written.landed && written.why === 'conflict' && attempt < ATTEMPTS) continue;
    if (!written.landed && written.why === 'gone') return result(standDown(d, 'skip', 'pod no longer exists'));
    if (!written.landed) return result(d, failureText(written.failure));
    if (d.plan === 'report') return result(d);
    const event = await tryWrite('create', () => gateway.createEvent(d.namespace, stuckPodEvent(d, 'FailPod', reporter, claim)));
    return result(d, event.landed ? undefined : `pod failed, but its Event was not written: ${failureText(event.failure)}`, true);
  }
}
