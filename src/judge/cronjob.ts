// CronJob suspension (policy `cronJobs.suspendAfter`): pure. The run of Jobs failed in a row is
// kept in annotations on the CronJob itself, because its Jobs do not outlive its history limits.
import type { CronJobView } from '../model.ts';
import { ANNOTATIONS, ignoredByAnnotation } from '../policy/annotations.ts';
import { compareText } from '../order.ts';

/** One Job of the CronJob failed by the sweeper in this sweep (or that a dry run would fail). */
export interface CronJobFailure {
  job: string;
  image: string;
  /** Orders failures within one sweep: oldest first. */
  stuckSince: Date;
}

/** The failures in a row counted so far, as read back from the CronJob's annotations. */
export interface Streak {
  count: number;
  image: string;
  /** The most recent Jobs counted, oldest first (at most JOBS_KEPT). */
  jobs: string[];
  /** status.lastSuccessfulTime when the run began ("none" when there was none). */
  lastSuccess: string;
}

export type CronJobVerdict =
  /** Leave the CronJob alone: nothing is written. */
  | { kind: 'skip'; detail: string; streak: Streak | undefined }
  /** Record the run so far (annotations only). */
  | { kind: 'count'; detail: string; streak: Streak; annotations: Record<string, string | null> }
  /** Suspend it: spec.suspend true and annotations; then the Event. */
  | { kind: 'suspend'; detail: string; streak: Streak; annotations: Record<string, string | null>; message: string };

/** Job names kept for the message and to never count one Job twice. */
export const JOBS_KEPT = 20;
const NO_SUCCESS = 'none';

export function readStreak(annotations: Record<string, string>): Streak | undefined {
  const count = Number(annotations[ANNOTATIONS.cronFailedInARow]);
  const image = annotations[ANNOTATIONS.cronFailedImage];
  const lastSuccess = annotations[ANNOTATIONS.cronLastSuccess];
  if (!Number.isInteger(count) || count < 1 || !image || lastSuccess === undefined) return undefined;
  const jobs = (annotations[ANNOTATIONS.cronFailedJobs] ?? '').split(',').filter(Boolean);
  return { count, image, jobs, lastSuccess };
}

/**
 * This sweep's failures of one CronJob's Jobs + the CronJob as read → what to write. The run
 * starts again when a Job of it succeeded since (lastSuccessfulTime moved), when the owner resumed
 * a CronJob the sweeper had suspended, or when the image changes.
 */
export function judgeCronJob(
  cronJob: CronJobView,
  failures: readonly CronJobFailure[],
  options: { suspendAfter: number; /** RFC 3339, for the annotations. */ at: string },
): CronJobVerdict {
  const previous = readStreak(cronJob.annotations);
  const skip = (detail: string): CronJobVerdict => ({ kind: 'skip', detail, streak: previous });
  if (options.suspendAfter <= 0) return skip('cronJobs.suspendAfter is 0 (off)');
  const ignore = ignoredByAnnotation(cronJob.annotations);
  if (ignore.ignored) return skip(ignore.warning ?? `annotation ${ANNOTATIONS.ignore}=true on the CronJob: never suspended`);
  const suspendedBySweeper = cronJob.annotations[ANNOTATIONS.suspendedAt] !== undefined;
  if (cronJob.suspended) {
    return skip(
      suspendedBySweeper
        ? `already suspended by imagepull-sweeper at ${cronJob.annotations[ANNOTATIONS.suspendedAt]}`
        : 'already suspended by its owner',
    );
  }
  if (failures.length === 0) return skip('no Job of it failed in this sweep');

  const lastSuccess = cronJob.lastSuccessfulTime ?? NO_SUCCESS;
  const resumed = suspendedBySweeper;
  let streak: Streak | undefined = previous && !resumed && previous.lastSuccess === lastSuccess ? previous : undefined;
  const counted: string[] = [];
  for (const f of [...failures].sort((a, b) => a.stuckSince.getTime() - b.stuckSince.getTime() || compareText(a.job, b.job))) {
    if (streak?.jobs.includes(f.job)) continue;
    if (!streak || streak.image !== f.image) streak = { count: 0, image: f.image, jobs: [], lastSuccess };
    streak = { ...streak, count: streak.count + 1, jobs: [...streak.jobs, f.job].slice(-JOBS_KEPT) };
    counted.push(f.job);
  }
  if (!streak || counted.length === 0) return skip(`Job(s) already counted: ${failures.map((f) => f.job).join(', ')}`);

  const why = resumed ? 'resumed by its owner since the last suspension; counting again: ' : '';
  const annotations: Record<string, string | null> = {
    [ANNOTATIONS.cronFailedInARow]: String(streak.count),
    [ANNOTATIONS.cronFailedImage]: streak.image,
    [ANNOTATIONS.cronFailedJobs]: streak.jobs.join(','),
    [ANNOTATIONS.cronLastSuccess]: streak.lastSuccess,
    [ANNOTATIONS.cronCountedAt]: options.at,
    ...(resumed ? { [ANNOTATIONS.suspendedAt]: null, [ANNOTATIONS.message]: null } : {}),
  };
  const run = `${streak.count} Job(s) in a row failed on image ${streak.image}`;
  if (streak.count < options.suspendAfter) {
    return { kind: 'count', detail: `${why}${run}; suspended at ${options.suspendAfter}`, streak, annotations };
  }
  const shown = streak.jobs.slice(-options.suspendAfter);
  const message =
    `Suspended by imagepull-sweeper: ${streak.count} Jobs in a row failed, stuck pulling image ${streak.image} ` +
    `(${shown.join(', ')}${streak.jobs.length > shown.length ? ' and earlier' : ''}). Fix the image, then resume: ` +
    `kubectl -n ${cronJob.namespace} patch cronjob ${cronJob.name} -p '{"spec":{"suspend":false}}'`;
  return {
    kind: 'suspend',
    detail: `${why}${run} (cronJobs.suspendAfter ${options.suspendAfter})`,
    streak,
    message,
    annotations: { ...annotations, [ANNOTATIONS.suspendedAt]: options.at, [ANNOTATIONS.message]: message },
  };
}
