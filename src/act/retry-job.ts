// A pending Job (docs/contract.md "How a Job is failed", steps 2 and 3): its never-started pods
// force-deleted; and what it still needs re-sent (mechanism set): its FailureTarget (conditional,
// idempotent), or, where that status write is refused, its deadline; once confirmWithin has
// passed, what was found of its pods and its Event if missing.
import type { V1Pod } from '@kubernetes/client-node';
import { jobPodsSelector } from '../attribute/job-view.ts';
import type { Decision } from '../judge/types.ts';
import { describeApiError, isRefusal } from '../kube/errors.ts';
import type { KubeGateway } from '../kube/gateway.ts';
import { tryWrite, type WriteOutcome } from '../kube/write-outcome.ts';
import { formatDuration } from '../policy/duration.ts';
import { passedDeadlineSeconds, resendFailureTarget } from './claim.ts';
import { failedJobEvent, type Reporter } from './events.ts';
import { withFallback } from './fail-job.ts';
import { forceDeletePods } from './force-delete.ts';
import { notLanded, type WriteResult } from './write-result.ts';

export async function retryJob(gateway: KubeGateway, d: Decision, reporter: Reporter): Promise<WriteResult> {
  const job = d.jobView!;
  const forced = await forceDeletePods(gateway, d, reporter);
  const steps = forced.done;
  const errors = forced.error ? [forced.error] : [];
  let carried = d;
  if (d.mechanism !== undefined || d.overdue) {
    const found = await gateway
      .listPods({ namespace: job.namespace, labelSelector: jobPodsSelector(job.uid), limit: 100 })
      .then((page) => describePodsFound(page.items, reporter.now))
      .catch((error: unknown) => `its pods could not be listed (${describeApiError(error).message})`);
    if (d.mechanism !== undefined) {
      let sent = await resend(gateway, d, reporter.now);
      if (!sent.landed && d.mechanism === 'condition' && sent.why === 'failed' && isRefusal(sent.failure)) {
        carried = withFallback(d, sent.failure, { mechanism: 'activeDeadlineSeconds', conditionType: undefined, why: '' });
        sent = await resend(gateway, carried, reporter.now);
      }
      if (!sent.landed) return notLanded(sent);
    }
    const event = failedJobEvent(job, reporter);
    const written = await tryWrite('create', () => gateway.createEvent(job.namespace, event));
    if (!written.landed) errors.push(`Job failed, but its Event was not written: ${written.failure.message}`);
    steps.push({ kind: 'found', text: `found ${found}` });
  }
  const error = errors.length > 0 ? errors.join('; ') : undefined;
  return carried === d ? { kind: 'done', steps, error } : { kind: 'done', steps, error, decision: carried };
}

/** Its FailureTarget, or its deadline (idempotent: a deadline already passed). */
function resend(gateway: KubeGateway, d: Decision, now: Date): Promise<WriteOutcome> {
  const job = d.jobView!;
  if (d.mechanism === 'condition') return resendFailureTarget(gateway, job, now);
  const deadline = { spec: { activeDeadlineSeconds: passedDeadlineSeconds(job, now) } };
  return tryWrite('update', () => gateway.mergePatchJob(job.namespace, job.name, deadline));
}

/** What a retry found of the Job's pods, e.g. `2 pod(s) terminating for 3m on node(s) n1`. Pure. */
export function describePodsFound(pods: readonly V1Pod[], now: Date): string {
  if (pods.length === 0) return 'no pods left';
  const parts: string[] = [];
  const terminating = pods.filter((p) => p.metadata?.deletionTimestamp);
  if (terminating.length > 0) {
    const since = terminating.map(
      (p) => new Date(p.metadata!.deletionTimestamp!).getTime() - (p.metadata?.deletionGracePeriodSeconds ?? 0) * 1000,
    );
    const longest = Math.max(0, Math.floor((now.getTime() - Math.min(...since)) / 1000));
    const nodes = [...new Set(terminating.map((p) => p.spec?.nodeName).filter(Boolean))];
    parts.push(
      `${terminating.length} pod(s) terminating for ${formatDuration(longest)}${nodes.length ? ` on node(s) ${nodes.join(', ')}` : ''}`,
    );
  }
  const byPhase = new Map<string, Set<string>>();
  for (const p of pods.filter((p) => !p.metadata?.deletionTimestamp)) {
    const phase = p.status?.phase ?? 'Unknown';
    const reasons = byPhase.get(phase) ?? new Set<string>();
    for (const s of [...(p.status?.initContainerStatuses ?? []), ...(p.status?.containerStatuses ?? [])]) {
      if (s.state?.waiting?.reason) reasons.add(s.state.waiting.reason);
    }
    byPhase.set(phase, reasons);
  }
  for (const [phase, reasons] of byPhase) {
    const n = pods.filter((p) => !p.metadata?.deletionTimestamp && (p.status?.phase ?? 'Unknown') === phase).length;
    parts.push(`${n} pod(s) ${phase}${reasons.size ? ` (${[...reasons].join(', ')})` : ''}`);
  }
  return parts.join('; ');
}
