// Leader election on a coordination.k8s.io/v1 Lease, as Kubernetes components do it (client-go's
// leaderelection): acquire, renew, release. Expiry is judged on the local monotonic clock only: a
// follower counts how long it has seen the same record unchanged, never reads another host's time.
import type winston from 'winston';
import type { Lease, LeaseSpec, LeaseStore } from '../kube/leases.ts';
import type { ElectionTimings } from './defaults.ts';

export type { Lease, LeaseSpec, LeaseStore, LeaseWritten } from '../kube/leases.ts';

export { DEFAULT_LEASE_NAME, DEFAULT_TIMINGS, type ElectionTimings } from './defaults.ts';
const JITTER = 1.2;

/** client-go's constraints: the renew deadline fits in the lease, and a jittered retry fits in the deadline. */
export function timingProblem(t: ElectionTimings): string | undefined {
  if (!(t.retryPeriodMs > 0)) return 'the retry period must be more than 0';
  if (t.leaseDurationMs <= t.renewDeadlineMs) return 'the lease duration must be longer than the renew deadline';
  if (t.renewDeadlineMs <= JITTER * t.retryPeriodMs) return `the renew deadline must be longer than ${JITTER} × the retry period`;
  return undefined;
}

/** A record as this process first saw it: an opaque fingerprint and the local monotonic time. */
export interface Observation {
  fingerprint: string;
  atMs: number;
}

export type LeaseVerdict = { kind: 'held'; holder: string; expiresInMs: number } | { kind: 'take'; spec: LeaseSpec };

/** The record's fields as they are, for "has it changed": no timestamp is interpreted. */
export function fingerprint(spec: LeaseSpec | undefined): string {
  const s = spec ?? {};
  return JSON.stringify([
    s.holderIdentity ?? '',
    s.leaseDurationSeconds ?? null,
    s.acquireTime ?? '',
    s.renewTime ?? '',
    s.leaseTransitions ?? 0,
  ]);
}

/** MicroTime as the API server writes it (six fractional digits). */
export function microTime(date: Date): string {
  return date.toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
}

/**
 * Pure: given the current record, when this process first saw it, and now (monotonic), may
 * `identity` write itself as holder? Ours: renew. Empty (released): take. Another's: only once it
 * has stood unchanged for a whole lease duration here.
 */
export function judgeLease(
  current: LeaseSpec | undefined,
  seen: Observation,
  identity: string,
  nowMs: number,
  wallNow: Date,
  timings: ElectionTimings,
): LeaseVerdict {
  const holder = current?.holderIdentity ?? '';
  const ours = holder === identity;
  if (holder !== '' && !ours) {
    // The holder's own duration, as client-go's isLeaseValid: during a rolling change of timings
    // a follower with a shorter one must not take the Lease early.
    const recorded = current?.leaseDurationSeconds;
    const durationMs = recorded && recorded > 0 ? recorded * 1000 : timings.leaseDurationMs;
    const expiresInMs = seen.atMs + durationMs - nowMs;
    if (expiresInMs > 0) return { kind: 'held', holder, expiresInMs };
  }
  return { kind: 'take', spec: holding(current, identity, wallNow, timings) };
}

/** The record that writes `identity` as holder over `current`: a renewal of its own keeps acquireTime and transitions. */
function holding(current: LeaseSpec | undefined, identity: string, wallNow: Date, timings: ElectionTimings): LeaseSpec {
  const ours = current?.holderIdentity === identity;
  const transitions = current?.leaseTransitions ?? 0;
  return {
    holderIdentity: identity,
    leaseDurationSeconds: Math.ceil(timings.leaseDurationMs / 1000),
    acquireTime: ours ? (current?.acquireTime ?? microTime(wallNow)) : microTime(wallNow),
    renewTime: microTime(wallNow),
    leaseTransitions: ours || current === undefined ? transitions : transitions + 1,
  };
}

export interface ElectorDeps {
  store: LeaseStore;
  identity: string;
  timings: ElectionTimings;
  /** Local monotonic milliseconds (performance.now). */
  monotonicMs: () => number;
  /** Only written into the record (acquireTime, renewTime) for people reading it; never read back. */
  wallClock: () => Date;
  sleep: (ms: number, signal: AbortSignal) => Promise<void>;
  logger: winston.Logger;
  random?: () => number;
  /** Told true on taking the lease, false on losing or releasing it (the leader gauge). */
  onLeading?: (leading: boolean) => void;
}

/** How leading ended: the Lease released on stop, or lost (not renewed in time, or another holder seen). */
export type LeadEnd = 'released' | 'lost';

export class LeaderElector {
  private seen: Observation | undefined;
  private lastHolder = '';
  /** Local monotonic time the last successful renewal was sent; undefined while not leading. */
  private renewedAtMs: number | undefined;
  /** Local monotonic time another holder's Lease expires here, as last judged. */
  private expiresAtMs: number | undefined;
  /** The last attempt to take the Lease met a newer record (perhaps its own write, its answer lost). */
  private takeConflicted = false;
  /** Ends a follower's wait early, when a watched record makes the Lease takeable sooner. */
  private wake: AbortController | undefined;
  /** The Lease as the watch last brought it, for the follower's next attempt instead of a read. */
  private watched: Lease | undefined;

  /** The record this process last wrote, with its resourceVersion: the leader's next renewal replaces it unread. */
  private own: Lease | undefined;

  constructor(private readonly deps: ElectorDeps) {}

  /** One attempt: read the Lease, write ourselves as holder when allowed. True while we hold it. */
  async tryAcquireOrRenew(): Promise<boolean> {
    if (await this.renewOwn()) return true;
    const { store, identity, timings } = this.deps;
    const current = this.takeWatched() ?? (await store.read());
    const nowMs = this.deps.monotonicMs();
    const seenFingerprint = fingerprint(current?.spec);
    if (this.seen?.fingerprint !== seenFingerprint) this.seen = { fingerprint: seenFingerprint, atMs: nowMs };
    const holder = current?.spec?.holderIdentity ?? '';
    if (holder !== this.lastHolder) {
      if (holder !== '' && holder !== identity)
        this.deps.logger.info('lease held by another sweeper', { lease: `${store.namespace}/${store.name}`, holder });
      this.lastHolder = holder;
    }
    const verdict = judgeLease(current?.spec, this.seen, identity, nowMs, this.deps.wallClock(), timings);
    this.expiresAtMs = verdict.kind === 'held' ? nowMs + verdict.expiresInMs : undefined;
    if (verdict.kind === 'held') return false;
    const written =
      current === undefined ? await store.create(verdict.spec) : await store.replace(current.metadata?.resourceVersion ?? '', verdict.spec);
    if (written) this.wrote(verdict.spec, written.resourceVersion, nowMs);
    this.takeConflicted = !written;
    return written !== false;
  }

  /**
   * The leader's renewal of the record it last wrote, conditional on that record's
   * resourceVersion, without reading it first (client-go's optimistic renewal): one request. False
   * when there is none, or when the record changed since (another holder wrote, or a renewal
   * landed with its answer lost): the attempt then reads it.
   */
  private async renewOwn(): Promise<boolean> {
    const own = this.own;
    this.own = undefined;
    const resourceVersion = own?.metadata?.resourceVersion;
    if (this.renewedAtMs === undefined || !resourceVersion || own?.spec?.holderIdentity !== this.deps.identity) return false;
    const nowMs = this.deps.monotonicMs();
    const spec = holding(own.spec, this.deps.identity, this.deps.wallClock(), this.deps.timings);
    const written = await this.deps.store.replace(resourceVersion, spec);
    if (written) this.wrote(spec, written.resourceVersion, nowMs);
    return written !== false;
  }

  /** The holder last read, when it is not this process (nor nobody). */
  private otherHolder(): string | undefined {
    return this.lastHolder !== '' && this.lastHolder !== this.deps.identity ? this.lastHolder : undefined;
  }

  private wrote(spec: LeaseSpec, resourceVersion: string | undefined, nowMs: number): void {
    this.seen = { fingerprint: fingerprint(spec), atMs: nowMs };
    // The holder is now this process: a renewal that fails later is not "another holder seen".
    this.lastHolder = this.deps.identity;
    this.own = resourceVersion === undefined ? undefined : { metadata: { resourceVersion }, spec };
  }

  /**
   * A record as a watch of the Lease brought it (undefined: deleted). A follower then sees a change
   * when it is written, not at its next read a retry period later, and counts the lease duration
   * from there; a released Lease is tried at once. It only ever makes the record seen later than a
   * read would have (the watch delivers a write after it happened), never takes the Lease sooner
   * than a lease duration after the holder's last renewal was sent. The follower's next attempt
   * judges it instead of reading the Lease again (a take is conditional on its resourceVersion: a
   * record already replaced makes it conflict, and the attempt after reads). The leader ignores it.
   */
  observed(lease: Lease | undefined): void {
    if (this.renewedAtMs !== undefined) return;
    this.watched = lease;
    const spec = lease?.spec;
    const nowMs = this.deps.monotonicMs();
    const seenFingerprint = fingerprint(spec);
    if (this.seen?.fingerprint === seenFingerprint) return;
    this.seen = { fingerprint: seenFingerprint, atMs: nowMs };
    const verdict = judgeLease(spec, this.seen, this.deps.identity, nowMs, this.deps.wallClock(), this.deps.timings);
    const before = this.expiresAtMs;
    this.expiresAtMs = nowMs + (verdict.kind === 'held' ? verdict.expiresInMs : 0);
    if (before === undefined || this.expiresAtMs < before) this.wake?.abort();
  }

  /** The watched record, once, for a follower's attempt; undefined when leading or none came since the last attempt. */
  private takeWatched(): Lease | undefined {
    const watched = this.watched;
    this.watched = undefined;
    return this.renewedAtMs === undefined ? watched : undefined;
  }

  /**
   * Until `stop`: wait for the lease, then `lead` while holding it. `lead`'s signal aborts on stop
   * (the Lease is then released, so a follower takes over at its next retry) or at once when the
   * Lease is lost: not renewed within the renew deadline, or another holder seen. Losing it ends
   * the run ('lost'): the process exits non-zero, as Kubernetes components do, and `onLost` is
   * told first (it abandons the requests in flight). A `lead` that throws rethrows here.
   */
  async run(lead: (signal: AbortSignal) => Promise<void>, stop: AbortSignal, onLost?: () => void): Promise<LeadEnd> {
    const { logger, store, timings } = this.deps;
    const lease = `${store.namespace}/${store.name}`;
    logger.info('waiting to become the leader', { lease, identity: this.deps.identity });
    while (!stop.aborted && !(await this.attempt('acquire', timings.retryPeriodMs))) {
      this.wake = new AbortController();
      await this.deps.sleep(this.untilNextAttemptMs(), AbortSignal.any([stop, this.wake.signal]));
      this.wake = undefined;
    }
    if (stop.aborted) return 'released';
    logger.info('became the leader: sweeping', { lease, identity: this.deps.identity });
    this.deps.onLeading?.(true);
    const held = await this.leadWhileRenewing(lead, stop, () => {
      logger.error('lost the lease: stopping at once, abandoning the writes in flight', {
        lease,
        renewDeadlineMs: timings.renewDeadlineMs,
        holder: this.otherHolder(),
      });
      onLost?.();
    });
    this.renewedAtMs = undefined;
    this.deps.onLeading?.(false);
    if (!held) return 'lost';
    await this.release();
    return 'released';
  }

  /**
   * A retry period (jittered); a Lease that expires sooner is tried as it expires: the same test
   * of a record unchanged for a lease duration, made when it can first pass, not up to a retry
   * period later. A take that conflicted reads the record again at once, once: the newer record
   * may be its own (a write that landed with its answer lost, then repeated) or a rival's, which
   * it then waits out.
   */
  private untilNextAttemptMs(): number {
    const retryMs = this.deps.timings.retryPeriodMs * (1 + (this.deps.random ?? Math.random)() * (JITTER - 1));
    if (this.takeConflicted) {
      this.takeConflicted = false;
      return 0;
    }
    if (this.expiresAtMs === undefined) return retryMs;
    return Math.max(0, Math.min(retryMs, this.expiresAtMs - this.deps.monotonicMs()));
  }

  /** For /healthz: a leader that has not renewed within the lease duration is not healthy. */
  health(): { ok: true } | { ok: false; why: string } {
    if (this.renewedAtMs === undefined) return { ok: true };
    const sinceMs = this.deps.monotonicMs() - this.renewedAtMs;
    return sinceMs <= this.deps.timings.leaseDurationMs
      ? { ok: true }
      : { ok: false, why: `the leader has not renewed its Lease for ${Math.round(sinceMs / 1000)} s` };
  }

  /** Runs `lead` and renews every retry period; false when the lease was lost. */
  private async leadWhileRenewing(lead: (signal: AbortSignal) => Promise<void>, stop: AbortSignal, lost: () => void): Promise<boolean> {
    const { timings } = this.deps;
    const leading = new AbortController();
    const stopLeading = () => leading.abort();
    stop.addEventListener('abort', stopLeading, { once: true });
    const finished = new AbortController();
    let failure: { error: unknown } | undefined;
    const done = lead(leading.signal)
      .catch((error: unknown) => void (failure = { error }))
      .finally(() => finished.abort());
    this.renewedAtMs = this.deps.monotonicMs();
    let held = true;
    while (held && !finished.signal.aborted) {
      await this.deps.sleep(timings.retryPeriodMs, finished.signal);
      if (finished.signal.aborted) break;
      // The deadline counts from when a renewal was sent, not from when its answer came.
      const sentAtMs = this.deps.monotonicMs();
      const leftMs = (this.renewedAtMs ?? sentAtMs) + timings.renewDeadlineMs - sentAtMs;
      if (await this.attempt('renew', Math.max(leftMs, 1))) this.renewedAtMs = sentAtMs;
      else if (this.otherHolder() !== undefined) held = false;
      else if (this.deps.monotonicMs() - (this.renewedAtMs ?? 0) >= timings.renewDeadlineMs) held = false;
      if (!held) {
        lost();
        leading.abort();
      }
    }
    await done;
    stop.removeEventListener('abort', stopLeading);
    if (failure) throw failure.error;
    return held;
  }

  /** tryAcquireOrRenew bounded by `withinMs`; a failure or timeout counts as "not held". */
  private async attempt(what: string, withinMs: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), withinMs)));
    try {
      return await Promise.race([this.tryAcquireOrRenew(), timeout]);
    } catch (error) {
      this.deps.logger.warn(`lease ${what} failed`, {
        lease: `${this.deps.store.namespace}/${this.deps.store.name}`,
        error: (error as Error).message,
      });
      return false;
    } finally {
      clearTimeout(timer);
    }
  }

  /** Gives the lease up (client-go's ReleaseOnCancel): no holder, a one-second duration. */
  async release(): Promise<void> {
    const { store, identity, logger } = this.deps;
    try {
      const current = await store.read();
      if (current?.spec?.holderIdentity !== identity) return;
      const now = microTime(this.deps.wallClock());
      const spec: LeaseSpec = {
        holderIdentity: null,
        leaseDurationSeconds: 1,
        acquireTime: now,
        renewTime: now,
        leaseTransitions: current.spec.leaseTransitions ?? 0,
      };
      const released = (await store.replace(current.metadata?.resourceVersion ?? '', spec)) !== false;
      logger.info(released ? 'released the lease' : 'could not release the lease (changed meanwhile)', {
        lease: `${store.namespace}/${store.name}`,
      });
    } catch (error) {
      logger.warn('releasing the lease failed; a follower takes over when it expires', { error: (error as Error).message });
    }
  }
}
