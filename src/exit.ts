// How a sweep ends and the exit status each ending means (docs/contract.md "Exit status"): one
// table, read by the summary's exitCode, the sweep's status and every command.

export const EXIT = { ok: 0, actionsFailed: 1, invalid: 2, unreachable: 3 } as const;

/**
 * How the sweep ended: `done` (whatever it decided), `actions-failed` (some action or lookup
 * failed), `invalid-policy`, `unreachable` or `no-server-clock` (no answer carried a Date header;
 * nothing was changed).
 */
export type SweepStatus = 'done' | 'actions-failed' | 'invalid-policy' | 'unreachable' | 'no-server-clock';

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

/** A sweep that judged: any failed action or lookup makes it `actions-failed` (exit 1). */
export function statusOfActions(actionErrors: number): 'done' | 'actions-failed' {
  return actionErrors > 0 ? 'actions-failed' : 'done';
}
