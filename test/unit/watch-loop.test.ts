// The loop of `run --watch` (src/watch/loop.ts) turn by turn, on a fake clock, fed by a scripted
// watch gateway (events, BOOKMARK, ERROR 410, drops) and judging with the real sweep against a
// scripted API. The pods are the real kubelet's recorded statuses. That the real API server
// watches, bookmarks and expires this way: test/e2e/watch*.test.ts.
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { describe, it } from 'node:test';
import type { V1Job, V1Pod } from '@kubernetes/client-node';
import { findStuckContainers } from '../../src/classify/index.ts';
import type { KubeGateway } from '../../src/kube/gateway.ts';
import { WatchExpiredError, type Collection, type WatchEvent, type WatchGateway, type WatchStream } from '../../src/kube/watch.ts';
import { ANNOTATIONS, LABELS, PENDING } from '../../src/policy/annotations.ts';
import { createLogger } from '../../src/report/logger.ts';
import type { Schedule } from '../../src/run/scheduler.ts';
import { sweep, type SweepOptions } from '../../src/sweep.ts';
import { ServerClock } from '../../src/watch/clock.ts';
import { TimerQueue } from '../../src/watch/due.ts';
import { WatchLoop } from '../../src/watch/loop.ts';
import { withRetries } from '../../src/kube/retrying.ts';
import { apiError, scriptedGateway } from '../support/scripted-gateway.ts';
import { REAL_NODE } from './real-node.ts';

/** Virtual time: the monotonic clock, the wall and server clocks (equal here), and sleeps that end as it advances. */
class FakeTime {
  mono = 0;
  readonly base: number;
  private sleepers: { at: number; done: () => void }[] = [];
  constructor(base: number) {
    this.base = base;
  }
  wall = () => new Date(this.base + this.mono);
  sleep = (ms: number, signal: AbortSignal) =>
    new Promise<void>((resolve) => {
      if (signal.aborted) return resolve();
      const aborted = () => resolve();
      const entry = {
        at: this.mono + ms,
        done: () => {
          signal.removeEventListener('abort', aborted);
          resolve();
        },
      };
      this.sleepers.push(entry);
      signal.addEventListener('abort', aborted, { once: true });
    });
  async advance(ms: number): Promise<void> {
    const until = this.mono + ms;
    for (;;) {
      const next = this.sleepers.filter((s) => s.at <= until).sort((a, b) => a.at - b.at)[0];
      if (!next) break;
      this.mono = Math.max(this.mono, next.at);
      this.sleepers = this.sleepers.filter((s) => s !== next);
      next.done();
      await settle();
    }
    this.mono = until;
    await settle();
  }
}

const settle = async () => {
  for (let i = 0; i < 20; i += 1) await new Promise((resolve) => setImmediate(resolve));
};

/** A read of `job`'s Job that hangs until `answer` (which then lets the loop run a second). */
function hangingRead(job: string): {
  slowReads: Map<string, Promise<void>>;
  answer: (t: { runFor: (ms: number) => Promise<void> }) => Promise<void>;
} {
  let release!: () => void;
  const slowReads = new Map([[job, new Promise<void>((resolve) => (release = resolve))]]);
  return {
    slowReads,
    answer: async (t) => {
      release();
      await settle();
      await t.runFor(1_000);
    },
  };
}

const recorded = REAL_NODE.cases.find((c) => c.id === 'repo-missing')!.pods.ImagePullBackOff!;
const since = findStuckContainers(recorded)[0]!.stuckSince.getTime();

function stuckPod(job: string, over: { rv?: string; namespace?: string; from?: V1Pod } = {}): V1Pod {
  const pod = structuredClone(over.from ?? recorded);
  pod.metadata = {
    ...pod.metadata,
    name: `${job}-pod`,
    namespace: over.namespace ?? 'ci',
    uid: `pod-${job}`,
    resourceVersion: over.rv ?? '1',
    ownerReferences: [{ apiVersion: 'batch/v1', kind: 'Job', name: job, uid: `job-${job}`, controller: true }],
  };
  return pod;
}

/** The pod Running again, its container exited and waiting on its image for the restart. */
function restartedInPlace(pod: V1Pod): V1Pod {
  const status = structuredClone(pod.status!);
  status.phase = 'Running';
  status.containerStatuses![0]!.lastState = { terminated: { exitCode: 1, finishedAt: new Date(since) } };
  status.containerStatuses![0]!.restartCount = 1;
  return { ...pod, status };
}

const jobObject = (name: string, namespace = 'ci'): V1Job => ({
  metadata: { name, namespace, uid: `job-${name}`, resourceVersion: '10' },
  spec: { template: { spec: { containers: [{ name: 'main', image: 'x' }] } } },
  status: {},
});

/** A watch gateway whose one pod watch the test drives. */
class ScriptedWatch implements WatchGateway {
  pods: V1Pod[] = [];
  lists = 0;
  watches: string[] = [];
  /** Each list of the pods waits for this (a list of tens of thousands takes seconds). */
  held: Promise<void> | undefined;
  private current: { emit: (e: WatchEvent<V1Pod>) => void; end: (error?: Error) => void } | undefined;
  async list<T>(collection: Collection): Promise<{ items: T[]; continueToken: undefined; resourceVersion: string }> {
    assert.match(collection.path, /pods/);
    this.lists += 1;
    await this.held;
    return { items: this.pods as T[], continueToken: undefined, resourceVersion: `list-${this.lists}` };
  }
  watch<T>(_c: Collection, opts: WatchStream, onEvent: (e: WatchEvent<T>) => void): Promise<void> {
    this.watches.push(opts.resourceVersion);
    return new Promise<void>((resolve, reject) => {
      const end = (error?: Error) => {
        this.current = undefined;
        if (error) reject(error);
        else resolve();
      };
      opts.signal.addEventListener('abort', () => end(), { once: true });
      opts.onAccepted?.();
      this.current = { emit: onEvent as (e: WatchEvent<V1Pod>) => void, end };
    });
  }
  async probeDate(): Promise<Date | undefined> {
    return undefined;
  }
  emit(e: WatchEvent<V1Pod>): void {
    this.current!.emit(e);
  }
  drop(error: Error = Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' })): void {
    this.current!.end(error);
  }
  get connected(): boolean {
    return this.current !== undefined;
  }
}

const EVERY_2_MIN: Schedule = { next: (after) => new Date((Math.floor(after.getTime() / 120_000) + 1) * 120_000) };

interface Setup {
  policy?: string;
  jobs: string[];
  /** The claim of these Jobs is refused (403, as an admission policy answers). */
  refused?: string[];
  /** The first claims of these Jobs, this many, answer 503 (a fault that outlasts the retries). */
  unavailable?: Record<string, number>;
  /** A claim of these Jobs hangs until released. */
  slow?: Map<string, Promise<void>>;
  /** A read of these Jobs hangs until released. */
  slowReads?: Map<string, Promise<void>>;
  /** A list of a namespace's Jobs hangs until this settles. */
  slowList?: Promise<void>;
  /** Jobs in a second namespace, whose list hangs until `slowList` settles (then the ci list does not). */
  elsewhere?: { namespace: string; jobs: string[]; slowList: Promise<void> };
  /** What a read of a pod answers, by name (a 404 otherwise). */
  pods?: Record<string, V1Pod>;
  /** The sweeper's namespaces (default: ci). */
  namespaces?: string[];
  /** Each read of the policy takes this long (a slow disk, a ConfigMap read). */
  policyReadMs?: number;
  /** Jobs failed by an earlier sweep, by name: when (`failed-at`), found by the pending label. */
  pending?: Record<string, Date>;
  /** Jobs whose stuck pod is Running (its container restarted in place): listed by the backstop, never watched. */
  running?: string[];
  /** Of the `pending` Jobs, those the Job controller has Failed (their pods gone, their Event owed). */
  finished?: string[];
  /** The first lists of the pending Jobs, this many, answer 503 (a fault that outlasts the retries). */
  pendingListsDown?: number;
  /** The first reads of these Jobs, this many, answer 503. */
  readsDown?: Record<string, number>;
}

function setup(s: Setup) {
  const policyText = s.policy ?? 'defaults: { grace: { permanent: 30s } }\n';
  // The recorded pod got stuck at `since`; the clocks start there.
  const time = new FakeTime(since);
  const clock = new ServerClock();
  const claims: string[] = [];
  /** When each claim was answered (monotonic ms). */
  const claimedAt: [string, number][] = [];
  const started: string[] = [];
  // The Jobs as the API server keeps them: a claim's annotations stay.
  const annotations = new Map<string, Record<string, string>>(
    Object.entries(s.pending ?? {}).map(([name, at]) => [name, { [ANNOTATIONS.failedAt]: at.toISOString() }]),
  );
  const labelled = (name: string): V1Job => {
    const j = jobObject(name);
    j.metadata = { ...j.metadata, labels: { [LABELS.pending]: PENDING.claimed }, annotations: annotations.get(name) };
    if (s.finished?.includes(name)) j.status = { failed: 1, conditions: [{ type: 'Failed', status: 'True', reason: 'PodFailurePolicy' }] };
    return j;
  };
  let pendingListsLeftDown = s.pendingListsDown ?? 0;
  const runningPods = new Map((s.running ?? []).map((job) => [`${job}-pod`, restartedInPlace(stuckPod(job))]));
  const scripted = scriptedGateway(
    {
      readJob: [
        async (namespace: string, name: string) => {
          await s.slowReads?.get(name);
          if (s.readsDown?.[name]) {
            s.readsDown[name] -= 1;
            return apiError(503, 'ServiceUnavailable', 'the server is currently unable to handle the request');
          }
          const j = jobObject(name, namespace);
          j.metadata!.annotations = annotations.get(name);
          return j;
        },
      ],
      readServerVersion: [{ major: '1', minor: '37', gitVersion: 'v1.37.2' }],
      // A namespace's Jobs listed (10 or more wanted); the pending ones (a label selector): none here.
      listJobs: [
        async (opts: { labelSelector?: string; namespace?: string }) => {
          const other = s.elsewhere && opts.namespace === s.elsewhere.namespace ? s.elsewhere : undefined;
          if (!opts.labelSelector) await (other ? other.slowList : s.slowList);
          else if (pendingListsLeftDown > 0) {
            pendingListsLeftDown -= 1;
            return apiError(503, 'ServiceUnavailable', 'the server is currently unable to handle the request');
          }
          if (other && !opts.labelSelector)
            return { items: other.jobs.map((name) => jobObject(name, other.namespace)), continueToken: undefined };
          return {
            items: opts.labelSelector
              ? Object.keys(s.pending ?? {}).map(labelled)
              : s.jobs.map((name) => ({
                  ...jobObject(name),
                  metadata: { ...jobObject(name).metadata, annotations: annotations.get(name) },
                })),
            continueToken: undefined,
          };
        },
      ],
      readPod: [
        (_ns: string, name: string) => runningPods.get(name) ?? s.pods?.[name] ?? apiError(404, 'NotFound', `pods "${name}" not found`),
      ],
      ...(s.running
        ? {
            // Only the Running pods are scripted: the Pending ones come from the watch.
            listPodRows: [
              (opts: { fieldSelector: string }) => ({
                items: opts.fieldSelector.includes('Running')
                  ? [...runningPods.keys()].map((name) => ({ namespace: 'ci', name, status: 'ImagePullBackOff' }))
                  : [],
                continueToken: undefined,
              }),
            ],
          }
        : {}),
      // The claim and the FailureTarget, in one status write (docs/how-it-works.md).
      patchJobStatus: [
        async (_ns: string, name: string, patch: { metadata?: { annotations?: Record<string, string> } }) => {
          started.push(name);
          await s.slow?.get(name);
          claims.push(name);
          claimedAt.push([name, time.mono]);
          if (s.refused?.includes(name)) return apiError(403, 'Forbidden', 'denied by the admission policy');
          if ((s.unavailable?.[name] ?? 0) >= claims.filter((c) => c === name).length)
            return apiError(503, 'ServiceUnavailable', 'the server is currently unable to handle the request');
          annotations.set(name, { ...annotations.get(name), ...patch.metadata?.annotations });
          return undefined;
        },
      ],
      // The fallback after a refused status write: refused for the same Jobs (a policy engine on every write).
      mergePatchJob: [
        (_ns: string, name: string) =>
          s.refused?.includes(name) ? apiError(403, 'Forbidden', 'denied by the admission policy') : undefined,
      ],
    },
    { repeatLast: true },
  );
  // The retry layer as the CLI stacks it (one attempt: a refusal is not retried anyway), over the
  // scripted API. A server Date comes only with an answer, as over HTTP (truncated to the second).
  let answeredAtMono: number | undefined;
  const retrying = withRetries(scripted.gateway, { attempts: 1 });
  const answered = <T>(p: Promise<T>) => p.finally(() => (answeredAtMono = time.mono));
  const gateway = new Proxy(retrying, {
    get: (target, name: string) => {
      const value = Reflect.get(target, name) as unknown;
      if (name === 'lastServerDate') {
        return () => {
          if (answeredAtMono === undefined) return undefined;
          const at = Math.floor((time.base + answeredAtMono) / 1000) * 1000;
          return { date: new Date(at), ageMs: time.mono - answeredAtMono };
        };
      }
      if (typeof value !== 'function' || name === 'serverDryRun') return value;
      return (...args: unknown[]) => answered((value as (...a: unknown[]) => Promise<unknown>).apply(target, args));
    },
  }) as KubeGateway;
  const watch = new ScriptedWatch();
  watch.pods = s.jobs.map((j) => stuckPod(j));
  if (s.elsewhere) for (const j of s.elsewhere.jobs) watch.pods.push(stuckPod(j, { namespace: s.elsewhere.namespace }));
  const out = new PassThrough();
  const lines: Record<string, unknown>[] = [];
  out.on('data', (chunk: Buffer) => {
    for (const l of chunk.toString('utf8').split('\n')) if (l.trim()) lines.push(JSON.parse(l) as Record<string, unknown>);
  });
  const sweeps: { trigger: string; jobs: string[] }[] = [];
  const options: SweepOptions = {
    dryRun: false,
    namespaces: s.namespaces ?? ['ci'],
    policy: {
      kind: 'file',
      path: '-',
      stdin: async () => {
        if (s.policyReadMs) await time.sleep(s.policyReadMs, new AbortController().signal);
        return policyText;
      },
    },
    instance: 'test',
  };
  const loop = new WatchLoop(
    {
      sweepDeps: { gateway, monotonicMs: () => time.mono, logger: createLogger({ format: 'json', stream: out }) },
      sweep: async (deps, opts) => {
        // A listing sweep (no observation from the cache) lists through the gateway, which scripts no pod lists here.
        if (!deps.observe) {
          sweeps.push({ trigger: 'list', jobs: [] });
          return sweep(deps, opts);
        }
        const observation = await deps.observe(deps.gateway, { namespaces: [], pageSize: 500 });
        sweeps.push({ trigger: '', jobs: [...new Set(observation.stuck.map((c) => c.controller?.name ?? ''))] });
        return sweep(deps, opts);
      },
      watchGateway: watch,
      schedule: EVERY_2_MIN,
      clock,
      wallClock: time.wall,
      timers: new TimerQueue(),
      sleep: time.sleep,
      probe: async () => {
        clock.noteAt(time.wall(), time.mono);
        return time.wall();
      },
      random: () => 0,
    },
    options,
  );
  const stop = new AbortController();
  /** Turns until `ms` of virtual time passed, as run() would (time moves while the loop waits). */
  const runFor = async (ms: number) => {
    const until = time.mono + ms;
    while (time.mono < until) {
      clock.noteAt(time.wall(), time.mono);
      const wait = await loop.turn();
      await settle();
      await time.advance(Math.min(Math.max(wait, 10), until - time.mono));
    }
  };
  const start = async (lead = true) => {
    clock.noteAt(time.wall(), time.mono);
    loop.start(stop.signal);
    if (lead) loop.lead(stop.signal);
    await settle();
  };
  return { loop, watch, time, claims, claimedAt, started, sweeps, lines, start, runFor, stop, scripted };
}

/** The names of the objects the sweeper's Events are about, in the order written. */
const eventsWritten = (scripted: { calls: { method: string; args: unknown[] }[] }) =>
  scripted.calls.filter((c) => c.method === 'createEvent').map((c) => (c.args[1] as { regarding?: { name?: string } }).regarding?.name);

const audit = (lines: Record<string, unknown>[], job: string) => lines.filter((l) => l.job === job && typeof l.outcome === 'string');

describe('the watch loop', () => {
  it('fails each Job when its grace runs out, in a batch of its own, and says `skipped` once', async () => {
    const t = setup({ jobs: ['a'] });
    await t.start();
    await t.runFor(25_000);
    assert.deepEqual(t.claims, [], 'nothing before the grace of 30 s');
    await t.runFor(10_000);
    assert.deepEqual(t.claims, ['a']);
    assert.deepEqual(
      audit(t.lines, 'a').map((l) => l.outcome),
      ['skipped', 'failed'],
      'one skipped line (the start sweep), then the failure',
    );
    t.stop.abort();
  });

  it("judges a Job that falls due beside another Job's retries, not behind them", async () => {
    let release!: () => void;
    const slow = new Map([['a', new Promise<void>((resolve) => (release = resolve))]]);
    const t = setup({ jobs: ['a'], slow });
    await t.start();
    await t.runFor(32_000);
    assert.deepEqual(t.started, ['a'], "a's claim is in flight and hangs");
    // b gets stuck 10 s later than a: due 10 s after a.
    const b = stuckPod('b', { rv: '5' });
    for (const c of b.status!.conditions ?? [])
      if (c.lastTransitionTime) c.lastTransitionTime = new Date(Date.parse(String(c.lastTransitionTime)) + 10_000);
    t.watch.emit({ type: 'ADDED', object: b, resourceVersion: '5' });
    await t.runFor(10_000);
    assert.deepEqual(t.claims, ['b'], 'b was failed while a still waited on its write');
    release();
    await t.runFor(1_000);
    assert.deepEqual(t.claims, ['b', 'a']);
    t.stop.abort();
  });

  it("fails a Job that falls due while another Job's pre-judgement waits on its read", async () => {
    const { slowReads, answer } = hangingRead('b');
    const t = setup({ jobs: ['a'], slowReads });
    await t.start();
    await t.runFor(20_000);
    // b gets stuck: its pre-judgement reads its Job, and that read hangs past a's due time.
    t.watch.emit({ type: 'ADDED', object: stuckPod('b', { rv: '5' }), resourceVersion: '5' });
    await t.runFor(15_000);
    assert.deepEqual(t.claims, ['a'], "a was failed on time while b's read still hung");
    await answer(t);
    assert.deepEqual(t.claims, ['a', 'b'], 'b, stuck as long as a, is failed once its read answers');
    t.stop.abort();
  });

  it('pre-judges a Job whose read failed again after 1 s, then 2 s: its own back-off, not a fixed 5 s', async () => {
    const t = setup({ jobs: [], readsDown: { b: 2 } });
    await t.start();
    await t.runFor(35_000);
    // b has been stuck 35 s, past its grace of 30 s, when the watch first brings it.
    t.watch.emit({ type: 'ADDED', object: stuckPod('b', { rv: '5' }), resourceVersion: '5' });
    await t.runFor(2_000);
    assert.deepEqual(t.claims, [], 'two reads failed so far: at once, then 1 s later');
    await t.runFor(1_500);
    assert.deepEqual(t.claims, ['b'], 'the third read, 2 s after the second, and the claim at once');
    const reads = t.scripted.calls.filter((c) => c.method === 'readJob' && c.args[1] === 'b').length;
    assert.equal(reads, 3);
    t.stop.abort();
  });

  // a and b get stuck together (one pre-judgement), fewer than a list's worth; b's Job read hangs.
  for (const [where, namespaces, nsA, nsB] of [
    ['a Job of another namespace', [], 'ci', 'other'],
    ['another Job of its namespace', undefined, undefined, undefined],
  ] as const) {
    it(`sets a Job's timer once its own read is in, not after a slow read of ${where}`, async () => {
      const { slowReads, answer } = hangingRead('b');
      const t = setup({ jobs: [], slowReads, ...(namespaces ? { namespaces: [...namespaces] } : {}) });
      await t.start();
      await t.runFor(20_000);
      t.watch.emit({ type: 'ADDED', object: stuckPod('a', { rv: '4', ...(nsA ? { namespace: nsA } : {}) }), resourceVersion: '4' });
      t.watch.emit({ type: 'ADDED', object: stuckPod('b', { rv: '5', ...(nsB ? { namespace: nsB } : {}) }), resourceVersion: '5' });
      await t.runFor(15_000);
      assert.deepEqual(t.claims, ['a'], "a was failed on time while b's read still hung");
      await answer(t);
      assert.deepEqual(t.claims, ['a', 'b']);
      t.stop.abort();
    });
  }

  it('fails a Job stuck after a whole sweep began on time, while that sweep waits on a read', async () => {
    const { slowReads, answer } = hangingRead('b');
    const t = setup({ jobs: ['b'], slowReads });
    // The start sweep (a whole sweep) reads b's Job, and that read hangs.
    await t.start();
    await t.runFor(20_000);
    t.watch.emit({ type: 'ADDED', object: stuckPod('c', { rv: '5' }), resourceVersion: '5' });
    await t.runFor(15_000);
    assert.deepEqual(t.claims, ['c'], 'c was failed when due, the whole sweep still in flight');
    await answer(t);
    assert.deepEqual(t.claims, ['c', 'b']);
    t.stop.abort();
  });

  it('keeps at most 8 batches in flight: 100 Jobs due at once start 64 claims, the rest as batches end', async () => {
    let release!: () => void;
    const hold = new Promise<void>((resolve) => (release = resolve));
    const jobs = Array.from({ length: 100 }, (_, i) => `j${i}`);
    const policy = 'defaults: { grace: { permanent: 30s } }\nlimits: { maxJobsPerSweep: 1000, maxJobsPerNamespace: 1000 }\n';
    const t = setup({ jobs, policy, slow: new Map(jobs.map((j) => [j, hold])) });
    await t.start();
    await t.runFor(35_000);
    assert.equal(t.started.length, 64, 'eight batches of eight claims in flight, no more');
    release();
    await settle();
    await t.runFor(2_000);
    assert.equal(new Set(t.claims).size, 100);
    t.stop.abort();
  });

  it('claims a Job whose grace runs out soon after it was read from that read (the claim is conditional on it); a read older than 30 s is not used', async () => {
    const t = setup({ jobs: [], policy: 'defaults: { grace: { permanent: 10s } }\n' });
    await t.start();
    t.watch.emit({ type: 'ADDED', object: stuckPod('soon', { rv: '2' }), resourceVersion: '2' });
    await t.runFor(2_000);
    assert.equal(t.scripted.count('readJob'), 1, 'read once, by the sweep on taking the lead');
    await t.runFor(10_000);
    assert.deepEqual(t.claims, ['soon']);
    assert.equal(t.scripted.count('readJob'), 1, 'the claim rode on that read');
    // One stuck after the lead was taken: pre-judged (its Job read), then claimed from that read.
    const next = stuckPod('next', { rv: '3' });
    for (const c of next.status!.conditions ?? [])
      if (c.lastTransitionTime) c.lastTransitionTime = new Date(Date.parse(String(c.lastTransitionTime)) + 12_000);
    t.watch.emit({ type: 'ADDED', object: next, resourceVersion: '3' });
    await t.runFor(12_000);
    assert.deepEqual(t.claims, ['soon', 'next']);
    const reads = t.scripted.calls.filter((c) => c.method === 'readJob').map((c) => c.args[1]);
    assert.deepEqual(reads, ['soon', 'next'], 'each Job read once: by the sweep, by the pre-judgement');
    const late = setup({ jobs: [], policy: 'defaults: { grace: { permanent: 45s } }\n' });
    await late.start();
    late.watch.emit({ type: 'ADDED', object: stuckPod('later', { rv: '2' }), resourceVersion: '2' });
    await late.runFor(50_000);
    assert.deepEqual(late.claims, ['later']);
    assert.equal(late.scripted.count('readJob'), 2, 'read on taking the lead, then again for the claim 45 s later');
    t.stop.abort();
    late.stop.abort();
  });

  it('reads a Job again before a report: only a claim is conditional on the read kept', async () => {
    const t = setup({
      jobs: [],
      policy: 'defaults: { grace: { permanent: 10s } }\nrules:\n  - name: watch-only\n    namespaces: [ci]\n    action: report\n',
    });
    await t.start();
    t.watch.emit({ type: 'ADDED', object: stuckPod('told', { rv: '2' }), resourceVersion: '2' });
    await t.runFor(12_000);
    assert.ok(t.scripted.count('createEvent') >= 1, 'reported');
    assert.equal(t.scripted.count('readJob'), 2, 'read on taking the lead, then again for the report');
    t.stop.abort();
  });

  it('judges the Jobs the outage breaker holds after the others, in chunks of their own: a Job stuck elsewhere first, however new', async () => {
    const refused = REAL_NODE.cases.find((c) => c.id === 'connection-refused')!.pods.ErrImagePull!;
    const held = Array.from({ length: 600 }, (_, i) => `held${i}`);
    const t = setup({ jobs: [...held, 'elsewhere'], policy: 'limits: { outage: { minStuckPods: 20, minImages: 1 } }\n' });
    t.watch.pods = held.map((j) => stuckPod(j, { from: refused }));
    // Stuck a minute after the others: the newest, so the last of an oldest-first order.
    const newest = stuckPod('elsewhere');
    for (const c of newest.status!.conditions ?? [])
      if (c.lastTransitionTime) c.lastTransitionTime = new Date(Date.parse(String(c.lastTransitionTime)) + 60_000);
    t.watch.pods.push(newest);
    await t.start();
    await t.runFor(1_000);
    assert.deepEqual(
      t.sweeps.map((s) => [s.jobs.length, s.jobs.includes('elsewhere')]),
      [
        [1, true],
        [500, false],
        [100, false],
      ],
      'the Job stuck elsewhere alone first (no held Job read beside it), then the held ones',
    );
    t.stop.abort();
  });

  it("lists a namespace's Jobs once for a whole sweep, however many chunks it goes in", async () => {
    const jobs = Array.from({ length: 600 }, (_, i) => `w${i}`);
    const t = setup({ jobs });
    await t.start();
    await t.runFor(1_000);
    const namespaceLists = () =>
      t.scripted.calls.filter((c) => c.method === 'listJobs' && !(c.args[0] as { labelSelector?: string }).labelSelector);
    assert.equal(t.sweeps.length, 2, 'the start sweep, in two chunks (500 + 100)');
    assert.equal(namespaceLists().length, 1);
    assert.equal(t.scripted.count('readJob'), 0);
    t.stop.abort();
  });

  it('judges a Job failed earlier once in a whole sweep, in the chunk of its stuck pods, not also in the first', async () => {
    const jobs = Array.from({ length: 600 }, (_, i) => `w${i}`);
    // Failed 20 minutes before its pods were seen stuck: overdue, so each judgement fails it again.
    const t = setup({ jobs, pending: { w550: new Date(since - 20 * 60_000) } });
    await t.start();
    await t.runFor(1_000);
    assert.deepEqual(
      t.sweeps.map((w) => [w.jobs.length, w.jobs.includes('w550')]),
      [
        [500, false],
        [100, true],
      ],
    );
    assert.deepEqual(
      audit(t.lines, 'w550').map((l) => l.outcome),
      ['retried'],
      'one line, from the chunk that holds its stuck pod',
    );
    assert.equal(t.claims.filter((c) => c === 'w550').length, 1, 'failed again once');
    t.stop.abort();
  });

  it('judges a Job failed earlier once at a backstop slot when its stuck pod is Running: with that pod, not also without it', async () => {
    // Failed 20 minutes before: overdue, so each judgement fails it again. Its pod restarted in
    // place, so only the backstop's list of Running pods finds it.
    const t = setup({ jobs: ['a'], pending: { r: new Date(since - 20 * 60_000) }, running: ['r'] });
    await t.start();
    await t.runFor(1_000);
    const before = audit(t.lines, 'r').length;
    const claimsBefore = t.claims.filter((c) => c === 'r').length;
    const slots = () => t.lines.filter((l) => l.message === 'next backstop sweep scheduled').length;
    const slotsBefore = slots();
    // Past the first slot of the 2-minute schedule (a minute after the start), before any other timer.
    await t.runFor(60_000);
    assert.equal(slots() - slotsBefore, 1, 'one backstop slot');
    const atSlot = audit(t.lines, 'r').slice(before);
    assert.deepEqual(
      atSlot.map((l) => [l.outcome, l.pod]),
      [['retried', 'r-pod']],
      JSON.stringify(atSlot),
    );
    assert.equal(t.claims.filter((c) => c === 'r').length - claimsBefore, 1, 'failed again once at the slot');
    t.stop.abort();
  });

  it('judges a Job with a Running and a Pending stuck pod once at a backstop slot, not once for each', async () => {
    // Failed 20 minutes before and overdue: each judgement fails it again. One pod restarted in
    // place (only the backstop lists it), the other waits in the watch's cache.
    const t = setup({ jobs: ['a'], pending: { r: new Date(since - 20 * 60_000) }, running: ['r'] });
    const waiting = stuckPod('r');
    waiting.metadata = { ...waiting.metadata, name: 'r-waiting', uid: 'pod-r-waiting' };
    t.watch.pods.push(waiting);
    await t.start();
    await t.runFor(1_000);
    const before = audit(t.lines, 'r').length;
    const claimsBefore = t.claims.filter((c) => c === 'r').length;
    await t.runFor(60_000);
    const atSlot = audit(t.lines, 'r').slice(before);
    assert.deepEqual(
      atSlot.map((l) => l.outcome),
      ['retried'],
      JSON.stringify(atSlot),
    );
    assert.equal(t.claims.filter((c) => c === 'r').length - claimsBefore, 1, 'failed again once at the slot');
    t.stop.abort();
  });

  it("leaves a Job failed earlier to its own timers and the backstop: another Job's timer does not judge it", async () => {
    // Failed 20 minutes before and overdue: each judgement would fail it again.
    const t = setup({ jobs: ['a'], pending: { r: new Date(since - 20 * 60_000) } });
    await t.start();
    // Past the first backstop slot (a minute after the start): r failed again there, a failed at its grace.
    await t.runFor(61_000);
    assert.deepEqual(t.claims, ['r', 'a', 'r']);
    const before = audit(t.lines, 'r').length;
    // a's forceDeleteAfter (60 s after its failure) fires a timer of its own, judged with the Jobs failed earlier.
    await t.runFor(35_000);
    assert.ok(
      audit(t.lines, 'a').some((l) => l.outcome === 'skipped' && String(l.detail).includes('waiting for the Job controller')),
      "a's own timer judged it",
    );
    assert.deepEqual(audit(t.lines, 'r').slice(before), [], "r is not judged by a's timer");
    assert.deepEqual(t.claims, ['r', 'a', 'r'], 'nor failed again');
    t.stop.abort();
  });

  it("starts no listing sweep at a backstop slot while the cache's first list runs; one a whole period later", async () => {
    const jobs = Array.from({ length: 20 }, (_, i) => `w${i}`);
    const t = setup({ jobs });
    let listed!: () => void;
    t.watch.held = new Promise<void>((resolve) => (listed = resolve));
    await t.start();
    const slots = () => t.lines.filter((l) => l.message === 'next backstop sweep scheduled').length;
    // Past one slot of the 2-minute schedule, the list still running.
    await t.runFor(121_000);
    assert.equal(slots(), 1, 'the slot passed: a new period');
    assert.equal(t.sweeps.length, 0, 'no listing sweep beside the first list');
    listed();
    await settle();
    await t.runFor(1_000);
    assert.deepEqual(
      t.sweeps.map((w) => w.jobs.length),
      [20],
      'the start sweep, from the cache, at its sync',
    );
    t.stop.abort();

    const slow = setup({ jobs });
    slow.watch.held = new Promise<void>(() => undefined);
    await slow.start();
    await slow.runFor(241_000);
    assert.deepEqual(slow.sweeps, [{ trigger: 'list', jobs: [] }], 'a cache not synced for a whole period: its slot lists');
    slow.stop.abort();
  });

  it('does not pre-judge the Jobs a starting whole sweep will list while it reads the policy', async () => {
    const jobs = Array.from({ length: 600 }, (_, i) => `w${i}`);
    const t = setup({ jobs, policyReadMs: 200 });
    await t.start();
    await t.runFor(3_000);
    const namespaceLists = t.scripted.calls.filter(
      (c) => c.method === 'listJobs' && !(c.args[0] as { labelSelector?: string }).labelSelector,
    );
    assert.deepEqual(
      t.sweeps.map((w) => w.jobs.length),
      [500, 100],
      'the start sweep, in two chunks',
    );
    assert.equal(namespaceLists.length, 1, 'the ci Jobs listed once, by the start sweep: no pre-judgement beside it');
    assert.equal(t.scripted.count('readJob'), 0);
    t.stop.abort();
  });

  it('does not pre-judge a namespace a whole sweep from the cache is about to list; a lone Job elsewhere is, and is failed on time', async () => {
    const jobs = Array.from({ length: 1200 }, (_, i) => `w${i}`);
    let answer!: () => void;
    const t = setup({ jobs, slowList: new Promise<void>((resolve) => (answer = resolve)), namespaces: [] });
    t.watch.pods.push(stuckPod('lone', { namespace: 'other' }));
    await t.start();
    // The start sweep's list of the ci Jobs hangs past the grace (30 s).
    await t.runFor(35_000);
    assert.deepEqual(t.claims, ['lone'], 'the lone Job, pre-judged beside the sweep, failed when due');
    const namespaceLists = () =>
      t.scripted.calls.filter((c) => c.method === 'listJobs' && !(c.args[0] as { labelSelector?: string }).labelSelector).length;
    assert.equal(namespaceLists(), 1, 'the ci Jobs listed once, by the start sweep: not pre-judged beside it');
    answer();
    await t.runFor(2_000);
    assert.equal(t.sweeps.length, 4, "lone's batch, and the start sweep in three chunks");
    assert.equal(namespaceLists(), 1);
    assert.ok(!t.scripted.calls.some((c) => c.method === 'readJob' && c.args[1] === 'w7'));
    // Changed after its chunk was judged: pre-judged.
    const changed = stuckPod('w7', { rv: '9' });
    for (const c of changed.status!.conditions ?? [])
      if (c.lastTransitionTime) c.lastTransitionTime = new Date(Date.parse(String(c.lastTransitionTime)) + 60_000);
    t.watch.emit({ type: 'ADDED', object: changed, resourceVersion: '9' });
    await t.runFor(1_000);
    assert.equal(t.scripted.calls.filter((c) => c.method === 'readJob').at(-1)?.args[1], 'w7');
    t.stop.abort();
  });

  it("does not pre-judge again the Jobs a whole sweep's chunk has judged while its later chunks run", async () => {
    let answer!: () => void;
    const slowList = new Promise<void>((resolve) => (answer = resolve));
    const jobs = Array.from({ length: 500 }, (_, i) => `w${i}`);
    const elsewhere = { namespace: 'slow', jobs: Array.from({ length: 20 }, (_, i) => `s${i}`), slowList };
    const t = setup({ jobs, elsewhere, namespaces: [] });
    await t.start();
    const lists = (namespace: string) =>
      t.scripted.calls.filter((c) => {
        const opts = c.args[0] as { labelSelector?: string; namespace?: string };
        return c.method === 'listJobs' && !opts.labelSelector && opts.namespace === namespace;
      }).length;
    // The first chunk (ci's 500 Jobs) is judged; the second waits on the slow namespace's list.
    await t.runFor(10_000);
    assert.deepEqual(
      t.sweeps.map((w) => w.jobs.length),
      [500, 20],
      "the chunks observed: ci's 500 Jobs, then the slow namespace's 20",
    );
    assert.equal(audit(t.lines, 'w0').length, 1, 'the first chunk judged');
    assert.equal(lists('ci'), 1, "ci's Jobs listed once: its judged Jobs are not pre-judged beside the second chunk");
    assert.equal(t.scripted.count('readJob'), 0);
    answer();
    await t.runFor(1_000);
    assert.equal(t.sweeps.length, 2);
    assert.equal(audit(t.lines, 's0').length, 1, 'the second chunk judged');
    assert.equal(lists('slow'), 1);
    assert.equal(lists('ci'), 1);
    t.stop.abort();
  });

  it('tries a Job whose write met a fault again 1 s later, then 2 s; a refused one 5 s later', async () => {
    const t = setup({ jobs: ['flaky', 'refused'], unavailable: { flaky: 2 }, refused: ['refused'] });
    await t.start();
    await t.runFor(60_000);
    const gaps = (job: string) =>
      t.claimedAt
        .filter(([name]) => name === job)
        .map(([, at], i, all) => (i === 0 ? 0 : at - all[i - 1]![1]))
        .slice(1);
    const flaky = gaps('flaky');
    assert.equal(flaky.length, 2, 'two failed claims, then one that landed');
    assert.ok(flaky[0]! >= 1_000 && flaky[0]! < 1_500, `first retry ${flaky[0]} ms after`);
    assert.ok(flaky[1]! >= 2_000 && flaky[1]! < 2_500, `second retry ${flaky[1]} ms after`);
    assert.deepEqual(
      audit(t.lines, 'flaky')
        .map((l) => l.outcome)
        .filter((o) => o !== 'skipped'),
      ['error', 'error', 'failed'],
    );
    const refused = gaps('refused');
    assert.ok(refused[0]! >= 5_000 && refused[0]! < 5_500, `a refusal tried again ${refused[0]} ms after`);
    t.stop.abort();
  });

  it('backs a refused write off per Job up to the backstop period: at most 12 attempts in 10 minutes, one line each', async () => {
    const t = setup({ jobs: ['refused', 'fine'], refused: ['refused'] });
    await t.start();
    await t.runFor(10 * 60_000);
    const attempts = t.claims.filter((j) => j === 'refused').length;
    assert.ok(attempts >= 5 && attempts <= 12, `${attempts} attempts`);
    const events = t.scripted.calls
      .filter((c) => c.method === 'createEvent')
      .map((c) => (c.args[1] as { regarding?: { name?: string } }).regarding?.name);
    assert.ok(!events.includes('refused'), 'no Event for a refused claim');
    assert.deepEqual(
      audit(t.lines, 'fine')
        .map((l) => l.outcome)
        .filter((o) => o === 'failed'),
      ['failed'],
      'the other Job was failed once (then only confirmed, as the Job controller never finishes it here)',
    );
    assert.equal(audit(t.lines, 'refused').filter((l) => l.outcome === 'error').length, attempts);
    t.stop.abort();
  });

  it('counts the limits per backstop period: Jobs over them wait for the next period', async () => {
    const jobs = ['j1', 'j2', 'j3', 'j4', 'j5'];
    const t = setup({ jobs, policy: 'defaults: { grace: { permanent: 30s } }\nlimits: { maxJobsPerSweep: 2 }\n' });
    await t.start();
    // All five are due at 30 s, in the first period (the backstop slots are every 2 minutes).
    const firstSlot = EVERY_2_MIN.next(t.time.wall()).getTime() - t.time.wall().getTime();
    await t.runFor(Math.min(firstSlot - 1_000, 100_000));
    assert.equal(t.claims.length, 2, 'two in the first period');
    await t.runFor(120_000);
    assert.equal(t.claims.length, 4, 'two more in the next one');
    t.stop.abort();
  });

  it("shares the period's limits exactly between batches side by side (20 due at once, batches of 8)", async () => {
    const jobs = Array.from({ length: 20 }, (_, i) => `p${i}`);
    const t = setup({
      jobs,
      policy: 'defaults: { grace: { permanent: 30s } }\nlimits: { maxJobsPerSweep: 10, maxJobsPerNamespace: 10 }\n',
    });
    await t.start();
    await t.runFor(40_000);
    assert.equal(t.claims.length, 10);
    assert.equal(
      audit(t.lines, 'p0').length +
        jobs.slice(1).reduce((n, j) => n + audit(t.lines, j).filter((l) => l.outcome === 'deferred').length, 0) >=
        10,
      true,
    );
    t.stop.abort();
  });

  it('resumes a dropped watch from its resourceVersion, moved on by bookmarks; lists again after 410', async () => {
    const t = setup({ jobs: [] });
    await t.start();
    assert.equal(t.watch.lists, 1);
    t.watch.emit({ type: 'BOOKMARK', resourceVersion: 'bm-7' });
    t.watch.drop();
    await t.runFor(2_000);
    assert.deepEqual(t.watch.watches, ['list-1', 'bm-7'], 'resumed from the bookmark, no list');
    assert.equal(t.watch.lists, 1);
    // A Job stuck while the watch expired is found by the new list.
    t.watch.pods = [stuckPod('late')];
    t.watch.drop(new WatchExpiredError('pod watch ci'));
    await t.runFor(2_000);
    assert.equal(t.watch.lists, 2);
    await t.runFor(35_000);
    assert.deepEqual(t.claims, ['late']);
    t.stop.abort();
  });

  it('on a cold start sweeps the cache its list has just filled, its watch not up yet: the pods are not listed again', async () => {
    const t = setup({ jobs: ['a'] });
    // The watch request is never answered (a slow API server): only the list is in.
    t.watch.watch = (_c, opts) => new Promise<void>((resolve) => opts.signal.addEventListener('abort', () => resolve(), { once: true }));
    await t.start();
    await t.runFor(1_000);
    assert.deepEqual(
      t.scripted.calls.filter((c) => c.method === 'listPodRows' || c.method === 'listPods'),
      [],
      'the start sweep judged from the cache',
    );
    assert.deepEqual(
      audit(t.lines, 'a').map((l) => l.outcome),
      ['skipped'],
      'a was judged (its grace not over)',
    );
    t.stop.abort();
  });

  it("acts on fresh facts while the pod watch is down: the due Jobs' pods are read again first", async () => {
    const recovered = stuckPod('recovered');
    recovered.status = { ...recovered.status, phase: 'Running', containerStatuses: [] };
    const t = setup({ jobs: ['still', 'recovered'], pods: { 'still-pod': stuckPod('still'), 'recovered-pod': recovered } });
    await t.start();
    await t.runFor(20_000);
    const failing = Object.assign(new Error('connection refused'), { code: 'ECONNREFUSED' });
    t.watch.watch = () => Promise.reject(failing);
    t.watch.drop();
    await t.runFor(20_000);
    assert.deepEqual(t.claims, ['still'], 'the pod that recovered while the watch was down is not failed');
    assert.deepEqual(
      t.scripted.calls
        .filter((c) => c.method === 'readPod')
        .map((c) => c.args[1])
        .sort(),
      ['recovered-pod', 'still-pod'],
      "only the due Jobs' pods are read",
    );
    t.stop.abort();
  });

  it('as a follower keeps its timers and writes nothing; on taking the lead acts at once on what fell due', async () => {
    const t = setup({ jobs: ['a'] });
    await t.start(false);
    await t.runFor(60_000);
    assert.deepEqual(t.claims, []);
    assert.ok(t.scripted.count('readJob') >= 1, 'the Job was pre-judged as a follower');
    const leading = new AbortController();
    t.loop.lead(leading.signal);
    await t.runFor(100);
    assert.deepEqual(t.claims, ['a'], 'the first turn after taking the lead');
    t.stop.abort();
  });

  it('on taking the lead, gives the Jobs an earlier leader failed and left the timers that leader held', async () => {
    // The earlier leader failed these before it died; none has a stuck pod left to watch. f is
    // Failed and owed its Event, its forceDeleteAfter (60 s) passed; r, failed 20 minutes ago and
    // still not Failed, is overdue; g, Failed 30 s before the follower started, is due 30 s in.
    const t = setup({
      jobs: ['a'],
      pending: { f: new Date(since - 70_000), r: new Date(since - 20 * 60_000), g: new Date(since - 30_000) },
      finished: ['f', 'g'],
    });
    const eventsFor = () => eventsWritten(t.scripted);
    await t.start(false);
    await t.runFor(20_000);
    assert.deepEqual(eventsFor(), [], 'a follower writes nothing');
    t.loop.lead(new AbortController().signal);
    await t.runFor(1_000);
    assert.deepEqual(eventsFor().sort(), ['f', 'r'], "f's owed Event, and r's as it is failed again; not g's yet");
    assert.ok(
      t.scripted.calls.some((c) => c.method === 'mergePatchJob' && c.args[1] === 'f'),
      "f's pending label removed once its Event is written",
    );
    assert.deepEqual(
      audit(t.lines, 'r').map((l) => l.outcome),
      ['retried'],
    );
    await t.runFor(10_000);
    assert.deepEqual(eventsFor().sort(), ['a', 'f', 'g', 'r'], "g's at its forceDeleteAfter, 30 s in, beside a's at its grace");
    assert.equal(t.claims.filter((c) => c === 'r').length, 1, 'r failed again once');
    t.stop.abort();
  });

  it("lists the Jobs an earlier leader failed again, 5 s later, when the new leader's list fails", async () => {
    // The list's page is asked four times (once, then after 1, 2 and 4 s), and fails each time.
    const t = setup({ jobs: ['a'], pending: { f: new Date(since - 70_000) }, finished: ['f'], pendingListsDown: 4 });
    const eventsFor = () => eventsWritten(t.scripted);
    await t.start(false);
    await t.runFor(20_000);
    t.loop.lead(new AbortController().signal);
    await t.runFor(7_500);
    assert.deepEqual(eventsFor(), [], 'the list failed: nothing known of f yet');
    assert.ok(t.lines.some((l) => String(l.message).startsWith('could not take over the Jobs an earlier leader failed')));
    await t.runFor(5_000);
    assert.deepEqual(eventsFor().sort(), ['a', 'f'], "f's owed Event once the list is made again, beside a's at its grace");
    t.stop.abort();
  });

  it('taking the lead while a pre-judgement waits on a read, acts at once: no whole sweep waits for it', async () => {
    const { slowReads, answer } = hangingRead('b');
    const t = setup({ jobs: ['a'], slowReads });
    await t.start(false);
    await t.runFor(20_000);
    t.watch.emit({ type: 'ADDED', object: stuckPod('b', { rv: '5' }), resourceVersion: '5' });
    await t.runFor(20_000);
    t.loop.lead(new AbortController().signal);
    await t.runFor(100);
    assert.deepEqual(t.claims, ['a'], "a, due as a follower, failed on the first turn while b's read still hangs");
    await answer(t);
    assert.deepEqual(t.claims, ['a', 'b']);
    t.stop.abort();
  });
});
