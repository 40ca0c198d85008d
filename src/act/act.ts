// Carries out decisions. Every write sequence is safe to stop at any instant: a Job is either
// untouched, or claimed (annotations + the pending label, in one conditional patch) and then
// completed by this sweep, or by a later one under the confirmation rule (judge/pending.ts).
import { toJobView } from '../attribute/job-view.ts';
import { mapBounded } from '../concurrency.ts';
import { standDown } from '../judge/stand-down.ts';
import type { ActResult, Decision } from '../judge/types.ts';
import type { KubeGateway } from '../kube/gateway.ts';
import { tryRead } from '../kube/write-outcome.ts';
import type { JobView } from '../model.ts';
import { OUTCOME_OF_PLAN } from '../outcomes.ts';
import type { Reporter } from './events.ts';
import { failJob, withFallback } from './fail-job.ts';
import { actOnOwnedPod } from './fail-owned-pod.ts';
import { healJob } from './heal-job.ts';
import { failJobOfJobSet } from './jobset.ts';
import { rememberQueued } from './remember.ts';
import { reportJob } from './report-job.ts';
import { retryJob } from './retry-job.ts';
import type { FreshPod, WriteResult } from './write-result.ts';

export interface ActOptions {
  concurrency: number;
  now: Date;
  instance: string;
  /** Unique to this sweep: written into each claim, and names the claim's Event. */
  claim: string;
  /** Judges one Job again from a fresh read, after a write's precondition failed. */
  rejudge: (decision: Decision, fresh: JobView, freshPod?: FreshPod) => Decision;
  /** How many times a conflicting Job is re-read and re-judged. */
  maxConflicts?: number;
  /** Once aborted, no write sequence starts; those in flight finish. */
  signal?: AbortSignal;
  /**
   * Called as each decision completes, so its audit line is out before the batch ends; a promise
   * it returns holds that decision's place until it settles (a slow log reader's back-pressure).
   */
  onResult?: (result: ActResult) => void | Promise<void>;
}

export type { ActResult, ActStep } from '../judge/types.ts';

/**
 * Carries out each decision's plan with bounded concurrency; one failing Job never stops the
 * others. The outcomes are what the gateway answered: whether it sent the writes is not act's
 * business (report/wording.ts words a dry run).
 */
export async function act(gateway: KubeGateway, decisions: readonly Decision[], options: ActOptions): Promise<ActResult[]> {
  return mapBounded(decisions, options.concurrency, async (decision) => {
    const result = await actOne(gateway, decision, options);
    await options.onResult?.(result);
    return result;
  });
}

async function actOne(gateway: KubeGateway, first: Decision, options: ActOptions): Promise<ActResult> {
  const maxConflicts = options.maxConflicts ?? 3;
  const reporter: Reporter = { instance: options.instance, now: options.now };
  const stoodDown = (decision: Decision, plan: 'skip' | 'defer', detail: string): ActResult => ({
    decision: standDown(decision, plan, detail),
    outcome: OUTCOME_OF_PLAN[plan].live,
    error: undefined,
  });
  let decision = first;
  for (let conflicts = 0; ; conflicts += 1) {
    const planned: ActResult = { decision, outcome: OUTCOME_OF_PLAN[decision.plan].live, error: undefined };
    // A Job Kueue queues, not failed: what it is stuck on is kept first (a failure's claim carries it).
    const kept =
      decision.remember !== undefined && decision.plan !== 'fail' && !options.signal?.aborted
        ? await rememberQueued(gateway, decision)
        : undefined;
    if (decision.plan === 'skip') return kept ? { ...planned, error: kept } : planned;
    if (decision.plan !== 'fail' && decision.plan !== 'report' && decision.plan !== 'retry' && decision.plan !== 'heal') return planned;
    if (options.signal?.aborted)
      return stoodDown(decision, 'defer', `sweep stopped before acting, waits for the next sweep (was: ${decision.detail})`);
    // A pod without a Job, under an `owners` rule: its own write sequence (act/fail-owned-pod.ts).
    if (!decision.jobView) return actOnOwnedPod(gateway, decision, reporter, options.claim);
    const written: WriteResult =
      decision.plan === 'report'
        ? await reportJob(gateway, decision, reporter)
        : decision.plan === 'retry'
          ? await retryJob(gateway, decision, reporter)
          : decision.plan === 'heal'
            ? await healJob(gateway, decision, reporter)
            : await failJobOfJobSet(gateway, decision, options.now, () => failJob(gateway, decision, reporter, options.claim));
    switch (written.kind) {
      case 'done': {
        const error = [written.error, kept].filter(Boolean).join('; ') || undefined;
        // A heal none of whose pods was recreated (each gone or changed since): it is spent all the same.
        if (decision.plan === 'heal' && !error && !written.steps?.some((s) => s.kind === 'healed')) {
          const found = (written.steps ?? []).map((s) => (s.kind === 'found' ? s.text : '')).join('; ');
          return stoodDown(decision, 'skip', `not healed: ${found}`);
        }
        const done = { ...planned, decision: written.decision ?? decision, error };
        return written.steps?.length ? { ...done, steps: written.steps } : done;
      }
      case 'gone':
        return stoodDown(decision, 'skip', 'Job or pod no longer exists');
      case 'failed':
        return { decision, outcome: 'error', error: written.error, ...(written.refused ? { refused: true as const } : {}) };
      case 'changed': {
        if (conflicts >= maxConflicts) return { decision, outcome: 'error', error: written.error };
        const fresh = await readJob(gateway, decision);
        if (fresh === 'gone') return stoodDown(decision, 'skip', 'Job no longer exists');
        if (!fresh) return { decision, outcome: 'error', error: written.error };
        decision = options.rejudge(decision, fresh, written.freshPod);
        // The status write's refusal is an answer for this Job: not asked again.
        if (written.refusal && decision.plan === 'fail' && decision.mechanism === 'condition')
          decision = withFallback(decision, written.refusal);
      }
    }
  }
}

async function readJob(gateway: KubeGateway, d: Decision): Promise<JobView | 'gone' | undefined> {
  const read = await tryRead(async () => toJobView(await gateway.readJob(d.namespace, d.job!)));
  return read.found ? read.value : read.gone ? 'gone' : undefined;
}
