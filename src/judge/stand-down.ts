import type { Decision } from './types.ts';

/** A decision stood down: nothing is written for it (no mechanism, no pod condition), and `detail` says why. */
export function standDown(decision: Decision, plan: 'skip' | 'defer', detail: string): Decision {
  return { ...decision, plan, mechanism: undefined, failJobCondition: undefined, detail };
}
