// Whether a Job can afford to have a stuck pod recreated, and how (docs/how-it-works.md
// "Healing"). Through the Eviction API when the first rule of its podFailurePolicy that matches
// the evicted pod (DisruptionTarget=True, every container ended 137) ignores it: nothing is spent.
// Otherwise by deletion, which the Job controller counts as a failure unless the first rule that
// matches the deleted pod ignores it: only while the failures so far (and the pods on their way
// out) plus one per pod stay within backoffLimit, and, with backoffLimitPerIndex, the pod's index
// failures plus one within that. A rule that would fail the Job or the index forbids it. Pure.
import type { HealFacts, JobView, PodFailureRule } from '../model.ts';
import { describeRule, matches } from './mechanism.ts';

export type HealWay =
  /** Nothing is spent: the podFailurePolicy rule ignores the evicted (or deleted) pod. */
  { way: 'evict'; why: string } | { way: 'delete'; spends: boolean; why: string } | { way: 'none'; why: string };

/** The condition the Eviction API adds to the pod it evicts. */
export const DISRUPTION_TARGET = 'DisruptionTarget';

/** The first rule that matches (or may match) the pod left behind, with its 1-based number. */
function firstMatch(
  job: Pick<JobView, 'podFailureRules' | 'containerNames'>,
  added: string,
): { n: number; rule: PodFailureRule; sure: boolean } | undefined {
  for (const [i, rule] of job.podFailureRules.entries()) {
    const m = matches(rule, job.containerNames, added);
    if (m !== 'no') return { n: i + 1, rule, sure: m === 'yes' };
  }
  return undefined;
}

const ruleText = (m: { n: number; rule: PodFailureRule }) => `podFailurePolicy rule ${m.n} (${describeRule(m.rule)})`;

/** How the Job's stuck pods would be recreated, before counting what it can spend. */
export function healWay(job: Pick<JobView, 'podFailureRules' | 'containerNames' | 'budget'>): HealWay {
  const evicted = firstMatch(job, DISRUPTION_TARGET);
  if (evicted && evicted.rule.action === 'Ignore' && evicted.sure) {
    return { way: 'evict', why: `through the Eviction API: ${ruleText(evicted)} ignores the evicted pod, nothing spent` };
  }
  const noEviction = evicted
    ? `the Eviction API would not help (${ruleText(evicted)} comes first for an evicted pod)`
    : 'no podFailurePolicy rule ignores DisruptionTarget (for the Eviction API)';
  const deleted = firstMatch(job, '');
  if (deleted && (deleted.rule.action === 'FailJob' || deleted.rule.action === 'FailIndex')) {
    return { way: 'none', why: `a deletion ${deleted.sure ? 'would' : 'could'} match ${ruleText(deleted)}, and ${noEviction}` };
  }
  if (deleted && deleted.rule.action === 'Ignore' && deleted.sure) {
    return { way: 'delete', spends: false, why: `by deletion: ${ruleText(deleted)} ignores the deleted pod, nothing spent` };
  }
  if (!job.budget) return { way: 'none', why: `its retries could not be counted, and ${noEviction}` };
  return { way: 'delete', spends: true, why: noEviction };
}

/** Of `pods` (most overdue first), the ones a deletion that spends may recreate, and why the others not. */
export function affordable<P extends { pod: string; facts: HealFacts }>(
  job: Pick<JobView, 'budget'>,
  way: Extract<HealWay, { way: 'delete' }>,
  pods: readonly P[],
): { pods: P[]; why: string } {
  if (!way.spends) return { pods: [...pods], why: way.why };
  const budget = job.budget!;
  const spent = budget.failed + budget.terminating;
  const counted = `${budget.failed} failed${budget.terminating > 0 ? ` + ${budget.terminating} terminating` : ''}`;
  const left = budget.backoffLimit - spent;
  const perIndex = budget.backoffLimitPerIndex;
  const within = perIndex === undefined ? [...pods] : pods.filter((p) => (p.facts.indexFailures ?? 0) + 1 <= perIndex);
  const chosen = within.slice(0, Math.max(0, left));
  const limit = `${counted} of backoffLimit ${budget.backoffLimit}`;
  if (chosen.length === 0) {
    const why =
      left <= 0
        ? `a deletion would spend one of its retries (${counted} + 1 > backoffLimit ${budget.backoffLimit}), and ${way.why}`
        : `a deletion would fail its index (its failures + 1 > backoffLimitPerIndex ${perIndex}), and ${way.why}`;
    return { pods: [], why };
  }
  const index = perIndex === undefined ? '' : `, each index within backoffLimitPerIndex ${perIndex}`;
  const short = chosen.length < pods.length ? `; ${pods.length - chosen.length} more pod(s) would not fit` : '';
  return { pods: chosen, why: `by deletion, spending ${chosen.length} of its retries (${limit}${index})${short}` };
}
