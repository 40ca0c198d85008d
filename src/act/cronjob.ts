// CronJob suspension, the writes: after the Jobs are failed, each CronJob that owns some of
// them gets its run count recorded (annotations), and is suspended once the run is long enough.
import { toCronJobView } from '../attribute/cronjob-view.ts';
import { mapBounded } from '../concurrency.ts';
import { judgeCronJob, type CronJobFailure, type CronJobVerdict } from '../judge/cronjob.ts';
import { describeApiError } from '../kube/errors.ts';
import type { KubeGateway } from '../kube/gateway.ts';
import type { ActResult } from './act.ts';
import { rfc3339Seconds } from './act.ts';
import { suspendedCronJobEvent } from './events.ts';

export const CRONJOB_OUTCOMES = ['suspended', 'counted', 'skipped', 'error', 'would-suspend', 'would-count'] as const;
export type CronJobOutcome = (typeof CRONJOB_OUTCOMES)[number];

export interface CronJobResult {
  namespace: string;
  cronJob: string;
  /** The image of the run, and how many Jobs in a row failed on it (after this sweep). */
  image: string | undefined;
  failedInARow: number | undefined;
  /** Jobs of the run (most recent last). */
  jobs: string[];
  outcome: CronJobOutcome;
  detail: string;
  error: string | undefined;
}

export interface CronJobActOptions {
  dryRun: boolean;
  suspendAfter: number;
  concurrency: number;
  now: Date;
  instance: string;
  maxConflicts?: number;
}

/** The CronJobs behind this sweep's failed Jobs (would-fail in a dry run): count, and suspend. */
export async function actOnCronJobs(gateway: KubeGateway, results: readonly ActResult[], options: CronJobActOptions): Promise<CronJobResult[]> {
  if (options.suspendAfter <= 0) return [];
  const failedOutcome = options.dryRun ? 'would-fail' : 'failed';
  const groups = new Map<string, { namespace: string; cronJob: string; uid: string | undefined; failures: CronJobFailure[] }>();
  for (const { decision: d, outcome } of results) {
    if (outcome !== failedOutcome || !d.cronJob || !d.job) continue;
    const key = `${d.namespace}/${d.cronJob}`;
    const group = groups.get(key) ?? { namespace: d.namespace, cronJob: d.cronJob, uid: d.jobView?.cronJobUid, failures: [] };
    group.failures.push({ job: d.job, image: d.image, stuckSince: d.stuckSince });
    groups.set(key, group);
  }
  return mapBounded([...groups.values()], options.concurrency, (g) => actOnCronJob(gateway, g, options));
}

async function actOnCronJob(
  gateway: KubeGateway,
  g: { namespace: string; cronJob: string; uid: string | undefined; failures: CronJobFailure[] },
  options: CronJobActOptions,
): Promise<CronJobResult> {
  const base = { namespace: g.namespace, cronJob: g.cronJob, error: undefined };
  const result = (verdict: CronJobVerdict, outcome: CronJobOutcome, error?: string): CronJobResult => ({
    ...base,
    image: verdict.streak?.image,
    failedInARow: verdict.streak?.count,
    jobs: verdict.streak?.jobs ?? [],
    outcome,
    detail: verdict.detail,
    error,
  });
  const at = rfc3339Seconds(options.now);
  const maxConflicts = options.maxConflicts ?? 3;
  for (let conflicts = 0; ; conflicts += 1) {
    let verdict: CronJobVerdict;
    let uid: string;
    try {
      const view = toCronJobView(await gateway.readCronJob(g.namespace, g.cronJob));
      if (g.uid !== undefined && view.uid !== g.uid) {
        return { ...base, image: undefined, failedInARow: undefined, jobs: [], outcome: 'skipped', detail: 'CronJob was replaced (uid differs)' };
      }
      uid = view.uid;
      verdict = judgeCronJob(view, g.failures, { suspendAfter: options.suspendAfter, at });
      if (verdict.kind === 'skip') return result(verdict, 'skipped');
      if (options.dryRun) return result(verdict, verdict.kind === 'suspend' ? 'would-suspend' : 'would-count');
      const patch = {
        metadata: { resourceVersion: view.resourceVersion, annotations: verdict.annotations },
        ...(verdict.kind === 'suspend' ? { spec: { suspend: true } } : {}),
      };
      await gateway.mergePatchCronJob(g.namespace, g.cronJob, patch);
    } catch (error) {
      const failure = describeApiError(error);
      if (failure.status === 404) {
        return { ...base, image: undefined, failedInARow: undefined, jobs: [], outcome: 'skipped', detail: 'CronJob no longer exists' };
      }
      if (failure.status === 409 && conflicts < maxConflicts) continue;
      return { ...base, image: undefined, failedInARow: undefined, jobs: g.failures.map((f) => f.job), outcome: 'error', detail: 'could not record or suspend', error: `${failure.reason}: ${failure.message}` };
    }
    if (verdict.kind === 'count') return result(verdict, 'counted');
    const event = suspendedCronJobEvent({ namespace: g.namespace, name: g.cronJob, uid }, verdict.streak.jobs.at(-1), verdict.message, {
      instance: options.instance,
      now: options.now,
    });
    try {
      await gateway.createEvent(g.namespace, event);
      return result(verdict, 'suspended');
    } catch (error) {
      return result(verdict, 'suspended', `CronJob suspended, but its Event was not written: ${describeApiError(error).message}`);
    }
  }
}
