import type { JobView, Outcome, Plan } from '../model.ts';
import type { Decision } from '../judge/types.ts';
import { describeApiError } from '../kube/errors.ts';
import type { KubeGateway } from '../kube/gateway.ts';
import { mapBounded } from '../concurrency.ts';
import { toJobView } from '../attribute/job-view.ts';
import { ANNOTATIONS } from '../policy/annotations.ts';
import { describeStuck, stuckJobEvent, truncate } from './events.ts';

export interface ActOptions {
  dryRun: boolean;
  concurrency: number;
  now: Date;
  instance: string;
  /** Judges one Job again from a fresh read, after a write conflicted. */
  rejudge: (decision: Decision, fresh: JobView) => Decision;
  /** How many times a conflicting Job is re-read and re-judged. */
  maxConflicts?: number;
}

export interface ActResult {
  decision: Decision;
  outcome: Outcome;
  /** What went wrong, when an action (or part of one) failed. */
  error: string | undefined;
}

const OUTCOME_OF_PLAN: Record<Plan, Outcome> = {
  fail: 'failed',
  report: 'reported',
  skip: 'skipped',
  defer: 'deferred',
  error: 'error',
};

/** A dry run writes nothing: what it would have written is `would-*`. */
const DRY_RUN_OUTCOME_OF_PLAN: Record<Plan, Outcome> = {
  fail: 'would-fail',
  report: 'would-report',
  skip: 'skipped',
  defer: 'deferred',
  error: 'error',
};

/** Carries out each decision's plan with bounded concurrency; one failing Job never stops the others. */
export async function act(gateway: KubeGateway, decisions: readonly Decision[], options: ActOptions): Promise<ActResult[]> {
  return mapBounded(decisions, options.concurrency, (decision) => actOne(gateway, decision, options));
}

async function actOne(gateway: KubeGateway, first: Decision, options: ActOptions): Promise<ActResult> {
  let decision = first;
  const maxConflicts = options.maxConflicts ?? 3;
  for (let conflicts = 0; ; conflicts += 1) {
    if (options.dryRun) return { decision, outcome: DRY_RUN_OUTCOME_OF_PLAN[decision.plan], error: undefined };
    const planned: ActResult = { decision, outcome: OUTCOME_OF_PLAN[decision.plan], error: undefined };
    if (decision.plan !== 'fail' && decision.plan !== 'report') return planned;
    try {
      if (decision.plan === 'report') {
        await reportJob(gateway, decision, options);
        return planned;
      }
      return { ...planned, error: await failJob(gateway, decision, options) };
    } catch (error) {
      const failure = describeApiError(error);
      if (failure.status === 404) {
        return { decision: { ...decision, plan: 'skip', detail: 'Job or pod no longer exists' }, outcome: 'skipped', error: undefined };
      }
      if (failure.status === 409 && conflicts < maxConflicts) {
        const fresh = await readJobQuietly(gateway, decision);
        if (fresh === 'gone') {
          return { decision: { ...decision, plan: 'skip', detail: 'Job no longer exists' }, outcome: 'skipped', error: undefined };
        }
        if (fresh) {
          decision = options.rejudge(decision, fresh);
          continue;
        }
      }
      return { decision, outcome: 'error', error: `${failure.reason}: ${failure.message}` };
    }
  }
}

async function readJobQuietly(gateway: KubeGateway, d: Decision): Promise<JobView | 'gone' | undefined> {
  try {
    return toJobView(await gateway.readJob(d.namespace, d.job!));
  } catch (error) {
    return describeApiError(error).status === 404 ? 'gone' : undefined;
  }
}

function failureAnnotations(d: Decision, now: Date): Record<string, string> {
  return {
    [ANNOTATIONS.failedAt]: rfc3339Seconds(now),
    [ANNOTATIONS.reason]: d.reason,
    [ANNOTATIONS.message]: truncate(describeStuck(d), 4096),
  };
}

/** Fails the Job; resolves to an error message when only its Event could not be written. */
async function failJob(gateway: KubeGateway, d: Decision, options: ActOptions): Promise<string | undefined> {
  const job = d.jobView!;
  const annotations = failureAnnotations(d, options.now);
  const metadata = { resourceVersion: job.resourceVersion, annotations };
  if (d.mechanism === 'podFailurePolicy') {
    // Claim the Job first (resourceVersion makes it a compare-and-swap), so a concurrent sweeper backs off.
    await gateway.mergePatchJob(job.namespace, job.name, { metadata });
    const condition = {
      type: job.failJobConditionType!,
      status: 'True',
      reason: d.reason,
      message: truncate(describeStuck(d), 32_768),
      lastTransitionTime: options.now.toISOString(),
      lastProbeTime: null,
    };
    try {
      await gateway.patchPodStatus(d.namespace, d.pod, { status: { conditions: [condition] } });
      await gateway.deletePod(d.namespace, d.pod, d.podUid);
    } catch (error) {
      // Release the claim so the next sweep tries again instead of seeing the Job as handled.
      const release = Object.fromEntries(Object.keys(annotations).map((k) => [k, null]));
      await gateway.mergePatchJob(job.namespace, job.name, { metadata: { annotations: release } }).catch(() => undefined);
      throw error;
    }
  } else {
    const spec = { activeDeadlineSeconds: passedDeadlineSeconds(job, options.now) };
    await gateway.mergePatchJob(job.namespace, job.name, { metadata, spec });
  }
  const event = stuckJobEvent(d, 'FailJob', { instance: options.instance, now: options.now });
  return gateway.createEvent(event.metadata!.namespace!, event).then(
    () => undefined,
    (error: unknown) => `Job failed, but its Event was not written: ${describeApiError(error).message}`,
  );
}

async function reportJob(gateway: KubeGateway, d: Decision, options: ActOptions): Promise<void> {
  const job = d.jobView!;
  if (job.annotations[ANNOTATIONS.reportedAt] !== undefined) return;
  const event = stuckJobEvent(d, 'Report', { instance: options.instance, now: options.now });
  await gateway.createEvent(event.metadata!.namespace!, event);
  const reportedAt = rfc3339Seconds(options.now);
  await gateway.mergePatchJob(job.namespace, job.name, { metadata: { annotations: { [ANNOTATIONS.reportedAt]: reportedAt } } });
}

/** An activeDeadlineSeconds that has already run out, counted from the Job's start. */
export function passedDeadlineSeconds(job: JobView, now: Date): number {
  if (!job.startTime) return 1;
  return Math.max(1, Math.floor((now.getTime() - job.startTime.getTime()) / 1000));
}

export function rfc3339Seconds(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}
