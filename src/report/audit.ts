import { truncate } from '../text.ts';
import type { ActResult, CronJobResult, OutageAssessment } from '../judge/types.ts';
import { sumCapacity, type StuckCapacity } from '../judge/capacity.ts';
import { hintFor } from '../judge/hint.ts';
import { exitStatusOf, statusOfActions } from '../exit.ts';
import { isActionError, type CronJobOutcome } from '../outcomes.ts';
import type { GraceSourceKind } from '../policy/types.ts';
import { PULL_CLASSES, outcomesFor, type Outcome, type PullClass } from '../model.ts';
import { registryHost } from '../classify/reference.ts';

/** One line per decision: the fields of docs/contract.md "Audit log", plus context. */
export interface AuditLine {
  sweepId: string;
  namespace: string;
  job: string | null;
  cronJob: string | null;
  /** The owner chain, `Kind/name` nearest first: above the Job, or the pod's own controller without one. */
  owners: string[];
  pod: string;
  container: string;
  containerKind: string;
  /** The reference whose pull failed (an image volume's, when `volume` is set). */
  image: string;
  /** The image volume whose pull failed, else null. */
  volume: string | null;
  reason: string;
  class: PullClass;
  stuckSeconds: number;
  graceSeconds: number | null;
  /** Where graceSeconds came from; null with it. */
  graceSource: GraceSourceKind | null;
  /** The Job's grace annotation asked for more than jobOverrides.maxGrace. */
  graceClamped: boolean;
  rule: string;
  action: string;
  outcome: Outcome;
  dryRun: boolean;
  detail: string;
  /** What to do about the cause, in a few words (the Job's message and Event carry it too). */
  hint: string;
  /** How the Job was failed: `condition`, or the fallback and why (`activeDeadlineSeconds (the status write was refused ...)`). */
  mechanism: string | null;
  error: string | null;
  warnings: string[];
  waitingMessage: string;
  /** What the Job's stuck pods requested and how long they held it, when it was (or would be) failed. */
  freed: StuckCapacity | null;
  /** Healing on for this Job's rule and class: the evidence its cause is gone, or why it was not healed (docs/how-it-works.md "Healing"). */
  heal: string | null;
}

/** Outcomes whose Job's capacity the audit and the summary count as freed. */
export const FREEING: ReadonlySet<Outcome> = new Set(['failed', 'would-fail']);

/** The kubelet's message is the registry's text: cut it so one decision stays one readable line. */
export const WAITING_MESSAGE_LIMIT = 2048;

export function auditLine(sweepId: string, result: ActResult, dryRun: boolean): AuditLine {
  const d = result.decision;
  return {
    sweepId,
    namespace: d.namespace,
    job: d.job ?? null,
    cronJob: d.cronJob ?? null,
    owners: d.owners,
    pod: d.pod,
    container: d.container,
    containerKind: d.containerKind,
    image: d.image,
    volume: d.volume ?? null,
    reason: d.reason,
    class: d.pullClass,
    stuckSeconds: d.stuckSeconds,
    graceSeconds: d.graceSeconds ?? null,
    graceSource: d.graceSource?.kind ?? null,
    graceClamped: d.graceSource?.clamped ?? false,
    rule: d.rule,
    action: d.action,
    outcome: result.outcome,
    dryRun,
    detail: d.detail,
    hint: hintFor(d),
    mechanism: d.mechanism === undefined ? null : d.fallback ? `${d.mechanism} (${d.fallback})` : d.mechanism,
    error: result.error ?? null,
    warnings: d.warnings,
    waitingMessage: truncate(d.message, WAITING_MESSAGE_LIMIT),
    freed: FREEING.has(result.outcome) ? (d.capacity ?? null) : null,
    heal: d.healNote ?? null,
  };
}

/** One line per CronJob whose Jobs the sweep failed, when cronJobs.suspendAfter is on. */
export interface CronJobAuditLine {
  sweepId: string;
  namespace: string;
  cronJob: string;
  image: string | null;
  /** Jobs failed in a row on that image, this sweep included. */
  failedInARow: number | null;
  suspendAfter: number;
  jobs: string[];
  outcome: CronJobOutcome;
  dryRun: boolean;
  detail: string;
  error: string | null;
}

export function cronJobAuditLine(sweepId: string, r: CronJobResult, suspendAfter: number, dryRun: boolean): CronJobAuditLine {
  return {
    sweepId,
    namespace: r.namespace,
    cronJob: r.cronJob,
    image: r.image ?? null,
    failedInARow: r.failedInARow ?? null,
    suspendAfter,
    jobs: r.jobs,
    outcome: r.outcome,
    dryRun,
    detail: r.detail,
    error: r.error ?? null,
  };
}

export interface SweepSummary {
  sweepId: string;
  dryRun: boolean;
  policy: string;
  namespaces: string[];
  startedAt: string;
  durationMs: number;
  podsScanned: number;
  stuckContainers: number;
  decisions: number;
  /** Every outcome of the mode (live: failed, reported...; dry run: would-fail, would-report...), zero or more. */
  outcomes: Partial<Record<Outcome, number>>;
  byClass: Record<PullClass, number>;
  byNamespace: Record<string, Partial<Record<Outcome, number>>>;
  deferred: number;
  /** Jobs failed by the sweeper (now or earlier) that the Job controller has not yet marked Failed. */
  awaitingFailed: number;
  /** Actions (or lookups) that failed; any makes the exit status 1. */
  actionErrors: number;
  /** CronJobs by outcome (suspended, counted...; would-suspend, would-count in a dry run). */
  cronJobs: Partial<Record<CronJobOutcome, number>>;
  outage: OutageAssessment;
  exitCode: number;
  /** The stuck pods of the Jobs failed (in a dry run: that would be failed), added up. */
  freed: StuckCapacity;
}

/** How many results had these labels (those of the summary and the metrics). */
export interface CountedEntry {
  outcome: Outcome;
  pullClass: PullClass;
  namespace: string;
  registry: string;
  results: number;
}

/**
 * The results a sweep in parts lets go after their part (no Job failed, no error), counted by
 * what the summary and the metrics say of them: 50,000 kept decisions were 16 MB of a sweep's peak.
 */
export class CountedResults {
  total = 0;
  private readonly byLabels = new Map<string, Omit<CountedEntry, 'registry'> & { image: string }>();

  add(r: ActResult): void {
    const { pullClass, namespace, image } = r.decision;
    const key = `${r.outcome} ${pullClass} ${namespace} ${image}`;
    const entry = this.byLabels.get(key);
    if (entry) entry.results += 1;
    else this.byLabels.set(key, { outcome: r.outcome, pullClass, namespace, image, results: 1 });
    this.total += 1;
  }

  /** By registry: one entry per image counted, merged by the caller's labels. */
  *entries(): Iterable<CountedEntry> {
    for (const { image, ...labels } of this.byLabels.values()) yield { ...labels, registry: registryHost(image) };
  }
}

export interface SummaryInput {
  sweepId: string;
  dryRun: boolean;
  policy: string;
  namespaces: string[];
  startedAt: Date;
  finishedAt: Date;
  podsScanned: number;
  stuckContainers: number;
  outage: OutageAssessment;
  results: readonly ActResult[];
  /** Results not in `results`, counted (a sweep in parts). */
  counted?: CountedResults;
  cronJobs?: readonly CronJobResult[];
  /** Pending Jobs seen by this sweep (failed earlier, not finished). */
  awaitingFailed?: number;
  /** Failures outside the decisions, each logged: listing the pending Jobs, settling a finished one. */
  otherErrors?: number;
}

export function summarize(input: SummaryInput): SweepSummary {
  const outcomes: Partial<Record<Outcome, number>> = Object.fromEntries(outcomesFor(input.dryRun).map((o) => [o, 0]));
  const byClass = Object.fromEntries(PULL_CLASSES.map((c) => [c, 0])) as Record<PullClass, number>;
  const byNamespace: SweepSummary['byNamespace'] = {};
  let actionErrors = 0;
  for (const r of input.results) {
    outcomes[r.outcome] = (outcomes[r.outcome] ?? 0) + 1;
    byClass[r.decision.pullClass] += 1;
    const ns = (byNamespace[r.decision.namespace] ??= {});
    ns[r.outcome] = (ns[r.outcome] ?? 0) + 1;
    if (isActionError(r)) actionErrors += 1;
  }
  for (const e of input.counted?.entries() ?? []) {
    outcomes[e.outcome] = (outcomes[e.outcome] ?? 0) + e.results;
    byClass[e.pullClass] += e.results;
    const ns = (byNamespace[e.namespace] ??= {});
    ns[e.outcome] = (ns[e.outcome] ?? 0) + e.results;
  }
  actionErrors += input.otherErrors ?? 0;
  const cronJobs: SweepSummary['cronJobs'] = {};
  for (const c of input.cronJobs ?? []) {
    cronJobs[c.outcome] = (cronJobs[c.outcome] ?? 0) + 1;
    if (isActionError(c)) actionErrors += 1;
  }
  return {
    sweepId: input.sweepId,
    dryRun: input.dryRun,
    policy: input.policy,
    namespaces: input.namespaces,
    startedAt: input.startedAt.toISOString(),
    durationMs: input.finishedAt.getTime() - input.startedAt.getTime(),
    podsScanned: input.podsScanned,
    stuckContainers: input.stuckContainers,
    decisions: input.results.length + (input.counted?.total ?? 0),
    outcomes,
    byClass,
    byNamespace,
    deferred: outcomes.deferred ?? 0,
    // Failed now (the Job controller acts a moment later), plus those failed earlier and not finished.
    awaitingFailed: (outcomes.failed ?? 0) + (input.awaitingFailed ?? 0),
    actionErrors,
    cronJobs,
    outage: input.outage,
    exitCode: exitStatusOf(statusOfActions(actionErrors)),
    freed: sumCapacity(
      input.results.filter((r) => FREEING.has(r.outcome)).flatMap((r) => (r.decision.capacity ? [r.decision.capacity] : [])),
    ),
  };
}
