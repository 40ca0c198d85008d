import { randomUUID } from 'node:crypto';
import type winston from 'winston';
import { act, type ActResult } from './act/act.ts';
import { actOnCronJobs, type CronJobResult } from './act/cronjob.ts';
import { writeInvalidPolicyEvent } from './act/invalid-policy.ts';
import { settleFinished } from './act/settle.ts';
import { attributeToJobs, jobNamesByNamespace, LIST_JOBS_THRESHOLD, SharedJobLists, type Attribution } from './attribute/attribute.ts';
import { statusOfActions, type SweepStatus } from './exit.ts';
import { capacityByJob, withCapacity } from './judge/capacity.ts';
import { countWithinGrace, type WithinGrace } from './judge/grace.ts';
import { CHUNK, inChunks } from './judge/chunks.ts';
import { holdsOf, judge, planHealReads, policyHeals, rejudgeJob, type JudgeInput } from './judge/judge.ts';
import { applyLimits, spendOne } from './judge/limits.ts';
import { dueForForceDelete, judgePending, type PendingJudgement } from './judge/pending.ts';
import { policyKueueWarnings } from './judge/queue.ts';
import { assessOutage } from './judge/outage.ts';
import { judgeQueued } from './judge/queued.ts';
import type { Decision, OutageAssessment } from './judge/types.ts';
import type { LimitsSpent } from './judge/limits.ts';
import { dryRunGateway } from './kube/dry-run-gateway.ts';
import { describeApiError, explainFailure, type ApiFailure } from './kube/errors.ts';
import type { KubeGateway } from './kube/gateway.ts';
import { serverNow } from './kube/server-clock.ts';
import { serverVersionWarning } from './kube/server-version.ts';
import { isActionError } from './outcomes.ts';
import { jobOwner, type JobView, type PodOwner, type StuckContainer } from './model.ts';
import { readHealEvidence } from './observe/heal-reads.ts';
import { readJobPods } from './observe/job-pods.ts';
import { readNamespaceLabels } from './observe/namespace-labels.ts';
import { listPendingJobs } from './observe/pending-jobs.ts';
import { observeStuckContainers, type ObserveOptions, type Observation } from './observe/pods.ts';
import { readKueueTimeout, type KueueConfigLocation } from './observe/kueue-timeout.ts';
import { LABELS, PENDING } from './policy/annotations.ts';
import { loadPolicy, problemSource, type LoadedPolicy, type PolicyLocation } from './policy/load.ts';
import { formatProblem } from './policy/problems.ts';
import type { Policy } from './policy/types.ts';
import { auditLine, CountedResults, cronJobAuditLine, FREEING, summarize, type SweepSummary } from './report/audit.ts';
import { logCronJob, logDecision, logSummary, outputRoom } from './report/logger.ts';
import { NO_SERVER_DATE, SweepLog } from './report/sweep-log.ts';
import { wordCronJobResult, wordResult } from './report/wording.ts';

const CONCURRENT_READS = 8;
/** Writes in flight at once; more gain nothing measurable (docs/performance.md). */
const CONCURRENT_WRITES = 16;
/** Namespace Job lists at once: fewer lists in flight keep a large dry run's peak memory lower (docs/performance.md). */
const CONCURRENT_JOB_LISTS = 2;

export interface SweepOptions {
  /** Nothing is changed, and the outcomes are audited as `would-`. */
  dryRun: boolean;
  /** `client` (the default): writes recorded, never sent; `server`: each sent with `dryRun=All`, judged, not persisted. */
  dryRunMode?: DryRunMode;
  /** Empty: every namespace. */
  namespaces: string[];
  policy: PolicyLocation;
  /** Kueue's configuration ConfigMap (docs/kueue.md); default kueue-system/kueue-manager-config. */
  kueueConfig?: KueueConfigLocation;
  /** Identifies this sweeper in Events (pod or host name). */
  instance: string;
  pageSize?: number;
  /** SIGTERM/SIGINT: writes in flight finish, no new one starts, the sweep reports what it did. */
  signal?: AbortSignal;
  /** `run --watch`: what a sweep of some of the stuck Jobs takes from the loop. */
  batch?: SweepBatch;
  /** Stuck Jobs judged at once past which a sweep goes in parts (default CHUNK; smaller in tests). */
  chunkSize?: number;
}

/** What `run --watch` hands a sweep beside its observation (src/watch/loop.ts). */
export interface SweepBatch {
  /** The breaker over every stuck pod the watch holds, not only this sweep's. */
  outage?: OutageAssessment;
  /** Without `outage`: the breaker over what this sweep observed beside every stuck pod the watch holds. */
  outageBeside?: (observed: readonly StuckContainer[]) => OutageAssessment;
  /**
   * Failures already spent in this backstop period, read as this sweep judges: with `onJudged`,
   * told synchronously after the judge, concurrent sweeps share the period's limits exactly.
   */
  spent?: () => LimitsSpent;
  onJudged?: (decisions: readonly Decision[]) => void;
  /** Whether a decision's audit line is written (an unchanged `skipped` one is not, again). */
  logs?: (result: ActResult) => boolean;
  /**
   * Only these Jobs' grace: no server version check and no list of the Jobs failed earlier (the
   * whole sweeps and those Jobs' own timers do both), so the first write waits on the Jobs' reads only.
   */
  focused?: boolean;
  /** The Job lists of a whole sweep made in parts, shared by its parts. */
  jobLists?: SharedJobLists;
  /**
   * Jobs (by uid) whose stuck pods the loop judges in a whole sweep's chunks or another batch: one
   * failed earlier is judged with its pods there, not also with the first part of this sweep.
   */
  judgedElsewhere?: ReadonlySet<string>;
  /**
   * A batch of timers: the Jobs (by uid) whose timers fired. Of the Jobs failed earlier it judges
   * only these and those of its stuck pods; the others wait for their own timers or the backstop.
   */
  timersOf?: ReadonlySet<string>;
  /**
   * The API server's time by the watch's clock (never ahead of it: docs/clock.md): a batch judged
   * from the cache and from reads kept since may send no request before judging, so no answer of
   * its own dates it.
   */
  serverNow?: () => Date | undefined;
}

export type DryRunMode = 'client' | 'server';

export interface SweepDeps {
  /** Retries are the gateway's business (kube/retrying.ts); the sweep calls each method once. */
  gateway: KubeGateway;
  /**
   * Local monotonic milliseconds (performance.now): how long since an answer arrived, never what
   * time it is. "Now" is the API server's clock (docs/clock.md).
   */
  monotonicMs: () => number;
  logger: winston.Logger;
  /** Where the stuck containers come from: listing the Pending pods, unless `run --watch` passes its cache (src/watch/). */
  observe?: (gateway: KubeGateway, options: ObserveOptions) => Promise<Observation>;
}

export type { SweepStatus } from './exit.ts';

export interface SweepResult {
  status: SweepStatus;
  summary: SweepSummary | undefined;
  results: ActResult[];
  cronJobs?: CronJobResult[];
  /** The policy ConfigMap did not exist: the default one (built-in defaults) or a named one (invalid). */
  policyMissing?: 'default' | 'named';
  /** The Jobs within grace, counted (a sweep in parts lets their decisions go); absent: count them from `results`. */
  withinGrace?: WithinGrace;
  /** A sweep in parts: the results it let go after their part (no Job failed, no error), counted; the others are in `results`. */
  counted?: CountedResults;
}

/**
 * One sweep: observe → classify → attribute → judge → act → report. Past CHUNK stuck Jobs the
 * stages after the pod list go in parts (judge/chunks.ts), each part's Job views and decisions
 * let go before the next: one sweep, one summary, the limits shared by its parts.
 */
export async function sweep(liveDeps: SweepDeps, options: SweepOptions): Promise<SweepResult> {
  // The one place a dry run is known, beside report's wording: its gateway.
  const deps = options.dryRun ? { ...liveDeps, gateway: dryRunGatewayOf(liveDeps.gateway, options.dryRunMode) } : liveDeps;
  // The claim id is unique to this sweep; its first 8 characters are the sweepId of the audit.
  const claim = randomUUID();
  const log = new SweepLog(deps.logger, claim.slice(0, 8));
  const startedMs = deps.monotonicMs();

  const loaded = await loadPolicy(deps.gateway, options.policy);
  if (!loaded.ok) return policyFailure(deps, options, log, startedMs, loaded);
  log.policyLoaded(loaded, problemSource(options.policy));
  const { policy } = loaded;

  const observation = await observePods(deps.gateway, options, log, deps.observe);
  if ('status' in observation) return observation;
  const outage =
    options.batch?.outage ?? options.batch?.outageBeside?.(observation.stuck) ?? assessOutage(observation.stuck, policy.limits.outage);
  const parts = partsOf(observation.stuck, outage, options.chunkSize);
  const around = observeAround(deps.gateway, options, log, policy, observation);
  const jobLists = parts.chunks.length > 1 ? new SharedJobLists(jobNamesByNamespace(observation.stuck)) : options.batch?.jobLists;
  const kueue = once(() => readKueueTimeout(deps.gateway, options.kueueConfig).then((k) => (log.info(k.said), k)));
  const spentHere = { total: 0, byNamespace: new Map<string, number>() };

  // In parts (not a batch of the watch, whose loop reads every result), what each part judged is let go after it.
  const inParts = parts.chunks.length > 1 && !options.batch;
  const stuckContainers = observation.stuck.length;
  if (inParts) observation.stuck = [];
  const counted = new CountedResults();
  const results: ActResult[] = [];
  const failed: ActResult[] = [];
  const withinGrace = countWithinGrace([]);
  let awaiting = 0;
  let otherErrors = 0;
  let first: { now: Date; nowMs: number } | undefined;
  let now: Date | undefined;
  for (const [i, keys] of parts.chunks.entries()) {
    if (i > 0 && options.signal?.aborted) break;
    const stuck = parts.chunks.length === 1 ? observation.stuck : keys.flatMap((key) => parts.groups.get(key) ?? []);
    const [shared, attribution] = await Promise.all([around, attributeChunk(deps.gateway, stuck, log, jobLists)]);
    if (i === 0) otherErrors += shared.errors;
    const ownerOf = ownerLookup(stuck, attribution, shared.unreadable);
    // A pending Job is judged with its stuck pods' part; one with none left, with the first.
    const inPart = new Set(keys);
    const { judgedElsewhere: elsewhere, timersOf } = options.batch ?? {};
    const labelled = shared.pendingJobs.filter(
      (j) => inPart.has(j.uid) || (i === 0 && !parts.groups.has(j.uid) && !elsewhere?.has(j.uid) && (timersOf?.has(j.uid) ?? true)),
    );
    const queues = await readForQueues(deps.gateway, policy, log, { stuck, ownerOf, pending: labelled, ...shared }, kueue);
    otherErrors += queues.errors;
    if (i === 0) await warnKueueTimeouts(deps.gateway, log, loaded, options.kueueConfig);
    const nowMs = deps.monotonicMs();
    now = latest(latest(serverNow(deps.gateway.lastServerDate(), nowMs - startedMs), options.batch?.serverNow?.()), now);
    if (!now) return noServerClock(log);
    if (!first) {
      first = { now, nowMs };
      log.sandboxWaits(observation.sandboxWaits, now);
    }

    const judgeInput: JudgeInput = { stuck, ownerOf, namespaceLabels: shared.labels, ...queues.judge, policy, now, outage };
    if (policyHeals(policy)) judgeInput.heal = await healEvidence(deps.gateway, judgeInput);
    // Read last, with no await before judging (decide).
    judgeInput.spent = options.batch?.spent?.() ?? spentHere;
    const decided = await decide(deps.gateway, judgeInput, labelled, observation.podCapacity, options.batch?.onJudged);
    for (const d of decided.decisions) if (d.plan === 'fail' || d.plan === 'heal') spendOne(spentHere, d.namespace);
    const acted = await carryOut(deps.gateway, judgeInput, decided.decisions, decided.finished, { options, log, claim });
    awaiting += decided.awaiting;
    otherErrors += acted.settleErrors;
    failed.push(...acted.failed);
    countWithinGrace(
      acted.results.map((r) => r.decision),
      withinGrace,
    );
    for (const r of acted.results) {
      if (inParts && !FREEING.has(r.outcome) && !isActionError(r)) counted.add(r);
      else results.push(r);
    }
    if (inParts) letGo(keys, stuck, parts.groups, observation.podCapacity);
  }
  if (!first || !now) return noServerClock(log);
  if (options.signal?.aborted) log.stopped();
  const cronJobs = await suspendCronJobs(deps.gateway, failed, policy, now, options);
  for (const c of cronJobs) logCronJob(log.logger, cronJobAuditLine(log.sweepId, c, policy.cronJobs.suspendAfter, options.dryRun));

  const summary = summarize({
    sweepId: log.sweepId,
    dryRun: options.dryRun,
    policy: loaded.description,
    namespaces: options.namespaces,
    startedAt: new Date(first.now.getTime() - (first.nowMs - startedMs)),
    finishedAt: new Date(first.now.getTime() + (deps.monotonicMs() - first.nowMs)),
    podsScanned: observation.podsScanned,
    stuckContainers,
    outage,
    results,
    counted,
    cronJobs,
    awaitingFailed: awaiting,
    otherErrors,
  });
  logSummary(deps.logger, summary);
  return {
    status: statusOfActions(summary.actionErrors),
    summary,
    results,
    counted,
    cronJobs,
    withinGrace,
    ...(loaded.builtin ? { policyMissing: 'default' as const } : {}),
  };
}

/** The stuck containers by the key `run --watch` keys its cache by (the Job's uid, or a bare pod's), in parts. */
function partsOf(
  stuck: readonly StuckContainer[],
  outage: OutageAssessment,
  size = CHUNK,
): { groups: Map<string, StuckContainer[]>; chunks: string[][] } {
  const groups = new Map<string, StuckContainer[]>();
  for (const c of stuck) {
    const key = jobOwner(c.controller)?.uid ?? c.podUid;
    const group = groups.get(key);
    if (group) group.push(c);
    else groups.set(key, [c]);
  }
  if (groups.size <= size) return { groups, chunks: [[...groups.keys()]] };
  return {
    groups,
    chunks: inChunks(
      [...groups].map(([key, containers]) => ({ key, containers })),
      outage,
      size,
    ),
  };
}

/** After its part: the part's stuck containers and their pods' capacity (its results are counted or kept). */
function letGo(
  keys: readonly string[],
  stuck: readonly StuckContainer[],
  groups: Map<string, StuckContainer[]>,
  podCapacity: Observation['podCapacity'],
): void {
  for (const key of keys) groups.delete(key);
  for (const c of stuck) podCapacity.delete(c.podUid);
}

function once<T>(make: () => Promise<T>): () => Promise<T> {
  let made: Promise<T> | undefined;
  return () => (made ??= make());
}

/** The later of two lower bounds of the API server's time (either may be missing). */
function latest(a: Date | undefined, b: Date | undefined): Date | undefined {
  if (!a || !b) return a ?? b;
  return a.getTime() >= b.getTime() ? a : b;
}

/** The loggers of the processes whose first sweep has run: the start-up checks are made once per process. */
const startedUp = new WeakSet<object>();

/**
 * At start-up (the first sweep of `sweep` or `run`): when Kueue's configuration can be read, a
 * warning for each grace of the policy that is not shorter than Kueue's timeout (docs/kueue.md).
 * Says nothing where there is no Kueue, or its configuration cannot be read.
 */
async function warnKueueTimeouts(
  gateway: KubeGateway,
  log: SweepLog,
  loaded: Extract<LoadedPolicy, { ok: true }>,
  at: KueueConfigLocation | undefined,
): Promise<void> {
  if (startedUp.has(log.logger)) return;
  startedUp.add(log.logger);
  const kueue = await readKueueTimeout(gateway, at);
  if (!kueue.timeout) return;
  log.info(kueue.said);
  for (const warning of policyKueueWarnings(loaded.policy, kueue.timeout)) log.warn(`start-up: ${warning}`);
}

/** A client dry run's writes are recorded, never sent; a server dry run's are sent to be judged, not persisted. */
function dryRunGatewayOf(live: KubeGateway, mode: DryRunMode = 'client'): KubeGateway {
  return mode === 'server' ? live.serverDryRun() : dryRunGateway(live);
}

/** What every part of a sweep shares, read beside the first part's Jobs. */
interface Around {
  labels: Map<string, Record<string, string>>;
  unreadable: Map<string, string>;
  /** The Jobs labelled pending (without those of unreadable namespaces Kueue queues: their rule is unknown). */
  pendingJobs: JobView[];
  /** Failures outside the decisions (listing the pending Jobs), each logged. */
  errors: number;
}

async function observePods(
  gateway: KubeGateway,
  options: SweepOptions,
  log: SweepLog,
  source: NonNullable<SweepDeps['observe']> = observeStuckContainers,
): Promise<Observation | SweepResult> {
  try {
    return await source(gateway, {
      namespaces: options.namespaces,
      pageSize: options.pageSize ?? 500,
      onRestart: log.listRestarted('pod list'),
    });
  } catch (error) {
    return unreachable(log, 'listing pods', describeApiError(error));
  }
}

/**
 * The reads after the pod list that no Job decides: the server's version, Namespace labels, the
 * pending Jobs. They run beside the first part's Job reads, so the first write waits for the
 * slowest of them, not for their sum.
 */
async function observeAround(
  gateway: KubeGateway,
  options: SweepOptions,
  log: SweepLog,
  policy: Policy,
  observation: Observation,
): Promise<Around> {
  const [tooOld, namespaceLabels, pendingJobs] = await Promise.all([
    // Read once the server answered: an unreachable one is reported by the list above.
    options.batch?.focused ? undefined : gateway.readServerVersion().then(serverVersionWarning, () => undefined),
    readNamespaceLabels(gateway, policy, observation.stuck, CONCURRENT_READS),
    options.batch?.focused
      ? { jobs: [] as JobView[], error: undefined }
      : listPendingJobs(gateway, options.namespaces, log.listRestarted('pending Job list')).then(
          (jobs) => ({ jobs, error: undefined }),
          (error: unknown) => ({ jobs: [] as JobView[], error: describeApiError(error).message }),
        ),
  ]);
  const { labels, unreadable } = namespaceLabels;
  const errors = log.observed({
    tooOld,
    nodesWithoutSandboxCondition: observation.nodesWithoutSandboxCondition,
    unreadableNamespaces: unreadable,
    pendingListError: pendingJobs.error === undefined ? undefined : { label: LABELS.pending, message: pendingJobs.error },
  });
  return {
    labels,
    unreadable,
    pendingJobs: pendingJobs.jobs.filter((j) => !unreadable.has(j.namespace) || j.pendingLabel !== PENDING.queued),
    errors,
  };
}

async function attributeChunk(gateway: KubeGateway, stuck: readonly StuckContainer[], log: SweepLog, shared: SharedJobLists | undefined) {
  const attribution = await attributeToJobs(gateway, stuck, {
    concurrency: CONCURRENT_READS,
    listConcurrency: CONCURRENT_JOB_LISTS,
    listThreshold: LIST_JOBS_THRESHOLD,
    onRestart: log.listRestarted('Job list'),
    ...(shared ? { shared } : {}),
  });
  log.unreadJobs(attribution.errors);
  return attribution;
}

/** Each stuck pod's owner; a pod of a namespace whose labels could not be read is unreadable (its rule is unknown). */
function ownerLookup(stuck: readonly StuckContainer[], attribution: Attribution, unreadable: ReadonlyMap<string, string>) {
  const containerByPod = new Map(stuck.map((c) => [c.podUid, c]));
  return (podUid: string): PodOwner => {
    const container = containerByPod.get(podUid);
    if (container && unreadable.has(container.namespace)) {
      return { kind: 'unreadable', owner: container.controller, detail: 'could not read Namespace labels for the policy' };
    }
    return attribution.ownerOf(podUid);
  };
}

/**
 * Jobs Kueue queues (docs/kueue.md): the labels of the namespaces of those it suspended (they
 * have no stuck pod), and Kueue's timeout (`kueue`, read once a sweep), read only when such a Job is judged.
 */
async function readForQueues(
  gateway: KubeGateway,
  policy: Policy,
  log: SweepLog,
  seen: {
    stuck: readonly StuckContainer[];
    ownerOf: (podUid: string) => PodOwner;
    pending: readonly JobView[];
    labels: Map<string, Record<string, string>>;
    unreadable: Map<string, string>;
  },
  kueue: () => Promise<Awaited<ReturnType<typeof readKueueTimeout>>>,
): Promise<{ judge: Pick<JudgeInput, 'kueueTimeout'>; errors: number }> {
  const queued = seen.pending.filter((j) => j.pendingLabel === PENDING.queued);
  const unread = queued.filter((j) => !seen.labels.has(j.namespace) && !seen.unreadable.has(j.namespace));
  const more = await readNamespaceLabels(gateway, policy, unread, CONCURRENT_READS);
  for (const [name, labels] of more.labels) seen.labels.set(name, labels);
  for (const [name, why] of more.unreadable) seen.unreadable.set(name, why);
  // Their Jobs are not judged this sweep (the labels decide their rule): each namespace counts as a failure.
  for (const [namespace, message] of more.unreadable) log.error('could not read Namespace labels', { namespace, error: message });
  const errors = more.unreadable.size;
  const queuedNow = seen.stuck.some((c) => {
    const owner = seen.ownerOf(c.podUid);
    return owner.kind === 'job' && owner.job.queue !== undefined;
  });
  if (queued.length === 0 && !queuedNow) return { judge: {}, errors };
  const { timeout } = await kueue();
  return { judge: timeout ? { kueueTimeout: timeout } : {}, errors };
}

/** What healing judges from (judge/heal.ts): the breaker's holds the Jobs record, and the reads their evidence needs. */
async function healEvidence(gateway: KubeGateway, input: JudgeInput): Promise<NonNullable<JudgeInput['heal']>> {
  const holds = holdsOf(input);
  const reads = await readHealEvidence(gateway, planHealReads(input, holds), CONCURRENT_READS);
  return { reads, holds };
}

/** Act on the decisions (each audited as it completes), then settle the finished pending Jobs. */
async function carryOut(
  gateway: KubeGateway,
  judged: JudgeInput,
  decisions: Decision[],
  finished: JobView[],
  { options, log, claim }: { options: SweepOptions; log: SweepLog; claim: string },
): Promise<{ results: ActResult[]; failed: ActResult[]; settleErrors: number }> {
  const { now } = judged;
  const { dryRun, instance, signal } = options;
  const live = await act(gateway, decisions, {
    concurrency: CONCURRENT_WRITES,
    now,
    instance,
    claim,
    signal,
    rejudge: (decision, fresh, freshPod) => ({ ...rejudgeJob(judged, decision, fresh, freshPod), capacity: decision.capacity }),
    onResult: (result) => {
      if (options.batch?.logs?.(result) !== false) logDecision(log.logger, auditLine(log.sweepId, wordResult(result, dryRun), dryRun));
      return outputRoom(log.logger);
    },
  });
  const reporter = { instance, now };
  const settled = await settleFinished(gateway, finished, { concurrency: CONCURRENT_WRITES, reporter, signal });
  return {
    results: live.map((r) => wordResult(r, dryRun)),
    failed: live.filter((r) => r.outcome === 'failed'),
    settleErrors: log.settled(settled, dryRun),
  };
}

/** The CronJobs behind the sweep's failed Jobs: counted and suspended, none once the sweep was told to stop (a write too). */
async function suspendCronJobs(
  gateway: KubeGateway,
  failed: readonly ActResult[],
  policy: Policy,
  now: Date,
  { signal, instance, dryRun }: SweepOptions,
): Promise<CronJobResult[]> {
  if (signal?.aborted) return [];
  const { suspendAfter } = policy.cronJobs;
  const counted = await actOnCronJobs(gateway, failed, { suspendAfter, concurrency: CONCURRENT_WRITES, now, instance });
  return counted.map((c) => wordCronJobResult(c, dryRun));
}

/**
 * The judge's decisions, the pending Jobs' lines and each Job's capacity, as one list. Only that
 * list outlives this call: every intermediate copy of a decision kept through act costs memory per
 * stuck Job (docs/performance.md).
 */
async function decide(
  gateway: KubeGateway,
  judgeInput: JudgeInput,
  labelled: JobView[],
  podCapacity: Observation['podCapacity'],
  onJudged?: (decisions: readonly Decision[]) => void,
): Promise<PendingJudgement> {
  const { policy, now } = judgeInput;
  // No await between reading the period's spent limits and judging, nor before onJudged.
  const judgement = judge(judgeInput);
  onJudged?.(judgement.decisions);
  const { confirmWithinSeconds, forceDeleteAfterSeconds } = policy.limits;
  const due = dueForForceDelete({ labelled, decisions: judgement.decisions, forceDeleteAfterSeconds, now });
  const podsByJob = await readJobPods(gateway, due, CONCURRENT_READS);
  const pending = judgePending({ labelled, decisions: judgement.decisions, confirmWithinSeconds, forceDeleteAfterSeconds, podsByJob, now });
  const queued = judgeQueued({ ...judgeInput, labelled, decisions: judgement.decisions });
  // A queued Job failed while it waits counts against the limits like any other.
  if (queued.some((d) => d.plan === 'fail')) applyLimits(pending.decisions.concat(queued), policy, judgeInput.spent);
  const decisions = withCapacity(pending.decisions.concat(queued), capacityByJob(judgeInput.stuck, podCapacity, now));
  return { ...pending, decisions };
}

async function policyFailure(
  deps: SweepDeps,
  options: SweepOptions,
  log: SweepLog,
  startedMs: number,
  loaded: Exclude<LoadedPolicy, { ok: true }>,
): Promise<SweepResult> {
  if (loaded.kind === 'unreachable') return unreachable(log, `reading ${loaded.description}`, loaded.failure);
  if (loaded.kind === 'unreadable-file') {
    log.nothingChanged(`cannot read policy ${loaded.description}: ${loaded.message}`);
    return { status: 'invalid-policy', summary: undefined, results: [] };
  }
  const problems = loaded.problems.map((p) => formatProblem(problemSource(options.policy), p));
  log.invalidPolicy(loaded.description, problems);
  const result: SweepResult = {
    status: 'invalid-policy',
    summary: undefined,
    results: [],
    ...(loaded.missing ? { policyMissing: 'named' as const } : {}),
  };
  if (options.policy.kind !== 'configmap') return result;
  const now = serverNow(deps.gateway.lastServerDate(), deps.monotonicMs() - startedMs);
  if (!now) {
    log.error(`the InvalidPolicy Event is not written: ${NO_SERVER_DATE}`);
    return result;
  }
  const { namespace, name } = options.policy;
  const configMap = { namespace, name, uid: loaded.configMapUid };
  log.invalidPolicyEvent(await writeInvalidPolicyEvent(deps.gateway, configMap, problems, { instance: options.instance, now }));
  return result;
}

/** Without the API server's clock no time stuck can be measured: nothing is judged or written. */
function noServerClock(log: SweepLog): SweepResult {
  log.nothingChanged(`${NO_SERVER_DATE}: the time stuck cannot be measured and the sweeper's own clock is not trusted`);
  return { status: 'no-server-clock', summary: undefined, results: [] };
}

function unreachable(log: SweepLog, what: string, failure: ApiFailure): SweepResult {
  log.nothingChanged(`${what}: ${explainFailure(failure)}`);
  return { status: 'unreachable', summary: undefined, results: [] };
}
