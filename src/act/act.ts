// Carries out decisions. Every write sequence is safe to stop at any instant: a Job is either
// untouched, or claimed (annotations + the pending label, in one conditional patch) and then
// completed by this sweep, or by a later one under the confirmation rule (judge/pending.ts).
import type { V1Pod } from '@kubernetes/client-node';
import { findStuckContainers } from '../classify/index.ts';
import type { JobView, Outcome, Plan, StuckContainer } from '../model.ts';
import type { Decision } from '../judge/types.ts';
import { describeApiError } from '../kube/errors.ts';
import type { KubeGateway } from '../kube/gateway.ts';
import { mapBounded } from '../concurrency.ts';
import { toJobView } from '../attribute/job-view.ts';
import { ANNOTATIONS, LABELS } from '../policy/annotations.ts';
import { formatDuration } from '../policy/duration.ts';
import { describeStuck, failedJobEvent, stuckJobEvent, truncate, type Reporter } from './events.ts';
import { forceDeletePods, wouldForceDelete } from './force-delete.ts';

export interface ActOptions {
  dryRun: boolean;
  concurrency: number;
  now: Date;
  instance: string;
  /** Unique to this sweep: written into each claim, and names the claim's Event. */
  claim: string;
  /** Judges one Job again from a fresh read, after a write's precondition failed. */
  rejudge: (decision: Decision, fresh: JobView, freshPod?: { podUid: string; stuck: StuckContainer[] }) => Decision;
  /** How many times a conflicting Job is re-read and re-judged. */
  maxConflicts?: number;
  /** Once aborted, no write sequence starts; those in flight finish. */
  signal?: AbortSignal;
  /** Called as each decision completes, so its audit line is out before the batch ends. */
  onResult?: (result: ActResult) => void;
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
  retry: 'retried',
  skip: 'skipped',
  defer: 'deferred',
  error: 'error',
};

/** A dry run writes nothing: what it would have written is `would-*`. */
const DRY_RUN_OUTCOME_OF_PLAN: Record<Plan, Outcome> = {
  fail: 'would-fail',
  report: 'would-report',
  retry: 'would-retry',
  skip: 'skipped',
  defer: 'deferred',
  error: 'error',
};

const WRITING_PLANS: ReadonlySet<Plan> = new Set(['fail', 'report', 'retry']);

/** The pod a precondition failed on, as it is now (no stuck containers: gone or recovered). */
class PodChanged extends Error {
  constructor(readonly stuck: StuckContainer[]) {
    super('the pod changed since it was observed');
  }
}

/** Carries out each decision's plan with bounded concurrency; one failing Job never stops the others. */
export async function act(gateway: KubeGateway, decisions: readonly Decision[], options: ActOptions): Promise<ActResult[]> {
  return mapBounded(decisions, options.concurrency, async (decision) => {
    const result = await actOne(gateway, decision, options);
    options.onResult?.(result);
    return result;
  });
}

async function actOne(gateway: KubeGateway, first: Decision, options: ActOptions): Promise<ActResult> {
  let decision = first;
  const maxConflicts = options.maxConflicts ?? 3;
  const skipped = (detail: string): ActResult => ({ decision: { ...decision, plan: 'skip', mechanism: undefined, detail }, outcome: 'skipped', error: undefined });
  for (let conflicts = 0; ; conflicts += 1) {
    if (options.dryRun) {
      const detail = [decision.detail, ...wouldForceDelete(decision.forceDelete ?? [])].join('; ');
      return { decision: { ...decision, detail }, outcome: DRY_RUN_OUTCOME_OF_PLAN[decision.plan], error: undefined };
    }
    const planned: ActResult = { decision, outcome: OUTCOME_OF_PLAN[decision.plan], error: undefined };
    if (!WRITING_PLANS.has(decision.plan)) return planned;
    if (options.signal?.aborted) {
      const detail = `sweep stopped before acting, waits for the next sweep (was: ${decision.detail})`;
      return { decision: { ...decision, plan: 'defer', mechanism: undefined, failJobCondition: undefined, detail }, outcome: 'deferred', error: undefined };
    }
    try {
      if (decision.plan === 'report') {
        await reportJob(gateway, decision, options);
        return planned;
      }
      if (decision.plan === 'retry') return await retryJob(gateway, decision, options);
      return { ...planned, error: await failJob(gateway, decision, options) };
    } catch (error) {
      if (error instanceof ReleasedAfter) {
        if (error.cause instanceof PodChanged && conflicts < maxConflicts) {
          const fresh = await readJobQuietly(gateway, decision);
          if (fresh === 'gone') return skipped('Job no longer exists');
          if (fresh) {
            decision = options.rejudge(decision, fresh, { podUid: decision.podUid, stuck: error.cause.stuck });
            continue;
          }
        }
        const why = error.cause instanceof PodChanged ? `pod ${decision.pod} kept changing` : apiErrorText(error.cause);
        return { decision, outcome: 'error', error: `${why}; ${error.released ? 'claim released' : 'claim kept, completed after confirmWithin'}` };
      }
      const failure = describeApiError(error);
      if (failure.status === 404) return skipped('Job or pod no longer exists');
      if (failure.status === 409 && conflicts < maxConflicts) {
        const fresh = await readJobQuietly(gateway, decision);
        if (fresh === 'gone') return skipped('Job no longer exists');
        if (fresh) {
          decision = options.rejudge(decision, fresh);
          continue;
        }
      }
      return { decision, outcome: 'error', error: apiErrorText(error) };
    }
  }
}

function apiErrorText(error: unknown): string {
  const failure = describeApiError(error);
  return `${failure.reason}: ${failure.message}`;
}

async function readJobQuietly(gateway: KubeGateway, d: Decision): Promise<JobView | 'gone' | undefined> {
  try {
    return toJobView(await gateway.readJob(d.namespace, d.job!));
  } catch (error) {
    return describeApiError(error).status === 404 ? 'gone' : undefined;
  }
}

async function readPodQuietly(gateway: KubeGateway, namespace: string, name: string): Promise<V1Pod | 'gone' | undefined> {
  try {
    return await gateway.readPod(namespace, name);
  } catch (error) {
    return describeApiError(error).status === 404 ? 'gone' : undefined;
  }
}

/** The claim: who failed the Job (a claim id unique to the sweep), when, why; and the pending label. */
function claimAnnotations(d: Decision, now: Date, claim: string): Record<string, string> {
  return {
    [ANNOTATIONS.failedAt]: rfc3339Seconds(now),
    [ANNOTATIONS.reason]: d.reason,
    [ANNOTATIONS.message]: truncate(describeStuck(d), 4096),
    [ANNOTATIONS.claim]: claim,
  };
}

/** A pod-step failure after the claim; `released` says whether the claim was taken back. */
class ReleasedAfter extends Error {
  constructor(
    override readonly cause: unknown,
    readonly released: boolean,
  ) {
    super('released');
  }
}

/**
 * Fails the Job; resolves to an error message when only its Event could not be written.
 * Deadline path: one conditional patch claims and fails at once. podFailurePolicy path: claim,
 * mark the pod, delete it; when a pod step fails the claim is released (or, if that fails too,
 * left for the confirmation rule to complete).
 */
async function failJob(gateway: KubeGateway, d: Decision, options: ActOptions): Promise<string | undefined> {
  const job = d.jobView!;
  const annotations = claimAnnotations(d, options.now, options.claim);
  const metadata = { resourceVersion: job.resourceVersion, annotations, labels: { [LABELS.pending]: 'true' } };
  const viaPod = d.mechanism === 'podFailurePolicy';
  const patch = viaPod ? { metadata } : { metadata, spec: { activeDeadlineSeconds: passedDeadlineSeconds(job, options.now) } };
  await claimJob(gateway, job, patch, options.claim);
  if (viaPod) {
    try {
      await failPod(gateway, d, options);
    } catch (error) {
      throw new ReleasedAfter(error, await releaseClaim(gateway, job, options.claim));
    }
  }
  const claimed = { ...job, annotations: { ...job.annotations, ...annotations } };
  // The pending label stays until a sweep sees the Job finished. Writing the Job again now would
  // race the Job controller: its status update would conflict after it had already deleted the
  // pod, and its next pass counts that pod as a failure first (BackoffLimitExceeded, not the
  // deadline), so nothing more is written to the Job in this sweep.
  return ensureEvent(gateway, failedJobEvent(claimed, reporter(options), { name: d.pod, uid: d.podUid }));
}

function dropPendingLabel(gateway: KubeGateway, job: JobView): Promise<void> {
  return gateway.mergePatchJob(job.namespace, job.name, { metadata: { labels: { [LABELS.pending]: null } } });
}

/** The claim patch. When its answer is lost and the retries fail, a read tells whether it landed. */
async function claimJob(gateway: KubeGateway, job: JobView, patch: object, claim: string): Promise<void> {
  try {
    await gateway.mergePatchJob(job.namespace, job.name, patch);
  } catch (error) {
    if (describeApiError(error).status === 409) throw error;
    const current = await gateway.readJob(job.namespace, job.name).catch(() => undefined);
    if (current?.metadata?.annotations?.[ANNOTATIONS.claim] !== claim) throw error;
  }
}

/** Takes the claim back, only if it is still this sweep's (a JSON patch `test`). */
async function releaseClaim(gateway: KubeGateway, job: JobView, claim: string): Promise<boolean> {
  const path = (kind: 'annotations' | 'labels', key: string) => `/metadata/${kind}/${key.replaceAll('~', '~0').replaceAll('/', '~1')}`;
  const keys = [ANNOTATIONS.failedAt, ANNOTATIONS.reason, ANNOTATIONS.message, ANNOTATIONS.claim];
  const operations = [
    { op: 'test', path: path('annotations', ANNOTATIONS.claim), value: claim },
    ...keys.map((key) => ({ op: 'remove', path: path('annotations', key) })),
    { op: 'remove', path: path('labels', LABELS.pending) },
  ];
  try {
    await gateway.jsonPatchJob(job.namespace, job.name, operations);
    return true;
  } catch {
    const current = await gateway.readJob(job.namespace, job.name).catch(() => undefined);
    return current !== undefined && current.metadata?.annotations?.[ANNOTATIONS.claim] !== claim;
  }
}

/** Adds the FailJob condition to the pod and deletes it, both with the pod's resourceVersion as precondition. */
async function failPod(gateway: KubeGateway, d: Decision, options: ActOptions): Promise<void> {
  const condition = {
    type: d.failJobCondition!,
    status: 'True',
    reason: d.reason,
    message: truncate(describeStuck(d), 32_768),
    lastTransitionTime: options.now.toISOString(),
    lastProbeTime: null,
  };
  const stuckNow = (pod: V1Pod): StuckContainer[] =>
    pod.metadata?.uid === d.podUid ? findStuckContainers(pod).filter((c) => c.controller?.uid === d.jobView!.uid) : [];
  const marked = (pod: V1Pod) => (pod.status?.conditions ?? []).some((c) => c.type === condition.type && c.status === 'True');

  let resourceVersion = d.podResourceVersion;
  try {
    const patched = await gateway.patchPodStatus(d.namespace, d.pod, {
      metadata: { resourceVersion },
      status: { conditions: [condition] },
    });
    resourceVersion = patched.metadata?.resourceVersion ?? resourceVersion;
  } catch (error) {
    const current = await readPodQuietly(gateway, d.namespace, d.pod);
    if (current === 'gone' || (current && current.metadata?.uid !== d.podUid)) throw new PodChanged([]);
    if (!current) throw error;
    if (!marked(current)) {
      if (describeApiError(error).status === 409) throw new PodChanged(stuckNow(current));
      throw error;
    }
    resourceVersion = current.metadata?.resourceVersion ?? resourceVersion; // it landed; its answer was lost
  }

  for (let attempt = 1; ; attempt += 1) {
    try {
      await gateway.deletePod(d.namespace, d.pod, d.podUid, resourceVersion);
      return;
    } catch (error) {
      const current = await readPodQuietly(gateway, d.namespace, d.pod);
      if (current === 'gone') return;
      if (current && (current.metadata?.uid !== d.podUid || current.metadata?.deletionTimestamp)) return;
      if (!current || describeApiError(error).status !== 409 || attempt >= 3) throw error;
      // The kubelet wrote the pod in between: delete it as it is now, if it is still stuck.
      if (!marked(current) || stuckNow(current).length === 0) throw new PodChanged(stuckNow(current));
      resourceVersion = current.metadata?.resourceVersion ?? resourceVersion;
    }
  }
}

/**
 * A pending Job: its never-started pods force-deleted (SPEC step 4), and, once confirmWithin has
 * passed (mechanism set), failed again by its deadline (idempotent) with its Event if missing.
 */
async function retryJob(gateway: KubeGateway, d: Decision, options: ActOptions): Promise<ActResult> {
  const job = d.jobView!;
  const forced = await forceDeletePods(gateway, d, reporter(options));
  const details = [d.detail, ...forced.done];
  const errors = forced.error ? [forced.error] : [];
  if (d.mechanism === 'activeDeadlineSeconds') {
    const found = await gateway
      .listPods({ namespace: job.namespace, labelSelector: `batch.kubernetes.io/controller-uid=${job.uid}`, limit: 100 })
      .then((page) => describePodsFound(page.items, options.now))
      .catch((error: unknown) => `its pods could not be listed (${describeApiError(error).message})`);
    await gateway.mergePatchJob(job.namespace, job.name, { spec: { activeDeadlineSeconds: passedDeadlineSeconds(job, options.now) } });
    const eventError = await ensureEvent(gateway, failedJobEvent(job, reporter(options)));
    if (eventError) errors.push(eventError);
    details.push(`found ${found}`);
  }
  return { decision: { ...d, detail: details.join('; ') }, outcome: 'retried', error: errors.length > 0 ? errors.join('; ') : undefined };
}

export interface SettledJob {
  job: JobView;
  /** The FailJob Event was missing and has now been written. */
  eventWritten: boolean;
  error: string | undefined;
}

/**
 * Pending Jobs that have finished: a Failed one gets its Event if the claiming sweep could not
 * write it, then the pending label goes. Nothing is written in a dry run or once stopped.
 */
export async function settleFinished(gateway: KubeGateway, jobs: readonly JobView[], options: ActOptions): Promise<SettledJob[]> {
  if (options.dryRun) return [];
  return mapBounded(jobs, options.concurrency, async (job): Promise<SettledJob> => {
    if (options.signal?.aborted) return { job, eventWritten: false, error: undefined };
    let eventWritten = false;
    if (job.failed && job.annotations[ANNOTATIONS.failedAt] !== undefined) {
      const event = failedJobEvent(job, reporter(options));
      try {
        await gateway.createEvent(job.namespace, event);
        eventWritten = true;
      } catch (error) {
        const failure = describeApiError(error);
        if (failure.status !== 409) return { job, eventWritten, error: `its Event could not be written: ${failure.message}` };
      }
    }
    try {
      await dropPendingLabel(gateway, job);
      return { job, eventWritten, error: undefined };
    } catch (error) {
      return { job, eventWritten, error: `its ${LABELS.pending} label could not be removed: ${describeApiError(error).message}` };
    }
  });
}

/** Creates the Event; one that already exists (same name: same claim) counts as written. */
async function ensureEvent(gateway: KubeGateway, event: ReturnType<typeof failedJobEvent>): Promise<string | undefined> {
  try {
    await gateway.createEvent(event.metadata!.namespace!, event);
    return undefined;
  } catch (error) {
    const failure = describeApiError(error);
    return failure.status === 409 ? undefined : `Job failed, but its Event was not written: ${failure.message}`;
  }
}

async function reportJob(gateway: KubeGateway, d: Decision, options: ActOptions): Promise<void> {
  const job = d.jobView!;
  if (job.annotations[ANNOTATIONS.reportedAt] !== undefined) return;
  const event = stuckJobEvent(d, 'Report', reporter(options));
  await gateway.createEvent(event.metadata!.namespace!, event);
  const reportedAt = rfc3339Seconds(options.now);
  await gateway.mergePatchJob(job.namespace, job.name, { metadata: { annotations: { [ANNOTATIONS.reportedAt]: reportedAt } } });
}

function reporter(options: ActOptions): Reporter {
  return { instance: options.instance, now: options.now };
}

/** What a retry found of the Job's pods, e.g. `2 pod(s) terminating for 3m on node(s) n1`. Pure. */
export function describePodsFound(pods: readonly V1Pod[], now: Date): string {
  if (pods.length === 0) return 'no pods left';
  const parts: string[] = [];
  const terminating = pods.filter((p) => p.metadata?.deletionTimestamp);
  if (terminating.length > 0) {
    const since = terminating.map((p) => new Date(p.metadata!.deletionTimestamp!).getTime() - (p.metadata?.deletionGracePeriodSeconds ?? 0) * 1000);
    const longest = Math.max(0, Math.floor((now.getTime() - Math.min(...since)) / 1000));
    const nodes = [...new Set(terminating.map((p) => p.spec?.nodeName).filter(Boolean))];
    parts.push(`${terminating.length} pod(s) terminating for ${formatDuration(longest)}${nodes.length ? ` on node(s) ${nodes.join(', ')}` : ''}`);
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

/** An activeDeadlineSeconds that has already run out, counted from the Job's start. */
export function passedDeadlineSeconds(job: JobView, now: Date): number {
  if (!job.startTime) return 1;
  return Math.max(1, Math.floor((now.getTime() - job.startTime.getTime()) / 1000));
}

export function rfc3339Seconds(date: Date): string {
  return date.toISOString().replace(/\.\d{3}Z$/, 'Z');
}
