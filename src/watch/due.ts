// When the next sweep is due for one Job (or one pod without a Job), from the decision a sweep or
// a pre-judgement made about it. Pure: the timers decide only WHEN to sweep; the sweep decides
// WHAT (docs/how-it-works.md "Event-driven mode"). Times are milliseconds on the API server's clock.
import type { Decision } from '../judge/types.ts';
import type { Outcome } from '../model.ts';
import { ANNOTATIONS } from '../policy/annotations.ts';
import type { Limits } from '../policy/types.ts';

/** `heal`: a ServiceAccount of the Job's stuck pods was given a pull secret (watch/service-accounts.ts). */
export type DueReason = 'grace' | 'forceDeleteAfter' | 'confirmWithin' | 'deferred' | 'error' | 'heal';

export interface Due {
  atMs: number;
  reason: DueReason;
}

export interface DueContext {
  /** The API server's time now (ms). */
  nowMs: number;
  limits: Pick<Limits, 'confirmWithinSeconds' | 'forceDeleteAfterSeconds'>;
  /** The earliest the Jobs failed by this sweep can carry as `failed-at` (the sweep's start). */
  claimedAtMs?: number;
  dryRun?: boolean;
  /** How soon a Job whose read or write failed is tried again: its back-off (default ERROR_RETRY_MS). */
  errorDelayMs?: number;
}

/** How soon a Job judged still within grace, although its time has come by our clock, is tried again. */
export const NOT_YET_RETRY_MS = 250;
/** How soon a Job whose read or write failed is tried again (the gateway has already retried). */
export const ERROR_RETRY_MS = 5_000;

/**
 * The next time a sweep should look at this decision's Job. `outcome` is what the sweep did
 * (undefined for a pre-judgement: nothing was done yet). Undefined: no timed rule is left; only
 * a change seen by the watch, or the backstop sweep, looks at it again.
 */
export function dueOf(decision: Decision, outcome: Outcome | undefined, ctx: DueContext): Due | undefined {
  const job = decision.jobView;
  if (outcome === 'failed' && ctx.claimedAtMs !== undefined) return pendingDue(ctx.claimedAtMs, ctx);
  const failedAt = job?.annotations[ANNOTATIONS.failedAt];
  if (job && failedAt !== undefined && (!job.finished || job.failing === true) && !job.deleting) {
    const at = Date.parse(failedAt);
    return Number.isNaN(at) ? undefined : pendingDue(at, ctx);
  }
  const plan = outcome === undefined ? decision.plan : planOfOutcome(outcome, decision);
  switch (plan) {
    case 'skip': {
      if (decision.graceSeconds === undefined || decision.stuckSeconds >= decision.graceSeconds) return undefined;
      const atMs = decision.stuckSince.getTime() + decision.graceSeconds * 1000;
      // Our clock runs ahead of the sweep's (its "now" is a truncated Date header): try again shortly.
      return { atMs: Math.max(atMs, outcome === undefined ? atMs : ctx.nowMs + NOT_YET_RETRY_MS), reason: 'grace' };
    }
    case 'fail':
      return ctx.dryRun && outcome !== undefined ? undefined : { atMs: ctx.nowMs, reason: 'grace' };
    case 'report':
      return outcome !== undefined || job?.annotations[ANNOTATIONS.reportedAt] !== undefined
        ? undefined
        : { atMs: ctx.nowMs, reason: 'grace' };
    case 'defer':
      // A Job over this period's limits waits for the next period: the backstop sweep opens it.
      return outcome === undefined ? { atMs: ctx.nowMs, reason: 'deferred' } : undefined;
    case 'error':
      return { atMs: ctx.nowMs + (ctx.errorDelayMs ?? ERROR_RETRY_MS), reason: 'error' };
    default:
      return undefined;
  }
}

function planOfOutcome(outcome: Outcome, decision: Decision): Decision['plan'] | 'done' {
  switch (outcome) {
    case 'skipped':
      return 'skip';
    case 'deferred':
      return 'defer';
    case 'error':
      return 'error';
    case 'would-fail':
      return 'fail';
    default:
      return decision.plan === 'skip' ? 'skip' : 'done';
  }
}

/** A Job failed by the sweeper and not finished: its timed rules after `failed-at`, earliest first. */
function pendingRules(failedAtMs: number, limits: DueContext['limits']): Due[] {
  const rules: Due[] = [];
  const forceAfter = limits.forceDeleteAfterSeconds ?? 0;
  if (forceAfter > 0) rules.push({ atMs: failedAtMs + forceAfter * 1000, reason: 'forceDeleteAfter' });
  rules.push({ atMs: failedAtMs + limits.confirmWithinSeconds * 1000, reason: 'confirmWithin' });
  return rules.sort((a, b) => a.atMs - b.atMs);
}

/** Force-delete after forceDeleteAfter, fail again after confirmWithin: the first still to come. */
function pendingDue(failedAtMs: number, ctx: DueContext): Due | undefined {
  if (ctx.dryRun) return undefined;
  // A time already passed was acted on by the sweep that reported this decision.
  return pendingRules(failedAtMs, ctx.limits).find((d) => d.atMs > ctx.nowMs);
}

/**
 * A Job an earlier leader failed and left (its pending label, `failed-at`): the timer that leader
 * held for it, its first of forceDeleteAfter and confirmWithin, or now if that has passed (no one
 * acted on it). Without a readable `failed-at`: now.
 */
export function leftBehindDue(failedAt: string | undefined, ctx: DueContext): Due | undefined {
  if (ctx.dryRun) return undefined;
  const at = Date.parse(failedAt ?? '');
  if (Number.isNaN(at)) return { atMs: ctx.nowMs, reason: 'confirmWithin' };
  const first = pendingRules(at, ctx.limits)[0]!;
  return { atMs: Math.max(first.atMs, ctx.nowMs), reason: first.reason };
}

/** Per-key back-off of failed reads and writes: from `firstMs` doubling up to `maxMs`. */
export function backOffMs(failures: number, firstMs: number, maxMs: number): number {
  return Math.min(maxMs, firstMs * 2 ** Math.max(0, failures - 1));
}

interface Entry {
  key: string;
  due: Due;
}

/**
 * The timers: one due time per key (a Job's uid, or a pod's for a pod without a Job), in a binary
 * heap. A key set again leaves its old heap entry behind, skipped when it surfaces (the heap is
 * rebuilt when such entries outnumber the live ones).
 */
export class TimerQueue {
  private readonly dues = new Map<string, Due>();
  private heap: Entry[] = [];

  set(key: string, due: Due | undefined): void {
    if (!due) return this.delete(key);
    const known = this.dues.get(key);
    if (known && known.atMs === due.atMs && known.reason === due.reason) return;
    this.dues.set(key, due);
    this.push({ key, due });
    if (this.heap.length > 64 && this.heap.length > 2 * this.dues.size) this.rebuild();
  }

  get(key: string): Due | undefined {
    return this.dues.get(key);
  }

  delete(key: string): void {
    this.dues.delete(key);
  }

  get size(): number {
    return this.dues.size;
  }

  /** The earliest due time, if any. */
  earliest(): Due | undefined {
    this.dropStale();
    return this.heap[0]?.due;
  }

  /** Takes the keys due at `nowMs` off the queue, earliest first, at most `max`. */
  takeDue(nowMs: number, max = Infinity): Map<string, Due> {
    const out = new Map<string, Due>();
    for (;;) {
      this.dropStale();
      const top = this.heap[0];
      if (!top || top.due.atMs > nowMs || out.size >= max) return out;
      this.pop();
      this.dues.delete(top.key);
      out.set(top.key, top.due);
    }
  }

  private dropStale(): void {
    while (this.heap.length > 0 && this.dues.get(this.heap[0]!.key) !== this.heap[0]!.due) this.pop();
  }

  private rebuild(): void {
    this.heap = [];
    for (const [key, due] of this.dues) this.push({ key, due });
  }

  private push(entry: Entry): void {
    const h = this.heap;
    h.push(entry);
    for (let i = h.length - 1; i > 0;) {
      const parent = (i - 1) >> 1;
      if (h[parent]!.due.atMs <= h[i]!.due.atMs) break;
      [h[parent], h[i]] = [h[i]!, h[parent]!];
      i = parent;
    }
  }

  private pop(): void {
    const h = this.heap;
    const last = h.pop()!;
    if (h.length === 0) return;
    h[0] = last;
    for (let i = 0; ;) {
      const l = 2 * i + 1;
      const r = l + 1;
      let smallest = i;
      if (l < h.length && h[l]!.due.atMs < h[smallest]!.due.atMs) smallest = l;
      if (r < h.length && h[r]!.due.atMs < h[smallest]!.due.atMs) smallest = r;
      if (smallest === i) return;
      [h[smallest], h[i]] = [h[i]!, h[smallest]!];
      i = smallest;
    }
  }
}
