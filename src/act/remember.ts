// A Job Kueue queues, within its grace: what it is stuck on and since when, written on the Job
// once per cause and admission (judge/queue.ts), with the label that finds it again once Kueue
// has suspended it. Conditional on the Job as judged: a Job that changed is judged again next sweep.
import type { Decision } from '../judge/types.ts';
import type { KubeGateway } from '../kube/gateway.ts';
import { failureText, tryWrite } from '../kube/write-outcome.ts';
import { ANNOTATIONS, LABELS, PENDING } from '../policy/annotations.ts';

/** Resolves to what went wrong, or undefined (written, or the Job changed or is gone). */
export async function rememberQueued(gateway: KubeGateway, d: Decision): Promise<string | undefined> {
  const job = d.jobView;
  if (!job || d.remember === undefined) return undefined;
  const patch = {
    metadata: {
      resourceVersion: job.resourceVersion,
      annotations: { [ANNOTATIONS.stuck]: d.remember },
      labels: { [LABELS.pending]: PENDING.queued },
    },
  };
  const written = await tryWrite('update', () => gateway.mergePatchJob(job.namespace, job.name, patch));
  if (written.landed || written.why !== 'failed') return undefined;
  return `what it is stuck on could not be kept on the Job (${failureText(written.failure)}): its next admission gets a full grace`;
}
