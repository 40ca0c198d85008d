// CronJob suspension, the writes: after the Jobs are failed, each CronJob that owns some of
// them gets its run count recorded (annotations), and is suspended once the run is long enough.
import { toCronJobView } from '../attribute/cronjob-view.ts';
import { mapBounded } from '../concurrency.ts';
import { judgeCronJob, type CronJobFailure, type CronJobVerdict } from '../judge/cronjob.ts';
import type { KubeGateway } from '../kube/gateway.ts';
import { failureText, tryRead, tryWrite } from '../kube/write-outcome.ts';
import { CRONJOB_OUTCOME_OF_VERDICT as OUTCOME, type CronJobOutcome } from '../outcomes.ts';
import type { ActResult, CronJobResult } from '../judge/types.ts';
import { rfc3339Seconds } from './claim.ts';
import { suspendedCronJobEvent } from './events.ts';

export { CRONJOB_OUTCOMES, type CronJobOutcome } from '../outcomes.ts';

export type { CronJobResult } from '../judge/types.ts';

export interface CronJobActOptions {
  suspendAfter: number;
  concurrency: number;
  now: Date;
  instance: string;
  maxConflicts?: number;
}

/** The CronJobs behind this sweep's failed Jobs: count, and suspend. */
export async function actOnCronJobs(
  gateway: KubeGateway,
  results: readonly ActResult[],
  options: CronJobActOptions,
): Promise<CronJobResult[]> {
  if (options.suspendAfter <= 0) return [];
  const groups = new Map<string, { namespace: string; cronJob: string; uid: string | undefined; failures: CronJobFailure[] }>();
  for (const { decision: d, outcome } of results) {
    if (outcome !== 'failed' || !d.cronJob || !d.job) continue;
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
  const skipped = (detail: string): CronJobResult => ({
    ...base,
    image: undefined,
    failedInARow: undefined,
    jobs: [],
    outcome: OUTCOME.skip.live,
    detail,
  });
  const failed = (failure: Parameters<typeof failureText>[0]): CronJobResult => ({
    ...base,
    image: undefined,
    failedInARow: undefined,
    jobs: g.failures.map((f) => f.job),
    outcome: 'error',
    detail: 'could not record or suspend',
    error: failureText(failure),
  });
  for (let conflicts = 0; ; conflicts += 1) {
    const read = await tryRead(async () => toCronJobView(await gateway.readCronJob(g.namespace, g.cronJob)));
    if (!read.found) return read.gone ? skipped('CronJob no longer exists') : failed(read.failure);
    const view = read.value;
    if (g.uid !== undefined && view.uid !== g.uid) return skipped('CronJob was replaced (uid differs)');
    const verdict = judgeCronJob(view, g.failures, { suspendAfter: options.suspendAfter, at });
    if (verdict.kind === 'skip') return result(verdict, OUTCOME.skip.live);
    const patch = {
      metadata: { resourceVersion: view.resourceVersion, annotations: verdict.annotations },
      ...(verdict.kind === 'suspend' ? { spec: { suspend: true } } : {}),
    };
    const patched = await tryWrite('update', () => gateway.mergePatchCronJob(g.namespace, g.cronJob, patch));
    if (!patched.landed) {
      if (patched.why === 'gone') return skipped('CronJob no longer exists');
      if (patched.why === 'conflict' && conflicts < maxConflicts) continue;
      return failed(patched.failure);
    }
    if (verdict.kind === 'count') return result(verdict, OUTCOME.count.live);
    const event = suspendedCronJobEvent(
      { namespace: g.namespace, name: g.cronJob, uid: view.uid },
      verdict.streak.jobs.at(-1),
      verdict.message,
      {
        instance: options.instance,
        now: options.now,
      },
    );
    const written = await tryWrite('create', () => gateway.createEvent(g.namespace, event));
    if (written.landed) return result(verdict, OUTCOME.suspend.live);
    return result(verdict, OUTCOME.suspend.live, `CronJob suspended, but its Event was not written: ${written.failure.message}`);
  }
}
