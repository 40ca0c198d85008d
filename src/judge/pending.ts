// The confirmation rule (docs/contract.md "How a Job is failed"), pure: a Job the sweeper failed (it carries `failed-at`) that has
// not finished is looked at on every sweep, failed again once `confirmWithin` has passed, and its
// never-started pods still terminating `forceDeleteAfter` after `failed-at` are force-deleted.
import type { V1Pod } from '@kubernetes/client-node';
import { formatOwners, isStuckReason, type JobView } from '../model.ts';
import { ANNOTATIONS } from '../policy/annotations.ts';
import { formatDuration } from '../policy/duration.ts';
import { parseClaimMessage } from './claim-message.ts';
import { planForceDeletes, type ForceDeleteTarget } from './force-delete.ts';
import { secondsBetween } from './judge.ts';
import type { Decision } from './types.ts';

export interface PendingInput {
  /** Jobs found by the pending label (server-side selector). */
  labelled: readonly JobView[];
  /** The sweep's decisions about stuck pods; Jobs among them carrying `failed-at` are pending too. */
  decisions: readonly Decision[];
  confirmWithinSeconds: number;
  /** 0 or unset: never force-delete. */
  forceDeleteAfterSeconds?: number;
  /** The pods of the Jobs `dueForForceDelete` named, by Job uid; a string says why they could not be read. */
  podsByJob?: ReadonlyMap<string, readonly V1Pod[] | string>;
  now: Date;
}

export interface PendingJudgement {
  /** `decisions` with one line per pending Job (skip while waiting, retry when overdue or a pod is force-deleted). */
  decisions: Decision[];
  /** Labelled Jobs that have finished: the label goes, and a Failed one gets its Event if missing. */
  finished: JobView[];
  /** Jobs failed by the sweeper that have not finished yet. */
  awaiting: number;
}

/** The pending Jobs (by uid) and the labelled Jobs that have finished. */
function pendingJobs(input: Pick<PendingInput, 'labelled' | 'decisions'>): { byUid: Map<string, JobView>; finished: JobView[] } {
  const byUid = new Map<string, JobView>();
  for (const d of input.decisions) {
    const job = d.jobView;
    if (job && job.annotations[ANNOTATIONS.failedAt] !== undefined && (!job.finished || job.failing) && !job.deleting)
      byUid.set(job.uid, job);
  }
  const finished: JobView[] = [];
  for (const job of input.labelled) {
    if (job.deleting) continue;
    // FailureTarget is not the end yet: the Job is Failed only once its pods are gone.
    if (job.finished && !job.failing) finished.push(job);
    else if (job.annotations[ANNOTATIONS.failedAt] !== undefined) byUid.set(job.uid, job);
  }
  return { byUid, finished };
}

/** Seconds since the Job's `failed-at` (Infinity when it cannot be read). */
function failedAgo(job: JobView, now: Date): number {
  const failedAt = new Date(job.annotations[ANNOTATIONS.failedAt]!);
  return Number.isNaN(failedAt.getTime()) ? Infinity : Math.max(0, secondsBetween(failedAt, now));
}

/** Pending Jobs whose pods are to be read this sweep: `forceDeleteAfter` has passed. */
export function dueForForceDelete(input: Omit<PendingInput, 'podsByJob' | 'confirmWithinSeconds'>): JobView[] {
  const after = input.forceDeleteAfterSeconds ?? 0;
  if (after <= 0) return [];
  return [...pendingJobs(input).byUid.values()].filter((job) => failedAgo(job, input.now) >= after);
}

export function judgePending(input: PendingInput): PendingJudgement {
  const { byUid, finished } = pendingJobs(input);
  const decisions = input.decisions.filter((d) => !d.jobView || !byUid.has(d.jobView.uid));
  for (const job of byUid.values()) {
    const stuckLine = input.decisions.find((d) => d.jobView?.uid === job.uid);
    decisions.push(pendingDecision(job, stuckLine, input));
  }
  return { decisions, finished, awaiting: byUid.size };
}

function pendingDecision(job: JobView, stuckLine: Decision | undefined, input: PendingInput): Decision {
  const failedAtText = job.annotations[ANNOTATIONS.failedAt]!;
  const failedAt = new Date(failedAtText);
  const age = failedAgo(job, input.now);
  const confirmWithin = formatDuration(input.confirmWithinSeconds);
  const since = `failed by imagepull-sweeper at ${failedAtText}`;
  const base = stuckLine ?? fromAnnotations(job, Number.isNaN(failedAt.getTime()) ? input.now : failedAt, input.now);
  const { forceDelete, notes } = forceDeleteFor(job, age, input);
  const withNotes = (detail: string) => [detail, ...notes].join('; ');
  // Suspended with its FailureTarget (Kueue evicted it, or it waits in its queue): the Job
  // controller fails it when it is resumed, before it creates a pod (docs/kueue.md).
  if (job.suspended && job.failing) {
    return {
      ...base,
      jobView: job,
      plan: 'skip',
      mechanism: undefined,
      failJobCondition: undefined,
      detail: `${since}; suspended with its FailureTarget: the Job controller fails it when it is resumed (admitted again)`,
    };
  }
  if (age < input.confirmWithinSeconds) {
    const forcing = forceDelete.length > 0;
    // The Job controller judges a pod failure policy only on pods in phase Failed, which the
    // kubelet never writes while the pull hangs: a Job not yet given up on (no FailureTarget, it
    // was failed by a fallback) gets its own condition now, which ends it once its force-deleted
    // pods are gone.
    const resend = forcing && !job.failed;
    const forced = `${since}; pods still terminating after forceDeleteAfter ${formatDuration(input.forceDeleteAfterSeconds ?? 0)}`;
    return {
      ...base,
      jobView: job,
      plan: forcing ? 'retry' : 'skip',
      mechanism: resend ? 'condition' : undefined,
      failJobCondition: undefined,
      forceDelete,
      detail: withNotes(
        !forcing
          ? `${since}; waiting for the Job controller (${formatDuration(Math.floor(age))} of confirmWithin ${confirmWithin})`
          : resend
            ? `${forced}, and the Job controller has not given up on it (its pod failure policy waits for a Failed pod): adding its FailureTarget too`
            : forced,
      ),
    };
  }
  const overdue = `${since}, not finished after confirmWithin ${confirmWithin}`;
  return {
    ...base,
    jobView: job,
    plan: 'retry',
    // What the Job still needs: its FailureTarget, unless it has one and the Job controller waits for its pods.
    mechanism: job.failed ? undefined : 'condition',
    failJobCondition: undefined,
    overdue: true,
    forceDelete,
    detail: withNotes(
      job.failed
        ? `${overdue}: the Job controller has given up on it and waits for its pods to end`
        : `${overdue}: failing it again by its own condition`,
    ),
  };
}

/** The pods to force-delete, and a note per terminating pod that is not (or could not be read). */
function forceDeleteFor(job: JobView, age: number, input: PendingInput): { forceDelete: ForceDeleteTarget[]; notes: string[] } {
  const after = input.forceDeleteAfterSeconds ?? 0;
  const pods = input.podsByJob?.get(job.uid);
  if (after <= 0 || age < after || pods === undefined) return { forceDelete: [], notes: [] };
  if (typeof pods === 'string') return { forceDelete: [], notes: [`its pods could not be read for forceDeleteAfter (${pods})`] };
  const plan = planForceDeletes(pods, job.uid, input.now);
  return { forceDelete: plan.targets, notes: plan.spared.map((s) => s.why) };
}

/** A pending Job with no stuck pod left: its line says what the claim recorded. */
function fromAnnotations(job: JobView, stuckSince: Date, now: Date): Decision {
  const message = job.annotations[ANNOTATIONS.message] ?? '';
  const claimed = parseClaimMessage(message);
  const reason = job.annotations[ANNOTATIONS.reason];
  return {
    namespace: job.namespace,
    job: job.name,
    cronJob: job.cronJob,
    owners: formatOwners(job.owners),
    pod: claimed?.pod ?? '',
    podUid: '',
    podResourceVersion: '',
    container: claimed?.container ?? '',
    containerKind: claimed?.containerKind ?? 'regular',
    image: claimed?.image ?? '',
    ...(claimed?.volume !== undefined ? { volume: claimed.volume } : {}),
    reason: isStuckReason(reason) ? reason : 'ImagePullBackOff',
    message,
    pullClass: claimed?.pullClass ?? 'unknown',
    stuckSince,
    stuckSeconds: Math.max(0, Math.floor(secondsBetween(stuckSince, now))),
    rule: claimed?.rule ?? '',
    action: 'fail',
    graceSeconds: undefined,
    graceSource: undefined,
    plan: 'skip',
    detail: '',
    mechanism: undefined,
    failJobCondition: undefined,
    warnings: [],
    jobView: job,
    stuckPods: 0,
  };
}
