import type { Action, JobView, PodOwner, StuckContainer } from '../model.ts';
import { ANNOTATIONS, ignoredByAnnotation } from '../policy/annotations.ts';
import { formatDuration } from '../policy/duration.ts';
import { describeGraceSource, graceForJob, resolveForNamespace } from '../policy/resolve.ts';
import type { EffectivePolicy, GraceSeconds, Policy } from '../policy/types.ts';
import { stuckWithinGrace } from './grace.ts';
import { chooseMechanism } from './mechanism.ts';
import { assessOutage, describeTrip, tripFor } from './outage.ts';
import type { Decision, Judgement, OutageAssessment } from './types.ts';
import { standDown } from './stand-down.ts';
import { compareText } from '../order.ts';

/** The Job controller's own name in spec.managedBy; any other value means another controller owns the Job. */
export const BUILTIN_JOB_CONTROLLER = 'kubernetes.io/job-controller';

export interface JudgeInput {
  stuck: StuckContainer[];
  ownerOf: (podUid: string) => PodOwner;
  namespaceLabels: ReadonlyMap<string, Record<string, string>>;
  policy: Policy;
  now: Date;
  /** Set when re-judging a subset, so the breaker still reflects the whole sweep. */
  outage?: OutageAssessment;
}

/** Pure: stuck containers + their owners + policy + now → one decision per Job (or per non-Job pod). */
export function judge(input: JudgeInput): Judgement {
  const outage = input.outage ?? assessOutage(input.stuck, input.policy.limits.outage);
  const decisions: Decision[] = [];
  for (const group of groupByOwner(input)) {
    decisions.push(decideGroup(group, input, outage));
  }
  applyLimits(decisions, input.policy);
  decisions.sort(byNamespaceThenName);
  return { decisions, outage };
}

interface OwnerGroup {
  owner: PodOwner;
  containers: StuckContainer[];
}

function groupByOwner(input: JudgeInput): OwnerGroup[] {
  const groups = new Map<string, OwnerGroup>();
  for (const container of input.stuck) {
    const owner = input.ownerOf(container.podUid);
    const key = owner.kind === 'job' ? `job/${owner.job.uid}` : `pod/${container.podUid}`;
    const group = groups.get(key);
    if (group) group.containers.push(container);
    else groups.set(key, { owner, containers: [container] });
  }
  return [...groups.values()];
}

function decideGroup(group: OwnerGroup, input: JudgeInput, outage: OutageAssessment): Decision {
  const namespace = group.containers[0]!.namespace;
  const effective = resolveForNamespace(input.policy, {
    name: namespace,
    labels: input.namespaceLabels.get(namespace) ?? {},
  });
  const { owner } = group;
  if (owner.kind !== 'job') {
    const worst = mostOverdue(group.containers, effective.grace, input.now);
    const detail =
      owner.kind === 'not-a-job'
        ? owner.owner
          ? `owner is ${owner.owner.kind} ${owner.owner.name}, not a Job: never acted on`
          : 'pod has no controller: never acted on'
        : owner.detail;
    const plan = owner.kind === 'unreadable' ? 'error' : 'skip';
    const jobName = owner.kind === 'not-a-job' ? undefined : owner.owner?.name;
    return makeDecision(worst, input.now, { rule: effective.rule, action: effective.action, plan, detail, job: undefined, jobName });
  }

  const job = owner.job;
  const jobGrace = graceForJob(effective, job.annotations);
  const worst = mostOverdue(group.containers, jobGrace.grace, input.now);
  const base = { rule: effective.rule, action: effective.action, job, stuckPods: new Set(group.containers.map((c) => c.podUid)).size };
  const skip = (detail: string): Decision => makeDecision(worst, input.now, { ...base, plan: 'skip', detail });

  const blocker = reasonToLeaveAlone(job, effective);
  if (blocker) return { ...skip(blocker.detail), action: blocker.action ?? effective.action };

  const graceSeconds = jobGrace.grace[worst.pullClass];
  const graceSource = jobGrace.sources[worst.pullClass];
  const graceFrom = `${formatDuration(graceSeconds)} from ${describeGraceSource(graceSource)}`;
  const stuckSeconds = secondsBetween(worst.stuckSince, input.now);
  const warnings = [...jobGrace.warnings];
  if (stuckWithinGrace(stuckSeconds, graceSeconds)) {
    return makeDecision(worst, input.now, {
      ...base,
      plan: 'skip',
      graceSeconds,
      graceSource,
      warnings,
      detail: `within grace (${formatDuration(Math.floor(stuckSeconds))} of ${graceFrom})`,
    });
  }
  const choice = chooseMechanism(job);
  if (effective.action === 'report') {
    return makeDecision(worst, input.now, {
      ...base,
      plan: 'report',
      graceSeconds,
      graceSource,
      warnings,
      detail: reportDetail(job, `rule ${effective.rule}: report only`),
    });
  }
  const trip = tripFor(outage, worst);
  if (trip) {
    return makeDecision(worst, input.now, {
      ...base,
      action: 'report',
      plan: 'report',
      graceSeconds,
      graceSource,
      warnings,
      detail: reportDetail(
        job,
        `outage breaker tripped (${describeTrip(trip)}): ${trip.pullClass} failures are reported, not failed, this sweep`,
      ),
    });
  }
  const shadowed =
    choice.mechanism === 'activeDeadlineSeconds' && job.podFailureRules.length > 0 ? `; ${choice.why}, so by the deadline` : '';
  return makeDecision(worst, input.now, {
    ...base,
    plan: 'fail',
    graceSeconds,
    graceSource,
    warnings,
    mechanism: choice.mechanism,
    failJobCondition: choice.conditionType,
    detail: `stuck past grace (${graceFrom})${shadowed}`,
  });
}

function reportDetail(job: JobView, why: string): string {
  const reportedAt = job.annotations[ANNOTATIONS.reportedAt];
  return reportedAt ? `${why}; Event already emitted at ${reportedAt}` : why;
}

/** Why this Job must not be touched, or undefined. Checked before grace. */
function reasonToLeaveAlone(job: JobView, effective: EffectivePolicy): { detail: string; action?: Action } | undefined {
  if (job.deleting) return { detail: 'Job is being deleted' };
  if (job.finished) return { detail: 'Job already finished' };
  const failedAt = job.annotations[ANNOTATIONS.failedAt];
  if (failedAt !== undefined) return { detail: `already failed by imagepull-sweeper at ${failedAt}` };
  const ignore = ignoredByAnnotation(job.annotations);
  if (ignore.ignored) return { detail: ignore.warning ?? `annotation ${ANNOTATIONS.ignore}=true`, action: 'ignore' };
  if (job.managedBy !== undefined && job.managedBy !== BUILTIN_JOB_CONTROLLER) {
    return { detail: `Job is managed by ${job.managedBy}, which would ignore the sweeper: never acted on` };
  }
  if (job.suspended) return { detail: 'Job is suspended' };
  if (effective.action === 'ignore') return { detail: `rule ${effective.rule}: action ignore` };
  return undefined;
}

/** The container furthest past its grace (or closest to it). */
function mostOverdue(containers: StuckContainer[], grace: GraceSeconds, now: Date): StuckContainer {
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

interface DecisionFields {
  rule: string;
  action: Action;
  plan: Decision['plan'];
  detail: string;
  job: JobView | undefined;
  /** Name of a Job that could not be judged (gone or unreadable). */
  jobName?: string;
  stuckPods?: number;
  graceSeconds?: number;
  graceSource?: Decision['graceSource'];
  mechanism?: Decision['mechanism'];
  failJobCondition?: string;
  warnings?: string[];
}

function makeDecision(c: StuckContainer, now: Date, f: DecisionFields): Decision {
  return {
    namespace: c.namespace,
    job: f.job?.name ?? f.jobName,
    cronJob: f.job?.cronJob,
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
  };
}

/** Keeps at most maxJobsPerSweep / maxJobsPerNamespace failures, oldest stuck first; the rest wait. */
function applyLimits(decisions: Decision[], policy: Policy): void {
  const { maxJobsPerSweep, maxJobsPerNamespace } = policy.limits;
  const failing = decisions.filter((d) => d.plan === 'fail').sort(oldestStuckFirst);
  const perNamespace = new Map<string, number>();
  let total = 0;
  for (const d of failing) {
    const inNamespace = perNamespace.get(d.namespace) ?? 0;
    if (total >= maxJobsPerSweep) {
      defer(d, `maxJobsPerSweep (${maxJobsPerSweep}) reached`);
    } else if (inNamespace >= maxJobsPerNamespace) {
      defer(d, `maxJobsPerNamespace (${maxJobsPerNamespace}) reached in ${d.namespace}`);
    } else {
      total += 1;
      perNamespace.set(d.namespace, inNamespace + 1);
    }
  }
}

function defer(d: Decision, why: string): void {
  d.plan = 'defer';
  d.mechanism = undefined;
  d.failJobCondition = undefined;
  d.detail = `${why}: waits for the next sweep`;
}

function oldestStuckFirst(a: Decision, b: Decision): number {
  return a.stuckSince.getTime() - b.stuckSince.getTime() || byNamespaceThenName(a, b);
}

function byNamespaceThenName(a: Decision, b: Decision): number {
  return (
    compareText(a.namespace, b.namespace) ||
    compareText(a.job ?? '', b.job ?? '') ||
    compareText(a.pod, b.pod) ||
    compareText(a.container, b.container)
  );
}

export function secondsBetween(from: Date, to: Date): number {
  return (to.getTime() - from.getTime()) / 1000;
}

/**
 * Judges one Job again after a fresh read (a write conflicted). It keeps the slot it held under
 * the limits. `freshPod` replaces what was seen of the pod a precondition failed on.
 */
export function rejudgeJob(
  input: JudgeInput,
  previous: Decision,
  fresh: JobView,
  freshPod?: { podUid: string; stuck: StuckContainer[] },
): Decision {
  const previousUid = previous.jobView?.uid;
  if (previousUid !== fresh.uid) {
    return standDown(previous, 'skip', `Job ${fresh.name} was replaced (uid differs)`);
  }
  const seen = freshPod ? input.stuck.filter((c) => c.podUid !== freshPod.podUid).concat(freshPod.stuck) : input.stuck;
  const stuck = seen.filter((c) => {
    if (freshPod && freshPod.stuck.includes(c)) return true;
    const owner = input.ownerOf(c.podUid);
    return owner.kind === 'job' && owner.job.uid === fresh.uid;
  });
  const outage = input.outage ?? assessOutage(input.stuck, input.policy.limits.outage);
  const judgement = judge({ ...input, stuck, outage, ownerOf: () => ({ kind: 'job', job: fresh }) });
  return judgement.decisions[0] ?? standDown(previous, 'skip', 'no longer stuck');
}
