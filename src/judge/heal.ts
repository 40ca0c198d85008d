// Healing (docs/contract.md "Healing"): a Job's stuck pod whose cause is gone is recreated instead
// of waiting for its grace to run out. Only with `heal: true` for its rule; only pods none of whose
// containers ever ran, every stuck container of a healable class with evidence (judge/heal-evidence.ts);
// only what the Job can afford (judge/heal-budget.ts); at most once per cause (judge/heal-memory.ts).
// Pure: the reads the evidence comes from are planned here (healNeeds) and made by observe/heal-reads.ts.
import { isHealableClass, type JobView, type StuckContainer } from '../model.ts';
import type { EffectivePolicy } from '../policy/types.ts';
import { affordable, healWay } from './heal-budget.ts';
import { evidenceNeeds, findEvidence, key, type HealReads, type OutageHold } from './heal-evidence.ts';
import { formatHealMemory, healedCause, readHealMemory, rememberHeal } from './heal-memory.ts';
import { secondsBetween } from './decision.ts';
import type { HealPlan, OutageAssessment } from './types.ts';

/** One stuck pod, with its stuck containers. */
interface PodGroup {
  pod: string;
  uid: string;
  resourceVersion: string;
  containers: StuckContainer[];
  facts: NonNullable<StuckContainer['heal']>;
  /** Its most overdue container: how long it has been stuck. */
  stuckSince: Date;
}

type Candidates = { kind: 'none'; note: string | undefined } | { kind: 'some'; pods: PodGroup[]; way: HealPlan['way']; why: string };

/**
 * The pods of this Job a heal could recreate, were there evidence: undefined note when healing
 * has nothing to say (off, or no container of a healable class).
 */
function candidates(job: JobView, effective: Pick<EffectivePolicy, 'heal'>, containers: readonly StuckContainer[]): Candidates {
  if (!effective.heal || !containers.some((c) => isHealableClass(c.pullClass))) return { kind: 'none', note: undefined };
  const memory = readHealMemory(job);
  const refusals: string[] = [];
  const eligible: PodGroup[] = [];
  for (const group of byPod(containers)) {
    const why = refusal(group, memory);
    if (why) refusals.push(why);
    else eligible.push(group);
  }
  if (eligible.length === 0) return { kind: 'none', note: `not healed: ${refusals[0] ?? 'no pod can be'}` };
  const way = healWay(job);
  if (way.way === 'none') return { kind: 'none', note: `not healed: ${way.why}` };
  eligible.sort((a, b) => a.stuckSince.getTime() - b.stuckSince.getTime());
  if (way.way === 'evict') return { kind: 'some', pods: eligible, way: 'evict', why: way.why };
  const afforded = affordable(job, way, eligible);
  if (afforded.pods.length === 0) return { kind: 'none', note: `not healed: ${afforded.why}` };
  return { kind: 'some', pods: afforded.pods, way: 'delete', why: afforded.why };
}

function byPod(containers: readonly StuckContainer[]): PodGroup[] {
  const groups = new Map<string, PodGroup>();
  for (const c of containers) {
    const group = groups.get(c.podUid);
    if (!group) {
      groups.set(c.podUid, {
        pod: c.pod,
        uid: c.podUid,
        resourceVersion: c.podResourceVersion,
        containers: [c],
        facts: c.heal ?? {},
        stuckSince: c.stuckSince,
      });
    } else {
      group.containers.push(c);
      if (c.stuckSince < group.stuckSince) group.stuckSince = c.stuckSince;
    }
  }
  return [...groups.values()];
}

/** Why this pod is not recreated whatever the evidence, or undefined. */
function refusal(group: PodGroup, memory: ReturnType<typeof readHealMemory>): string | undefined {
  for (const c of group.containers) {
    if (!isHealableClass(c.pullClass)) return `pod ${group.pod}: ${c.container} is stuck ${c.pullClass}, which no heal fixes`;
    const healed = healedCause(memory, c);
    if (healed) return `${c.image} (${c.pullClass}) was healed once already, at ${healed.at}: its time stuck counts from before`;
  }
  if (group.facts.ran) return `pod ${group.pod}: its ${group.facts.ran} has run`;
  return undefined;
}

/** What the evidence of this Job's candidates will be read from. */
export interface HealNeeds {
  serviceAccounts: Set<string>;
  secrets: Set<string>;
  pulledIn: Set<string>;
}

export function emptyNeeds(): HealNeeds {
  return { serviceAccounts: new Set(), secrets: new Set(), pulledIn: new Set() };
}

/** Adds to `needs` the reads this Job's heal would judge from (nothing when it cannot be healed anyway). */
export function addHealNeeds(
  needs: HealNeeds,
  job: JobView,
  effective: Pick<EffectivePolicy, 'heal'>,
  containers: readonly StuckContainer[],
  holds: readonly OutageHold[],
): void {
  const found = candidates(job, effective, containers);
  if (found.kind === 'none') return;
  for (const group of found.pods) {
    for (const c of group.containers) {
      const need = evidenceNeeds(c, job, holds);
      if (need.serviceAccount !== undefined) needs.serviceAccounts.add(key(c.namespace, need.serviceAccount));
      for (const s of need.secrets) needs.secrets.add(key(c.namespace, s));
      if (need.pulledIn !== undefined) needs.pulledIn.add(need.pulledIn);
    }
  }
}

export type HealVerdict =
  | { heal: true; plan: HealPlan; worst: StuckContainer; detail: string; note: string }
  | { heal: false; note: string | undefined; warning?: string };

/** Whether to heal this Job now, and how; else why not (undefined when healing has nothing to say). */
export function judgeHeal(
  job: JobView,
  effective: Pick<EffectivePolicy, 'heal'>,
  containers: readonly StuckContainer[],
  context: { reads: HealReads; holds: readonly OutageHold[]; outage: OutageAssessment; now: Date },
): HealVerdict {
  const found = candidates(job, effective, containers);
  if (found.kind === 'none') return { heal: false, note: found.note };
  const healed: { group: PodGroup; evidence: string }[] = [];
  const waiting: string[] = [];
  const warnings: string[] = [];
  for (const group of found.pods) {
    const evidence = group.containers.map((c) => findEvidence(c, job, context.reads, context));
    const missing = evidence.find((e) => !e.found);
    if (!missing) healed.push({ group, evidence: [...new Set(evidence.map((e) => e.text))].join('; ') });
    else {
      waiting.push(missing.text);
      if (!missing.found && missing.warning) warnings.push(missing.warning);
    }
  }
  if (healed.length === 0) {
    const note = `waiting for evidence its cause is gone: ${waiting[0] ?? ''}`;
    return warnings.length > 0 ? { heal: false, note, warning: `heal: ${warnings[0]}` } : { heal: false, note };
  }
  const worst = healed[0]!.group.containers.reduce((a, b) => (b.stuckSince < a.stuckSince ? b : a));
  const pods = healed.map(({ group, evidence }) => ({ pod: group.pod, uid: group.uid, resourceVersion: group.resourceVersion, evidence }));
  const at = context.now.toISOString().replace(/\.\d{3}Z$/, 'Z');
  // Every cause the healed pods are stuck on is remembered, with the longest time stuck on it.
  let memory = readHealMemory(job);
  for (const { group, evidence } of healed) {
    for (const c of group.containers) {
      const stuckSeconds = Math.max(0, Math.floor(secondsBetween(c.stuckSince, context.now)));
      memory = rememberHeal(memory, { image: c.image, pullClass: c.pullClass, pods: [group.uid], stuckSeconds, evidence, at });
    }
  }
  const names = pods.map((p) => p.pod).join(', ');
  const detail = `cause gone (${pods[0]!.evidence}): recreating pod(s) ${names} ${found.why}`;
  return { heal: true, plan: { way: found.way, pods, memory: formatHealMemory(memory) }, worst, detail, note: pods[0]!.evidence };
}
