// npm run bench:bad-day -- --scenario outage|startup|takeover|refused|policy|failover [--stuck 20000] [--minutes 10] [--faults 0.3] [--mode watch|periodic|both] [--starts 5]
//
// `run --watch` on the days that matter, on the bundled control plane (docs/performance.md, "The
// watch on a bad day"). Prints figures, asserts nothing; one run per invocation (take the median
// of three, each under its own hold of the machine lock). Pod statuses are the real kubelet's
// recorded words (test/support/kubelet.ts).
// - outage: `--stuck` pods of Jobs stuck in one registry's transient back-off (20 min stuck, so
//   within the 1h grace), each pod's status rewritten every 5 minutes as the kubelet does, and
//   every 30 s a Job stuck on "not found" at another registry with a 5 s grace. `run --watch
//   --schedule '*/2 * * * *'` and then `run --schedule '*/2 * * * *'`, `--minutes` each, with the
//   shipped NODE_OPTIONS and the image's node flags: the sweeper's CPU, API requests, peak RSS,
//   audit lines, and the decisive Jobs' first write after grace (all of them, and those created
//   once the sweeper was ready: the watch's cache synced, the periodic mode's first sweep
//   scheduled); `--mode` runs one mode only.
// - startup: the outage's cluster, `run --watch` started `--starts` times (default 5), a decisive
//   Job created as each starts: time to the cache synced, and that Job's first write after grace.
// - takeover: 20,000 Pending pods (unscheduled) of which 1,000 are Jobs past grace; a follower
//   `run --watch --leader-elect` with its cache synced while another identity holds the Lease;
//   the Lease released: from the follower's acquireTime to its first write.
// - refused: 5 stuck Jobs whose every update (status included) a ValidatingAdmissionPolicy
//   denies, `--minutes`: claim attempts per Job and Events per Job.
// - failover: 3 replicas of `run --watch --leader-elect` through the fault proxy (`--faults` of
//   every request, watches cut every 10 s), the leader SIGKILLed after each 20 s of tenure and
//   restarted; 200 stuck Jobs in waves, 5 s grace, 30 controls: first write after grace for Jobs
//   whose leader lived and across a change of leader (a kill, or a leader's exit on losing its
//   Lease to the faults; the first wave, due before any replica took the Lease, apart: from the
//   first Lease taken); unfailed, duplicate Events, early, controls touched.
// - policy: `run --watch` through the fault proxy, watches cut every 10 s; 5 edits of the policy
//   ConfigMap, each making a stuck Job due: edit -> first write.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BatchV1Api, CoreV1Api, CoordinationV1Api, type V1Pod } from '@kubernetes/client-node';
import { findStuckContainers } from '../src/classify/index.ts';
import { mapBounded } from '../src/concurrency.ts';
import { CLI, ensureBuilt, jsonLines } from '../test/support/cli.ts';
import { freePort, startCluster, type Cluster } from '../test/support/cluster.ts';
import { runtimeConfig } from '../test/support/dockerfile.ts';
import { createNamespace, jobManifest } from '../test/support/fixtures.ts';
import { realPullMessage, setImagePullStuck, waitFor, waitForJobPods } from '../test/support/kubelet.ts';
import { createPods, rawClient, type Raw } from './scale-setup.ts';
import { countFaultOutcomes, createHealthyJobs, startFaults, waitForStuckEvents, watchJobs } from './latency-faults.ts';

const flag = (name: string, fallback: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1]! : fallback;
};
const SCENARIO = flag('scenario', 'outage');
const STUCK = Number(flag('stuck', '20000'));
const MINUTES = Number(flag('minutes', '10'));
const FAULT_RATE = Number(flag('faults', '0.3'));
/** The outage's modes: `watch`, `periodic` or `both`. */
const MODE = flag('mode', 'both');
/** The start-up scenario's starts of the watch on one fill. */
const STARTS = Number(flag('starts', '5'));
/** The watch's line once its pod cache is synced. */
const WATCH_READY = 'watching: the pod cache is synced';

/** The shipped Deployment's NODE_OPTIONS (manifests/deployment/deployment.yaml). */
const NODE_OPTIONS = ((): string => {
  const text = readFileSync(new URL('../manifests/deployment/deployment.yaml', import.meta.url), 'utf8');
  return /name: NODE_OPTIONS\s+value: "([^"]+)"/.exec(text)?.[1] ?? '';
})();

/** The node flags of the image's ENTRYPOINT (`node <flags> main.js`), which NODE_OPTIONS cannot carry. */
const IMAGE_NODE_FLAGS = runtimeConfig()
  .entrypoint.slice(1)
  .filter((a) => a.startsWith('-'));

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
};
/** When a 5 s grace runs out on the stuck clock the sweeper reads from the pod (its conditions' times, docs/clock.md). */
const graceEnds = (pod: V1Pod): number => findStuckContainers(pod)[0]!.stuckSince.getTime() + 5_000;
const f2 = (x: number) => (Number.isNaN(x) ? 'n/a' : x.toFixed(2));
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Sweeper {
  child: ChildProcess;
  output: () => string;
  metricsPort: number;
  stop: () => Promise<void>;
}

async function startSweeper(args: string[], env: Record<string, string> = {}): Promise<Sweeper> {
  const metricsPort = await freePort();
  const child = spawn(
    process.execPath,
    [...IMAGE_NODE_FLAGS, CLI, 'run', ...args, '--listen', `127.0.0.1:${metricsPort}`, '--output', 'json'],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
      env: { ...process.env, NODE_OPTIONS, ...env },
    },
  );
  let out = '';
  child.stdout!.setEncoding('utf8').on('data', (d: string) => (out += d));
  // Every replica's log is kept, a killed one's too.
  const closed = new Promise<void>((r) =>
    child.on('close', () => {
      writeFileSync(join(tmpdir(), `bad-day-${SCENARIO}-${child.pid}.log`), out);
      r();
    }),
  );
  return {
    child,
    output: () => out,
    metricsPort,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await closed;
    },
  };
}

/** The sweeper's CPU seconds, peak RSS (MB) and API requests (its own /metrics). */
async function sweeperFigures(s: Sweeper): Promise<{ cpuS: number; rssMb: number; requests: number }> {
  const status = readFileSync(`/proc/${s.child.pid}/status`, 'utf8');
  const rssMb = Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024;
  const stat = readFileSync(`/proc/${s.child.pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  const cpuS = (Number(stat[11]) + Number(stat[12])) / 100;
  const body = await (await fetch(`http://127.0.0.1:${s.metricsPort}/metrics`)).text();
  let requests = 0;
  for (const line of body.split('\n'))
    if (line.startsWith('imagepull_sweeper_api_requests_total{')) requests += Number(line.split(' ').pop());
  return { cpuS, rssMb, requests };
}

/** When each Job of `namespaces` was first seen claimed (`failed-at`), by `namespace/name`; and how to stop looking. */
function claimsIn(kc: Cluster['kubeConfig'], namespaces: string[]): { claimed: Map<string, number>; stop: () => void } {
  const claimed = new Map<string, number>();
  const unwatch = namespaces.map((ns) =>
    watchJobs(kc, ns, (job) => {
      const k = `${ns}/${job.metadata?.name}`;
      if (job.metadata?.annotations?.['imagepull-sweeper/failed-at'] && !claimed.has(k)) claimed.set(k, Date.now());
    }),
  );
  return { claimed, stop: () => unwatch.forEach((u) => u()) };
}

/** `run --watch --leader-elect` on a Lease in `leaseNs`, never a backstop. */
const leaderArgs = (leaseNs: string, ...more: string[]) => [
  '--watch',
  '--leader-elect',
  '--leader-elect-namespace',
  leaseNs,
  '--schedule',
  '0 0 1 1 *',
  ...more,
];

/**
 * `count` Jobs through the real Job controller (one pod each), and the name of each Job's pod:
 * the pods are listed per namespace, not waited for one by one.
 */
async function createJobPods(
  raw: Raw,
  namespaces: string[],
  count: number,
  prefix: string,
  image: (i: number) => string,
): Promise<{ namespace: string; name: string; pod: string; image: string }[]> {
  const items = Array.from({ length: count }, (_, i) => ({
    namespace: namespaces[i % namespaces.length]!,
    name: `${prefix}-${i}`,
    image: image(i),
    pod: '',
  }));
  await mapBounded(items, 32, async (it) => {
    for (let attempt = 0; ; attempt += 1) {
      const res = await raw.request('POST', `/apis/batch/v1/namespaces/${it.namespace}/jobs`, jobManifest(it.name, it.image));
      if (res.status === 201 || res.status === 409) return;
      if (attempt > 5) throw new Error(`create Job ${it.name}: HTTP ${res.status} ${res.body.slice(0, 200)}`);
    }
  });
  const byJob = new Map(items.map((it) => [`${it.namespace}/${it.name}`, it]));
  let missing = items.length;
  for (const started = Date.now(); missing > 0; await sleep(2_000)) {
    if (Date.now() - started > 1_800_000) throw new Error(`${missing} Jobs have no pod after 30 minutes`);
    for (const ns of namespaces) {
      for (let token: string | undefined = ''; token !== undefined;) {
        const q = `labelSelector=job-name&limit=2000${token ? `&continue=${encodeURIComponent(token)}` : ''}`;
        const page = JSON.parse((await raw.request('GET', `/api/v1/namespaces/${ns}/pods?${q}`)).body) as {
          items: V1Pod[];
          metadata?: { continue?: string };
        };
        for (const pod of page.items) {
          const it = byJob.get(`${ns}/${pod.metadata?.labels?.['job-name']}`);
          if (it && !it.pod) it.pod = pod.metadata!.name!;
        }
        token = page.metadata?.continue || undefined;
      }
    }
    missing = items.filter((it) => !it.pod).length;
  }
  return items;
}

/** What the kubelet writes of a pull in back-off (the real recorded words), `sinceMs` ago. */
function stuck(
  core: CoreV1Api,
  p: { namespace: string; pod: string; image: string },
  since: Date,
  kind: 'service-unavailable' | 'tag-missing',
  reason: 'ErrImagePull' | 'ImagePullBackOff',
) {
  return setImagePullStuck(core, p.namespace, p.pod, {
    since,
    stuck: [{ container: 'main', reason, message: realPullMessage(kind, p.image, reason) }],
  });
}

interface OutageFill {
  decisiveNs: string;
  policy: string;
  /** Creates a decisive Job (stuck on "not found" at another registry, 5 s grace) and writes its stuck status once its pod exists. */
  decisive(name: string, due: Map<string, number>, written: Map<string, number>): Promise<void>;
  stop(): Promise<void>;
}

/** The outage's cluster: STUCK pods of Jobs in one registry's transient back-off, the kubelet's churn running. */
async function fillOutage(cluster: Cluster): Promise<OutageFill> {
  const kc = cluster.kubeConfig;
  const raw = rawClient(kc);
  const core = kc.makeApiClient(CoreV1Api);
  const dir = mkdtempSync(join(tmpdir(), 'bad-day-'));
  const namespaces = await mapBounded([...Array(20).keys()], 4, async (i) => (await createNamespace(kc, `outage-${i}`)).name);
  const decisiveNs = (await createNamespace(kc, 'decisive')).name;
  const policy = join(dir, 'policy.yaml');
  writeFileSync(policy, `rules:\n  - name: decisive\n    namespaces: ["${decisiveNs}"]\n    grace: { permanent: 5s }\n`);
  const t0 = Date.now();
  const pods = await createJobPods(raw, namespaces, STUCK, 'out', (i) => `outage.registry.example/team/app-${i % 50}:1`);
  const since = new Date(Date.now() - 20 * 60_000);
  let flip = 0;
  await mapBounded(pods, 32, (p) => stuck(core, p, since, 'service-unavailable', 'ImagePullBackOff'));
  process.stderr.write(`[bad-day] ${STUCK} stuck pods in ${((Date.now() - t0) / 1000).toFixed(0)} s\n`);
  // The kubelet's churn: each pod's status rewritten once every 5 minutes, spread evenly.
  let churning = true;
  const churn = (async () => {
    const perTick = Math.max(1, Math.round(STUCK / 3000));
    for (let i = 0; churning; i = (i + perTick) % STUCK) {
      const reason = flip++ % 2 === 0 ? 'ErrImagePull' : 'ImagePullBackOff';
      await Promise.all(pods.slice(i, i + perTick).map((p) => stuck(core, p, since, 'service-unavailable', reason).catch(() => undefined)));
      await sleep(100);
    }
  })();
  const batch = kc.makeApiClient(BatchV1Api);
  return {
    decisiveNs,
    policy,
    async decisive(name, due, written) {
      const image = `other.registry.example/team/app:${name}`;
      await batch.createNamespacedJob({ namespace: decisiveNs, body: jobManifest(name, image) });
      void (async () => {
        const [pod] = await waitForJobPods(core, decisiveNs, name);
        written.set(name, Date.now());
        // Its stuck clock starts when its sandbox was up: the stand-in writes that as now.
        const stuckPod = await setImagePullStuck(core, decisiveNs, pod!.metadata!.name!, {
          since: new Date(),
          stuck: [{ container: 'main', reason: 'ErrImagePull', message: realPullMessage('tag-missing', image, 'ErrImagePull') }],
        });
        due.set(name, graceEnds(stuckPod));
      })();
    },
    async stop() {
      churning = false;
      await churn;
      raw.close();
    },
  };
}

async function outage(cluster: Cluster): Promise<void> {
  const fill = await fillOutage(cluster);
  const { decisiveNs, policy } = fill;
  const kc = cluster.kubeConfig;
  const modes: [string, string[]][] = [
    ['watch', ['--watch', '--schedule', '*/2 * * * *']],
    ['periodic', ['--schedule', '*/2 * * * *']],
  ].filter(([m]) => MODE === 'both' || m === MODE) as [string, string[]][];
  try {
    for (const [mode, args] of modes) {
      const { claimed, stop: unwatch } = claimsIn(kc, [decisiveNs]);
      const s = await startSweeper([...args, '--policy-file', policy, '--kubeconfig', cluster.kubeconfigPath]);
      const due = new Map<string, number>();
      // When each decisive Job's stuck status was written.
      const written = new Map<string, number>();
      const created = new Map<string, number>();
      const started = Date.now();
      // Ready: the watch once its pod cache is synced, the periodic mode once it has scheduled its first sweep.
      const readyLine = mode === 'watch' ? WATCH_READY : 'next sweep scheduled';
      let readyAt: number | undefined;
      const readiness = setInterval(() => {
        if (readyAt === undefined && s.output().includes(readyLine)) readyAt = Date.now();
      }, 100);
      let n = 0;
      while (Date.now() - started < MINUTES * 60_000) {
        const name = `${mode}-decisive-${n++}`;
        created.set(name, Date.now());
        await fill.decisive(name, due, written);
        await sleep(30_000);
      }
      const figures = await sweeperFigures(s);
      const lines = jsonLines(s.output()).length;
      clearInterval(readiness);
      await s.stop();
      unwatch();
      const at = (name: string) => claimed.get(`${decisiveNs}/${name}`);
      const writes = [...due].filter(([k]) => at(k) !== undefined).map(([k, d]) => (at(k)! - d) / 1000);
      const seen = [...due].filter(([k]) => at(k) !== undefined).map(([k, d]) => (at(k)! - Math.max(d, written.get(k)!)) / 1000);
      const whenReady = [...due]
        .filter(([k]) => at(k) !== undefined && readyAt !== undefined && created.get(k)! >= readyAt)
        .map(([k, d]) => (at(k)! - d) / 1000);
      const ready = readyAt === undefined ? 'never ready' : `ready ${((readyAt - started) / 1000).toFixed(1)} s after start`;
      console.log(
        `${mode} (${STUCK} stuck, ${MINUTES} min): CPU ${figures.cpuS.toFixed(1)} s, requests ${figures.requests}, peak RSS ${figures.rssMb.toFixed(0)} MB, audit lines ${lines}; decisive Jobs ${writes.length}/${due.size} written, first write after grace p50 ${f2(pct(writes, 50))} s, p99 ${f2(pct(writes, 99))} s, max ${f2(Math.max(...writes))} s (after grace or the stuck status's write, whichever is later: p50 ${f2(pct(seen, 50))} s, p99 ${f2(pct(seen, 99))} s); ` +
          `${ready}, of the ${whenReady.length} created after: p50 ${f2(pct(whenReady, 50))} s, p99 ${f2(pct(whenReady, 99))} s`,
      );
    }
  } finally {
    await fill.stop();
  }
}

/** The watch started `--starts` times on one outage fill, a decisive Job created as each starts. */
async function startups(cluster: Cluster): Promise<void> {
  const fill = await fillOutage(cluster);
  const ready: number[] = [];
  const writes: number[] = [];
  try {
    for (let k = 0; k < STARTS; k++) {
      const { claimed, stop: unwatch } = claimsIn(cluster.kubeConfig, [fill.decisiveNs]);
      const args = ['--watch', '--schedule', '*/2 * * * *', '--policy-file', fill.policy, '--kubeconfig', cluster.kubeconfigPath];
      const started = Date.now();
      const s = await startSweeper(args);
      const [due, written] = [new Map<string, number>(), new Map<string, number>()];
      const name = `start-${k}`;
      await fill.decisive(name, due, written);
      await waitFor(() => s.output().includes(WATCH_READY), 120_000, 'the cache synced');
      ready.push((Date.now() - started) / 1000);
      await waitFor(() => claimed.has(`${fill.decisiveNs}/${name}`) && due.has(name), 120_000, 'the decisive Job claimed');
      writes.push((claimed.get(`${fill.decisiveNs}/${name}`)! - due.get(name)!) / 1000);
      console.log(
        `start ${k + 1}: ready ${f2(ready.at(-1)!)} s after start, the decisive Job written ${f2(writes.at(-1)!)} s after its grace`,
      );
      await s.stop();
      unwatch();
    }
    console.log(
      `start-up (${STUCK} stuck, ${STARTS} starts): ready after start p50 ${f2(pct(ready, 50))} s (${ready.map(f2).join(', ')}); ` +
        `the decisive Job's first write after grace p50 ${f2(pct(writes, 50))} s, max ${f2(Math.max(...writes))} s (${writes.map(f2).join(', ')})`,
    );
  } finally {
    await fill.stop();
  }
}

async function takeover(cluster: Cluster): Promise<void> {
  const kc = cluster.kubeConfig;
  const raw = rawClient(kc);
  const core = kc.makeApiClient(CoreV1Api);
  const leases = kc.makeApiClient(CoordinationV1Api);
  const namespaces = await mapBounded([...Array(10).keys()], 4, async (i) => (await createNamespace(kc, `takeover-${i}`)).name);
  const leaseNs = (await createNamespace(kc, 'takeover-lease')).name;
  await createPods(raw, namespaces, 19_000, 'pending');
  const candidates = await createJobPods(raw, namespaces, 1_000, 'due', () => 'registry.invalid/team/app:does-not-exist');
  await mapBounded(candidates, 32, (p) => stuck(core, p, new Date(Date.now() - 3600_000), 'tag-missing', 'ImagePullBackOff'));
  // Another identity holds the Lease and renews it (MicroTime: six fractional digits).
  const leasePath = `/apis/coordination.k8s.io/v1/namespaces/${leaseNs}/leases`;
  const micro = () => new Date().toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
  await raw.request('POST', leasePath, {
    metadata: { name: 'imagepull-sweeper' },
    spec: { holderIdentity: 'bench-holder', leaseDurationSeconds: 15, acquireTime: micro(), renewTime: micro() },
  });
  const patchLease = (spec: Record<string, unknown>) =>
    raw.request('PATCH', `${leasePath}/imagepull-sweeper`, { spec }, 'application/merge-patch+json');
  let holding = true;
  const renewing = (async () => {
    while (holding) {
      await patchLease({ renewTime: micro() });
      await sleep(2_000);
    }
  })();
  const { claimed: claims, stop: unwatch } = claimsIn(kc, namespaces);
  const claimed = {
    get length() {
      return claims.size;
    },
    times: () => [...claims.values()],
  };
  const s = await startSweeper(leaderArgs(leaseNs, '--kubeconfig', cluster.kubeconfigPath));
  try {
    await waitFor(() => jsonLines(s.output()).some((l) => l.message === WATCH_READY), 600_000, 'the follower synced', 200);
    await sleep(10_000); // the pre-judgements
    holding = false;
    await renewing;
    await patchLease({ holderIdentity: null, leaseDurationSeconds: 1 });
    let tookAt = 0;
    await waitFor(
      async () => {
        const now = await leases.readNamespacedLease({ namespace: leaseNs, name: 'imagepull-sweeper' });
        if (now.spec?.holderIdentity && now.spec.holderIdentity !== 'bench-holder') tookAt = Date.now();
        return tookAt > 0;
      },
      60_000,
      'the follower took the Lease',
      20,
    );
    await waitFor(() => claimed.length > 0, 60_000, 'the first write', 20);
    const became = jsonLines(s.output()).find((x) => x.message === 'became the leader: sweeping');
    const becameAt = Date.parse(String(became?.timestamp ?? ''));
    console.log(
      `takeover (19,000 Pending + 1,000 due): first write ${((Math.min(...claimed.times()) - tookAt) / 1000).toFixed(2)} s after the Lease was seen taken (${Number.isNaN(becameAt) ? 'n/a' : ((Math.min(...claimed.times()) - becameAt) / 1000).toFixed(2)} s after its "became the leader" line); ${claimed.length} Jobs claimed within the period`,
    );
  } finally {
    holding = false;
    unwatch();
    await s.stop();
    raw.close();
  }
}

async function refused(cluster: Cluster): Promise<void> {
  const kc = cluster.kubeConfig;
  const core = kc.makeApiClient(CoreV1Api);
  const ns = (await createNamespace(kc, 'refused', { 'bench-refused': 'true' })).name;
  const raw = rawClient(kc);
  const vap = {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingAdmissionPolicy',
    metadata: { name: 'bench-refuse-job-updates' },
    spec: {
      failurePolicy: 'Fail',
      // The Job and its status: the FailureTarget status write and the fallback's patch alike.
      matchConstraints: {
        resourceRules: [{ apiGroups: ['batch'], apiVersions: ['v1'], operations: ['UPDATE'], resources: ['jobs', 'jobs/status'] }],
      },
      validations: [{ expression: 'false', message: 'this cluster does not let Jobs be changed' }],
    },
  };
  const binding = {
    apiVersion: 'admissionregistration.k8s.io/v1',
    kind: 'ValidatingAdmissionPolicyBinding',
    metadata: { name: 'bench-refuse-job-updates' },
    spec: {
      policyName: 'bench-refuse-job-updates',
      validationActions: ['Deny'],
      matchResources: { namespaceSelector: { matchLabels: { 'bench-refused': 'true' } } },
    },
  };
  await raw.request('POST', '/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies', vap);
  await raw.request('POST', '/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings', binding);
  await sleep(5_000); // the policy takes effect
  const pods = await createJobPods(raw, [ns], 5, 'refused', () => 'registry.invalid/team/app:does-not-exist');
  await mapBounded(pods, 8, (p) => stuck(core, p, new Date(Date.now() - 3600_000), 'tag-missing', 'ImagePullBackOff'));
  const dir = mkdtempSync(join(tmpdir(), 'bad-day-'));
  const policy = join(dir, 'policy.yaml');
  writeFileSync(policy, '{}\n');
  const s = await startSweeper([
    '--watch',
    '--schedule',
    '*/2 * * * *',
    '--namespace',
    ns,
    '--policy-file',
    policy,
    '--kubeconfig',
    cluster.kubeconfigPath,
  ]);
  await sleep(MINUTES * 60_000);
  await s.stop();
  const errors = jsonLines(s.output()).filter((l) => l.outcome === 'error');
  const perJob = pods.map((p) => errors.filter((l) => l.job === p.name).length);
  // The sweeper's Events only (the Job controller writes its own, one SuccessfulCreate per Job).
  const events = JSON.parse((await raw.request('GET', `/apis/events.k8s.io/v1/namespaces/${ns}/events`)).body) as {
    items: { reportingController?: string }[];
  };
  const sweepers = events.items.filter((e) => e.reportingController === 'imagepull-sweeper').length;
  console.log(
    `refused (${MINUTES} min): claim attempts per Job ${perJob.join(', ')} (max ${Math.max(...perJob)}); the sweeper's Events ${sweepers} (all Events ${events.items.length})`,
  );
  raw.close();
}

async function policyEdits(cluster: Cluster): Promise<void> {
  const kc = cluster.kubeConfig;
  const core = kc.makeApiClient(CoreV1Api);
  const raw = rawClient(kc);
  const ns = (await createNamespace(kc, 'policy-edit')).name;
  const cm = (grace: string) => ({
    metadata: { name: 'bench-policy' },
    data: { 'policy.yaml': `defaults: { grace: { permanent: ${grace} } }\n` },
  });
  await core.createNamespacedConfigMap({ namespace: ns, body: cm('10h') });
  const faults = await startFaults(cluster, 0);
  const s = await startSweeper([
    '--watch',
    '--schedule',
    '0 0 1 1 *',
    '--namespace',
    ns,
    '--policy-configmap',
    `${ns}/bench-policy`,
    '--kubeconfig',
    faults.kubeconfig,
  ]);
  const { claimed: claims, stop: unwatch } = claimsIn(kc, [ns]);
  const claimed = { has: (name: string) => claims.has(`${ns}/${name}`), get: (name: string) => claims.get(`${ns}/${name}`) };
  const stopFaults = faults.begin();
  const delays: number[] = [];
  try {
    await waitFor(() => jsonLines(s.output()).some((l) => l.message === 'summary'), 120_000, 'the first sweep', 100);
    for (let i = 0; i < 5; i += 1) {
      // A Job stuck 10 minutes: the edit to a 5m grace makes it due at once.
      const [p] = await createJobPods(raw, [ns], 1, `edit-${i}`, () => 'registry.invalid/team/app:does-not-exist');
      await stuck(core, p!, new Date(Date.now() - 600_000), 'tag-missing', 'ImagePullBackOff');
      await sleep(3_000 + Math.random() * 10_000);
      const editedAt = Date.now();
      await core.replaceNamespacedConfigMap({ namespace: ns, name: 'bench-policy', body: cm('5m') });
      await waitFor(() => claimed.has(`edit-${i}-0`), 60_000, 'the edit applied', 20);
      delays.push((claimed.get(`edit-${i}-0`)! - editedAt) / 1000);
      await core.replaceNamespacedConfigMap({ namespace: ns, name: 'bench-policy', body: cm('10h') });
      await sleep(2_000);
    }
  } finally {
    const injected = stopFaults();
    unwatch();
    await s.stop();
    await faults.proxy.close();
    raw.close();
    console.log(
      `policy edits with watches cut every 10 s (${injected.cuts} cuts): edit -> first write ${delays.map(f2).join(', ')} s (max ${f2(Math.max(...delays))} s)`,
    );
  }
}

/**
 * Three replicas of `run --watch --leader-elect` through the fault proxy (a share of every request
 * faulted, every watch cut every 10 s); the leader SIGKILLed after each 20 s of tenure and started
 * again, as a Deployment would. 200 stuck Jobs in waves (20 every 6 s) with a 5 s grace, 30 controls.
 */
async function failover(cluster: Cluster): Promise<void> {
  const kc = cluster.kubeConfig;
  const batch = kc.makeApiClient(BatchV1Api);
  const core = kc.makeApiClient(CoreV1Api);
  const leases = kc.makeApiClient(CoordinationV1Api);
  const namespaces = await mapBounded([...Array(10).keys()], 4, async (i) => (await createNamespace(kc, `failover-${i}`)).name);
  const leaseNs = (await createNamespace(kc, 'failover-lease')).name;
  const dir = mkdtempSync(join(tmpdir(), 'bad-day-'));
  const policy = join(dir, 'policy.yaml');
  writeFileSync(policy, 'defaults: { grace: { permanent: 5s } }\nlimits: { maxJobsPerSweep: 1000, maxJobsPerNamespace: 1000 }\n');
  const faults = await startFaults(cluster, FAULT_RATE);
  const jobs = Array.from({ length: 200 }, (_, i) => ({ namespace: namespaces[i % 10]!, name: `stuck-${i}` }));
  await mapBounded(jobs, 16, (j) =>
    batch.createNamespacedJob({ namespace: j.namespace, body: jobManifest(j.name, 'registry.invalid/team/app:does-not-exist') }),
  );
  const podOf = new Map<string, string>();
  await mapBounded(jobs, 16, async (j) =>
    podOf.set(`${j.namespace}/${j.name}`, (await waitForJobPods(core, j.namespace, j.name))[0]!.metadata!.name!),
  );
  const healthy = await createHealthyJobs(kc, namespaces, 30);
  const { claimed, stop: unwatch } = claimsIn(kc, namespaces);
  // As the issue measured it: a slow answer (3 s) outlasts the request timeout.
  const args = leaderArgs(leaseNs, '--policy-file', policy, '--kubeconfig', faults.kubeconfig, '--request-timeout', '2s');
  const replicas: Sweeper[] = [];
  const names: string[] = [];
  for (let i = 0; i < 3; i += 1) {
    names.push(`replica-${i}`);
    replicas.push(await startSweeper(args, { POD_NAME: names[i]! }));
  }
  const everyReplica = [...replicas];
  const output = () => everyReplica.map((r) => r.output()).join('');
  const kills: number[] = [];
  const exits: number[] = [];
  /** Every replica killed or gone on its own (a lost Lease exits 1), with the name it ran under: a follower's exit is no change of leader. */
  const deaths: { at: number; name: string }[] = [];
  const holders: { at: number; holder: string }[] = [];
  let running = true;
  // The killer: whoever holds the Lease for 20 s is SIGKILLed and replaced.
  const killer = (async () => {
    let holder = '';
    let since = Date.now();
    while (running) {
      await sleep(250);
      const lease = await leases.readNamespacedLease({ namespace: leaseNs, name: 'imagepull-sweeper' }).catch(() => undefined);
      const now = lease?.spec?.holderIdentity ?? '';
      if (now !== holder) {
        [holder, since] = [now, Date.now()];
        holders.push({ at: since, holder });
      }
      // A replica that exited (a lost Lease exits 1) is started again, as its Deployment would.
      for (let r = 0; r < replicas.length; r += 1) {
        if (replicas[r]!.child.exitCode === null) continue;
        exits.push(replicas[r]!.child.exitCode!);
        deaths.push({ at: Date.now(), name: names[r]! });
        names[r] = `replica-${r}-r${exits.length}`;
        replicas[r] = await startSweeper(args, { POD_NAME: names[r]! });
        everyReplica.push(replicas[r]!);
      }
      if (!holder || Date.now() - since < 20_000) continue;
      const i = names.findIndex((n) => holder.startsWith(`${n}_`));
      if (i < 0) continue;
      replicas[i]!.child.kill('SIGKILL');
      kills.push(Date.now());
      deaths.push({ at: Date.now(), name: names[i]! });
      names[i] = `replica-${i}-${kills.length}`;
      replicas[i] = await startSweeper(args, { POD_NAME: names[i]! });
      everyReplica.push(replicas[i]!);
      holder = '';
    }
  })();
  const stopFaults = faults.begin();
  const due = new Map<string, number>();
  // When each Job's stuck status was written, and when a watch of the bench first saw it: the
  // part of a figure before the sweeper can know, when a status lands after its grace.
  const written = new Map<string, number>();
  const landed = new Map<string, number>();
  try {
    for (let wave = 0; wave < 10; wave += 1) {
      await Promise.all(
        jobs.slice(wave * 20, wave * 20 + 20).map(async (j) => {
          const k = `${j.namespace}/${j.name}`;
          written.set(k, Date.now());
          const pod = await setImagePullStuck(core, j.namespace, podOf.get(k)!, {
            since: new Date(),
            stuck: [
              {
                container: 'main',
                reason: 'ErrImagePull',
                message: realPullMessage('tag-missing', 'registry.invalid/team/app:does-not-exist', 'ErrImagePull'),
              },
            ],
          });
          landed.set(k, Date.now());
          due.set(k, graceEnds(pod));
        }),
      );
      await sleep(6_000);
    }
    await waitFor(() => claimed.size >= jobs.length, 180_000, 'every Job claimed', 250).catch(() => undefined);
    const injected = stopFaults();
    await sleep(5_000);
    running = false;
    await killer;
    /**
     * When the bench first saw another replica hold the Lease after the one that died last held it
     * (Infinity: none did; -Infinity: the one that died never led).
     */
    const takenAfter = ({ at, name }: { at: number; name: string }): number => {
      const held = holders.findLastIndex((h) => h.at <= at && h.holder.startsWith(`${name}_`));
      if (held < 0) return -Infinity;
      return holders.slice(held + 1).find((h) => h.holder !== '' && !h.holder.startsWith(`${name}_`))?.at ?? Infinity;
    };
    const across: number[] = [];
    const lives: number[] = [];
    const livesSeen: number[] = [];
    // The part of a lives figure no sweeper can shorten (a stuck status that landed after grace), and the rest.
    const statusLanded: number[] = [];
    const afterLanded: number[] = [];
    const acrossTaken: number[] = [];
    // Due before the first replica took the Lease (the first wave meets the replicas starting): no leader lived yet.
    const firstTaken = holders.find((h) => h.holder !== '')?.at ?? Infinity;
    const beforeLeader: number[] = [];
    let early = 0;
    for (const [k, d] of due) {
      const c = claimed.get(k);
      if (c === undefined) continue;
      if (c < d) early += 1;
      if (d < firstTaken) {
        beforeLeader.push((c - firstTaken) / 1000);
        continue;
      }
      // Across a kill: the leader died before the Job's first write, and either the Job was due
      // before that or no new leader held the Lease yet when it fell due (the Lease changes hands a
      // lease duration after the last renewal seen, later when a renewal lands after its sender died).
      const death = deaths.find((x) => x.at <= c && d < takenAfter(x));
      const isAcross = death !== undefined;
      (isAcross ? across : lives).push((c - d) / 1000);
      const taken = isAcross ? takenAfter(death) : Infinity;
      if (taken !== Infinity) acrossTaken.push((c - Math.max(d, taken)) / 1000);
      if (!isAcross) {
        livesSeen.push((c - Math.max(d, written.get(k)!)) / 1000);
        statusLanded.push((landed.get(k)! - d) / 1000);
        afterLanded.push((c - Math.max(d, landed.get(k)!)) / 1000);
      }
    }
    const timeline = join(tmpdir(), `bad-day-failover-${process.pid}.json`);
    writeFileSync(
      timeline,
      JSON.stringify({
        due: [...due],
        claimed: [...claimed],
        kills,
        deaths,
        holders,
        written: [...written],
        landed: [...landed],
      }),
    );
    console.log(`failover timeline: ${timeline}`);
    // The replicas still run: an Event a kill cut short is written by the next leader's sweep.
    const eventsWaited = await waitForStuckEvents(kc, namespaces, jobs, 60_000);
    const counted = await countFaultOutcomes(kc, namespaces, jobs, healthy, output());
    console.log(
      `failover (faults ${FAULT_RATE}, ${kills.length} kills, ${exits.length} exits of their own [${exits.join(',')}], ${injected.cuts} watch cuts): first write after grace, leader lives p50 ${f2(pct(lives, 50))} s, p99 ${f2(pct(lives, 99))} s (${lives.length}; after grace or the stuck status's write, whichever is later: p50 ${f2(pct(livesSeen, 50))} s, p99 ${f2(pct(livesSeen, 99))} s; the stuck status landed p50 ${f2(pct(statusLanded, 50))} s after grace, and the first write came p50 ${f2(pct(afterLanded, 50))} s, p99 ${f2(pct(afterLanded, 99))} s after that); across a kill or a lost Lease p99 ${f2(pct(across, 99))} s (${across.length}; after the new leader took the Lease: p50 ${f2(pct(acrossTaken, 50))} s, p99 ${f2(pct(acrossTaken, 99))} s); due before the first leader took the Lease ${beforeLeader.length}, written after it p50 ${f2(pct(beforeLeader, 50))} s, max ${f2(Math.max(...beforeLeader))} s; ` +
        `unfailed ${counted.unfailed}, lost Events ${counted.lostEvents} (after waiting ${f2(eventsWaited)} s for owed ones), duplicate Events ${counted.duplicateEvents}, early ${early}, controls touched ${counted.healthyTouched}/30`,
    );
  } finally {
    running = false;
    unwatch();
    await Promise.all(everyReplica.map((r) => r.stop()));
    await faults.proxy.close();
  }
}

async function main(): Promise<void> {
  ensureBuilt();
  // The policy scenario cuts watches past etcd compactions: the watch cache off, as bench/latency-faults.ts.
  const cluster = await startCluster(
    SCENARIO === 'policy'
      ? { apiserverArgs: ['--watch-cache=false'] }
      : { controllerManagerArgs: ['--kube-api-qps=200', '--kube-api-burst=400'] },
  );
  try {
    if (SCENARIO === 'outage') await outage(cluster);
    else if (SCENARIO === 'takeover') await takeover(cluster);
    else if (SCENARIO === 'refused') await refused(cluster);
    else if (SCENARIO === 'policy') await policyEdits(cluster);
    else if (SCENARIO === 'failover') await failover(cluster);
    else if (SCENARIO === 'startup') await startups(cluster);
    else throw new Error(`--scenario ${SCENARIO}: outage, startup, takeover, refused, policy or failover`);
  } finally {
    await cluster.stop();
  }
}

await main();
