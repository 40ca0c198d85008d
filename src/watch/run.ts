// `run --watch` (docs/how-it-works.md "Event-driven mode"): one loop, so two sweeps never overlap.
// It sweeps once the pod cache has its first list, then whenever a timed rule falls due, the
// policy (its ConfigMap or its file) changes, or the backstop schedule comes; between sweeps it only pre-judges pods
// that newly wait on their image, to set their timers. Every sweep is the ordinary sweep(); a
// triggered one observes from the cache instead of listing.
import type { ActResult } from '../act/act.ts';
import type { KubeGateway } from '../kube/gateway.ts';
import type { WatchGateway } from '../kube/watch.ts';
import type { StuckContainer } from '../model.ts';
import { loadPolicy } from '../policy/load.ts';
import type { Schedule } from '../schedule/scheduler.ts';
import type { SweepDeps, SweepOptions, SweepResult } from '../sweep.ts';
import { ServerClock } from './clock.ts';
import { DueTimes, ERROR_RETRY_MS, dueOf, type Due } from './due.ts';
import type { WatchMetrics, WatchTrigger } from './metrics.ts';
import { PodCache } from './pod-cache.ts';
import { watchPolicyFile } from './policy-file-watch.ts';
import { watchPolicy } from './policy-watch.ts';
import { prejudge } from './prejudge.ts';
import { recordingWrites } from './recording-gateway.ts';
import { Wakeup } from './wakeup.ts';

/** Pods that changed are pre-judged together after this long (a burst is one batch of reads). */
const PREJUDGE_DELAY_MS = 50;
/** A triggered sweep starts this long after its due time on our estimate of the server's clock. */
const FIRE_MARGIN_MS = 20;
/** The clock is calibrated again (a few GET /version) when a timer fires and it is older than this. */
const RECALIBRATE_AFTER_MS = 5 * 60_000;

export interface WatchRunDeps {
  sweepDeps: SweepDeps;
  sweep: (deps: SweepDeps, options: SweepOptions) => Promise<SweepResult>;
  watchGateway: WatchGateway;
  schedule: Schedule;
  metrics?: WatchMetrics;
  onSweep?: (result: SweepResult | undefined, seconds: number, finishedAt: Date) => void;
  sleep: (ms: number, signal: AbortSignal) => Promise<void>;
  pageSize?: number;
  watchTimeoutSeconds?: number;
}

export async function runWatching(deps: WatchRunDeps, options: SweepOptions, stop: AbortSignal): Promise<void> {
  const { sweepDeps } = deps;
  const { logger, monotonicMs } = sweepDeps;
  const gateway: KubeGateway = sweepDeps.gateway;
  const clock = new ServerClock();
  const dues = new DueTimes();
  const wakeup = new Wakeup();
  /** uid → change count, for pods whose timers are not known yet. */
  const dirty = new Map<string, number>();
  const keyByUid = new Map<string, string>();
  let changes = 0;
  /** When the oldest change not pre-judged yet came. */
  let dirtySinceMs = 0;
  let policyChanged = false;
  let synced = false;
  let calibratedAtMs = -Infinity;

  const watching = new AbortController();
  const stopWatching = () => watching.abort();
  stop.addEventListener('abort', stopWatching, { once: true });
  const onRestart = (watch: 'pods' | 'policy') => (scope: string, reason: 'timeout' | 'dropped' | 'expired', error?: string) => {
    deps.metrics?.restarted(watch, reason);
    if (reason === 'timeout') logger.debug('watch ended by the API server; resuming', { watch: scope });
    else if (reason === 'expired') logger.warn('watch expired (410 Gone); listing again', { watch: scope });
    else logger.warn('watch failed; resuming from the last resourceVersion seen', { watch: scope, error });
  };
  const cache = new PodCache(deps.watchGateway, gateway, {
    namespaces: options.namespaces,
    pageSize: deps.pageSize ?? 500,
    watchTimeoutSeconds: deps.watchTimeoutSeconds,
    sleep: deps.sleep,
    onRestart: onRestart('pods'),
    onSynced: () => {
      synced = true;
      wakeup.notify();
    },
    onChange: (pod, uid) => {
      const previous = keyByUid.get(uid);
      if (pod && pod.stuck.length > 0) keyByUid.set(uid, pod.key);
      else keyByUid.delete(uid);
      // A Job left with no stuck pod loses its grace timer (not those of a failed Job's rules).
      if (previous !== undefined && ![...keyByUid.values()].includes(previous) && dues.get(previous)?.reason === 'grace')
        dues.delete(previous);
      if (pod && pod.stuck.length > 0) {
        if (dirty.size === 0) dirtySinceMs = monotonicMs();
        dirty.set(uid, ++changes);
        wakeup.notify();
      } else dirty.delete(uid);
    },
  });
  deps.metrics?.listed('pods');
  const background: Promise<void>[] = [cache.run(watching.signal)];
  const onPolicyChange = () => {
    policyChanged = true;
    wakeup.notify();
  };
  if (options.policy.kind === 'configmap') {
    deps.metrics?.listed('policy');
    const policyOptions = {
      namespace: options.policy.namespace,
      name: options.policy.name,
      watchTimeoutSeconds: deps.watchTimeoutSeconds,
      sleep: deps.sleep,
      onRestart: onRestart('policy'),
      onChange: onPolicyChange,
    };
    background.push(watchPolicy(deps.watchGateway, policyOptions, watching.signal));
  } else if (!(options.policy.path === '-' && options.policy.stdin)) {
    // A file is polled (policy-file-watch.ts); stdin has no edits.
    background.push(watchPolicyFile({ path: options.policy.path, sleep: deps.sleep, onChange: onPolicyChange }, watching.signal));
  }

  const serverNow = () => clock.serverNowMs(monotonicMs());
  const calibrate = async () => {
    let previous: number | undefined;
    for (let i = 0; i < 30 && !stop.aborted; i += 1) {
      await gateway.readServerVersion().catch(() => undefined);
      const seen = gateway.lastServerDate();
      clock.note(seen, monotonicMs());
      const second = seen?.date.getTime();
      if (previous !== undefined && second !== undefined && second !== previous) break;
      previous = second;
      await deps.sleep(40, stop);
    }
    calibratedAtMs = monotonicMs();
  };
  const keyOf = (d: ActResult['decision']) => d.jobView?.uid ?? cache.pod(d.podUid)?.key ?? d.podUid;

  const runSweep = async (trigger: WatchTrigger, fired: Map<string, Due>) => {
    deps.metrics?.swept(trigger);
    const snapshot = new Map(dirty);
    const writes = recordingWrites(gateway, monotonicMs);
    const fromCache = trigger !== 'schedule';
    const sweepDeps2: SweepDeps = {
      ...sweepDeps,
      gateway: writes.gateway,
      ...(fromCache ? { observe: () => Promise.resolve(cache.observation()) } : {}),
    };
    const startedMono = monotonicMs();
    const started = new Date();
    let result: SweepResult | undefined;
    try {
      result = await deps.sweep(sweepDeps2, options);
    } catch (error) {
      logger.error('sweep crashed', { error: (error as Error).message });
    }
    const finished = new Date();
    deps.onSweep?.(result, (finished.getTime() - started.getTime()) / 1000, finished);
    clock.note(gateway.lastServerDate(), monotonicMs());
    const nowMs = serverNow() ?? 0;
    if (!result || !(result.status === 'done' || result.status === 'actions-failed')) {
      // Nothing was judged: an invalid policy waits for its edit (or the backstop); anything else is tried again soon.
      if (result?.status === 'invalid-policy') dues.clear();
      else for (const [key, due] of dues.dueBy(nowMs)) dues.set(key, { ...due, atMs: nowMs + ERROR_RETRY_MS });
      return;
    }
    for (const [uid, count] of snapshot) if (dirty.get(uid) === count) dirty.delete(uid);
    const startedAtMs = result.summary ? Date.parse(result.summary.startedAt) : nowMs - (monotonicMs() - startedMono);
    const limits = await policyLimits(writes.replayingPolicy());
    dues.clear();
    for (const r of result.results) {
      const key = keyOf(r.decision);
      const firedFor = fired.get(key);
      const wroteAt = writes.firstWrite(r.decision.namespace, r.decision.job ?? r.decision.pod);
      if (firedFor && wroteAt !== undefined && (r.outcome === 'failed' || r.outcome === 'reported' || r.outcome === 'retried')) {
        const wroteServerMs = clock.serverNowMs(wroteAt) ?? 0;
        deps.metrics?.reacted(firedFor.reason, (wroteServerMs - firedFor.atMs) / 1000);
      }
      if (!limits) continue;
      const due = dueOf(r.decision, r.outcome, { nowMs, limits, claimedAtMs: startedAtMs, dryRun: options.dryRun });
      const known = dues.get(key);
      if (due && (!known || due.atMs < known.atMs)) dues.set(key, due);
    }
  };

  /** The limits the next timers are set from (the policy as a sweep reads it). */
  const policyLimits = async (replaying: KubeGateway) => {
    const loaded = await loadPolicy(replaying, options.policy).catch(() => undefined);
    return loaded?.ok ? loaded.policy.limits : undefined;
  };

  const prejudgeDirty = async () => {
    const uids = [...dirty.keys()];
    const snapshot = new Map(dirty);
    const keys = new Set(uids.map((uid) => keyByUid.get(uid)).filter((k): k is string => k !== undefined));
    const stuck: StuckContainer[] = [];
    for (const [uid, key] of keyByUid) if (keys.has(key)) stuck.push(...(cache.pod(uid)?.stuck ?? []));
    const loaded = await loadPolicy(gateway, options.policy).catch(() => undefined);
    if (!loaded?.ok) {
      // The sweep reports the policy's problem; the timers wait for it to be fixed.
      for (const [uid, count] of snapshot) if (dirty.get(uid) === count) dirty.delete(uid);
      return;
    }
    clock.note(gateway.lastServerDate(), monotonicMs());
    let decisions: ActResult['decision'][];
    try {
      decisions = await prejudge(gateway, stuck, loaded.policy, () => new Date(serverNow() ?? 0));
    } catch (error) {
      logger.warn('could not pre-judge pods that wait on their image; trying again in 5 s, and the next sweep judges them', {
        error: (error as Error).message,
      });
      dirtySinceMs = monotonicMs() + ERROR_RETRY_MS;
      return;
    }
    clock.note(gateway.lastServerDate(), monotonicMs());
    const nowMs = serverNow() ?? 0;
    for (const d of decisions) {
      const due = dueOf(d, undefined, { nowMs, limits: loaded.policy.limits, dryRun: options.dryRun });
      const key = keyOf(d);
      const known = dues.get(key);
      if (due && (!known || known.reason !== 'grace' || due.atMs < known.atMs)) dues.set(key, due);
      else if (!due && known?.reason === 'grace') dues.delete(key);
    }
    for (const [uid, count] of snapshot) if (dirty.get(uid) === count) dirty.delete(uid);
    dirtySinceMs = monotonicMs();
  };

  let nextBackstop = deps.schedule.next(new Date());
  logger.info('next backstop sweep scheduled', { at: nextBackstop.toISOString() });
  let started = false;
  try {
    while (!stop.aborted) {
      if (synced && !started) {
        started = true;
        logger.info('watching: the pod cache is synced', { candidates: cache.observation().candidates });
        // At once: a Job whose grace ran out while nobody watched (no leader, a restart) waits no longer.
        await runSweep('start', new Map());
        await calibrate();
        continue;
      }
      const monoNow = monotonicMs();
      const earliest = started ? dues.earliest() : undefined;
      const dueMono = earliest ? clock.monotonicAt(earliest.atMs + FIRE_MARGIN_MS, monoNow) : undefined;
      // Until the cache is synced (a list that keeps failing), only the backstop sweeps.
      const waits = [nextBackstop.getTime() - Date.now(), dueMono === undefined ? Infinity : dueMono - monoNow];
      if (started && dirty.size > 0) waits.push(dirtySinceMs + PREJUDGE_DELAY_MS - monoNow);
      if (started && policyChanged) waits.push(0);
      const waitMs = Math.min(...waits);
      if (waitMs > 0) {
        await wakeup.wait(Math.min(waitMs, 3_600_000), stop);
        continue;
      }
      if (Date.now() >= nextBackstop.getTime()) {
        await runSweep('schedule', new Map());
        nextBackstop = deps.schedule.next(new Date());
        logger.info('next backstop sweep scheduled', { at: nextBackstop.toISOString() });
      } else if (policyChanged) {
        policyChanged = false;
        await runSweep('policy', new Map());
      } else if (dueMono !== undefined && dueMono <= monoNow) {
        if (monoNow - calibratedAtMs > RECALIBRATE_AFTER_MS) {
          await calibrate();
          continue;
        }
        await runSweep('timer', dues.dueBy(serverNow() ?? 0));
      } else if (dirty.size > 0) await prejudgeDirty();
    }
  } finally {
    stop.removeEventListener('abort', stopWatching);
    watching.abort();
    await Promise.allSettled(background);
    logger.info('stopping: no sweep in flight');
  }
}
