import { randomUUID } from 'node:crypto';
import type winston from 'winston';
import { act, type ActResult } from './act/act.ts';
import { actOnCronJobs, type CronJobResult } from './act/cronjob.ts';
import { writeInvalidPolicyEvent } from './act/invalid-policy.ts';
import { settleFinished } from './act/settle.ts';
import { attributeToJobs, LIST_JOBS_THRESHOLD, type SharedJobLists } from './attribute/attribute.ts';
import { statusOfActions, type SweepStatus } from './exit.ts';
import { capacityByJob, withCapacity } from './judge/capacity.ts';
import { holdsOf, judge, planHealReads, policyHeals, rejudgeJob, type JudgeInput } from './judge/judge.ts';
import { applyLimits } from './judge/limits.ts';
import { dueForForceDelete, judgePending, type PendingJudgement } from './judge/pending.ts';
import { policyKueueWarnings } from './judge/queue.ts';
import { judgeQueued } from './judge/queued.ts';
import type { Decision, Judgement, OutageAssessment } from './judge/types.ts';
import type { LimitsSpent } from './judge/limits.ts';
import { dryRunGateway } from './kube/dry-run-gateway.ts';
import { describeApiError, explainFailure, type ApiFailure } from './kube/errors.ts';
import type { KubeGateway } from './kube/gateway.ts';
import { serverNow } from './kube/server-clock.ts';
import { serverVersionWarning } from './kube/server-version.ts';
import type { JobView, PodOwner } from './model.ts';
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
import { auditLine, cronJobAuditLine, summarize, type SweepSummary } from './report/audit.ts';
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
}

/** What `run --watch` hands a sweep beside its observation (src/watch/loop.ts). */
export interface SweepBatch {
  /** The breaker over every stuck pod the watch holds, not only this sweep's. */
  outage?: OutageAssessment;
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
}

/** One sweep: observe → classify → attribute → judge → act → report. */
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

  const observed = await observe(deps.gateway, options, log, loaded.policy, deps.observe);
  if ('status' in observed) return observed;
  await warnKueueTimeouts(deps.gateway, log, loaded, options.kueueConfig);
  const nowMs = deps.monotonicMs();
  const now = latest(serverNow(deps.gateway.lastServerDate(), nowMs - startedMs), options.batch?.serverNow?.());
  if (!now) return noServerClock(log);
  log.sandboxWaits(observed.observation.sandboxWaits, now);

  const { outage: wholeOutage, spent } = options.batch ?? {};
  const judgeInput: JudgeInput = {
    ...observed.judgeInput,
    policy: loaded.policy,
    now,
    ...(wholeOutage ? { outage: wholeOutage } : {}),
  };
  if (policyHeals(loaded.policy)) judgeInput.heal = await healEvidence(deps.gateway, judgeInput);
  // Read last, with no await before judging (decide).
  if (spent) judgeInput.spent = spent();
  const { outage, decisions, finished, awaiting } = await decide(
    deps.gateway,
    judgeInput,
    observed.pendingJobs,
    observed.observation,
    options.batch?.onJudged,
  );
  const acted = await carryOut(deps.gateway, { ...judgeInput, outage }, decisions, finished, { options, log, claim });
  const otherErrors = observed.errors + acted.settleErrors;

  const summary = summarize({
    sweepId: log.sweepId,
    dryRun: options.dryRun,
    policy: loaded.description,
    namespaces: options.namespaces,
    startedAt: new Date(now.getTime() - (nowMs - startedMs)),
    finishedAt: new Date(now.getTime() + (deps.monotonicMs() - nowMs)),
    podsScanned: observed.observation.podsScanned,
    stuckContainers: observed.observation.stuck.length,
    outage,
    results: acted.results,
    cronJobs: acted.cronJobs,
    awaitingFailed: awaiting,
    otherErrors,
  });
  logSummary(deps.logger, summary);
  return {
    status: statusOfActions(summary.actionErrors),
    summary,
    results: acted.results,
    cronJobs: acted.cronJobs,
    ...(loaded.builtin ? { policyMissing: 'default' as const } : {}),
  };
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

interface Observed {
  observation: Observation;
  judgeInput: Pick<JudgeInput, 'stuck' | 'ownerOf' | 'namespaceLabels'>;
  pendingJobs: JobView[];
  /** Failures outside the decisions (listing the pending Jobs), each logged. */
  errors: number;
}

/** The pod list, then the reads that depend on it only: Jobs, Namespace labels, pending Jobs, the server's version. */
async function observe(
  gateway: KubeGateway,
  options: SweepOptions,
  log: SweepLog,
  policy: Policy,
  source: NonNullable<SweepDeps['observe']> = observeStuckContainers,
): Promise<Observed | SweepResult> {
  let observation;
  try {
    observation = await source(gateway, {
      namespaces: options.namespaces,
      pageSize: options.pageSize ?? 500,
      onRestart: log.listRestarted('pod list'),
    });
  } catch (error) {
    return unreachable(log, 'listing pods', describeApiError(error));
  }
  // The reads after the pod list do not depend on one another: they run together, so the first
  // write waits for the slowest of them, not for their sum.
  const [tooOld, attribution, namespaceLabels, pendingJobs] = await Promise.all([
    // Read once the server answered: an unreachable one is reported by the list above.
    options.batch?.focused ? undefined : gateway.readServerVersion().then(serverVersionWarning, () => undefined),
    attributeToJobs(gateway, observation.stuck, {
      concurrency: CONCURRENT_READS,
      listConcurrency: CONCURRENT_JOB_LISTS,
      listThreshold: LIST_JOBS_THRESHOLD,
      onRestart: log.listRestarted('Job list'),
      ...(options.batch?.jobLists ? { shared: options.batch.jobLists } : {}),
    }),
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
    jobErrors: attribution.errors,
    unreadableNamespaces: unreadable,
    pendingListError: pendingJobs.error === undefined ? undefined : { label: LABELS.pending, message: pendingJobs.error },
  });
  const containerByPod = new Map(observation.stuck.map((c) => [c.podUid, c]));
  const ownerOf = (podUid: string): PodOwner => {
    const container = containerByPod.get(podUid);
    if (container && unreadable.has(container.namespace)) {
      return { kind: 'unreadable', owner: container.controller, detail: 'could not read Namespace labels for the policy' };
    }
    return attribution.ownerOf(podUid);
  };
  const queues = await readForQueues(
    gateway,
    policy,
    log,
    {
      stuck: observation.stuck,
      ownerOf,
      pending: pendingJobs.jobs,
      labels,
      unreadable,
    },
    options.kueueConfig,
  );
  return {
    observation,
    judgeInput: { stuck: observation.stuck, ownerOf, namespaceLabels: labels, ...queues.judge },
    pendingJobs: pendingJobs.jobs.filter((j) => !unreadable.has(j.namespace) || j.pendingLabel !== PENDING.queued),
    errors: errors + queues.errors,
  };
}

/**
 * Jobs Kueue queues (docs/kueue.md): the labels of the namespaces of those it suspended (they
 * have no stuck pod), and Kueue's timeout, read only when such a Job is judged.
 */
async function readForQueues(
  gateway: KubeGateway,
  policy: Policy,
  log: SweepLog,
  seen: {
    stuck: Observation['stuck'];
    ownerOf: (podUid: string) => PodOwner;
    pending: readonly JobView[];
    labels: Map<string, Record<string, string>>;
    unreadable: Map<string, string>;
  },
  kueueConfig: KueueConfigLocation | undefined,
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
  const kueue = await readKueueTimeout(gateway, kueueConfig);
  log.info(kueue.said);
  return { judge: kueue.timeout ? { kueueTimeout: kueue.timeout } : {}, errors };
}

/** What healing judges from (judge/heal.ts): the breaker's holds the Jobs record, and the reads their evidence needs. */
async function healEvidence(gateway: KubeGateway, input: JudgeInput): Promise<NonNullable<JudgeInput['heal']>> {
  const holds = holdsOf(input);
  const reads = await readHealEvidence(gateway, planHealReads(input, holds), CONCURRENT_READS);
  return { reads, holds };
}

/** Act on the decisions (each audited as it completes), settle the finished pending Jobs, then the CronJobs. */
async function carryOut(
  gateway: KubeGateway,
  judged: JudgeInput & Pick<Judgement, 'outage'>,
  decisions: Decision[],
  finished: JobView[],
  { options, log, claim }: { options: SweepOptions; log: SweepLog; claim: string },
): Promise<{ results: ActResult[]; cronJobs: CronJobResult[]; settleErrors: number }> {
  const { now, policy } = judged;
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
  const settleErrors = log.settled(settled, dryRun);
  if (signal?.aborted) log.stopped();
  // CronJob suspension is a write too: none starts once the sweep was told to stop.
  const { suspendAfter } = policy.cronJobs;
  const cronJobs = signal?.aborted
    ? []
    : (await actOnCronJobs(gateway, live, { suspendAfter, concurrency: CONCURRENT_WRITES, now, instance })).map((c) =>
        wordCronJobResult(c, dryRun),
      );
  for (const c of cronJobs) logCronJob(log.logger, cronJobAuditLine(log.sweepId, c, suspendAfter, dryRun));
  return { results: live.map((r) => wordResult(r, dryRun)), cronJobs, settleErrors };
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
  observation: Pick<Observation, 'stuck' | 'podCapacity'>,
  onJudged?: (decisions: readonly Decision[]) => void,
): Promise<PendingJudgement & Pick<Judgement, 'outage'>> {
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
  const decisions = withCapacity(pending.decisions.concat(queued), capacityByJob(observation.stuck, observation.podCapacity, now));
  return { ...pending, decisions, outage: judgement.outage };
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
