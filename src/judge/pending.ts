// The SPEC's confirmation rule, pure: a Job the sweeper failed (it carries `failed-at`) that has
// not finished is looked at on every sweep, and failed again once `confirmWithin` has passed.
import { isStuckReason, PULL_CLASSES, type JobView, type PullClass } from '../model.ts';
import { ANNOTATIONS } from '../policy/annotations.ts';
import { formatDuration } from '../policy/duration.ts';
import { secondsBetween } from './judge.ts';
import type { Decision } from './types.ts';

export interface PendingInput {
  /** Jobs found by the pending label (server-side selector). */
  labelled: readonly JobView[];
  /** The sweep's decisions about stuck pods; Jobs among them carrying `failed-at` are pending too. */
  decisions: readonly Decision[];
  confirmWithinSeconds: number;
  now: Date;
}

export interface PendingJudgement {
  /** `decisions` with one line per pending Job (skip while waiting, retry when overdue). */
  decisions: Decision[];
  /** Labelled Jobs that have finished: the label goes, and a Failed one gets its Event if missing. */
  finished: JobView[];
  /** Jobs failed by the sweeper that have not finished yet. */
  awaiting: number;
}

export function judgePending(input: PendingInput): PendingJudgement {
  const byUid = new Map<string, JobView>();
  for (const d of input.decisions) {
    const job = d.jobView;
    if (job && job.annotations[ANNOTATIONS.failedAt] !== undefined && !job.finished && !job.deleting) byUid.set(job.uid, job);
  }
  const finished: JobView[] = [];
  for (const job of input.labelled) {
    if (job.deleting) continue;
    if (job.finished) finished.push(job);
    else if (job.annotations[ANNOTATIONS.failedAt] !== undefined) byUid.set(job.uid, job);
  }

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
  const age = Number.isNaN(failedAt.getTime()) ? Infinity : Math.max(0, secondsBetween(failedAt, input.now));
  const confirmWithin = formatDuration(input.confirmWithinSeconds);
  const since = `failed by imagepull-sweeper at ${failedAtText}`;
  const base = stuckLine ?? fromAnnotations(job, Number.isNaN(failedAt.getTime()) ? input.now : failedAt, input.now);
  if (age < input.confirmWithinSeconds) {
    return {
      ...base,
      plan: 'skip',
      mechanism: undefined,
      failJobCondition: undefined,
      detail: `${since}; waiting for the Job controller (${formatDuration(Math.floor(age))} of confirmWithin ${confirmWithin})`,
    };
  }
  return {
    ...base,
    jobView: job,
    plan: 'retry',
    mechanism: 'activeDeadlineSeconds',
    failJobCondition: undefined,
    detail: `${since}, not finished after confirmWithin ${confirmWithin}: failing it again by its deadline`,
  };
}

const MESSAGE = /^(init|sidecar|regular) container (\S+) of pod (\S+)(?: \(\d+ pods stuck\))? waited \S+ on image (\S+) \(class (\w+), rule ([^,)]+)/;

/** A pending Job with no stuck pod left: its line says what the claim recorded. */
function fromAnnotations(job: JobView, stuckSince: Date, now: Date): Decision {
  const message = job.annotations[ANNOTATIONS.message] ?? '';
  const m = MESSAGE.exec(message);
  const reason = job.annotations[ANNOTATIONS.reason];
  const pullClass = m && (PULL_CLASSES as readonly string[]).includes(m[5]!) ? (m[5] as PullClass) : 'unknown';
  return {
    namespace: job.namespace,
    job: job.name,
    cronJob: job.cronJob,
    pod: m?.[3] ?? '',
    podUid: '',
    podResourceVersion: '',
    container: m?.[2] ?? '',
    containerKind: (m?.[1] as Decision['containerKind'] | undefined) ?? 'regular',
    image: m?.[4] ?? '',
    reason: isStuckReason(reason) ? reason : 'ImagePullBackOff',
    message,
    pullClass,
    stuckSince,
    stuckSeconds: Math.max(0, Math.floor(secondsBetween(stuckSince, now))),
    rule: m?.[6] ?? '',
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
