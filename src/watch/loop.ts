// `run --watch` (docs/how-it-works.md "Event-driven mode"). The pods and the policy are listed and
// watched (reflector.ts) into a cache of what judging needs (pod-cache.ts). Each Job whose stuck
// pods change is pre-judged beside the loop (a slow read holds back only its own namespace's
// Jobs), which sets its timer (a heap, due.ts). When timers fall due, those Jobs, and only those,
// are judged and written as one batch, beside the batches already in flight: a Job's retries never
// hold another Job back; a Job read within 30 s is claimed from that read (the claim is
// conditional on it: job-reads.ts). A whole sweep (every stuck Job, from the cache) runs on a cold
// start, on a policy edit and at each backstop slot, one at a time and beside the timers (not when
// it must list: then no timer fires until it is done). Limits count per backstop period; a Job
// whose read or write failed backs off per Job up to the period. Followers keep the cache and the
// pre-judgements warm and write nothing. The wall clock, the monotonic clock, the server's clock
// and the timers are passed in, so a test drives every turn.
import { createHash } from 'node:crypto';
import type { V1Job } from '@kubernetes/client-node';
import type { ActResult } from '../act/act.ts';
import { jobNamesByNamespace, LIST_JOBS_THRESHOLD, SharedJobLists } from '../attribute/attribute.ts';
import { mapBounded } from '../concurrency.ts';
import { jobOwner } from '../model.ts';
import { compareByPod } from '../order.ts';
import { policyHeals } from '../judge/judge.ts';
import { inChunks } from '../judge/chunks.ts';
import { spendOne } from '../judge/limits.ts';
import { describeApiError } from '../kube/errors.ts';
import type { KubeGateway } from '../kube/gateway.ts';
import { podCollection, configMapCollection, serviceAccountCollection, type Collection, type WatchGateway } from '../kube/watch.ts';
import { listPendingJobs } from '../observe/pending-jobs.ts';
import { PENDING_PODS, observeStuckContainers, type Observation, type ObserveOptions } from '../observe/pods.ts';
import { ANNOTATIONS, PENDING } from '../policy/annotations.ts';
import { loadPolicy } from '../policy/load.ts';
import type { Policy } from '../policy/types.ts';
import type { Schedule } from '../run/scheduler.ts';
import type { SweepDeps, SweepOptions, SweepResult } from '../sweep.ts';
import type { ServerClock } from './clock.ts';
import { backOffMs, dueOf, leftBehindDue, type Due, type TimerQueue } from './due.ts';
import type { WatchedKind, WatchMetrics, WatchTrigger } from './metrics.ts';
import { FRESH_MS, JobReads } from './job-reads.ts';
import { PodCache } from './pod-cache.ts';
import { watchPolicyFile } from './policy-file-watch.ts';
import { PolicyConfigMap } from './policy-watch.ts';
import { prejudge, sharingNamespaceReads } from './prejudge.ts';
import { recordingWrites } from './recording-gateway.ts';
import { reflect, type ReflectorHandler, type RestartReason } from './reflector.ts';
import { ServiceAccountSecrets } from './service-accounts.ts';
import { Wakeup } from './wakeup.ts';

/** Pods that changed are pre-judged together after this long (a burst is one batch of reads). */
const PREJUDGE_DELAY_MS = 50;
/** Pre-judgements run beside the loop, at most this many at once: a slow read holds only its own. */
const MAX_PREJUDGES = 4;
/** One pre-judgement reads this many Jobs (or namespaces' lists of Jobs) side by side. */
const PREJUDGE_GROUPS = 32;
/** A batch starts this long after its due time on our estimate of the server's clock. */
const FIRE_MARGIN_MS = 20;
/** The clock is calibrated again, beside the loop, when its newest answer is older than this. */
const RECALIBRATE_AFTER_MS = 5 * 60_000;
/**
 * The first back-off of a Job whose read or write failed (a fault that outlasted the gateway's
 * retries); it doubles up to the backstop period.
 */
const FIRST_BACK_OFF_MS = 1_000;
/** The first back-off of a Job whose write was refused for good (RBAC, an admission policy). */
const FIRST_REFUSED_BACK_OFF_MS = 5_000;
/** After a pre-judgement failed, changed pods are pre-judged again this long after. */
const PREJUDGE_RETRY_MS = 5_000;
/** Jobs due at once are judged and written in batches of at most this many, side by side. */
const BATCH_MAX = 8;
/** At most this many batches in flight: more due Jobs wait in the heap, so a takeover's thousand
 * due Jobs do not queue a thousand reads ahead of the first claim in the client's rate limit. */
const MAX_BATCHES = 8;
/** A cache first listed this recently is swept as it is, its watch up or not (as fresh as a list would be). */
const JUST_LISTED_MS = 10_000;
/** The loop turns at least this often (its health is judged on it). */
const MAX_WAIT_MS = 60_000;
/** How soon a due Job whose pods could not be read again (the watch not connected) is tried again. */
const DISCONNECTED_RECHECK_MS = 1_000;
/** How soon a new leader lists again the Jobs an earlier leader left, when that list failed. */
const LEFT_BEHIND_RETRY_MS = 5_000;

export interface WatchLoopDeps {
  sweepDeps: SweepDeps;
  sweep: (deps: SweepDeps, options: SweepOptions) => Promise<SweepResult>;
  watchGateway: WatchGateway;
  schedule: Schedule;
  /** The API server's clock, fed by every answer of the HTTP layer. */
  clock: ServerClock;
  wallClock: () => Date;
  timers: TimerQueue;
  sleep: (ms: number, signal: AbortSignal) => Promise<void>;
  /** One short GET /version, not retried: the answer's Date calibrates the clock. */
  probe: (signal: AbortSignal) => Promise<Date | undefined>;
  metrics?: WatchMetrics;
  onSweep?: (result: SweepResult | undefined, seconds: number, finishedAt: Date) => void;
  random?: () => number;
  pageSize?: number;
  watchTimeoutSeconds?: number;
}

interface Spent {
  total: number;
  byNamespace: Map<string, number>;
}

export class WatchLoop {
  readonly cache: PodCache;
  private readonly policyConfigMap: PolicyConfigMap | undefined;
  private readonly wakeup = new Wakeup();
  /** key → change count, for Jobs whose timers are not known yet. */
  private readonly dirty = new Map<string, number>();
  private changes = 0;
  private dirtySinceMs = 0;
  private policyChanged = false;
  private readonly failures = new Map<string, number>();
  /** key → the digest of the last `skipped` line written for it (an unchanged one is not written again). */
  private readonly lastSkipped = new Map<string, string>();
  private readonly inFlight = new Set<string>();
  /** Jobs read lately whose grace runs out soon: their timers' sweeps judge from these reads. */
  private readonly jobReads = new JobReads();
  private readonly batches = new Set<Promise<void>>();
  /** The whole sweep in flight, beside the loop (at most one). */
  private whole: Promise<void> | undefined;
  private wholeSinceMs: number | undefined;
  /** A whole sweep is listing (its cache not trusted): no timer fires until it is done. */
  private listing = false;
  /** The Jobs judged or pre-judged beside the whole sweep in flight: it does not undo their timers. */
  private readonly judgedMeanwhile = new Set<string>();
  private readonly prejudges = new Set<Promise<void>>();
  /** The keys of the pre-judgements in flight. */
  private readonly prejudging = new Set<string>();
  /** Keys a whole sweep from the cache has yet to judge: its chunk will, from the cache as it is then. */
  private readonly awaitingWhole = new Set<string>();
  /** Jobs the backstop's sweep of Running pods judges with their cached Pending pods (in flight meanwhile). */
  private readonly judgingWithRunning = new Set<string>();
  private spent: Spent = { total: 0, byNamespace: new Map() };
  /** Jobs a sweep in flight judged to fail, by namespace: they count against the period's limits until that sweep ends. */
  private readonly reserved = new Map<string, string>();
  private readonly scopes: string[];
  private readonly synced = new Set<string>();
  /** When the pod cache's first list was in (monotonic): until its watch is up, that list is the cache's age. */
  private syncedAtMs: number | undefined;
  private startedAtMs = 0;
  private readonly connected = new Set<string>();
  private leading: AbortSignal | undefined;
  private startPending = false;
  /** When a failed list of the Jobs an earlier leader left is tried again (monotonic ms). */
  private leftBehindRetryAtMs: number | undefined;
  private nextBackstop: Date;
  private periodMs: number;
  private busySinceMs: number | undefined;
  private calibrating = false;
  /** Every stuck Job the cache held has been pre-judged once (a follower's warm timers); what changed since is being pre-judged. */
  private prejudged = false;
  private calibratedAtMs = -Infinity;
  private policy: Policy | undefined;
  private readonly background: Promise<void>[] = [];
  private readonly watching = new AbortController();
  /** Starts one more reflector beside the pods' (set by `start`). */
  private follow: (<T>(kind: WatchedKind, collection: Collection, handler: ReflectorHandler<T>) => void) | undefined;
  /** Followed once a policy heals: the ServiceAccounts given a pull secret. */
  private serviceAccounts: ServiceAccountSecrets | undefined;

  constructor(
    private readonly deps: WatchLoopDeps,
    private readonly options: SweepOptions,
  ) {
    this.cache = new PodCache((key) => this.changed(key));
    if (options.policy.kind === 'configmap') {
      this.policyConfigMap = new PolicyConfigMap(options.policy.namespace, options.policy.name, () => this.policyEdited());
    }
    this.scopes = options.namespaces.length > 0 ? [...new Set(options.namespaces)] : ['*'];
    this.nextBackstop = deps.schedule.next(deps.wallClock());
    this.periodMs = this.periodAfter(this.nextBackstop);
  }

  private get monotonicMs(): () => number {
    return this.deps.sweepDeps.monotonicMs;
  }

  private get logger() {
    return this.deps.sweepDeps.logger;
  }

  /** Lists and watches the pods and the policy, in the background, until `stop`. */
  start(stop: AbortSignal): void {
    this.startedAtMs = this.monotonicMs();
    stop.addEventListener('abort', () => this.watching.abort(), { once: true });
    const signal = this.watching.signal;
    const { deps } = this;
    const onRestart = (watch: WatchedKind) => (scope: string, reason: RestartReason, error?: string) => {
      deps.metrics?.restarted(watch, reason);
      if (reason === 'timeout') this.logger.debug('watch ended by the API server; resuming', { watch: scope });
      else if (reason === 'expired') this.logger.warn('watch expired (410 Gone); listing again', { watch: scope });
      else this.logger.warn('watch failed; resuming', { watch: scope, error });
    };
    const common = {
      pageSize: deps.pageSize ?? 500,
      watchTimeoutSeconds: deps.watchTimeoutSeconds,
      random: deps.random,
      sleep: deps.sleep,
      monotonicMs: this.monotonicMs,
    };
    for (const scope of this.scopes) {
      const collection = podCollection(scope === '*' ? undefined : scope, PENDING_PODS);
      const options = {
        ...common,
        onRestart: onRestart('pods'),
        onList: () => deps.metrics?.listed('pods'),
        onSynced: () => {
          this.synced.add(scope);
          if (this.synced.size === this.scopes.length) this.syncedAtMs = this.monotonicMs();
          if (this.synced.size === this.scopes.length)
            this.logger.info('watching: the pod cache is synced', { stuckJobs: this.cache.stuckKeys, leading: this.leading !== undefined });
          this.wakeup.notify();
        },
        onConnected: (up: boolean) => {
          if (up) this.connected.add(scope);
          else this.connected.delete(scope);
          this.wakeup.notify();
        },
      };
      this.background.push(reflect(deps.watchGateway, collection, this.cache.handler(scope), options, signal));
    }
    this.follow = (kind, collection, handler) => {
      const options = { ...common, onRestart: onRestart(kind), onList: () => deps.metrics?.listed(kind) };
      this.background.push(reflect(deps.watchGateway, collection, handler, options, signal));
    };
    if (this.policy) this.followServiceAccounts(this.policy);
    const policy = this.options.policy;
    if (this.policyConfigMap) {
      const collection = configMapCollection(this.policyConfigMap.namespace, this.policyConfigMap.name);
      const options = { ...common, onRestart: onRestart('policy'), onList: () => deps.metrics?.listed('policy') };
      this.background.push(reflect(deps.watchGateway, collection, this.policyConfigMap.handler(), options, signal));
    } else if (policy.kind === 'file' && !(policy.path === '-' && policy.stdin)) {
      // A file is polled (policy-file-watch.ts); stdin has no edits.
      this.background.push(watchPolicyFile({ path: policy.path, sleep: deps.sleep, onChange: () => this.policyEdited() }, signal));
    }
  }

  /** Sweeps and writes while `signal` lives (the Lease is held; without election, until stop). */
  lead(signal: AbortSignal): void {
    this.leading = signal;
    this.startPending = true;
    signal.addEventListener('abort', () => this.wakeup.notify(), { once: true });
    this.wakeup.notify();
  }

  /** Until `stop`: turns, waiting between turns for a timer, a change or the backstop. */
  async run(stop: AbortSignal): Promise<void> {
    this.start(stop);
    this.logger.info('next backstop sweep scheduled', { at: this.nextBackstop.toISOString() });
    try {
      while (!stop.aborted) {
        const waitMs = await this.turn();
        if (waitMs > 0 && !stop.aborted) await this.wakeup.wait(waitMs, stop);
      }
    } finally {
      this.watching.abort();
      await Promise.allSettled([...this.background, ...this.batches, ...this.prejudges, this.whole]);
      this.logger.info('stopping: no sweep in flight');
    }
  }

  /** Healthy unless a turn or a whole sweep has run longer than the backstop period. */
  health(): { ok: true } | { ok: false; why: string } {
    const now = this.monotonicMs();
    const busy = this.busySinceMs === undefined ? 0 : now - this.busySinceMs;
    const whole = this.wholeSinceMs === undefined ? 0 : now - this.wholeSinceMs;
    const limitMs = Math.max(this.periodMs, 2 * MAX_WAIT_MS);
    if (busy > limitMs) return { ok: false, why: `the watch loop has not turned for ${Math.round(busy / 1000)} s` };
    if (whole > limitMs) return { ok: false, why: `a whole sweep has run for ${Math.round(whole / 1000)} s` };
    return { ok: true };
  }

  /** One turn: whatever is due now. Returns how long to wait for the next (0: turn again). */
  async turn(): Promise<number> {
    this.busySinceMs = this.monotonicMs();
    try {
      return await this.turnOnce();
    } finally {
      this.busySinceMs = undefined;
    }
  }

  private async turnOnce(): Promise<number> {
    const { deps } = this;
    const wallNow = deps.wallClock();
    const backstopDue = wallNow.getTime() >= this.nextBackstop.getTime();
    const leading = this.leading !== undefined && !this.leading.aborted;
    const synced = this.synced.size === this.scopes.length;
    if (this.deps.clock.ageMs(this.monotonicMs()) > RECALIBRATE_AFTER_MS) this.calibrate();

    // A whole sweep runs beside the loop, one at a time: the timers and pre-judgements go on meanwhile.
    const wholeFree = this.whole === undefined;
    if (backstopDue && wholeFree) {
      // While the cache's first list runs, the sweep its sync starts stands for the slot's: a
      // listing sweep beside that list would hold everything twice. A cache not synced for a
      // whole period is swept by listing.
      if (leading && (synced || this.unsyncedForAPeriod())) this.startWhole('schedule');
      else this.nextPeriod();
      return 0;
    }
    if (!synced) return this.waitMs([]);
    if (leading && this.startPending && wholeFree) {
      this.startPending = false;
      // Jobs whose grace ran out while there was no leader, known from the pre-judgements, first.
      this.startDue();
      // A follower that has pre-judged every stuck Job it held has their timers, and what changed
      // since is being pre-judged: only the Jobs an earlier leader failed and left are listed.
      if (this.prejudged) this.startLeftByEarlierLeader();
      else this.startWhole('start');
      return 0;
    }
    if (leading && wholeFree && this.leftBehindRetryAtMs !== undefined && this.monotonicMs() >= this.leftBehindRetryAtMs) {
      this.startLeftByEarlierLeader();
      return 0;
    }
    if (leading && this.policyChanged && wholeFree) {
      this.policyChanged = false;
      this.startWhole('policy');
      return 0;
    }
    const monoNow = this.monotonicMs();
    const prejudgeWaits = this.prejudgeWaiting();
    if (prejudgeWaits && monoNow >= this.dirtySinceMs + PREJUDGE_DELAY_MS) {
      this.startPrejudge();
      return 0;
    }
    const waits: number[] = [];
    if (leading && !this.listing) {
      const serverNow = deps.clock.serverNowMs(monoNow);
      const earliest = deps.timers.earliest();
      if (earliest && serverNow !== undefined && earliest.atMs + FIRE_MARGIN_MS <= serverNow) {
        // With every batch slot taken, a batch that ends wakes the loop.
        if (this.batches.size < MAX_BATCHES) {
          this.startDue();
          return 0;
        }
      } else if (earliest) {
        const at = deps.clock.monotonicAt(earliest.atMs + FIRE_MARGIN_MS, monoNow);
        if (at === undefined) this.calibrate();
        else waits.push(at - monoNow);
      }
    }
    if (prejudgeWaits) waits.push(this.dirtySinceMs + PREJUDGE_DELAY_MS - monoNow);
    if (leading && this.leftBehindRetryAtMs !== undefined) waits.push(this.leftBehindRetryAtMs - monoNow);
    return this.waitMs(waits);
  }

  private waitMs(waits: number[]): number {
    // A backstop due while a whole sweep runs waits for its end (which wakes the loop).
    const toBackstop = this.whole ? MAX_WAIT_MS : this.nextBackstop.getTime() - this.deps.wallClock().getTime();
    return Math.max(0, Math.min(MAX_WAIT_MS, toBackstop, ...waits));
  }

  private startWhole(trigger: WatchTrigger): void {
    this.wholeSinceMs = this.monotonicMs();
    this.judgedMeanwhile.clear();
    // Marked before anything else runs: a pre-judgement started meanwhile would list them again.
    this.markListedByWhole([...this.cache.keys()]);
    this.whole = this.wholeSweep(trigger)
      .catch((error: unknown) => void this.logger.error('sweep crashed', { error: (error as Error).message }))
      .finally(() => {
        this.whole = undefined;
        this.wholeSinceMs = undefined;
        this.listing = false;
        this.judgedMeanwhile.clear();
        this.awaitingWhole.clear();
        this.wakeup.notify();
      });
  }

  /**
   * The Jobs an earlier leader failed and left (the pending label), whose pods may be gone, so no
   * pre-judgement knows them: one list, and each gets the timer that leader held for it. Its owed
   * Event is written and its failure confirmed when that leader would have, not in one burst
   * beside the first writes. A Job a stuck pod or a timer already stands for is left to them.
   */
  private startLeftByEarlierLeader(): void {
    const { gateway } = this.deps.sweepDeps;
    this.leftBehindRetryAtMs = undefined;
    this.whole = (async () => {
      const policy = await this.currentPolicy();
      const jobs = await listPendingJobs(
        this.reading(gateway),
        this.options.namespaces,
        (namespace, restart) =>
          this.logger.warn('pending Job list continue token expired; listing again from the start', {
            namespace: namespace ?? '*',
            restart,
          }),
        (ms) => this.deps.sleep(ms, this.watching.signal),
      );
      // With no valid policy yet, the whole sweep a valid one starts lists and judges them.
      if (!policy) return;
      const nowMs = this.deps.clock.serverNowMs(this.monotonicMs());
      if (nowMs === undefined) throw new Error("the server's clock is not known yet");
      const ctx = { nowMs, limits: policy.limits, dryRun: this.options.dryRun };
      for (const job of jobs) {
        if (job.pendingLabel !== PENDING.claimed || this.cache.podsOf(job.uid).length > 0 || this.deps.timers.get(job.uid)) continue;
        this.deps.timers.set(job.uid, leftBehindDue(job.annotations[ANNOTATIONS.failedAt], ctx));
      }
    })()
      .catch((error: unknown) => {
        this.logger.error('could not take over the Jobs an earlier leader failed; trying again shortly', {
          error: describeApiError(error).message,
        });
        this.leftBehindRetryAtMs = this.monotonicMs() + LEFT_BEHIND_RETRY_MS;
      })
      .finally(() => {
        this.whole = undefined;
        this.wakeup.notify();
      });
  }

  private changed(key: string): void {
    // A Job whose pods wait differently (or are gone) starts its back-off and its audit afresh.
    this.failures.delete(key);
    if (this.cache.podsOf(key).length === 0) {
      this.dirty.delete(key);
      this.lastSkipped.delete(key);
      // A Job left with no stuck pod loses its grace timer (not those of a failed Job's rules).
      const due = this.deps.timers.get(key);
      if (due?.reason === 'grace' || due?.reason === 'error' || due?.reason === 'deferred') this.deps.timers.delete(key);
      return;
    }
    if (this.dirty.size === 0) this.dirtySinceMs = this.monotonicMs();
    this.dirty.set(key, ++this.changes);
    this.wakeup.notify();
  }

  private policyEdited(): void {
    this.policyChanged = true;
    this.wakeup.notify();
  }

  private nextPeriod(): void {
    const now = this.deps.wallClock();
    this.nextBackstop = this.deps.schedule.next(now);
    this.periodMs = this.periodAfter(this.nextBackstop);
    this.spent = { total: 0, byNamespace: new Map() };
    this.logger.info('next backstop sweep scheduled', { at: this.nextBackstop.toISOString() });
  }

  private periodAfter(slot: Date): number {
    return Math.max(1000, this.deps.schedule.next(slot).getTime() - slot.getTime());
  }

  /** The gateway a sweep or pre-judgement reads through: the policy ConfigMap answered from its watch. */
  private reading(gateway: KubeGateway): KubeGateway {
    return this.policyConfigMap?.synced ? this.policyConfigMap.serving(gateway) : gateway;
  }

  private keyOf(d: ActResult['decision']): string {
    // The cache's own copy of the key first: one string per stuck Job, not one per read of it.
    return this.cache.pod(d.podUid)?.key ?? d.jobView?.uid ?? d.podUid;
  }

  /** Writes a decision's audit line unless it is the same `skipped` as last time for its Job. */
  private logs(result: ActResult): boolean {
    const key = this.keyOf(result.decision);
    if (result.outcome !== 'skipped') {
      this.lastSkipped.delete(key);
      return true;
    }
    const d = result.decision;
    const detail = d.detail.startsWith('within grace') ? 'within grace' : d.detail;
    // Its digest is kept per stuck Job, not the line (about 0.1 KB less each).
    const line = createHash('sha1')
      .update([d.rule, d.action, d.graceSeconds, d.graceSource, d.pullClass, d.image, detail].join('|'))
      .digest('base64');
    if (this.lastSkipped.get(key) === line) return false;
    this.lastSkipped.set(key, line);
    return true;
  }

  /**
   * Every stuck Job: on taking the lead, a policy edit, the backstop slot (a new period). From the
   * cache it goes in parts (judge/chunks.ts: a Job stuck elsewhere is not judged behind thousands
   * the outage breaker holds), with the due batches started between parts: a Job falling due waits
   * for one part, not for every stuck Job, and memory holds one part's decisions. Listing (the
   * watch not connected and the first list older than 10 s), it is one sweep, in parts past 500.
   */
  private async wholeSweep(trigger: WatchTrigger): Promise<void> {
    await Promise.allSettled([...this.batches, ...this.prejudges]);
    // The batches in flight at the slot count in the period they were judged in.
    if (trigger === 'schedule') this.nextPeriod();
    const fromCache = this.synced.size === this.scopes.length && (this.connected.size === this.scopes.length || this.justListed());
    const snapshot = new Map(this.dirty);
    const judged = this.judgedMeanwhile;
    if (!fromCache) {
      this.listing = true;
      // Listing, the sweep reads every Job anyway; the changed ones are pre-judged beside it.
      this.awaitingWhole.clear();
      this.wakeup.notify();
      const result = await this.sweepOf(trigger, 'list', new Map());
      if (!result) return;
      for (const r of result.results) judged.add(this.keyOf(r.decision));
    } else {
      // The watch holds the Pending pods; the backstop first lists the Running ones whose container
      // restarted in place, so a Job failed earlier with such a pod is judged once, with it.
      const running = new Set<string>();
      if (trigger === 'schedule') {
        try {
          const result = await this.sweepOf(trigger, 'running', new Map(), true);
          for (const r of result?.results ?? []) {
            running.add(this.keyOf(r.decision));
            judged.add(this.keyOf(r.decision));
          }
        } finally {
          for (const key of this.judgingWithRunning) this.inFlight.delete(key);
          this.judgingWithRunning.clear();
        }
        this.startDue();
      }
      const chunks = this.chunksInOrder((await this.currentPolicy())?.limits.outage);
      // Jobs stuck since the start are marked too.
      const whole = new Set(chunks.flat());
      const names = this.markListedByWhole([...whole]);
      const jobLists = chunks.length > 1 ? new SharedJobLists(names) : undefined;
      for (let i = 0; i < chunks.length; i += 1) {
        if (i > 0) this.startDue();
        const chunk = new Set(chunks[i]!.filter((key) => !this.inFlight.has(key) && !running.has(key)));
        for (const key of chunk) this.inFlight.add(key);
        try {
          // The first chunk also lists the Jobs failed earlier (each judged with its chunk's pods) and checks the server's version.
          const elsewhere = i === 0 ? (running.size > 0 ? new Set([...whole, ...running]) : whole) : undefined;
          const result = await this.sweepOf(trigger, chunk, new Map(), i > 0, jobLists, elsewhere);
          if (!result) return;
          for (const r of result.results) judged.add(this.keyOf(r.decision));
          // Judged: not pre-judged again while the later chunks run (a change since still is).
          for (const key of chunks[i]!) if (this.dirty.get(key) === snapshot.get(key)) this.dirty.delete(key);
        } finally {
          for (const key of chunk) this.inFlight.delete(key);
          for (const key of chunks[i]!) this.awaitingWhole.delete(key);
          this.wakeup.notify();
        }
      }
    }
    for (const [key, count] of snapshot) if (this.dirty.get(key) === count) this.dirty.delete(key);
    // A grace timer of a Job nothing judged (no rule fails it any more) goes; not one judged or
    // changed beside this sweep.
    for (const key of this.cache.keys())
      if (!judged.has(key) && !this.inFlight.has(key) && !this.dirty.has(key) && this.deps.timers.get(key)?.reason === 'grace')
        this.deps.timers.delete(key);
  }

  /**
   * The backstop's Running pods (a container restarted in place), with the cached Pending pods of
   * their Jobs: a Job with both is judged once, on all its pods, and its chunk leaves it out.
   */
  private async runningWithTheirJobs(gateway: KubeGateway, options: ObserveOptions): Promise<Observation> {
    const observed = await observeStuckContainers(gateway, { ...options, phases: ['Running'] });
    const keys = new Set<string>();
    for (const c of observed.stuck) {
      const key = jobOwner(c.controller)?.uid ?? c.podUid;
      const free = !this.inFlight.has(key) || this.judgingWithRunning.has(key);
      if (free && this.cache.podsOf(key).length > 0) keys.add(key);
    }
    if (keys.size === 0) return observed;
    for (const key of keys) {
      this.inFlight.add(key);
      this.judgingWithRunning.add(key);
    }
    const cached = this.cache.observation(keys);
    const stuck = [...observed.stuck, ...cached.stuck].sort(compareByPod);
    return { ...observed, stuck, podCapacity: new Map([...observed.podCapacity, ...cached.podCapacity]) };
  }

  /**
   * A namespace a whole sweep lists is not pre-judged meanwhile: its chunks judge it from the cache
   * as it is then (a cold start would list those Jobs twice). A few Jobs elsewhere are: one read
   * each, and their timers come at once. Returns the Job names by namespace of `keys`.
   */
  private markListedByWhole(keys: readonly string[]): Map<string, Set<string>> {
    const names = jobNamesByNamespace(keys.flatMap((key) => this.cache.podsOf(key).flatMap((pod) => pod.stuck)));
    for (const key of keys) {
      const namespace = this.cache.podsOf(key)[0]?.namespace ?? '';
      if ((names.get(namespace)?.size ?? 0) >= LIST_JOBS_THRESHOLD) this.awaitingWhole.add(key);
    }
    return names;
  }

  private unsyncedForAPeriod(): boolean {
    return this.syncedAtMs === undefined && this.monotonicMs() - this.startedAtMs >= this.periodMs;
  }

  /** The cache's first list is moments old: whatever its watch did since, the cache is as fresh as a list. */
  private justListed(): boolean {
    return this.syncedAtMs !== undefined && this.monotonicMs() - this.syncedAtMs < JUST_LISTED_MS;
  }

  /** The stuck Jobs in parts (judge/chunks.ts), the outage breaker's under `outageLimits`. */
  private chunksInOrder(outageLimits: Policy['limits']['outage'] | undefined): string[][] {
    const outage = outageLimits ? this.cache.outage(outageLimits) : undefined;
    const groups = [...this.cache.keys()].map((key) => ({ key, containers: this.cache.podsOf(key).flatMap((pod) => pod.stuck) }));
    return inChunks(groups, outage);
  }

  /**
   * Takes the due Jobs off the timers and judges and writes them as one batch, in the background.
   * The cache is as fresh as its watch: while a pod watch is not connected (cut, or listing
   * again), the due Jobs' pods are read again first (at most the batch's), and a Job whose pods
   * could not be read waits a moment.
   */
  private startDue(): void {
    const serverNow = this.deps.clock.serverNowMs(this.monotonicMs());
    if (serverNow === undefined) return;
    const room = (MAX_BATCHES - this.batches.size) * BATCH_MAX;
    if (room <= 0) return;
    const taken = this.deps.timers.takeDue(serverNow - FIRE_MARGIN_MS, room);
    for (const key of this.inFlight) taken.delete(key);
    // Small batches side by side: the first writes wait on a few Jobs' reads, not on all of them.
    const entries = [...taken];
    for (let i = 0; i < entries.length; i += BATCH_MAX) this.startBatch(new Map(entries.slice(i, i + BATCH_MAX)), serverNow);
  }

  private startBatch(due: Map<string, Due>, serverNow: number): void {
    for (const key of due.keys()) this.inFlight.add(key);
    const stale = this.connected.size < this.scopes.length;
    const fresh = stale ? this.readAgain(due, serverNow) : Promise.resolve();
    const batch = fresh
      .then(() => (due.size === 0 ? undefined : this.sweepOf('timer', new Set(due.keys()), due)))
      .catch(() => undefined)
      .finally(() => {
        for (const key of due.keys()) this.inFlight.delete(key);
        this.batches.delete(batch);
        this.wakeup.notify();
      })
      .then(() => undefined);
    this.batches.add(batch);
  }

  /** Reads the pods of the `due` Jobs again into the cache; a Job whose pods could not be read leaves `due`, due again shortly. */
  private async readAgain(due: Map<string, Due>, serverNow: number): Promise<void> {
    const { gateway } = this.deps.sweepDeps;
    const pods = [...due.keys()].flatMap((key) => this.cache.podsOf(key).map((pod) => ({ key, pod })));
    const unread = new Set<string>();
    await mapBounded(pods, 8, async ({ key, pod }) => {
      try {
        this.cache.refresh(pod.uid, await gateway.readPod(pod.namespace, pod.name));
      } catch (error) {
        if (describeApiError(error).status === 404) this.cache.refresh(pod.uid, undefined);
        else unread.add(key);
      }
    });
    for (const key of unread) {
      this.deps.timers.set(key, { atMs: serverNow + DISCONNECTED_RECHECK_MS, reason: due.get(key)!.reason });
      due.delete(key);
      this.inFlight.delete(key);
    }
  }

  /**
   * One sweep: of the given keys from the cache, of every key from the cache (undefined), or
   * listing (`list`: the watch cannot be trusted). Sets the timers of what it judged.
   */
  private async sweepOf(
    trigger: WatchTrigger,
    keys: ReadonlySet<string> | 'list' | 'running' | undefined,
    fired: Map<string, Due>,
    lean = false,
    jobLists?: SharedJobLists,
    judgedElsewhere?: ReadonlySet<string>,
  ) {
    const { deps } = this;
    const { sweepDeps, clock } = deps;
    deps.metrics?.swept(trigger);
    // A timer's sweep judges its Jobs from an earlier fresh read of them: its first write waits on no read.
    const jobsRead = new Map<string, V1Job>();
    const reading = JobReads.recording(this.reading(sweepDeps.gateway), jobsRead);
    const served = typeof keys === 'object' && fired.size > 0 ? this.jobReads.serving(reading, keys, this.monotonicMs()) : reading;
    const writes = recordingWrites(served, this.monotonicMs);
    const policy = await this.currentPolicy();
    const reservedHere = new Set<string>();
    const deps2: SweepDeps = {
      ...sweepDeps,
      gateway: writes.gateway,
      ...(keys === 'list'
        ? {}
        : keys === 'running'
          ? { observe: (g: KubeGateway, o: ObserveOptions) => this.runningWithTheirJobs(g, o) }
          : { observe: () => Promise.resolve(this.cache.observation(keys)) }),
    };
    const started = deps.wallClock();
    const startedMono = this.monotonicMs();
    let result: SweepResult | undefined;
    try {
      result = await deps.sweep(deps2, {
        ...this.options,
        signal: this.leading,
        batch: {
          ...(policy && keys !== 'list' && keys !== 'running' ? { outage: this.cache.outage(policy.limits.outage) } : {}),
          ...(policy && keys === 'running' ? { outageBeside: (observed) => this.cache.outageBeside(observed, policy.limits.outage) } : {}),
          spent: () => this.spentNow(),
          onJudged: (decisions) => {
            for (const d of decisions) {
              if (d.plan !== 'fail' && d.plan !== 'heal') continue;
              const key = this.keyOf(d);
              this.reserved.set(key, d.namespace);
              reservedHere.add(key);
            }
          },
          logs: (r) => this.logs(r),
          serverNow: () => {
            const ms = clock.serverNowMs(this.monotonicMs());
            return ms === undefined ? undefined : new Date(ms);
          },
          ...(jobLists ? { jobLists } : {}),
          ...(judgedElsewhere ? { judgedElsewhere } : {}),
          ...(fired.size > 0 ? { timersOf: new Set(fired.keys()) } : {}),
          focused:
            lean ||
            (fired.size > 0 &&
              [...fired.values()].every(
                (d) => d.reason === 'grace' || d.reason === 'error' || d.reason === 'deferred' || d.reason === 'heal',
              )),
        },
      });
    } catch (error) {
      this.logger.error('sweep crashed', { error: (error as Error).message });
    }
    for (const key of reservedHere) this.reserved.delete(key);
    const finished = deps.wallClock();
    deps.onSweep?.(result, (finished.getTime() - started.getTime()) / 1000, finished);
    const nowMs = clock.serverNowMs(this.monotonicMs()) ?? 0;
    if (!result || !(result.status === 'done' || result.status === 'actions-failed')) {
      // Nothing was judged: an invalid policy waits for its edit (or the backstop); anything else backs off.
      if (result?.status !== 'invalid-policy') {
        for (const key of fired.keys()) this.backOff(key, nowMs, fired.get(key)!);
      }
      return result;
    }
    const loaded = await loadPolicy(writes.replayingPolicy(), this.options.policy).catch(() => undefined);
    const limits = loaded?.ok ? loaded.policy.limits : undefined;
    if (loaded?.ok) this.policyLoaded(loaded.policy);
    const startedAtMs = result.summary ? Date.parse(result.summary.startedAt) : nowMs - (this.monotonicMs() - startedMono);
    const seen = new Set<string>();
    for (const r of result.results) {
      const key = this.keyOf(r.decision);
      if (this.whole) this.judgedMeanwhile.add(key);
      const firstForKey = !seen.has(key);
      seen.add(key);
      if (r.outcome === 'failed' || r.outcome === 'would-fail' || r.outcome === 'healed' || r.outcome === 'would-heal')
        spendOne(this.spent, r.decision.namespace);
      const firedFor = fired.get(key);
      const wroteAt = writes.firstWrite(r.decision.namespace, r.decision.job ?? r.decision.pod);
      if (
        firedFor &&
        wroteAt !== undefined &&
        (r.outcome === 'failed' || r.outcome === 'reported' || r.outcome === 'retried' || r.outcome === 'healed')
      ) {
        deps.metrics?.reacted(firedFor.reason, ((clock.serverNowMs(wroteAt) ?? 0) - firedFor.atMs) / 1000);
      }
      if (!limits) continue;
      const failures = r.outcome === 'error' ? (this.failures.get(key) ?? 0) + 1 : 0;
      if (failures > 0) this.failures.set(key, failures);
      else this.failures.delete(key);
      const errorDelayMs = backOffMs(failures, r.refused ? FIRST_REFUSED_BACK_OFF_MS : FIRST_BACK_OFF_MS, this.periodMs);
      let due = dueOf(r.decision, r.outcome, { nowMs, limits, claimedAtMs: startedAtMs, dryRun: this.options.dryRun, errorDelayMs });
      // A back-off as long as the period is the backstop's to retry.
      if (due?.reason === 'error' && errorDelayMs >= this.periodMs) due = undefined;
      const known = firstForKey ? undefined : deps.timers.get(key);
      if (!known || (due && due.atMs < known.atMs)) deps.timers.set(key, due);
      this.keepRead(jobsRead, r.decision, due, nowMs, startedMono);
    }
    return result;
  }

  /**
   * Keeps the read of a Job a rule fails whose grace runs out within FRESH_MS, for its timer's
   * sweep: the claim is conditional on it (a report or a retry is written on a fresh read).
   */
  private keepRead(jobsRead: Map<string, V1Job>, d: ActResult['decision'], due: Due | undefined, nowMs: number, readAtMs: number): void {
    if (due?.reason !== 'grace' || due.atMs - nowMs >= FRESH_MS || d.job === undefined || d.action !== 'fail') return;
    const job = jobsRead.get(`${d.namespace}/${d.job}`);
    if (job) this.jobReads.keep(job, readAtMs);
  }

  private backOff(key: string, nowMs: number, was: Due): void {
    const delayMs = this.nextBackOffMs(key);
    if (delayMs < this.periodMs)
      this.deps.timers.set(key, { atMs: nowMs + delayMs, reason: was.reason === 'grace' ? 'error' : was.reason });
  }

  /** One more failure of `key` in a row: how long it backs off (from 1 s, doubling up to the backstop period). */
  private nextBackOffMs(key: string): number {
    const failures = (this.failures.get(key) ?? 0) + 1;
    this.failures.set(key, failures);
    return backOffMs(failures, FIRST_BACK_OFF_MS, this.periodMs);
  }

  /** The period's failures so far, and those the sweeps in flight judged to fail. */
  private spentNow(): Spent {
    const byNamespace = new Map(this.spent.byNamespace);
    for (const namespace of this.reserved.values()) byNamespace.set(namespace, (byNamespace.get(namespace) ?? 0) + 1);
    return { total: this.spent.total + this.reserved.size, byNamespace };
  }

  private async currentPolicy(): Promise<Policy | undefined> {
    const loaded = await loadPolicy(this.reading(this.deps.sweepDeps.gateway), this.options.policy).catch(() => undefined);
    if (loaded?.ok) this.policyLoaded(loaded.policy);
    return loaded?.ok ? loaded.policy : this.policy;
  }

  private policyLoaded(policy: Policy): void {
    this.policy = policy;
    this.followServiceAccounts(policy);
  }

  /** A policy that heals: the ServiceAccounts are followed from then on (the scopes' pods' ones). */
  private followServiceAccounts(policy: Policy): void {
    if (this.serviceAccounts || !this.follow || !policyHeals(policy)) return;
    this.serviceAccounts = new ServiceAccountSecrets((namespace, name) => this.pullSecretGiven(namespace, name));
    for (const scope of this.scopes)
      this.follow('serviceaccounts', serviceAccountCollection(scope === '*' ? undefined : scope), this.serviceAccounts.handler());
    this.logger.info('healing on: watching ServiceAccounts for pull secrets given');
  }

  /** The Jobs with a pod stuck `auth` under that ServiceAccount are due now: the sweep reads the evidence and heals. */
  private pullSecretGiven(namespace: string, serviceAccount: string): void {
    const nowMs = this.deps.clock.serverNowMs(this.monotonicMs());
    if (nowMs === undefined) return;
    let due = 0;
    for (const key of this.cache.keys()) {
      if (this.inFlight.has(key)) continue;
      const under = this.cache
        .podsOf(key)
        .some(
          (pod) =>
            pod.namespace === namespace &&
            pod.stuck.some((c) => c.pullClass === 'auth' && (c.heal?.serviceAccount ?? 'default') === serviceAccount),
        );
      if (!under) continue;
      this.deps.timers.set(key, { atMs: nowMs, reason: 'heal' });
      due += 1;
    }
    if (due === 0) return;
    this.logger.info('a ServiceAccount was given a pull secret: judging its stuck Jobs now', {
      serviceAccount: `${namespace}/${serviceAccount}`,
      jobs: due,
    });
    this.wakeup.notify();
  }

  /** Changed Jobs not being pre-judged already, and room for one more pre-judgement. */
  private prejudgeWaiting(): boolean {
    if (this.prejudges.size >= MAX_PREJUDGES) return false;
    for (const key of this.dirty.keys()) if (!this.prejudging.has(key) && !this.awaitingWhole.has(key)) return true;
    return false;
  }

  /** Pre-judges the changed Jobs not in a pre-judgement already, beside the loop; it wakes the loop when done. */
  private startPrejudge(): void {
    const snapshot = new Map([...this.dirty].filter(([key]) => !this.prejudging.has(key) && !this.awaitingWhole.has(key)));
    for (const key of snapshot.keys()) this.prejudging.add(key);
    this.dirtySinceMs = this.monotonicMs();
    const run: Promise<void> = this.prejudgeChanged(snapshot)
      .catch((error: unknown) => void this.logger.error('pre-judging crashed', { error: (error as Error).message }))
      .finally(() => {
        for (const key of snapshot.keys()) this.prejudging.delete(key);
        this.prejudges.delete(run);
        this.wakeup.notify();
      });
    this.prejudges.add(run);
  }

  /**
   * Pre-judges the Jobs whose stuck pods changed (`snapshot`: key → its change count): their
   * timers (reads only; followers too). Job by Job, side by side, each timer set as soon as its
   * Job's read is in: a Job waits on its own read, not on the slowest read of a burst. The Jobs
   * of a namespace with 10 or more of them changed go together, after one list of its Jobs.
   */
  private async prejudgeChanged(snapshot: Map<string, number>): Promise<void> {
    const policy = await this.currentPolicy();
    if (!policy) {
      // The sweep reports the policy's problem; the timers wait for it to be fixed.
      for (const [key, count] of snapshot) if (this.dirty.get(key) === count) this.dirty.delete(key);
      return;
    }
    const byNamespace = new Map<string, string[]>();
    for (const key of snapshot.keys()) {
      const namespace = this.cache.podsOf(key)[0]?.namespace ?? '';
      const keys = byNamespace.get(namespace);
      if (keys) keys.push(key);
      else byNamespace.set(namespace, [key]);
    }
    const groups = [...byNamespace.values()].flatMap((keys) => (keys.length >= LIST_JOBS_THRESHOLD ? [keys] : keys.map((key) => [key])));
    const gateway = sharingNamespaceReads(this.reading(this.deps.sweepDeps.gateway));
    await mapBounded(groups, PREJUDGE_GROUPS, async (keys) => {
      if (await this.prejudgeKeys(keys, policy, gateway)) {
        for (const key of keys) if (this.dirty.get(key) === snapshot.get(key)) this.dirty.delete(key);
      }
      this.wakeup.notify();
    });
    if (this.dirty.size === 0) this.prejudged = true;
  }

  /** Pre-judges the Jobs of `keys` and sets their timers; false when their reads failed (they stay changed). */
  private async prejudgeKeys(keys: string[], policy: Policy, gateway: KubeGateway): Promise<boolean> {
    const { deps } = this;
    const stuck = [];
    for (const key of keys) for (const pod of this.cache.podsOf(key)) stuck.push(...pod.stuck);
    let decisions: ActResult['decision'][];
    const jobsRead = new Map<string, V1Job>();
    const readFromMs = this.monotonicMs();
    try {
      decisions = await prejudge(JobReads.recording(gateway, jobsRead), stuck, policy, {
        now: () => new Date(deps.clock.serverNowMs(this.monotonicMs()) ?? 0),
        outage: this.cache.outage(policy.limits.outage),
      });
    } catch (error) {
      this.logger.warn('could not pre-judge pods that wait on their image; trying again in 5 s, and the next sweep judges them', {
        error: (error as Error).message,
      });
      this.dirtySinceMs = this.monotonicMs() + PREJUDGE_RETRY_MS;
      return false;
    }
    const nowMs = deps.clock.serverNowMs(this.monotonicMs()) ?? 0;
    this.jobReads.prune(this.monotonicMs());
    for (const d of decisions) {
      const key = this.keyOf(d);
      // A Job whose read failed (after the gateway's retries) backs off as a failed write does, from 1 s.
      const errorDelayMs = d.plan === 'error' ? this.nextBackOffMs(key) : undefined;
      const due = dueOf(d, undefined, {
        nowMs,
        limits: policy.limits,
        dryRun: this.options.dryRun,
        ...(errorDelayMs === undefined ? {} : { errorDelayMs }),
      });
      if (this.whole) this.judgedMeanwhile.add(key);
      const known = deps.timers.get(key);
      // A heal due (a pull secret given) is not put off by a later grace.
      if (known?.reason === 'heal' && (!due || due.atMs >= known.atMs)) continue;
      if (due && (!known || known.reason !== 'grace' || due.atMs < known.atMs)) deps.timers.set(key, due);
      else if (!due && known?.reason === 'grace') deps.timers.delete(key);
      this.keepRead(jobsRead, d, due, nowMs, readFromMs);
    }
    return true;
  }

  /** A few short probes, beside the loop, until the server's Date turns a second: the offset to within their spacing. */
  private calibrate(): void {
    if (this.calibrating || this.monotonicMs() - this.calibratedAtMs < 5_000) return;
    this.calibrating = true;
    this.calibratedAtMs = this.monotonicMs();
    const signal = this.watching.signal;
    void (async () => {
      let previous: number | undefined;
      for (let i = 0; i < 30 && !signal.aborted; i += 1) {
        const date = await this.deps.probe(signal).catch(() => undefined);
        if (date === undefined) break;
        const second = date.getTime();
        if (previous !== undefined && second !== previous) break;
        previous = second;
        await this.deps.sleep(40, signal);
      }
    })().finally(() => {
      this.calibrating = false;
      this.wakeup.notify();
    });
  }
}
