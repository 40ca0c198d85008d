import { randomUUID } from 'node:crypto';
import type winston from 'winston';
import { act, type ActResult } from './act/act.ts';
import { invalidPolicyEvent } from './act/events.ts';
import { attributeToJobs } from './attribute/attribute.ts';
import { judge, rejudgeJob, type JudgeInput } from './judge/plan.ts';
import type { PodOwner } from './judge/types.ts';
import { describeApiError, isCredentialFailure, type ApiFailure } from './kube/errors.ts';
import type { KubeGateway } from './kube/gateway.ts';
import { DEFAULT_RETRY, mapBounded, withRetry, type RetryOptions } from './kube/retry.ts';
import type { StuckContainer } from './model.ts';
import { observeStuckContainers } from './observe/pods.ts';
import { formatProblem, loadPolicy, type LoadedPolicy, type PolicyLocation } from './observe/policy.ts';
import { policyNeedsNamespaceLabels } from './policy/resolve.ts';
import type { Policy } from './policy/types.ts';
import { auditLine, summarize, type SweepSummary } from './report/audit.ts';
import { logDecision, logSummary } from './report/logger.ts';

export const EXIT = { ok: 0, actionsFailed: 1, invalid: 2, unreachable: 3 } as const;

const CONCURRENT_READS = 8;
const CONCURRENT_WRITES = 4;
/** From this many stuck Jobs in one namespace on, one paged LIST is cheaper than GETs. */
const LIST_JOBS_THRESHOLD = 10;

export interface SweepOptions {
  dryRun: boolean;
  /** Empty: every namespace. */
  namespaces: string[];
  policy: PolicyLocation;
  /** Identifies this sweeper in Events (pod or host name). */
  instance: string;
  pageSize?: number;
  retry?: RetryOptions;
}

export interface SweepDeps {
  gateway: KubeGateway;
  clock: () => Date;
  logger: winston.Logger;
}

export interface SweepResult {
  exitCode: number;
  summary: SweepSummary | undefined;
  results: ActResult[];
}

/** One sweep: observe → classify → attribute → judge → act → report. */
export async function sweep(deps: SweepDeps, options: SweepOptions): Promise<SweepResult> {
  const { gateway, clock, logger } = deps;
  const sweepId = randomUUID().slice(0, 8);
  const startedAt = clock();
  const retry = options.retry ?? DEFAULT_RETRY;

  const loaded = await loadPolicy(gateway, options.policy);
  if (!loaded.ok) return policyFailure(deps, options, sweepId, loaded);
  if (loaded.builtin) logger.info(`policy: ${loaded.description}`, { sweepId });
  for (const w of loaded.warnings) logger.warn(`policy warning: ${formatProblem(loaded.description, w)}`, { sweepId });
  const policy = loaded.policy;

  let observation;
  try {
    observation = await observeStuckContainers(gateway, {
      namespaces: options.namespaces,
      pageSize: options.pageSize ?? 500,
      retry,
      onRestart: (ns, n) => logger.warn('pod list continue token expired; listing again from the start', { sweepId, namespace: ns ?? '*', restart: n }),
    });
  } catch (error) {
    return unreachable(logger, sweepId, 'listing pods', describeApiError(error));
  }

  const attribution = await attributeToJobs(gateway, observation.stuck, {
    concurrency: CONCURRENT_READS,
    listThreshold: LIST_JOBS_THRESHOLD,
    retry,
  });
  for (const e of attribution.errors) logger.error('could not read Job', { sweepId, namespace: e.namespace, job: e.job, error: e.message });

  const { labels, unreadable } = await readNamespaceLabels(gateway, policy, observation.stuck, retry);
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

  const now = clock();
  const judgeInput: JudgeInput = { stuck: observation.stuck, ownerOf, namespaceLabels: labels, policy, now };
  const plan = judge(judgeInput);
  const results = await act(gateway, plan.decisions, {
    dryRun: options.dryRun,
    concurrency: CONCURRENT_WRITES,
    now,
    instance: options.instance,
    retry,
    rejudge: (decision, fresh) => rejudgeJob({ ...judgeInput, outage: plan.outage }, decision, fresh),
  });

  for (const result of results) logDecision(logger, auditLine(sweepId, result, options.dryRun));
  const summary = summarize({
    sweepId,
    dryRun: options.dryRun,
    policy: loaded.description,
    namespaces: options.namespaces,
    startedAt,
    finishedAt: clock(),
    podsScanned: observation.podsScanned,
    stuckContainers: observation.stuck.length,
    outage: plan.outage,
    results,
  });
  logSummary(logger, summary);
  return { exitCode: summary.exitCode, summary, results };
}

async function policyFailure(
  deps: SweepDeps,
  options: SweepOptions,
  sweepId: string,
  loaded: Exclude<LoadedPolicy, { ok: true }>,
): Promise<SweepResult> {
  const { logger } = deps;
  if (loaded.kind === 'unreachable') return unreachable(logger, sweepId, `reading ${loaded.description}`, loaded.failure);
  if (loaded.kind === 'unreadable-file') {
    logger.error(`cannot read policy ${loaded.description}: ${loaded.message}; nothing was changed`, { sweepId });
    return { exitCode: EXIT.invalid, summary: undefined, results: [] };
  }
  const source = options.policy.kind === 'file' ? options.policy.path : `${options.policy.namespace}/${options.policy.name}:policy.yaml`;
  const problems = loaded.problems.map((p) => formatProblem(source, p));
  for (const problem of problems) logger.error(`invalid policy: ${problem}`, { sweepId });
  logger.error(`policy ${loaded.description} is invalid; nothing was changed`, { sweepId, problems: problems.length });
  if (options.policy.kind === 'configmap' && !options.dryRun) {
    const { namespace, name } = options.policy;
    const event = invalidPolicyEvent({ namespace, name, uid: loaded.configMapUid }, problems, {
      instance: options.instance,
      now: deps.clock(),
    });
    try {
      await withRetry(() => deps.gateway.createEvent(namespace, event), options.retry ?? DEFAULT_RETRY);
    } catch (error) {
      logger.error('could not write the InvalidPolicy Event', { sweepId, error: describeApiError(error).message });
    }
  }
  return { exitCode: EXIT.invalid, summary: undefined, results: [] };
}

function unreachable(logger: winston.Logger, sweepId: string, what: string, failure: ApiFailure): SweepResult {
  const why = isCredentialFailure(failure)
    ? `the cluster refused the credentials (${failure.status} ${failure.reason}: ${failure.message})`
    : failure.unreachable
      ? `the cluster could not be reached (${failure.reason}: ${failure.message})`
      : `the cluster answered ${failure.status ?? ''} ${failure.reason}: ${failure.message}`;
  logger.error(`${what}: ${why}; nothing was changed`, { sweepId });
  return { exitCode: EXIT.unreachable, summary: undefined, results: [] };
}

async function readNamespaceLabels(
  gateway: KubeGateway,
  policy: Policy,
  stuck: readonly StuckContainer[],
  retry: RetryOptions,
): Promise<{ labels: Map<string, Record<string, string>>; unreadable: Map<string, string> }> {
  const labels = new Map<string, Record<string, string>>();
  const unreadable = new Map<string, string>();
  if (!policyNeedsNamespaceLabels(policy)) return { labels, unreadable };
  const namespaces = [...new Set(stuck.map((c) => c.namespace))];
  await mapBounded(namespaces, CONCURRENT_READS, async (name) => {
    try {
      const ns = await withRetry(() => gateway.readNamespace(name), retry);
      labels.set(name, { ...(ns.metadata?.labels ?? {}) });
    } catch (error) {
      unreadable.set(name, describeApiError(error).message);
    }
  });
  return { labels, unreadable };
}
