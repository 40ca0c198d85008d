// Pending Jobs that have finished: a Failed one gets its Event if the claiming sweep could not
// write it, then the pending label goes.
import { mapBounded } from '../concurrency.ts';
import type { KubeGateway } from '../kube/gateway.ts';
import { tryWrite } from '../kube/write-outcome.ts';
import type { JobView } from '../model.ts';
import { ANNOTATIONS, LABELS } from '../policy/annotations.ts';
import { failedJobEvent, type Reporter } from './events.ts';

export interface SettledJob {
  job: JobView;
  /** The FailJob Event was missing and has now been written. */
  eventWritten: boolean;
  error: string | undefined;
}

/** Nothing starts once `signal` is aborted. */
export function settleFinished(
  gateway: KubeGateway,
  jobs: readonly JobView[],
  options: { concurrency: number; reporter: Reporter; signal?: AbortSignal },
): Promise<SettledJob[]> {
  return mapBounded(jobs, options.concurrency, async (job): Promise<SettledJob> => {
    if (options.signal?.aborted) return { job, eventWritten: false, error: undefined };
    let eventWritten = false;
    if (job.failed && job.annotations[ANNOTATIONS.failedAt] !== undefined) {
      const event = failedJobEvent(job, options.reporter);
      const written = await tryWrite('create', () => gateway.createEvent(job.namespace, event));
      if (!written.landed) return { job, eventWritten, error: `its Event could not be written: ${written.failure.message}` };
      eventWritten = !written.already;
    }
    const unlabel = { metadata: { labels: { [LABELS.pending]: null } } };
    const dropped = await tryWrite('update', () => gateway.mergePatchJob(job.namespace, job.name, unlabel));
    // Gone: its owner deleted it since the list (a JobSet restarting its Jobs), and the label with it.
    if (dropped.landed || dropped.why === 'gone') return { job, eventWritten, error: undefined };
    return { job, eventWritten, error: `its ${LABELS.pending} label could not be removed: ${dropped.failure.message}` };
  });
}
