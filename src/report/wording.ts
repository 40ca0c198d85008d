// A dry run in words: act and judge report what was done (live outcomes, live steps) whichever
// gateway they wrote through; the sweep's one dryRun flag turns them into what would be done.
import type { ActResult, CronJobResult } from '../judge/types.ts';
import { dryRunOutcome } from '../outcomes.ts';

/**
 * A decision's result as audited: its plan's detail and the steps it took (`force-deleted ...`);
 * in a dry run `would-` its outcome, and only the pods it would force-delete, not what the unsent
 * writes seemed to find.
 */
export function wordResult(result: ActResult, dryRun: boolean): ActResult {
  const { steps = [], ...rest } = result;
  const words = dryRun
    ? steps.flatMap((s) =>
        s.kind === 'force-deleted' ? [`would force-delete ${s.pod}`] : s.kind === 'healed' ? [`would ${HEAL_VERB[s.how]} ${s.pod}`] : [],
      )
    : steps.map((s) => (s.kind === 'force-deleted' ? `force-deleted ${s.pod}` : s.kind === 'healed' ? `${s.how} ${s.pod}` : s.text));
  const outcome = dryRun ? dryRunOutcome(result.outcome) : result.outcome;
  // The decision is shared when its detail stands: a copy per stuck Job lives until the sweep ends.
  if (words.length === 0) return steps.length === 0 && outcome === result.outcome ? result : { ...rest, outcome };
  return { ...rest, outcome, decision: { ...result.decision, detail: [result.decision.detail, ...words].join('; ') } };
}

const HEAL_VERB = { evicted: 'evict', deleted: 'delete' } as const;

export function wordCronJobResult(result: CronJobResult, dryRun: boolean): CronJobResult {
  return dryRun ? { ...result, outcome: dryRunOutcome(result.outcome) } : result;
}
