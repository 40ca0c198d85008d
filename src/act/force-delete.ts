// SPEC "How a Job is failed", step 4, the writes: each planned pod deleted with grace period 0,
// its uid and resourceVersion as preconditions (a container that started after the pod was read
// changes the pod: 409, left for the next sweep to judge again), then its Event. Safe to repeat:
// a pod already gone (404) is done; the Event's name is fixed.
import type { Decision } from '../judge/types.ts';
import { describeTarget, type ForceDeleteTarget } from '../judge/force-delete.ts';
import { describeApiError } from '../kube/errors.ts';
import type { KubeGateway } from '../kube/gateway.ts';
import { forceDeletedPodEvent, type Reporter } from './events.ts';

export interface ForceDeleteResult {
  /** One phrase per planned pod, for the audit line. */
  done: string[];
  /** What failed, when a delete or an Event did. */
  error: string | undefined;
}

/** What a dry run would do. */
export function wouldForceDelete(targets: readonly ForceDeleteTarget[]): string[] {
  return targets.map((t) => `would force-delete ${describeTarget(t)}`);
}

export async function forceDeletePods(gateway: KubeGateway, d: Decision, reporter: Reporter): Promise<ForceDeleteResult> {
  const job = d.jobView!;
  const done: string[] = [];
  const errors: string[] = [];
  for (const target of d.forceDelete ?? []) {
    const what = `force-deleted ${describeTarget(target)}`;
    try {
      await gateway.deletePod(job.namespace, target.pod, target.uid, target.resourceVersion, { gracePeriodSeconds: 0 });
    } catch (error) {
      const failure = describeApiError(error);
      if (failure.status === 404) done.push(`pod ${target.pod} already gone`);
      else if (failure.status === 409) done.push(`pod ${target.pod} changed since it was read (another pod, or a new status), left for the next sweep`);
      else errors.push(`could not force-delete pod ${target.pod}: ${failure.reason}: ${failure.message}`);
      continue;
    }
    done.push(what);
    try {
      await gateway.createEvent(job.namespace, forceDeletedPodEvent(job, { name: target.pod, uid: target.uid }, what, reporter));
    } catch (error) {
      const failure = describeApiError(error);
      if (failure.status !== 409) errors.push(`pod ${target.pod} force-deleted, but its Event was not written: ${failure.message}`);
    }
  }
  return { done, error: errors.length > 0 ? errors.join('; ') : undefined };
}
