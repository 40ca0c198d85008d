import { isRefusal, type ApiFailure } from '../kube/errors.ts';
import { failureText, type WriteOutcome } from '../kube/write-outcome.ts';
import type { StuckContainer } from '../model.ts';
import type { ActStep, Decision } from '../judge/types.ts';

/** The pod a precondition failed on, as it is now (no stuck containers: gone or recovered). */
export interface FreshPod {
  podUid: string;
  stuck: StuckContainer[];
}

/**
 * How one Job's write sequence ended:
 * - `done`: as planned; `steps` says what it did beyond the plan; `error` says what part failed
 *   without undoing it (e.g. its Event); `decision`, the decision as carried out when it took a
 *   fallback mechanism;
 * - `gone`: the Job (or its pod) no longer exists;
 * - `changed`: a precondition failed: the Job is read and judged again; `error` is audited when
 *   it keeps changing; `refusal`, the status write's refusal, so the next attempt goes straight to
 *   the fallback;
 * - `failed`: a write failed; nothing more is tried this sweep. `refused`: the API server refused it
 *   for good (RBAC, an admission policy), not a fault that outlasted the retries.
 */
export type WriteResult =
  | { kind: 'done'; steps?: ActStep[]; error: string | undefined; decision?: Decision }
  | { kind: 'gone' }
  | { kind: 'changed'; error: string; freshPod?: FreshPod; refusal?: ApiFailure }
  | { kind: 'failed'; error: string; refused?: true };

/** A write that did not land, as the end of a Job's write sequence. */
export function notLanded(outcome: Extract<WriteOutcome<unknown>, { landed: false }>): WriteResult {
  if (outcome.why === 'gone') return { kind: 'gone' };
  if (outcome.why === 'conflict') return { kind: 'changed', error: failureText(outcome.failure) };
  return { kind: 'failed', error: failureText(outcome.failure), ...refusedIf(outcome.failure) };
}

/** `refused: true` when the API server refused the write for good. */
export function refusedIf(failure: ApiFailure): { refused?: true } {
  return isRefusal(failure) ? { refused: true } : {};
}
