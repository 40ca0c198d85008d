import { registryHost } from '../classify/reference.ts';
import { formatOwners, type Action, type JobView, type PodOwner, type StuckContainer } from '../model.ts';
import {
  carriedFor,
  describeCarried,
  kueueTimeoutWarning,
  rememberStuck,
  stuckMemoryOf,
  withCarried,
  type Carried,
  type KueueTimeout,
} from './queue.ts';
import { ANNOTATIONS, ignoredByAnnotation } from '../policy/annotations.ts';
import { describeGraceSource, graceForJob, resolveForNamespace } from '../policy/resolve.ts';
import type { EffectivePolicy, Policy } from '../policy/types.ts';
import { decideOwnedPod } from './owned-pod.ts';
import { keepJobSetMemory, spentByJobSet } from './jobset.ts';
import { applyLimits, byNamespaceThenName, type LimitsSpent } from './limits.ts';
import { chooseMechanism } from './mechanism.ts';
import { assessOutage, tripFor } from './outage.ts';
import { addHealNeeds, emptyNeeds, judgeHeal, type HealNeeds } from './heal.ts';
import { formatOutageHold, NO_READS, outageHolds, type HealReads, type OutageHold } from './heal-evidence.ts';
import { readHealMemory, withHealedTime } from './heal-memory.ts';
import { judgeAgainstGrace, makeDecision, mostOverdue } from './decision.ts';
import type { Decision, Judgement, OutageAssessment } from './types.ts';
import { standDown } from './stand-down.ts';

/** The Job controller's own name in spec.managedBy; any other value means another controller owns the Job. */
export const BUILTIN_JOB_CONTROLLER = 'kubernetes.io/job-controller';

export interface JudgeInput {
  stuck: StuckContainer[];
  ownerOf: (podUid: string) => PodOwner;
  namespaceLabels: ReadonlyMap<string, Record<string, string>>;
  policy: Policy;
  now: Date;
  /** Set when re-judging a subset, so the breaker still reflects the whole sweep (or `run --watch`'s whole cache). */
  outage?: OutageAssessment;
  /** Failures already spent in this schedule period (`run --watch`); none in a sweep of its own. */
  spent?: LimitsSpent;
  /** Kueue's waitForPodsReady timeout, when Kueue queues Jobs and its configuration was read (docs/kueue.md). */
  kueueTimeout?: KueueTimeout;
  /** What healing judges from: the reads observe/heal-reads.ts made, the breaker's holds the sweep's Jobs record. */
  heal?: { reads: HealReads; holds: readonly OutageHold[] };
}

/** Pure: stuck containers + their owners + policy + now → one decision per Job (or per non-Job pod). */
export function judge(input: JudgeInput): Judgement {
  const outage = input.outage ?? assessOutage(input.stuck, input.policy.limits.outage);
  const decisions: Decision[] = [];
  for (const group of groupByOwner(input)) {
    decisions.push(decideGroup(group, input, outage));
  }
  applyLimits(decisions, input.policy, input.spent);
  decisions.sort(byNamespaceThenName);
  return { decisions, outage };
}

interface OwnerGroup {
  owner: PodOwner;
  containers: StuckContainer[];
}

function groupByOwner(input: Pick<JudgeInput, 'stuck' | 'ownerOf'>): OwnerGroup[] {
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
  if (owner.kind === 'not-a-job') {
    const ns = { name: namespace, labels: input.namespaceLabels.get(namespace) ?? {} };
    const owned = decideOwnedPod(group.containers, owner.owner, ns, input, outage);
    if (owned) return owned;
  }
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
    const owners = owner.kind === 'not-a-job' && owner.owner ? formatOwners([owner.owner]) : [];
    return makeDecision(worst, input.now, {
      rule: effective.rule,
      action: effective.action,
      plan,
      detail,
      job: undefined,
      jobName,
      owners,
    });
  }

  const job = owner.job;
  const jobGrace = graceForJob(effective, job.annotations);
  // After a heal, a pod stuck again on the same cause counts the time stuck before it too.
  const healMemory = readHealMemory(job);
  // A Job Kueue queues: its containers stuck on the remembered cause carry their earlier admissions.
  const memory = stuckMemoryOf(job);
  const asIs = new Map<StuckContainer, StuckContainer>();
  const carried = new Map<StuckContainer, Carried>();
  const containers = group.containers.map((c) => {
    const k = carriedFor(memory, c);
    const judged = withCarried(healMemory.length > 0 ? withHealedTime(healMemory, c) : c, k);
    asIs.set(judged, c);
    if (k && (k.seconds > 0 || k.evictions > 0)) carried.set(judged, k);
    return judged;
  });
  const spent = spentByJobSet(job, containers);
  const worst = spent?.container ?? mostOverdue(containers, jobGrace.grace, input.now);
  const stuckPods = new Set(group.containers.map((c) => c.podUid)).size;
  const base = { rule: effective.rule, action: effective.action, job, stuckPods, ...(spent ? { spentBy: spent.text } : {}) };
  const skip = (detail: string): Decision => makeDecision(worst, input.now, { ...base, plan: 'skip', detail });

  const blocker = reasonToLeaveAlone(job, effective);
  if (blocker) return { ...skip(blocker.detail), action: blocker.action ?? effective.action };

  const grace = job.jobSet?.unreadable
    ? { ...jobGrace, warnings: [...jobGrace.warnings, `${job.jobSet.unreadable}: its restarts get a full grace`] }
    : jobGrace;
  const heal = judgeHeal(job, effective, group.containers, { ...(input.heal ?? { reads: NO_READS, holds: [] }), outage, now: input.now });
  if (heal.heal) {
    const healed = containers.find((c) => c.podUid === heal.worst.podUid && c.container === heal.worst.container) ?? heal.worst;
    const d = makeDecision(healed, input.now, {
      ...base,
      plan: 'heal',
      detail: heal.detail,
      graceSeconds: grace.grace[healed.pullClass],
      graceSource: grace.sources[healed.pullClass],
      warnings: [...grace.warnings],
    });
    d.heal = heal.plan;
    d.healNote = heal.note;
    return d;
  }

  // Failed by its own condition; the pod failure policy's rule is kept for the fallback (act/fail-job.ts).
  const fallback = chooseMechanism(job);
  const before = carried.get(worst);
  // A permanent cause already known when Kueue ended an admission: its image is not pulled again (docs/kueue.md).
  const known =
    before && before.evictions > 0 && worst.pullClass === 'permanent'
      ? `its permanent cause is known (${describeCarried(before)}): failed at once`
      : undefined;
  const decided = judgeAgainstGrace(worst, input.now, outage, {
    base,
    effective,
    grace,
    annotations: job.annotations,
    spent: spent?.text ?? known,
    failing: { mechanism: 'condition', failJobCondition: fallback.conditionType, note: '' },
  });
  if (heal.note !== undefined) decided.healNote = heal.note;
  if (heal.warning !== undefined) decided.warnings.push(heal.warning);
  // Healing on: a Job the breaker holds records the registry host, whose recovery is evidence later.
  const trip = effective.heal && decided.plan === 'report' ? tripFor(outage, worst) : undefined;
  if (trip?.pullClass === 'transient') {
    const host = registryHost(worst.image);
    const held = job.annotations[ANNOTATIONS.outageHeld];
    if (!held?.startsWith(`${host} `)) decided.outageHold = formatOutageHold(host, rfc3339(input.now));
  }
  return job.queue ? queuedDecision(decided, job, before, asIs.get(worst) ?? worst, input) : decided;
}

/**
 * A Job Kueue queues, as decided: what its earlier admissions carried, the memory to write while
 * it is within grace, and a warning when its grace is not shorter than Kueue's timeout.
 */
function queuedDecision(d: Decision, job: JobView, before: Carried | undefined, asIs: StuckContainer, input: JudgeInput): Decision {
  const out: Decision = { ...d, warnings: [...d.warnings] };
  if (before) {
    out.queued = describeCarried(before);
    out.detail = `${d.detail}; ${out.queued}`;
  }
  // Within grace, or reported (a report-only rule, the outage breaker): its time stuck is kept.
  if ((d.plan === 'skip' && d.graceSeconds !== undefined) || d.plan === 'report') {
    const remember = rememberStuck(stuckMemoryOf(job), asIs, input.now);
    if (remember !== undefined) out.remember = remember;
  }
  if (input.kueueTimeout && d.graceSeconds !== undefined && d.graceSource) {
    const grace = { seconds: d.graceSeconds, from: describeGraceSource(d.graceSource) };
    const warning = kueueTimeoutWarning(d.pullClass, grace, input.kueueTimeout);
    if (warning) out.warnings.push(warning);
  }
  return out;
}

const rfc3339 = (d: Date): string => d.toISOString().replace(/\.\d{3}Z$/, 'Z');

/** Whether any rule, or the defaults, turns healing on: else nothing about healing is read. */
export function policyHeals(policy: Policy): boolean {
  return policy.defaults.heal || policy.rules.some((r) => r.heal === true && r.owners === undefined);
}

/**
 * The reads the evidence of this sweep's heals needs (judge/heal.ts): for each Job healing is on
 * for, that nothing leaves alone, of a healable class, and that could afford a heal. Pure.
 */
export function planHealReads(input: Omit<JudgeInput, 'now' | 'heal'>, holds: readonly OutageHold[]): HealNeeds {
  const needs = emptyNeeds();
  if (!policyHeals(input.policy)) return needs;
  for (const group of groupByOwner(input)) {
    if (group.owner.kind !== 'job') continue;
    const job = group.owner.job;
    const namespace = group.containers[0]!.namespace;
    const effective = resolveForNamespace(input.policy, { name: namespace, labels: input.namespaceLabels.get(namespace) ?? {} });
    if (!effective.heal || reasonToLeaveAlone(job, effective)) continue;
    addHealNeeds(needs, job, effective, group.containers, holds);
  }
  return needs;
}

/** The breaker's holds the Jobs behind this sweep's stuck pods record (judge/heal-evidence.ts). */
export function holdsOf(input: Pick<JudgeInput, 'stuck' | 'ownerOf'>): OutageHold[] {
  const jobs = new Map<string, JobView>();
  for (const c of input.stuck) {
    const owner = input.ownerOf(c.podUid);
    if (owner.kind === 'job') jobs.set(owner.job.uid, owner.job);
  }
  return outageHolds(jobs.values());
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

/**
 * Judges one Job again after a fresh read (a write conflicted). It keeps the slot it held under
 * the limits. `freshPod` replaces what was seen of the pod a precondition failed on.
 */
export function rejudgeJob(
  input: JudgeInput,
  previous: Decision,
  read: JobView,
  freshPod?: { podUid: string; stuck: StuckContainer[] },
): Decision {
  let fresh = keepJobSetMemory(previous.jobView, read);
  const previousUid = previous.jobView?.uid;
  if (previousUid !== fresh.uid) {
    return standDown(previous, 'skip', `Job ${fresh.name} was replaced (uid differs)`);
  }
  // A fresh read carries the Job's own controller only; what the attribute stage read above it stays.
  const known = previous.jobView?.owners ?? [];
  if (known.length > fresh.owners.length && known[0]?.uid === fresh.owners[0]?.uid) fresh = { ...fresh, owners: known };
  const seen = freshPod ? input.stuck.filter((c) => c.podUid !== freshPod.podUid).concat(freshPod.stuck) : input.stuck;
  const stuck = seen.filter((c) => {
    if (freshPod && freshPod.stuck.includes(c)) return true;
    const owner = input.ownerOf(c.podUid);
    return owner.kind === 'job' && owner.job.uid === fresh.uid;
  });
  const outage = input.outage ?? assessOutage(input.stuck, input.policy.limits.outage);
  const judgement = judge({ ...input, stuck, outage, spent: undefined, ownerOf: () => ({ kind: 'job', job: fresh }) });
  return judgement.decisions[0] ?? standDown(previous, 'skip', 'no longer stuck');
}

export { secondsBetween } from './decision.ts';
