import { randomUUID } from 'node:crypto';
import type winston from 'winston';
import { act, type ActResult } from './act/act.ts';
import { actOnCronJobs, type CronJobResult } from './act/cronjob.ts';
import { settledAsDryRun } from './act/dry-run.ts';
import { writeInvalidPolicyEvent } from './act/invalid-policy.ts';
import { settleFinished } from './act/settle.ts';
import { attributeToJobs } from './attribute/attribute.ts';
import { judge, rejudgeJob, type JudgeInput } from './judge/judge.ts';
import type { Judgement } from './judge/types.ts';
import { dueForForceDelete, judgePending, type PendingJudgement } from './judge/pending.ts';
import { dryRunGateway } from './kube/dry-run-gateway.ts';
import { describeApiError, explainFailure, type ApiFailure } from './kube/errors.ts';
import type { KubeGateway } from './kube/gateway.ts';
import { serverNow } from './kube/server-clock.ts';
import { serverVersionWarning } from './kube/server-version.ts';
import type { JobView, PodOwner } from './model.ts';
import { readJobPods } from './observe/job-pods.ts';
import { readNamespaceLabels } from './observe/namespace-labels.ts';
import { listPendingJobs } from './observe/pending-jobs.ts';
import { observeStuckContainers, type ObserveOptions, type Observation } from './observe/pods.ts';
import { LABELS } from './policy/annotations.ts';
import { SYSTEM_NAMESPACES } from './policy/defaults.ts';
import { loadPolicy, type LoadedPolicy, type PolicyLocation } from './policy/load.ts';
import { formatProblem } from './policy/problems.ts';
import { auditLine, cronJobAuditLine, summarize, type SweepSummary } from './report/audit.ts';
import { capacityByJob, withCapacity } from './judge/capacity.ts';
import { logCronJob, logDecision, logSummary } from './report/logger.ts';

const CONCURRENT_READS = 8;
/** Writes in flight at once; more gain nothing measurable (npm run bench). */
const CONCURRENT_WRITES = 16;
/** From this many stuck Jobs in one namespace on, one paged LIST is cheaper than GETs. */
const LIST_JOBS_THRESHOLD = 10;
/** Namespace Job lists at once: 2 instead of 8 lowered a 1,500-Job dry run's peak by 2 MiB (docs/performance.md). */
const CONCURRENT_JOB_LISTS = 2;
const SANDBOX_CONDITION_MISSING =
  'the kubelet of these nodes writes no PodReadyToStartContainers condition (feature gate PodReadyToStartContainersCondition off, ' +
  'possible before Kubernetes 1.37): pulls that hang without an error are not detected on them, and the stuck time of a pull error counts from before its sandbox was up';
const SANDBOX_WAIT_WARN_MS = 30_000;
const SANDBOX_NOT_READY =
  'pods have waited over 30 s for their sandbox (PodReadyToStartContainers False) with containers still to be created: either the sandbox ' +
  'does not come up, or, on a kubelet before Kubernetes 1.36 (which marks the sandbox ready only after the image pull), their pull hangs ' +
  'without an error; the sweeper cannot tell which and does not act on them';

export interface SweepOptions {
  /** Writes are recorded, not sent (kube/dry-run-gateway.ts), and audited as `would-`. */
  dryRun: boolean;
  /** Empty: every namespace. */
  namespaces: string[];
  policy: PolicyLocation;
  /** Identifies this sweeper in Events (pod or host name). */
  instance: string;
  pageSize?: number;
  /** SIGTERM/SIGINT: writes in flight finish, no new one starts, the sweep reports what it did. */
  signal?: AbortSignal;
}

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

/**
 * How the sweep ended: `done` (whatever it decided), `actions-failed` (some action or lookup
 * failed), `invalid-policy`, `unreachable` or `no-server-clock` (no answer carried a Date header;
 * nothing was changed).
 */
export type SweepStatus = 'done' | 'actions-failed' | 'invalid-policy' | 'unreachable' | 'no-server-clock';

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
  const deps = options.dryRun ? { ...liveDeps, gateway: dryRunGateway(liveDeps.gateway) } : liveDeps;
  const { gateway, monotonicMs, logger } = deps;
  // The claim id is unique to this sweep; its first 8 characters are the sweepId of the audit.
  const claim = randomUUID();
  const sweepId = claim.slice(0, 8);
  const startedMs = monotonicMs();

  const loaded = await loadPolicy(gateway, options.policy);
  if (!loaded.ok) return policyFailure(deps, options, sweepId, startedMs, loaded);
  if (loaded.builtin) {
    logger.warn(
      `policy: ${loaded.description}: sweeping on the built-in defaults (ignore ${SYSTEM_NAMESPACES.join(', ')}; default grace elsewhere); ` +
        'create the ConfigMap, or name one with --policy-configmap',
      { sweepId },
    );
  }
  for (const w of loaded.warnings) logger.warn(`policy warning: ${formatProblem(loaded.description, w)}`, { sweepId });
  const policy = loaded.policy;

  let observation;
  try {
    observation = await (deps.observe ?? observeStuckContainers)(gateway, {
      namespaces: options.namespaces,
      pageSize: options.pageSize ?? 500,
      onRestart: (ns, n) =>
        logger.warn('pod list continue token expired; listing again from the start', { sweepId, namespace: ns ?? '*', restart: n }),
    });
  } catch (error) {
    return unreachable(logger, sweepId, 'listing pods', describeApiError(error));
  }
  // The reads after the pod list do not depend on one another: they run together, so the first
  // write waits for the slowest of them, not for their sum.
  const [tooOld, attribution, namespaceLabels, pendingJobs] = await Promise.all([
    // Read once the server answered: an unreachable one is reported by the list above.
    gateway.readServerVersion().then(serverVersionWarning, () => undefined),
    attributeToJobs(gateway, observation.stuck, {
      concurrency: CONCURRENT_READS,
      listConcurrency: CONCURRENT_JOB_LISTS,
      listThreshold: LIST_JOBS_THRESHOLD,
      onRestart: (ns, n) =>
        logger.warn('Job list continue token expired; listing again from the start', { sweepId, namespace: ns, restart: n }),
    }),
    readNamespaceLabels(gateway, policy, observation.stuck, CONCURRENT_READS),
    listPendingJobs(gateway, options.namespaces, (ns, n) =>
      logger.warn('pending Job list continue token expired; listing again from the start', { sweepId, namespace: ns ?? '*', restart: n }),
    ).then(
      (jobs) => ({ jobs, error: undefined }),
      (error: unknown) => ({ jobs: [] as JobView[], error }),
    ),
  ]);
  if (tooOld) logger.warn(tooOld, { sweepId });
  const blind = [...observation.nodesWithoutSandboxCondition].sort();
  if (blind.length > 0) logger.warn(SANDBOX_CONDITION_MISSING, { sweepId, nodes: blind });
  for (const e of attribution.errors) logger.error('could not read Job', { sweepId, namespace: e.namespace, job: e.job, error: e.message });

  const { labels, unreadable } = namespaceLabels;
  for (const [namespace, message] of unreadable) logger.error('could not read Namespace labels', { sweepId, namespace, error: message });
  const containerByPod = new Map(observation.stuck.map((c) => [c.podUid, c]));
  const ownerOf = (podUid: string): PodOwner => {
    const owner = attribution.ownerOf(podUid);
    const container = containerByPod.get(podUid);
    if (container && unreadable.has(container.namespace)) {
      return { kind: 'unreadable', owner: container.controller, detail: 'could not read Namespace labels for the policy' };
    }
    return owner;
  };

  const labelled = pendingJobs.jobs;
  let otherErrors = 0;
  if (pendingJobs.error !== undefined) {
    otherErrors += 1;
    logger.error(`could not list the Jobs labelled ${LABELS.pending}; they are checked on the next sweep`, {
      sweepId,
      error: describeApiError(pendingJobs.error).message,
    });
  }
  const nowMs = monotonicMs();
  const now = serverNow(gateway.lastServerDate(), nowMs - startedMs);
  if (!now) return noServerClock(logger, sweepId);
  const slowSandboxes = observation.sandboxWaits.filter((w) => now.getTime() - w.since.getTime() > SANDBOX_WAIT_WARN_MS);
  if (slowSandboxes.length > 0) {
    const pods = slowSandboxes.map((w) => `${w.namespace}/${w.pod}`);
    logger.warn(SANDBOX_NOT_READY, { sweepId, pods, nodes: [...new Set(slowSandboxes.map((w) => w.node))].sort() });
  }
  const judgeInput: JudgeInput = { stuck: observation.stuck, ownerOf, namespaceLabels: labels, policy, now };
  const { outage, decisions, finished, awaiting } = await decide(gateway, judgeInput, labelled, observation);
  const actOptions = {
    concurrency: CONCURRENT_WRITES,
    now,
    instance: options.instance,
    claim,
    signal: options.signal,
    rejudge: (decision: Parameters<typeof rejudgeJob>[1], fresh: JobView, freshPod?: Parameters<typeof rejudgeJob>[3]) => ({
      ...rejudgeJob({ ...judgeInput, outage }, decision, fresh, freshPod),
      capacity: decision.capacity,
    }),
    onResult: (result: ActResult) => logDecision(logger, auditLine(sweepId, result, options.dryRun)),
  };
  const results = await act(gateway, decisions, actOptions);
  const reporter = { instance: options.instance, now };
  const settledJobs = await settleFinished(gateway, finished, { concurrency: CONCURRENT_WRITES, reporter, signal: options.signal });
  for (const settled of settledAsDryRun(gateway, settledJobs)) {
    const fields = { sweepId, namespace: settled.job.namespace, job: settled.job.name };
    if (settled.error) {
      otherErrors += 1;
      logger.error(`Job failed by an earlier sweep: ${settled.error}; tried again next sweep`, fields);
    } else if (settled.eventWritten) logger.info('wrote the missing FailJob Event of a Job failed by an earlier sweep', fields);
  }
  if (options.signal?.aborted) logger.warn('sweep stopped by a signal: writes in flight finished, none started after', { sweepId });
  // CronJob suspension is a write too: none starts once the sweep was told to stop.
  const { suspendAfter } = policy.cronJobs;
  const cronJobs = options.signal?.aborted
    ? []
    : await actOnCronJobs(gateway, results, { suspendAfter, concurrency: CONCURRENT_WRITES, now, instance: options.instance });
  for (const c of cronJobs) logCronJob(logger, cronJobAuditLine(sweepId, c, suspendAfter, options.dryRun));
  const summary = summarize({
    sweepId,
    dryRun: options.dryRun,
    policy: loaded.description,
    namespaces: options.namespaces,
    startedAt: new Date(now.getTime() - (nowMs - startedMs)),
    finishedAt: new Date(now.getTime() + (monotonicMs() - nowMs)),
    podsScanned: observation.podsScanned,
    stuckContainers: observation.stuck.length,
    outage,
    results,
    cronJobs,
    awaitingFailed: awaiting,
    otherErrors,
  });
  logSummary(logger, summary);
  return {
    status: summary.actionErrors > 0 ? 'actions-failed' : 'done',
    summary,
    results,
    cronJobs,
    ...(loaded.builtin ? { policyMissing: 'default' as const } : {}),
  };
}

/**
 * The judge's decisions, the pending Jobs' lines and each Job's capacity, as one list. Only that
 * list outlives this call: every intermediate copy of a decision kept through act cost about 300
 * bytes per stuck Job (docs/performance.md).
 */
async function decide(
  gateway: KubeGateway,
  judgeInput: JudgeInput,
  labelled: JobView[],
  observation: Pick<Observation, 'stuck' | 'podCapacity'>,
): Promise<PendingJudgement & Pick<Judgement, 'outage'>> {
  const { policy, now } = judgeInput;
  const judgement = judge(judgeInput);
  const { confirmWithinSeconds, forceDeleteAfterSeconds } = policy.limits;
  const due = dueForForceDelete({ labelled, decisions: judgement.decisions, forceDeleteAfterSeconds, now });
  const podsByJob = await readJobPods(gateway, due, CONCURRENT_READS);
  const pending = judgePending({ labelled, decisions: judgement.decisions, confirmWithinSeconds, forceDeleteAfterSeconds, podsByJob, now });
  const decisions = withCapacity(pending.decisions, capacityByJob(observation.stuck, observation.podCapacity, now));
  return { ...pending, decisions, outage: judgement.outage };
}

async function policyFailure(
  deps: SweepDeps,
  options: SweepOptions,
  sweepId: string,
  startedMs: number,
  loaded: Exclude<LoadedPolicy, { ok: true }>,
): Promise<SweepResult> {
  const { logger } = deps;
  if (loaded.kind === 'unreachable') return unreachable(logger, sweepId, `reading ${loaded.description}`, loaded.failure);
  if (loaded.kind === 'unreadable-file') {
    logger.error(`cannot read policy ${loaded.description}: ${loaded.message}; nothing was changed`, { sweepId });
    return { status: 'invalid-policy', summary: undefined, results: [] };
  }
  const source = options.policy.kind === 'file' ? options.policy.path : `${options.policy.namespace}/${options.policy.name}:policy.yaml`;
  const problems = loaded.problems.map((p) => formatProblem(source, p));
  for (const problem of problems) logger.error(`invalid policy: ${problem}`, { sweepId });
  logger.error(`policy ${loaded.description} is invalid; nothing was changed`, { sweepId, problems: problems.length });
  const result: SweepResult = {
    status: 'invalid-policy',
    summary: undefined,
    results: [],
    ...(loaded.missing ? { policyMissing: 'named' as const } : {}),
  };
  if (options.policy.kind !== 'configmap') return result;
  const now = serverNow(deps.gateway.lastServerDate(), deps.monotonicMs() - startedMs);
  if (!now) {
    logger.error(`the InvalidPolicy Event is not written: ${NO_DATE}`, { sweepId });
    return result;
  }
  const { namespace, name } = options.policy;
  const written = await writeInvalidPolicyEvent(deps.gateway, { namespace, name, uid: loaded.configMapUid }, problems, {
    instance: options.instance,
    now,
  });
  if (!written.written) logger.error('could not write the InvalidPolicy Event', { sweepId, error: written.error });
  else if (written.already) logger.info('the InvalidPolicy Event for these problems was already emitted', { sweepId, event: written.name });
  return result;
}

const NO_DATE = 'no answer of the API server carried a Date header (does a proxy in between strip it?), so its clock is unknown';

/** Without the API server's clock no time stuck can be measured: nothing is judged or written. */
function noServerClock(logger: winston.Logger, sweepId: string): SweepResult {
  logger.error(`${NO_DATE}: the time stuck cannot be measured and the sweeper's own clock is not trusted; nothing was changed`, {
    sweepId,
  });
  return { status: 'no-server-clock', summary: undefined, results: [] };
}

function unreachable(logger: winston.Logger, sweepId: string, what: string, failure: ApiFailure): SweepResult {
  logger.error(`${what}: ${explainFailure(failure)}; nothing was changed`, { sweepId });
  return { status: 'unreachable', summary: undefined, results: [] };
}
