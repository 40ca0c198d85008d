import type { SweepStatus } from '../sweep.ts';

/** Exit status of every command (docs/contract.md "Exit status"). */
export const EXIT = { ok: 0, actionsFailed: 1, invalid: 2, unreachable: 3 } as const;

const EXIT_OF_SWEEP: Record<SweepStatus, number> = {
  done: EXIT.ok,
  'actions-failed': EXIT.actionsFailed,
  'invalid-policy': EXIT.invalid,
  unreachable: EXIT.unreachable,
  'no-server-clock': EXIT.unreachable,
};

export function exitStatusOf(status: SweepStatus): number {
  return EXIT_OF_SWEEP[status];
}
