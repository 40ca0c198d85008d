// Leader election's pure parts: the verdict on a Lease record, timings, and the elector's state
// machine on a fake monotonic clock over an in-memory store (the real Lease API is in
// test/e2e/leader-election.test.ts).
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { describe, it } from 'node:test';
import { createLogger } from '../../src/report/logger.ts';
import {
  fingerprint,
  judgeLease,
  LeaderElector,
  type ElectorDeps,
  type Lease,
  type LeaseSpec,
  type LeaseStore,
  type LeaseWritten,
  microTime,
  DEFAULT_TIMINGS,
  timingProblem,
} from '../../src/leader/elector.ts';

const WALL = new Date('2026-01-02T03:04:05.678Z');

describe('judgeLease', () => {
  const seenAt = (atMs: number, spec?: LeaseSpec) => ({ fingerprint: fingerprint(spec), atMs });
  const other: LeaseSpec = { holderIdentity: 'b', leaseDurationSeconds: 15, acquireTime: 'x', renewTime: 'y', leaseTransitions: 3 };

  it('takes an absent Lease with zero transitions', () => {
    const v = judgeLease(undefined, seenAt(0), 'a', 0, WALL, DEFAULT_TIMINGS);
    assert.deepEqual(v, {
      kind: 'take',
      spec: {
        holderIdentity: 'a',
        leaseDurationSeconds: 15,
        acquireTime: '2026-01-02T03:04:05.678000Z',
        renewTime: '2026-01-02T03:04:05.678000Z',
        leaseTransitions: 0,
      },
    });
  });

  it("leaves another holder's Lease alone until it has stood unchanged here for a lease duration", () => {
    assert.deepEqual(judgeLease(other, seenAt(1000, other), 'a', 1000 + 14_999, WALL, DEFAULT_TIMINGS), {
      kind: 'held',
      holder: 'b',
      expiresInMs: 1,
    });
    const taken = judgeLease(other, seenAt(1000, other), 'a', 1000 + 15_000, WALL, DEFAULT_TIMINGS);
    assert.equal(taken.kind, 'take');
    assert.equal(taken.kind === 'take' && taken.spec.leaseTransitions, 4);
  });

  it("ignores the holder's timestamps: a renewTime far in the past does not expire it early", () => {
    const stale = { ...other, renewTime: '1970-01-01T00:00:00.000000Z' };
    assert.equal(judgeLease(stale, seenAt(0, stale), 'a', 1, WALL, DEFAULT_TIMINGS).kind, 'held');
  });

  it('renews its own Lease keeping acquireTime and transitions', () => {
    const mine = { ...other, holderIdentity: 'a' };
    const v = judgeLease(mine, seenAt(0, mine), 'a', 1, WALL, DEFAULT_TIMINGS);
    assert.deepEqual(v.kind === 'take' && [v.spec.acquireTime, v.spec.leaseTransitions, v.spec.renewTime], ['x', 3, microTime(WALL)]);
  });

  it("waits out the holder's own leaseDurationSeconds, not this process's (a rolling change of timings)", () => {
    const longer = { ...other, leaseDurationSeconds: 60 };
    assert.equal(judgeLease(longer, seenAt(0, longer), 'a', 15_000, WALL, DEFAULT_TIMINGS).kind, 'held');
    assert.equal(judgeLease(longer, seenAt(0, longer), 'a', 59_999, WALL, DEFAULT_TIMINGS).kind, 'held');
    assert.equal(judgeLease(longer, seenAt(0, longer), 'a', 60_000, WALL, DEFAULT_TIMINGS).kind, 'take');
  });

  it('takes a released Lease (no holder) at once', () => {
    const released = { ...other, holderIdentity: null, leaseDurationSeconds: 1 };
    assert.equal(judgeLease(released, seenAt(0, released), 'a', 0, WALL, DEFAULT_TIMINGS).kind, 'take');
  });
});

describe('timingProblem', () => {
  it('accepts the standard timings and rejects inconsistent ones', () => {
    assert.equal(timingProblem(DEFAULT_TIMINGS), undefined);
    assert.match(timingProblem({ leaseDurationMs: 10_000, renewDeadlineMs: 10_000, retryPeriodMs: 2000 }) ?? '', /lease duration/);
    assert.match(timingProblem({ leaseDurationMs: 15_000, renewDeadlineMs: 2_000, retryPeriodMs: 2000 }) ?? '', /renew deadline/);
  });
});

/** A Lease in memory with the API server's optimistic concurrency (resourceVersion). */
function memoryStore(): LeaseStore & { lease: Lease | undefined; failing: boolean } {
  let version = 0;
  const store = {
    namespace: 'ns',
    name: 'lease',
    lease: undefined as Lease | undefined,
    failing: false,
    async read() {
      if (store.failing) throw new Error('connection refused');
      return store.lease && structuredClone(store.lease);
    },
    async create(spec: LeaseSpec): Promise<LeaseWritten | false> {
      if (store.failing) throw new Error('connection refused');
      if (store.lease) return false;
      store.lease = { metadata: { resourceVersion: String(++version) }, spec };
      return { resourceVersion: String(version) };
    },
    async replace(resourceVersion: string, spec: LeaseSpec): Promise<LeaseWritten | false> {
      if (store.failing) throw new Error('connection refused');
      if (store.lease?.metadata?.resourceVersion !== resourceVersion) return false;
      store.lease = { metadata: { resourceVersion: String(++version) }, spec };
      return { resourceVersion: String(version) };
    },
  };
  return store;
}

function elector(store: LeaseStore, identity: string, clock: { ms: number }) {
  return new LeaderElector(electorDeps(store, identity, clock));
}

function electorDeps(store: LeaseStore, identity: string, clock: { ms: number }): ElectorDeps {
  return {
    store,
    identity,
    timings: DEFAULT_TIMINGS,
    monotonicMs: () => clock.ms,
    wallClock: () => new Date(WALL.getTime() + clock.ms),
    sleep: async () => {},
    logger: createLogger({ format: 'json', stream: new PassThrough() }),
    random: () => 0,
  };
}

describe('LeaderElector', () => {
  it('one of two candidates holds the Lease; the other takes it only after a lease duration of silence', async () => {
    const store = memoryStore();
    const clock = { ms: 0 };
    const a = elector(store, 'a', clock);
    const b = elector(store, 'b', clock);
    assert.equal(await a.tryAcquireOrRenew(), true);
    assert.equal(await b.tryAcquireOrRenew(), false);
    clock.ms = 10_000;
    assert.equal(await a.tryAcquireOrRenew(), true, 'a renews');
    clock.ms = 20_000;
    assert.equal(await b.tryAcquireOrRenew(), false, 'b first sees the renewed record at 20 s, on its own clock');
    clock.ms = 34_999;
    assert.equal(await b.tryAcquireOrRenew(), false);
    clock.ms = 35_000;
    assert.equal(await b.tryAcquireOrRenew(), true, 'unchanged for 15 s since b saw it change');
    assert.equal(store.lease?.spec?.holderIdentity, 'b');
    assert.equal(store.lease?.spec?.leaseTransitions, 1);
    assert.equal(await a.tryAcquireOrRenew(), false, 'a, back, sees b holding');
  });

  it('a conflicting write loses: two candidates racing on an absent Lease, one wins', async () => {
    const store = memoryStore();
    const clock = { ms: 0 };
    const results = await Promise.all([elector(store, 'a', clock).tryAcquireOrRenew(), elector(store, 'b', clock).tryAcquireOrRenew()]);
    assert.deepEqual(results.sort(), [false, true]);
  });

  it('release clears the holder so a follower takes over at once', async () => {
    const store = memoryStore();
    const clock = { ms: 0 };
    const a = elector(store, 'a', clock);
    const b = elector(store, 'b', clock);
    await a.tryAcquireOrRenew();
    assert.equal(await b.tryAcquireOrRenew(), false);
    await a.release();
    assert.equal(store.lease?.spec?.holderIdentity, null);
    assert.equal(await b.tryAcquireOrRenew(), true);
  });

  it('run: a follower tries a silent Lease as it expires, not up to a retry period later, and reads it no more often', async () => {
    const store = memoryStore();
    const clock = { ms: 0 };
    assert.equal(await elector(store, 'a', clock).tryAcquireOrRenew(), true, 'a holds it, then dies');
    const stop = new AbortController();
    let reads = 0;
    const counting: LeaseStore = { ...store, read: () => (reads++, store.read()) };
    const b = new LeaderElector({
      ...electorDeps(counting, 'b', clock),
      // Retry periods of 2.2 s: attempts at 0, 2.2 ... 13.2 s, then 15.4 s had it waited a whole one.
      random: () => 0.5,
      sleep: async (ms) => void (clock.ms += ms),
    });
    let took: [number, number] | undefined;
    await b.run(async () => void (took = [clock.ms, reads]), stop.signal);
    assert.deepEqual(took, [15_000, 8], 'taken the moment it had stood unchanged for 15 s here, at its 8th read (0, 2.2 ... 13.2 s, 15 s)');
  });

  it('run: a take whose answer was lost (repeated, it conflicts with itself) reads the Lease again at once and leads', async () => {
    const store = memoryStore();
    const clock = { ms: 0 };
    let lostAnswers = 1;
    // The first replace lands and its answer is lost; the retry layer repeats it with the old
    // resourceVersion, which now conflicts with the write itself: false, as the API server's 409.
    const losing: LeaseStore = {
      ...store,
      replace: async (rv, spec) => {
        const landed = await store.replace(rv, spec);
        if (landed && lostAnswers-- > 0) return store.replace(rv, spec);
        return landed;
      },
    };
    await store.create({ holderIdentity: null, leaseDurationSeconds: 1 });
    const sleeps: number[] = [];
    const b = new LeaderElector({
      ...electorDeps(losing, 'b', clock),
      sleep: async (ms) => void (sleeps.push(ms), (clock.ms += ms)),
    });
    let ledAt: number | undefined;
    await b.run(async () => void (ledAt = clock.ms), new AbortController().signal);
    assert.equal(store.lease?.spec?.holderIdentity, null, 'released on the way out');
    assert.equal(ledAt, 0, 'led at once: no retry period waited after its own write conflicted');
    assert.deepEqual(sleeps.slice(0, 1), [0]);
  });

  it('run: leads while renewing; when renewals fail past the renew deadline, the lead is aborted', async () => {
    const store = memoryStore();
    const clock = { ms: 0 };
    const stop = new AbortController();
    let ticks = 0;
    const e = new LeaderElector({
      store,
      identity: 'a',
      timings: DEFAULT_TIMINGS,
      monotonicMs: () => clock.ms,
      wallClock: () => WALL,
      // Each sleep advances the fake clock; from the 3rd renewal on, the API is unreachable.
      sleep: async (ms) => {
        clock.ms += ms;
        if (++ticks === 3) store.failing = true;
        if (ticks > 20) stop.abort();
      },
      logger: createLogger({ format: 'json', stream: new PassThrough() }),
      random: () => 0,
      onLeading: (leading) => leadership.push([leading, clock.ms]),
    });
    const leadership: [boolean, number][] = [];
    const leadEnds: number[] = [];
    await e.run(
      (signal) =>
        new Promise<void>((resolve) => signal.addEventListener('abort', () => (leadEnds.push(clock.ms), resolve()), { once: true })),
      stop.signal,
    );
    assert.equal(leadEnds.length, 1);
    // Last renewal at 4 s; lost once 10 s passed without one.
    assert.ok(leadEnds[0]! >= 14_000 && leadEnds[0]! <= 16_000, `lead aborted at ${leadEnds[0]} ms`);
    // The leader gauge: up on taking the Lease, down the moment it is lost (before the lead ends).
    assert.deepEqual(leadership, [
      [true, 0],
      [false, leadEnds[0]],
    ]);
  });

  it('run: renews the record it wrote without reading it first; a renewal that meets a changed record reads it', async () => {
    const store = memoryStore();
    const clock = { ms: 0 };
    const stop = new AbortController();
    const calls: string[] = [];
    const counting: LeaseStore = {
      ...store,
      read: () => (calls.push('read'), store.read()),
      replace: (rv, spec) => (calls.push('replace'), store.replace(rv, spec)),
    };
    let ticks = 0;
    const e = new LeaderElector({
      ...electorDeps(counting, 'a', clock),
      sleep: async (ms) => {
        clock.ms += ms;
        ticks += 1;
        // After the 3rd renewal, the record changes under it (a renewal of its own whose answer was lost).
        if (ticks === 4) store.lease = { metadata: { resourceVersion: '50' }, spec: { ...store.lease!.spec } };
        if (ticks === 6) stop.abort();
      },
    });
    await e.run((signal) => new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true })), stop.signal);
    // Taken (a read, then the create), renewed three times unread; the fourth conflicts, reads and renews.
    assert.deepEqual(calls.slice(0, 7), ['read', 'replace', 'replace', 'replace', 'replace', 'read', 'replace']);
    assert.ok(
      calls.slice(7, -2).every((c) => c === 'replace'),
      calls.join(' '),
    );
    assert.deepEqual(calls.slice(-2), ['read', 'replace'], 'released on stop: read, then cleared');
  });

  it('run: on stop, the lead finishes and the Lease is released', async () => {
    const store = memoryStore();
    const clock = { ms: 0 };
    const stop = new AbortController();
    const leadership: boolean[] = [];
    const e = new LeaderElector({ ...electorDeps(store, 'a', clock), onLeading: (leading) => leadership.push(leading) });
    await e.run(async (signal) => {
      assert.equal(store.lease?.spec?.holderIdentity, 'a');
      assert.deepEqual(leadership, [true]);
      stop.abort();
      assert.equal(signal.aborted, true);
    }, stop.signal);
    assert.deepEqual(leadership, [true, false], 'down once released');
    assert.equal(store.lease?.spec?.holderIdentity, null);
    assert.equal(store.lease?.spec?.leaseDurationSeconds, 1);
  });
});

describe('LeaderElector: a watched Lease', () => {
  /**
   * A sleep on the fake clock that lets `events` happen at their times (a holder's writes, each
   * delivered by the watch a moment later) and ends early when its signal aborts.
   */
  function scriptedSleep(clock: { ms: number }, events: { at: number; run: () => unknown }[]) {
    return async (ms: number, signal: AbortSignal) => {
      const until = clock.ms + ms;
      while (events.length > 0 && events[0]!.at <= until) {
        const event = events.shift()!;
        clock.ms = Math.max(clock.ms, event.at);
        await event.run();
        if (signal.aborted) return;
      }
      clock.ms = until;
    };
  }

  type Script = (
    a: LeaderElector,
    store: ReturnType<typeof memoryStore>,
    observe: (lease: Lease) => void,
  ) => { at: number; run: () => unknown }[];
  /** `a` holds the Lease and then does what `script` says; b follows with its watch until it takes the Lease: when. */
  async function takenAt(script: Script, deps: Partial<ElectorDeps> = {}): Promise<number | undefined> {
    const store = memoryStore();
    const clock = { ms: 0 };
    const a = elector(store, 'a', clock);
    await a.tryAcquireOrRenew();
    const events = script(a, store, (lease) => b.observed(lease));
    const b: LeaderElector = new LeaderElector({ ...electorDeps(store, 'b', clock), ...deps, sleep: scriptedSleep(clock, events) });
    let tookAt: number | undefined;
    await b.run(async () => void (tookAt = clock.ms), new AbortController().signal);
    return tookAt;
  }

  it('a follower counts the lease duration from the renewal the watch brought, not from its next read', async () => {
    // a renews at 1 s (its last renewal: then it dies); the watch brings the record to b at 1.05 s.
    const tookAt = await takenAt(
      (a, store, observe) => [
        { at: 1_000, run: () => a.tryAcquireOrRenew() },
        { at: 1_050, run: () => observe(structuredClone(store.lease!)) },
      ],
      { random: () => 0.5 },
    );
    assert.equal(
      tookAt,
      16_050,
      'a lease duration after the watch brought the last renewal; by its reads alone (at 2.2 s) it would be 17.2 s',
    );
  });

  it('a follower tries a Lease the watch shows released at once, not at its next read', async () => {
    const tookAt = await takenAt((a, store, observe) => [
      { at: 500, run: () => a.release() },
      { at: 550, run: () => observe(structuredClone(store.lease!)) },
    ]);
    assert.equal(tookAt, 550);
  });

  it('an older record brought late never makes the Lease taken sooner than its reads allow', async () => {
    // a renews at 1 s and dies; b reads the renewal at 2 s, then the watch brings the first record late.
    const tookAt = await takenAt((a, store, observe) => {
      const first = structuredClone(store.lease!);
      return [
        { at: 1_000, run: () => a.tryAcquireOrRenew() },
        { at: 2_100, run: () => observe(first) },
      ];
    });
    assert.ok(tookAt! >= 17_000, `taken at ${tookAt} ms: not before 15 s after b first read the last renewal (2 s)`);
  });

  it("judges a watched record at the follower's next attempt without reading; a take on a stale one conflicts, and the attempt after reads", async () => {
    const store = memoryStore();
    const clock = { ms: 0 };
    const a = elector(store, 'a', clock);
    await a.tryAcquireOrRenew();
    let reads = 0;
    const counting: LeaseStore = { ...store, read: () => (reads++, store.read()) };
    const b = elector(counting, 'b', clock);
    b.observed(structuredClone(store.lease!));
    clock.ms = 15_000;
    assert.equal(await b.tryAcquireOrRenew(), true, 'taken from the watched record');
    assert.equal(reads, 0);

    const c = elector(counting, 'c', clock);
    c.observed(structuredClone(store.lease!));
    clock.ms = 16_000;
    await b.tryAcquireOrRenew(); // b renews; c's watch has not brought it yet
    clock.ms = 30_000;
    assert.equal(await c.tryAcquireOrRenew(), false, "the stale record's take conflicts");
    assert.equal(store.lease?.spec?.holderIdentity, 'b');
    const readsBefore = reads;
    assert.equal(await c.tryAcquireOrRenew(), false, 'held: b renewed at 16 s, first seen by c now');
    assert.equal(reads, readsBefore + 1, 'read, not the watched record again');
  });
});

describe('LeaderElector.run: stopping when it should', () => {
  it('stops at once on seeing another holder, tells onLost first, and ends "lost"', async () => {
    const store = memoryStore();
    const clock = { ms: 0 };
    const stop = new AbortController();
    const order: string[] = [];
    const e = new LeaderElector({
      ...electorDeps(store, 'a', clock),
      sleep: async (ms) => {
        clock.ms += ms;
        // At 4 s another candidate (with other timings, or a partition healed) has written itself in.
        if (clock.ms === 4_000) store.lease = { metadata: { resourceVersion: '99' }, spec: { ...store.lease!.spec, holderIdentity: 'b' } };
        if (clock.ms > 60_000) stop.abort();
      },
    });
    const end = await e.run(
      (signal) =>
        new Promise<void>((resolve) => signal.addEventListener('abort', () => (order.push(`lead ended at ${clock.ms}`), resolve()))),
      stop.signal,
      () => order.push(`lost at ${clock.ms}`),
    );
    assert.equal(end, 'lost');
    assert.deepEqual(order, ['lost at 4000', 'lead ended at 4000'], 'at the renewal that sees it, not after the renew deadline');
    assert.equal(store.lease?.spec?.holderIdentity, 'b', 'a lost Lease is not released');
  });

  it('a leader that took the Lease from another holder keeps it through a failed renewal, until the renew deadline', async () => {
    const store = memoryStore();
    store.lease = { metadata: { resourceVersion: '7' }, spec: { holderIdentity: 'b', leaseDurationSeconds: 15, leaseTransitions: 2 } };
    const clock = { ms: 0 };
    const stop = new AbortController();
    const lost: number[] = [];
    let tookAt: number | undefined;
    const e = new LeaderElector({
      ...electorDeps(store, 'a', clock),
      sleep: async (ms) => {
        clock.ms += ms;
        tookAt ??= store.lease?.spec?.holderIdentity === 'a' ? clock.ms : undefined;
        // One renewal, 4 s into its tenure, meets a dropped connection; the next goes through.
        store.failing = tookAt !== undefined && clock.ms - tookAt === 4_000;
        if (clock.ms > 60_000) stop.abort();
      },
    });
    const end = await e.run(
      (signal) => new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true })),
      stop.signal,
      () => lost.push(clock.ms),
    );
    assert.ok(tookAt !== undefined && tookAt >= 15_000, `took b's Lease once it expired (at ${tookAt} ms)`);
    assert.deepEqual(lost, [], 'not lost: b was the holder before, not one seen since');
    assert.equal(end, 'released');
  });

  it('a lead that throws ends the run with its error (the process exits non-zero), the Lease not released', async () => {
    const store = memoryStore();
    const clock = { ms: 0 };
    const e = new LeaderElector({ ...electorDeps(store, 'a', clock), sleep: async (ms) => void (clock.ms += ms) });
    await assert.rejects(
      e.run(async () => {
        throw new Error('the watch loop crashed');
      }, new AbortController().signal),
      /the watch loop crashed/,
    );
  });

  it('reports unhealthy once the leader has not renewed within the lease duration', async () => {
    const store = memoryStore();
    const clock = { ms: 0 };
    let health: ReturnType<LeaderElector['health']> | undefined;
    const e = new LeaderElector({
      ...electorDeps(store, 'a', clock),
      sleep: async (ms, signal) => {
        // The renewals are wedged: time passes, no renewal is attempted.
        clock.ms += 20_000;
        health = e.health();
        await new Promise((resolve) => signal.addEventListener('abort', resolve, { once: true }));
        void ms;
      },
    });
    const stop = new AbortController();
    const running = e.run(async (signal) => {
      assert.deepEqual(e.health(), { ok: true });
      await new Promise((resolve) => setTimeout(resolve, 10));
      assert.equal(health?.ok, false);
      stop.abort();
      void signal;
    }, stop.signal);
    await running;
    assert.match(health?.ok === false ? health.why : '', /has not renewed its Lease for 20 s/);
  });
});

describe('leaseNamespace', () => {
  const kubeconfig = (context: string, namespace?: string) => ({
    getCurrentContext: () => context,
    getContextObject: (name: string) => (name === context ? { namespace } : null),
  });

  it('the flag first; in a pod its own namespace; else the context namespace, else default', async () => {
    const { leaseNamespace } = await import('../../src/cli/leader-elect.ts');
    assert.equal(leaseNamespace('flagged', kubeconfig('inClusterContext', 'x')), 'flagged');
    const saved = process.env.POD_NAMESPACE;
    process.env.POD_NAMESPACE = 'pods-own';
    try {
      assert.equal(leaseNamespace(undefined, kubeconfig('inClusterContext', 'x')), 'pods-own');
      assert.equal(leaseNamespace(undefined, kubeconfig('staging', 'team-a')), 'team-a');
      assert.equal(leaseNamespace(undefined, kubeconfig('staging')), 'default');
    } finally {
      if (saved === undefined) delete process.env.POD_NAMESPACE;
      else process.env.POD_NAMESPACE = saved;
    }
  });
});
