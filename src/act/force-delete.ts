// Force-deleting the never-started pods of a pending Job (docs/contract.md "How a Job is failed",
// step 4): each planned pod deleted with grace period 0, its uid and resourceVersion as
// preconditions (a container that started after the pod was read changes the pod: 409, left for
// the next sweep to judge again), then its Event. Safe to repeat: a pod already gone (404) is
// done; the Event's name is fixed.
import type { Decision } from '../judge/types.ts';
import { describeTarget } from '../judge/force-delete.ts';
import type { KubeGateway } from '../kube/gateway.ts';
import { failureText, tryWrite } from '../kube/write-outcome.ts';
import type { ActStep } from '../judge/types.ts';
import { forceDeletedPodEvent, type Reporter } from './events.ts';

export interface ForceDeleteResult {
  /** One step per planned pod, for the audit line. */
  done: ActStep[];
  /** What failed, when a delete or an Event did. */
  error: string | undefined;
}

export async function forceDeletePods(gateway: KubeGateway, d: Decision, reporter: Reporter): Promise<ForceDeleteResult> {
  const job = d.jobView!;
  const done: ActStep[] = [];
  const errors: string[] = [];
  for (const target of d.forceDelete ?? []) {
    const pod = describeTarget(target);
    const deleted = await tryWrite('delete', () =>
      gateway.deletePod(job.namespace, target.pod, target.uid, target.resourceVersion, { gracePeriodSeconds: 0 }),
    );
    if (!deleted.landed) {
      if (deleted.why === 'conflict')
        done.push({
          kind: 'found',
          text: `pod ${target.pod} changed since it was read (another pod, or a new status), left for the next sweep`,
        });
      else errors.push(`could not force-delete pod ${target.pod}: ${failureText(deleted.failure)}`);
      continue;
    }
    if (deleted.already) {
      done.push({ kind: 'found', text: `pod ${target.pod} already gone` });
      continue;
    }
    done.push({ kind: 'force-deleted', pod });
    const event = forceDeletedPodEvent(job, { name: target.pod, uid: target.uid }, `force-deleted ${pod}`, reporter);
    const written = await tryWrite('create', () => gateway.createEvent(job.namespace, event));
    if (!written.landed) errors.push(`pod ${target.pod} force-deleted, but its Event was not written: ${written.failure.message}`);
  }
  return { done, error: errors.length > 0 ? errors.join('; ') : undefined };
}
