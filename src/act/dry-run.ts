// What a dry run says, from what its gateway recorded (kube/dry-run-gateway.ts): the same
// results as a sweep, in their `would-` words. Against a gateway that sends writes, nothing changes.
import { describeTarget } from '../judge/force-delete.ts';
import type { Decision } from '../judge/types.ts';
import { recordedWrites } from '../kube/dry-run-gateway.ts';
import type { KubeGateway } from '../kube/gateway.ts';
import { dryRunOutcome } from '../outcomes.ts';
import type { ActResult } from './act.ts';
import type { CronJobResult } from './cronjob.ts';
import type { SettledJob } from './settle.ts';

/**
 * A decision's result in a dry run: `would-` its outcome, and its plan's detail with the pods it
 * would force-delete (the deletes recorded for it), not what the unsent writes seemed to find.
 */
export function asDryRun(gateway: KubeGateway, planned: Decision, result: ActResult): ActResult {
  const recorded = recordedWrites(gateway);
  if (!recorded) return result;
  if (result.decision.plan !== planned.plan) return { ...result, outcome: dryRunOutcome(result.outcome) };
  const forced = (planned.forceDelete ?? [])
    .filter((t) => recorded.deletedPodUids.has(t.uid))
    .map((t) => `would force-delete ${describeTarget(t)}`);
  const detail = [planned.detail, ...forced].join('; ');
  // The decision is shared when its detail stands: a copy per stuck Job lives until the sweep ends.
  return {
    decision: detail === result.decision.detail ? result.decision : { ...result.decision, detail },
    outcome: dryRunOutcome(result.outcome),
    error: result.error,
  };
}

export function cronJobAsDryRun(gateway: KubeGateway, result: CronJobResult): CronJobResult {
  return recordedWrites(gateway) ? { ...result, outcome: dryRunOutcome(result.outcome) } : result;
}

/** A dry run settles nothing it would report: the finished Jobs are settled by the next real sweep. */
export function settledAsDryRun(gateway: KubeGateway, settled: SettledJob[]): SettledJob[] {
  return recordedWrites(gateway) ? [] : settled;
}
