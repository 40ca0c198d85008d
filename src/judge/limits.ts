// The blast radius of one sweep (policy limits): pure.
import { compareText } from '../order.ts';
import type { Policy } from '../policy/types.ts';
import type { Decision } from './types.ts';

/** Failures already spent in this schedule period (`run --watch`: the sweeps since its backstop slot). */
export interface LimitsSpent {
  total: number;
  byNamespace: ReadonlyMap<string, number>;
}

/** One more failure (or heal) spent in `namespace`. */
export function spendOne(spent: { total: number; byNamespace: Map<string, number> }, namespace: string): void {
  spent.total += 1;
  spent.byNamespace.set(namespace, (spent.byNamespace.get(namespace) ?? 0) + 1);
}

/**
 * Keeps at most maxJobsPerSweep / maxJobsPerNamespace failures and heals together in the period,
 * oldest stuck first; the rest wait for the next period.
 */
export function applyLimits(decisions: Decision[], policy: Policy, spent?: LimitsSpent): void {
  const { maxJobsPerSweep, maxJobsPerNamespace } = policy.limits;
  const failing = decisions.filter((d) => d.plan === 'fail' || d.plan === 'heal').sort(oldestStuckFirst);
  const perNamespace = new Map<string, number>(spent?.byNamespace ?? []);
  let total = spent?.total ?? 0;
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
  if (d.heal) {
    d.healNote = `${d.healNote ?? ''}; not healed this sweep: ${why}`;
    delete d.heal;
  }
  d.detail = `${why}: waits for the next sweep`;
}

function oldestStuckFirst(a: Decision, b: Decision): number {
  return a.stuckSince.getTime() - b.stuckSince.getTime() || byNamespaceThenName(a, b);
}

export function byNamespaceThenName(a: Decision, b: Decision): number {
  return (
    compareText(a.namespace, b.namespace) ||
    compareText(a.job ?? '', b.job ?? '') ||
    compareText(a.pod, b.pod) ||
    compareText(a.container, b.container)
  );
}
