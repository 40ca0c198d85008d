// Building one decision, and the verdict every stuck subject (a Job, or a pod under an `owners`
// rule) gets once nothing leaves it alone: within grace, report only, held by the outage breaker,
// or failed by its mechanism. Pure.
import { formatOwners, type Action, type JobView, type StuckContainer } from '../model.ts';
import { ANNOTATIONS } from '../policy/annotations.ts';
import { formatDuration } from '../policy/duration.ts';
import { describeGraceSource } from '../policy/resolve.ts';
import type { EffectivePolicy, GraceSeconds, JobGrace } from '../policy/types.ts';
import { stuckWithinGrace } from './grace.ts';
import { describeTrip, tripFor } from './outage.ts';
import type { Decision, FailMechanism, OutageAssessment } from './types.ts';

export function secondsBetween(from: Date, to: Date): number {
  return (to.getTime() - from.getTime()) / 1000;
}

/** The container furthest past its grace (or closest to it). */
export function mostOverdue(containers: StuckContainer[], grace: GraceSeconds, now: Date): StuckContainer {
  let best = containers[0]!;
  let bestOverdue = -Infinity;
  for (const c of containers) {
    const overdue = secondsBetween(c.stuckSince, now) - grace[c.pullClass];
    if (overdue > bestOverdue || (overdue === bestOverdue && c.stuckSince < best.stuckSince)) {
      best = c;
      bestOverdue = overdue;
    }
  }
  return best;
}

export interface DecisionFields {
  rule: string;
  action: Action;
  plan: Decision['plan'];
  detail: string;
  job: JobView | undefined;
  /** Name of a Job that could not be judged (gone or unreadable). */
  jobName?: string;
  /** Without a Job: the pod's own controller, `Kind/name`. */
  owners?: string[];
  stuckPods?: number;
  graceSeconds?: number;
  graceSource?: Decision['graceSource'];
  mechanism?: Decision['mechanism'];
  failJobCondition?: string | undefined;
  warnings?: string[];
  /** A JobSet restart whose grace an earlier attempt already spent (docs/jobset.md). */
  spentBy?: string;
}

export function makeDecision(c: StuckContainer, now: Date, f: DecisionFields): Decision {
  // One literal without spreads, the rare fields set after it (as classify/stuck.ts does).
  const d: Decision = {
    namespace: c.namespace,
    job: f.job?.name ?? f.jobName,
    cronJob: f.job?.cronJob,
    owners: f.job ? formatOwners(f.job.owners) : (f.owners ?? []),
    pod: c.pod,
    podUid: c.podUid,
    podResourceVersion: c.podResourceVersion,
    container: c.container,
    containerKind: c.containerKind,
    image: c.image,
    reason: c.reason,
    message: c.message,
    pullClass: c.pullClass,
    stuckSince: c.stuckSince,
    stuckSeconds: Math.max(0, Math.floor(secondsBetween(c.stuckSince, now))),
    rule: f.rule,
    action: f.action,
    graceSeconds: f.graceSeconds,
    graceSource: f.graceSource,
    plan: f.plan,
    detail: f.detail,
    mechanism: f.mechanism,
    failJobCondition: f.failJobCondition,
    warnings: f.warnings ?? [],
    jobView: f.job,
    stuckPods: f.stuckPods ?? 1,
    // Set later (withCapacity): a copy that only replaces a field keeps the literal's hidden class.
    capacity: undefined,
  };
  if (c.volume !== undefined) d.volume = c.volume;
  if (f.spentBy) d.spentBy = f.spentBy;
  return d;
}

/** What is judged against its grace: a Job, or a pod under an `owners` rule. */
export interface GraceSubject {
  base: Pick<DecisionFields, 'rule' | 'action' | 'job' | 'owners' | 'stuckPods' | 'spentBy'>;
  effective: EffectivePolicy;
  grace: JobGrace;
  /** The subject's own annotations (its `reported-at`). */
  annotations: Record<string, string>;
  /** How it is failed, and a note for the detail. */
  failing: { mechanism: FailMechanism; failJobCondition: string | undefined; note: string };
  /** Set when the grace is already spent (a JobSet restart): it is not waited for again. */
  spent?: string;
}

/** Within grace, report only, held by the breaker, or failed. */
export function judgeAgainstGrace(worst: StuckContainer, now: Date, outage: OutageAssessment, s: GraceSubject): Decision {
  const graceSeconds = s.grace.grace[worst.pullClass];
  const graceSource = s.grace.sources[worst.pullClass];
  const graceFrom = `${formatDuration(graceSeconds)} from ${describeGraceSource(graceSource)}`;
  const stuckSeconds = secondsBetween(worst.stuckSince, now);
  const fields = { ...s.base, graceSeconds, graceSource, warnings: [...s.grace.warnings] };
  if (stuckWithinGrace(stuckSeconds, graceSeconds) && !s.spent) {
    return makeDecision(worst, now, {
      ...fields,
      plan: 'skip',
      detail: `within grace (${formatDuration(Math.floor(stuckSeconds))} of ${graceFrom})`,
    });
  }
  const reportedAt = s.annotations[ANNOTATIONS.reportedAt];
  const report = (why: string) => (reportedAt ? `${why}; Event already emitted at ${reportedAt}` : why);
  if (s.effective.action === 'report') {
    return makeDecision(worst, now, { ...fields, plan: 'report', detail: report(`rule ${s.effective.rule}: report only`) });
  }
  const trip = tripFor(outage, worst);
  if (trip) {
    const why = `outage breaker tripped (${describeTrip(trip)}): ${trip.pullClass} failures are reported, not failed, this sweep`;
    return makeDecision(worst, now, { ...fields, action: 'report', plan: 'report', detail: report(why) });
  }
  return makeDecision(worst, now, {
    ...fields,
    plan: 'fail',
    mechanism: s.failing.mechanism,
    failJobCondition: s.failing.failJobCondition,
    detail: `${s.spent ?? `stuck past grace (${graceFrom})`}${s.failing.note}`,
  });
}
