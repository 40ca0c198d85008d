// "Within grace", once: the judge leaves a Job alone by it, and the metrics count the Jobs it left.
import type { Decision } from './types.ts';

/** A stuck container still within its grace: stuck for less than the grace of its class. */
export function stuckWithinGrace(stuckSeconds: number, graceSeconds: number): boolean {
  return stuckSeconds < graceSeconds;
}

/** A Job left alone this sweep only because its grace has not passed yet. */
export function isWithinGrace(d: Pick<Decision, 'plan' | 'jobView' | 'graceSeconds' | 'stuckSeconds'>): boolean {
  return d.plan === 'skip' && d.jobView !== undefined && d.graceSeconds !== undefined && stuckWithinGrace(d.stuckSeconds, d.graceSeconds);
}
