// What a Job remembers of its heals (docs/how-it-works.md "Healing"), kept on the Job itself in
// the annotation imagepull-sweeper/healed, so it survives the pods it names and needs no memory
// in the sweeper: per cause (image and class), the pods healed, how long the worst of them had
// been stuck, and the evidence. A cause it names is never healed again; a pod stuck on it later
// (the recreated one) is judged on the time stuck before the heal too. Pure.
import { PULL_CLASSES, type JobView, type PullClass, type StuckContainer } from '../model.ts';
import { ANNOTATIONS } from '../policy/annotations.ts';
import { truncate } from '../text.ts';

export interface HealedCause {
  image: string;
  pullClass: PullClass;
  /** Uids of the pods healed on it. */
  pods: string[];
  /** How long the most overdue of them had been stuck when it was healed. */
  stuckSeconds: number;
  /** The evidence, as the Event said it (cut to EVIDENCE_KEPT). */
  evidence: string;
  /** RFC 3339: when. */
  at: string;
}

/** Causes kept (the oldest dropped first), and the characters of evidence kept with each. */
const CAUSES_KEPT = 16;
const EVIDENCE_KEPT = 256;

/** The heals a Job records; anything unreadable counts as none (a heal then waits for evidence again, once). */
export function readHealMemory(job: Pick<JobView, 'annotations'>): HealedCause[] {
  const raw = job.annotations[ANNOTATIONS.healed];
  if (raw === undefined) return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(raw);
  } catch {
    return [];
  }
  if (!Array.isArray(parsed)) return [];
  const out: HealedCause[] = [];
  for (const entry of parsed as Partial<HealedCause>[]) {
    if (typeof entry !== 'object' || entry === null || typeof entry.image !== 'string') continue;
    if (!(PULL_CLASSES as readonly unknown[]).includes(entry.pullClass)) continue;
    const seconds = typeof entry.stuckSeconds === 'number' && Number.isFinite(entry.stuckSeconds) ? Math.max(0, entry.stuckSeconds) : 0;
    out.push({
      image: entry.image,
      pullClass: entry.pullClass!,
      pods: Array.isArray(entry.pods) ? entry.pods.filter((p): p is string => typeof p === 'string') : [],
      stuckSeconds: Math.floor(seconds),
      evidence: typeof entry.evidence === 'string' ? entry.evidence : '',
      at: typeof entry.at === 'string' ? entry.at : '',
    });
  }
  return out;
}

/** The memory with `cause` added (its pods merged into an entry of the same cause), the oldest dropped past CAUSES_KEPT. */
export function rememberHeal(memory: readonly HealedCause[], cause: HealedCause): HealedCause[] {
  const kept = memory.filter((m) => !sameCause(m, cause));
  const earlier = memory.find((m) => sameCause(m, cause));
  const merged: HealedCause = earlier
    ? { ...cause, pods: [...new Set([...earlier.pods, ...cause.pods])], stuckSeconds: Math.max(earlier.stuckSeconds, cause.stuckSeconds) }
    : cause;
  const all = [...kept, { ...merged, evidence: truncate(merged.evidence, EVIDENCE_KEPT) }];
  return all.slice(-CAUSES_KEPT);
}

/** The annotation's value. */
export function formatHealMemory(memory: readonly HealedCause[]): string {
  return JSON.stringify(memory);
}

export function sameCause(a: Pick<HealedCause, 'image' | 'pullClass'>, b: Pick<StuckContainer, 'image' | 'pullClass'>): boolean {
  return a.image === b.image && a.pullClass === b.pullClass;
}

/** The heal recorded for this container's cause, if any. */
export function healedCause(memory: readonly HealedCause[], c: Pick<StuckContainer, 'image' | 'pullClass'>): HealedCause | undefined {
  return memory.find((m) => sameCause(m, c));
}

/**
 * The container as judged after a heal of its cause: a pod that was not healed itself (the one
 * recreated, or another stuck the same way since) counts the time stuck before the heal too; a pod
 * the heal named (its eviction had not landed) already counts its whole time.
 */
export function withHealedTime(memory: readonly HealedCause[], c: StuckContainer): StuckContainer {
  const healed = healedCause(memory, c);
  if (!healed || healed.stuckSeconds <= 0 || healed.pods.includes(c.podUid)) return c;
  return { ...c, stuckSince: new Date(c.stuckSince.getTime() - healed.stuckSeconds * 1000) };
}
