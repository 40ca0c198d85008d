// The plans and the outcome words: what a sweep decided to do with a Job, what then happened to
// it (or to a CronJob), live and in a dry run, and the word that heads its text line. One table;
// the audit, the summary, the metrics and the text log all read it (glossary: model.ts).

/** `heal`: recreate the Job's stuck pods, their cause gone (judge/heal.ts). `error`: the Job could not be read, so nothing could be judged. */
export const PLANS = ['fail', 'report', 'retry', 'heal', 'skip', 'defer', 'error'] as const;
export type Plan = (typeof PLANS)[number];

interface Row<L extends string, D extends string> {
  live: L;
  /** What a dry run says: the writes were recorded, not sent. */
  dryRun: D;
  /** The word heading a text line, live and in a dry run. */
  word: string;
  dryRunWord: string;
}

const row = <L extends string, D extends string>(live: L, dryRun: D, word: string, dryRunWord: string): Row<L, D> => ({
  live,
  dryRun,
  word,
  dryRunWord,
});

/** Each plan's outcome once carried out. */
export const OUTCOME_OF_PLAN = {
  fail: row('failed', 'would-fail', 'FAILED', 'WOULD FAIL'),
  report: row('reported', 'would-report', 'REPORTED', 'WOULD REPORT'),
  retry: row('retried', 'would-retry', 'RETRIED', 'WOULD RETRY'),
  heal: row('healed', 'would-heal', 'HEALED', 'WOULD HEAL'),
  skip: row('skipped', 'skipped', 'skipped', 'would skip'),
  defer: row('deferred', 'deferred', 'DEFERRED', 'WOULD DEFER'),
  error: row('error', 'error', 'ERROR', 'ERROR'),
} as const satisfies Record<Plan, Row<string, string>>;

/** What a CronJob behind failed Jobs got: its run counted, or it was suspended. */
export const CRONJOB_OUTCOME_OF_VERDICT = {
  suspend: row('suspended', 'would-suspend', 'SUSPENDED', 'WOULD SUSPEND'),
  count: row('counted', 'would-count', 'counted', 'would count'),
  skip: row('skipped', 'skipped', 'skipped', 'would skip'),
  error: row('error', 'error', 'ERROR', 'ERROR'),
} as const;

type Rows = typeof OUTCOME_OF_PLAN;
type CronJobRows = typeof CRONJOB_OUTCOME_OF_VERDICT;

export const OUTCOMES = Object.values(OUTCOME_OF_PLAN).map((r) => r.live) as Rows[Plan]['live'][];
export const DRY_RUN_OUTCOMES = Object.values(OUTCOME_OF_PLAN).map((r) => r.dryRun) as Rows[Plan]['dryRun'][];
export type Outcome = Rows[Plan]['live'] | Rows[Plan]['dryRun'];

export type CronJobOutcome = CronJobRows[keyof CronJobRows]['live'] | CronJobRows[keyof CronJobRows]['dryRun'];
export const CRONJOB_OUTCOMES = [
  ...new Set(Object.values(CRONJOB_OUTCOME_OF_VERDICT).flatMap((r) => [r.live, r.dryRun])),
] as CronJobOutcome[];

/** The outcomes one mode (live or dry run) can produce. */
export function outcomesFor(dryRun: boolean): readonly Outcome[] {
  return dryRun ? DRY_RUN_OUTCOMES : OUTCOMES;
}

const ALL_ROWS: readonly Row<string, string>[] = [...Object.values(OUTCOME_OF_PLAN), ...Object.values(CRONJOB_OUTCOME_OF_VERDICT)];

/** The dry-run form of an outcome (`failed` → `would-fail`); a dry-run form stays as it is. */
export function dryRunOutcome<O extends Outcome | CronJobOutcome>(outcome: O): O {
  return (ALL_ROWS.find((r) => r.live === outcome)?.dryRun ?? outcome) as O;
}

/** The live form of an outcome (`would-fail` → `failed`). */
export function liveOutcome<O extends Outcome | CronJobOutcome>(outcome: O): O {
  return (ALL_ROWS.find((r) => r.dryRun === outcome)?.live ?? outcome) as O;
}

/** The word heading a text line: a dry run says "would" on every line but errors, and so does a `would-` outcome. */
export function outcomeWord(outcome: string, dryRun: boolean): string {
  const r = ALL_ROWS.find((x) => x.live === outcome || x.dryRun === outcome);
  if (!r) return outcome;
  return dryRun || (r.dryRun === outcome && r.live !== outcome) ? r.dryRunWord : r.word;
}

/** A decision (or CronJob) whose action failed: outcome `error`, or an error beside another outcome (exit 1, logged at `error`). */
export function isActionError(result: { outcome: string; error?: string | null | undefined }): boolean {
  return result.outcome === 'error' || (result.error !== undefined && result.error !== null);
}
