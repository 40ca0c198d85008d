// Prints figures; asserts nothing; not part of `npm test`.
//   npm run bench:scale -- --pods 50000 --stuck 1%            all Pending, 1% of them stuck Jobs
//   npm run bench:scale -- --pods 10000 --running 90% --stuck 1%
//   npm run bench:scale -- --pods 10000 --running 90% --restart-policy OnFailure   Running pods the sweep lists
//   npm run bench:scale -- --pods 1000 --namespaces 5000        pods in 20 namespaces, 4,980 empty
//   npm run bench:scale -- --jobs 1000 --kcm-qps 100            the batch case (real sweep)
// Options: --namespaces N (pods mode, default 20: the pods go in the first 20, the rest are empty), --runs N (default 3, medians printed), --kubeconfig FILE (use a running cluster, e.g.
// `npm run cluster:up`, instead of starting a fresh one), --failed-timeout SECONDS (default 900),
// --kcm-qps N (start kube-controller-manager with --kube-api-qps=N, burst 2N; default: its own 20).
//
// Pods mode, per run: the full-object LIST floor (bench/list-floor.ts: client-node, 500 a page,
// a process of its own) and `sweep --dry-run` (the built CLI, a process of its own), each under
// the image's environment (NODE_ENV), the shipped CronJob's NODE_OPTIONS and a hard memory cap
// equal to its memory limit (the sweep also with the node flags of the image's ENTRYPOINT), with wall time, CPU, peak RSS and the API server's
// apiserver_request_total diff by verb and resource.
// Jobs mode, per run: a real sweep failing N stuck Jobs, the time until the Job controller has
// marked them all Failed, and the writes floor on another N: bench/writes-floor.ts, a minimal
// client making the same writes a sweep made (its Job patches and Events, read back and
// addressed to the other batch), as many in flight, keep-alive, answers unread; the sweep's wall
// time over the writer's is the figure. Odd runs put the writer first, replaying the previous
// run's sweep, so neither always follows the setup. Every measured command starts on
// a quiet API server (no writes, and the API server and etcd under 10% of a core, for 3 s), so
// none pays for the setup's or another's aftermath.
import { spawn, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BatchV1Api, KubeConfig } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { startCluster } from '../test/support/cluster.ts';
import { mapBounded } from '../src/concurrency.ts';
import { passedDeadlineSeconds } from '../src/act/claim.ts';
import { createPods, createStuckJobs, markRunning, rawClient, type Raw } from './scale-setup.ts';
import { runtimeConfig } from '../test/support/dockerfile.ts';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const NAMESPACES = 20;
/** The sweep's writes in flight (src/sweep.ts CONCURRENT_WRITES). */
const WRITE_CONCURRENCY = 16;

function flag(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

/** `1%` of total, or a plain count. */
function amount(value: string | undefined, total: number): number {
  if (!value) return 0;
  return value.endsWith('%') ? Math.round((Number(value.slice(0, -1)) / 100) * total) : Number(value);
}

const jobsMode = flag('jobs') !== undefined;
const totalPods = Number(flag('pods') ?? 10_000);
const stuckCount = jobsMode ? Number(flag('jobs')) : amount(flag('stuck') ?? '1%', totalPods);
const runningCount = jobsMode ? 0 : amount(flag('running'), totalPods);
/** The plain pods' restartPolicy (default Never): the sweep lists the Running pods of OnFailure only. */
const restartPolicy = flag('restart-policy') ?? 'Never';
const runs = Number(flag('runs') ?? 3);
const failedTimeoutS = Number(flag('failed-timeout') ?? 900);
const kcmQps = flag('kcm-qps');
/** Pods mode: namespaces in all; the pods are in the first 20, the rest are empty. */
const namespaceCount = Number(flag('namespaces') ?? NAMESPACES);

// ---- the shipped CronJob's limits -------------------------------------------------------------
interface Shipped {
  nodeOptions: string;
  memoryLimitBytes: number;
  memoryLimit: string;
}

function shippedLimits(): Shipped {
  const docs = parseAllDocuments(fs.readFileSync(path.join(ROOT, 'manifests', 'cronjob.yaml'), 'utf8'));
  for (const doc of Array.isArray(docs) ? docs : [docs]) {
    const obj = doc.toJS() as {
      kind?: string;
      spec?: { jobTemplate?: { spec?: { template?: { spec?: { containers?: unknown[] } } } } };
    } | null;
    if (obj?.kind !== 'CronJob') continue;
    const c = obj.spec?.jobTemplate?.spec?.template?.spec?.containers?.[0] as {
      env?: { name: string; value?: string }[];
      resources?: { limits?: { memory?: string } };
    };
    const memoryLimit = c.resources?.limits?.memory ?? '';
    return {
      nodeOptions: c.env?.find((e) => e.name === 'NODE_OPTIONS')?.value ?? '',
      memoryLimit,
      memoryLimitBytes: quantityBytes(memoryLimit),
    };
  }
  throw new Error('manifests/cronjob.yaml: no CronJob');
}

const image = runtimeConfig();
if (image.entrypoint[0] !== 'node') throw new Error(`Dockerfile ENTRYPOINT runs ${image.entrypoint[0]}, not node`);
/** The flags the image's ENTRYPOINT gives node before the CLI (`node <flags> main.js`). */
const imageNodeFlags = image.entrypoint.slice(1).filter((a) => a.startsWith('-'));

function quantityBytes(q: string): number {
  const m = /^(\d+)(Ki|Mi|Gi)?$/.exec(q);
  if (!m) throw new Error(`memory limit ${q}: not understood`);
  return Number(m[1]) * ({ Ki: 1024, Mi: 1024 ** 2, Gi: 1024 ** 3 }[m[2] as 'Ki' | 'Mi' | 'Gi'] ?? 1);
}

// ---- a hard memory cap: a cgroup of its own for each measured process ------------------------
interface Cap {
  kind: string;
  /** Wraps argv so the process starts inside the cgroup. */
  wrap(argv: string[]): string[];
  /** Peak usage charged to the cgroup (bytes), times the limit was hit, and removes it. */
  finish(): { peakBytes: number | undefined; limitHits: number | undefined };
}

function memoryCap(limitBytes: number, label: string): Cap {
  const v2 = '/sys/fs/cgroup';
  const v1 = '/sys/fs/cgroup/memory';
  const name = `imagepull-sweeper-bench-${label}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
  const enter = (dir: string) => (argv: string[]) => ['sh', '-c', `echo $$ > ${dir}/cgroup.procs && exec "$@"`, 'sh', ...argv];
  const read = (file: string): number | undefined => {
    try {
      return Number(fs.readFileSync(file, 'utf8').trim().split(/\s+/).pop());
    } catch {
      return undefined;
    }
  };
  try {
    if (fs.existsSync(`${v2}/cgroup.controllers`) && fs.readFileSync(`${v2}/cgroup.controllers`, 'utf8').includes('memory')) {
      const dir = `${v2}/${name}`;
      fs.mkdirSync(dir);
      fs.writeFileSync(`${dir}/memory.max`, String(limitBytes));
      fs.writeFileSync(`${dir}/memory.swap.max`, '0');
      return {
        kind: `cgroup v2 memory.max=${limitBytes}`,
        wrap: enter(dir),
        finish: () => {
          const peakBytes = read(`${dir}/memory.peak`);
          const events = fs.readFileSync(`${dir}/memory.events`, 'utf8');
          fs.rmdirSync(dir);
          return { peakBytes, limitHits: Number(/^max (\d+)/m.exec(events)?.[1] ?? 0) };
        },
      };
    }
    if (fs.existsSync(`${v1}/memory.limit_in_bytes`)) {
      const dir = `${v1}/${name}`;
      fs.mkdirSync(dir);
      fs.writeFileSync(`${dir}/memory.limit_in_bytes`, String(limitBytes));
      if (fs.existsSync(`${dir}/memory.memsw.limit_in_bytes`)) fs.writeFileSync(`${dir}/memory.memsw.limit_in_bytes`, String(limitBytes));
      return {
        kind: `cgroup v1 memory.limit_in_bytes=${limitBytes}`,
        wrap: enter(dir),
        finish: () => {
          const out = { peakBytes: read(`${dir}/memory.max_usage_in_bytes`), limitHits: read(`${dir}/memory.failcnt`) };
          fs.rmdirSync(dir);
          return out;
        },
      };
    }
  } catch (error) {
    console.log(`(no cgroup memory cap: ${(error as Error).message}; measuring unconstrained)`);
  }
  return { kind: 'none (no writable memory cgroup)', wrap: (argv) => argv, finish: () => ({ peakBytes: undefined, limitHits: undefined }) };
}

// ---- measured processes --------------------------------------------------------------------
interface Measured {
  /** Date.now() at spawn: the sweep's audit lines carry wall-clock timestamps. */
  startedAtMs: number;
  wallMs: number;
  cpuMs: number;
  maxRssKb: number;
  exitCode: number;
  stdout: string;
  cgroupPeakBytes: number | undefined;
  limitHits: number | undefined;
}

async function measure(argv: string[], env: NodeJS.ProcessEnv, cap: Cap): Promise<Measured> {
  const timeFile = path.join(os.tmpdir(), `scale-bench-time-${process.pid}-${Math.random().toString(36).slice(2)}`);
  const full = cap.wrap(['/usr/bin/time', '-f', '%e %U %S %M', '-o', timeFile, ...argv]);
  const started = performance.now();
  const startedAtMs = Date.now();
  const child = spawn(full[0]!, full.slice(1), { env, stdio: ['ignore', 'pipe', 'inherit'], cwd: ROOT });
  let stdout = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (d: string) => (stdout += d));
  const exitCode = await new Promise<number>((resolve) =>
    child.on('close', (code, signal) => resolve(code ?? (signal === 'SIGKILL' ? 137 : 1))),
  );
  const wallMs = performance.now() - started;
  const cg = cap.finish();
  const [, user, sys, rss] = fs.readFileSync(timeFile, 'utf8').trim().split('\n').pop()!.split(' ').map(Number);
  fs.rmSync(timeFile, { force: true });
  return {
    startedAtMs,
    wallMs,
    cpuMs: (user! + sys!) * 1000,
    maxRssKb: rss!,
    exitCode,
    stdout,
    cgroupPeakBytes: cg.peakBytes,
    limitHits: cg.limitHits,
  };
}

/**
 * When the sweep's first and last Job were done, from its start: audit lines are written as each
 * Job's writes land, with wall-clock timestamps. What comes before the first is start-up and reads.
 */
interface WritePhases {
  firstMs: number;
  lastMs: number;
}

function writePhases(startedAtMs: number, lines: { message?: string; timestamp?: string }[]): WritePhases {
  const at = lines.filter((l) => l.message === 'decision' && l.timestamp).map((l) => Date.parse(l.timestamp!) - startedAtMs);
  return { firstMs: Math.min(...at), lastMs: Math.max(...at) };
}

// ---- apiserver_request_total ---------------------------------------------------------------
type Counts = Map<string, number>;

async function requestCounts(raw: Raw): Promise<Counts> {
  const res = await raw.request('GET', '/metrics');
  const counts: Counts = new Map();
  for (const line of res.body.split('\n')) {
    if (!line.startsWith('apiserver_request_total{')) continue;
    const labels = Object.fromEntries([...line.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
    const key = `${labels.verb} ${labels.resource}${labels.subresource ? `/${labels.subresource}` : ''}`;
    counts.set(key, (counts.get(key) ?? 0) + Number(line.split(' ').pop()));
  }
  return counts;
}

function diffCounts(before: Counts, after: Counts): string {
  const parts: string[] = [];
  for (const [key, n] of [...after].sort()) {
    const d = n - (before.get(key) ?? 0);
    // Watches, discovery and leases are the controller manager's background, not the measured process.
    if (d > 0 && !/^WATCH |^\S+ \/| (leases|metrics)$/.test(key)) parts.push(`${key}=${d}`);
  }
  return parts.join(', ') || 'none';
}

const PROBE_BYTES = Buffer.alloc(32 * 1024 * 1024, 7);
const PROBE_ROUNDS = 8;
const PROBE_MB = (PROBE_ROUNDS * PROBE_BYTES.length) / 1024 ** 2;

/**
 * Milliseconds to hash the same PROBE_MB in this process: fixed work, so a slow minute of the
 * machine shows next to the command measured after it (docs/performance.md).
 */
function machineProbeMs(): number {
  const started = performance.now();
  const hash = createHash('sha256');
  for (let i = 0; i < PROBE_ROUNDS; i++) hash.update(PROBE_BYTES);
  hash.digest();
  return performance.now() - started;
}

/** Share of one core the idle API server and etcd stay under (a 150k-pod cluster idles at a few percent). */
const QUIET_CPU = 0.1;

/**
 * Waits until the API server has taken no writes for 3 s (leases aside) and, when the bench
 * started the cluster, the API server and etcd used under QUIET_CPU of a core in those 3 s: the
 * controllers have caught up with the setup (the Job controller creating pods and updating Job
 * status at its own client QPS), and the server has digested the previous command (a 150k-pod
 * LIST keeps it busy for seconds after its answer), so the measured command has the server to
 * itself. Gives up after 10 minutes.
 */
async function waitQuiet(raw: Raw, what: string): Promise<void> {
  const started = Date.now();
  const writes = (c: Counts): number =>
    [...c].filter(([k]) => /^(POST|PUT|PATCH|DELETE|APPLY) /.test(k) && !/ leases$/.test(k)).reduce((n, [, v]) => n + v, 0);
  const serverCpu = (): number => {
    const used = controlPlaneCpu();
    return (used.get('kube-apiserver') ?? 0) + (used.get('etcd') ?? 0);
  };
  let last = writes(await requestCounts(raw));
  let lastCpu = serverCpu();
  while (Date.now() - started < 600_000) {
    await new Promise((r) => setTimeout(r, 3000));
    const now = writes(await requestCounts(raw));
    const cpu = serverCpu();
    const cpuShare = (cpu - lastCpu) / 3;
    if (now === last && cpuShare < QUIET_CPU) {
      console.log(
        `  API server quiet before ${what} (${s(Date.now() - started)} waited; API server and etcd at ${(cpuShare * 100).toFixed(0)}% of a core; ` +
          `machine probe: ${PROBE_MB} MB hashed in ${machineProbeMs().toFixed(0)} ms)`,
      );
      return;
    }
    last = now;
    lastCpu = cpu;
  }
  console.log(`  API server still busy before ${what} after 10 minutes; measuring anyway`);
}

const CLOCK_TICKS = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

/** CPU seconds each control-plane process has used so far (/proc), when the bench started the cluster. */
function controlPlaneCpu(): Map<string, number> {
  const used = new Map<string, number>();
  if (!cluster) return used;
  for (const [name, pid] of Object.entries(cluster.state.pids)) {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    // Fields after "(comm) ": state is the first, utime the 12th, stime the 13th.
    const fields = stat.slice(stat.lastIndexOf(') ') + 2).split(' ');
    used.set(name, (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS);
  }
  return used;
}

function cpuDiff(before: Map<string, number>, after: Map<string, number>): string {
  return [...after].map(([name, t]) => `${name} ${(t - (before.get(name) ?? 0)).toFixed(2)} s`).join(', ') || 'not measured (--kubeconfig)';
}

// ---- helpers -----------------------------------------------------------------------------------
const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};
/** /usr/bin/time and cgroups count KiB; printed in MiB, the unit of a container memory limit. */
const mb = (kb: number): string => `${(kb / 1024).toFixed(0)} MiB`;
const s = (ms: number): string => `${(ms / 1000).toFixed(2)} s`;

async function run(cmd: string, args: string[]): Promise<void> {
  const child = spawn(cmd, args, { stdio: 'inherit', cwd: ROOT });
  const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
  if (code !== 0) throw new Error(`${cmd} ${args.join(' ')} exited ${code}`);
}

/** Namespaces nothing runs in (no wait for their ServiceAccount). */
async function makeEmptyNamespaces(raw: Raw, prefix: string, count: number): Promise<void> {
  await mapBounded(
    Array.from({ length: count }, (_, i) => `${prefix}-${i}`),
    32,
    async (name) => {
      const res = await raw.request('POST', '/api/v1/namespaces', { metadata: { name } });
      if (res.status !== 201 && res.status !== 409) throw new Error(`create namespace ${name}: HTTP ${res.status}`);
    },
  );
}

async function makeNamespaces(raw: Raw, prefix: string, count: number): Promise<string[]> {
  const names = Array.from({ length: count }, (_, i) => `${prefix}-${i}`);
  for (const name of names) await raw.request('POST', '/api/v1/namespaces', { metadata: { name } });
  for (const name of names) {
    for (let i = 0; i < 300; i++) {
      if ((await raw.request('GET', `/api/v1/namespaces/${name}/serviceaccounts/default`)).status === 200) break;
      await new Promise((r) => setTimeout(r, 200));
    }
  }
  return names;
}

// ---- the writes floor -------------------------------------------------------------------------
const noCap: Cap = { kind: 'none', wrap: (a) => a, finish: () => ({ peakBytes: undefined, limitHits: undefined }) };

type Obj = {
  metadata?: {
    name?: string;
    namespace?: string;
    uid?: string;
    resourceVersion?: string;
    annotations?: Record<string, string>;
    labels?: Record<string, string>;
  };
  [k: string]: unknown;
};

function startTimeOf(job: Obj): Date | undefined {
  const started = (job.status as { startTime?: string } | undefined)?.startTime;
  return started ? new Date(started) : undefined;
}

async function listAll(raw: Raw, path: string): Promise<Obj[]> {
  const res = await raw.request('GET', path);
  if (res.status !== 200) throw new Error(`GET ${path}: HTTP ${res.status}`);
  return (JSON.parse(res.body) as { items: Obj[] }).items;
}

/**
 * What the sweep wrote to each of its Jobs (read back: its patch's annotations, label and
 * deadline, and its Event), addressed to the same-named Job of the other batch: the writes floor's
 * plan. The patch keeps the sweep's resourceVersion precondition, with the other Job's version, and
 * its deadline is one the other Job has passed.
 */
async function writesPlan(raw: Raw, kc: KubeConfig, swept: string[], target: string[]): Promise<{ file: string; jobs: number }> {
  const chains: { method: string; path: string; contentType: string; body: string }[][] = [];
  for (const [i, ns] of swept.entries()) {
    const events = (await listAll(raw, `/apis/events.k8s.io/v1/namespaces/${ns}/events`)).filter(
      (e) => e.reason === 'ImagePullStuck' && (e.regarding as { kind?: string } | undefined)?.kind === 'Job',
    );
    const eventOf = new Map(events.map((e) => [(e.regarding as { name: string }).name, e]));
    const targets = new Map((await listAll(raw, `/apis/batch/v1/namespaces/${target[i]}/jobs`)).map((j) => [j.metadata!.name!, j]));
    for (const job of await listAll(raw, `/apis/batch/v1/namespaces/${ns}/jobs`)) {
      const other = targets.get(job.metadata!.name!);
      const event = eventOf.get(job.metadata!.name!);
      if (!other || !event) continue;
      const mine = (o: Record<string, string> | undefined) =>
        Object.fromEntries(Object.entries(o ?? {}).filter(([k]) => k.startsWith('imagepull-sweeper/')));
      const patch = {
        metadata: {
          resourceVersion: other.metadata!.resourceVersion,
          annotations: mine(job.metadata!.annotations),
          labels: mine(job.metadata!.labels),
        },
        // Passed for the target Job, as the sweep's was for its own: the Job controller fails it at
        // once, within the writer's window, however old the swept Jobs were.
        spec: { activeDeadlineSeconds: passedDeadlineSeconds({ startTime: startTimeOf(other) }, new Date()) },
      };
      const { metadata, regarding, related, ...rest } = event as Obj & {
        regarding: Record<string, unknown>;
        related?: Record<string, unknown>;
      };
      const copy = {
        ...rest,
        metadata: { name: metadata!.name, namespace: target[i] },
        regarding: { ...regarding, namespace: target[i], uid: other.metadata!.uid },
        ...(related ? { related: { ...related, namespace: target[i] } } : {}),
      };
      delete (copy as Record<string, unknown>).deprecatedFirstTimestamp;
      delete (copy as Record<string, unknown>).deprecatedLastTimestamp;
      delete (copy as Record<string, unknown>).deprecatedCount;
      delete (copy as Record<string, unknown>).deprecatedSource;
      chains.push([
        {
          method: 'PATCH',
          path: `/apis/batch/v1/namespaces/${target[i]}/jobs/${other.metadata!.name}`,
          contentType: 'application/merge-patch+json',
          body: JSON.stringify(patch),
        },
        {
          method: 'POST',
          path: `/apis/events.k8s.io/v1/namespaces/${target[i]}/events`,
          contentType: 'application/json',
          body: JSON.stringify(copy),
        },
      ]);
    }
  }
  const cluster = kc.getCurrentCluster()!;
  const file = path.join(os.tmpdir(), `scale-bench-writes-${process.pid}.json`);
  const plan = {
    server: cluster.server,
    ca: Buffer.from(cluster.caData ?? '', 'base64').toString(),
    token: kc.getCurrentUser()!.token,
    concurrency: WRITE_CONCURRENCY,
    chains,
  };
  fs.writeFileSync(file, JSON.stringify(plan), { mode: 0o600 });
  return { file, jobs: chains.length };
}

// ---- main ------------------------------------------------------------------------------------
const shipped = shippedLimits();
console.log(
  `node ${process.version}, ${os.cpus().length} CPUs, load average ${os
    .loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')}, ${new Date().toISOString()}\n` +
    `shipped CronJob: NODE_OPTIONS="${shipped.nodeOptions}", limits.memory ${shipped.memoryLimit}; the image's environment: ${JSON.stringify(image.env)}; the image's node flags: ${imageNodeFlags.join(' ')}`,
);
await run('npm', ['run', 'build']);

const given = flag('kubeconfig');
const cluster = given
  ? undefined
  : await startCluster({ controllerManagerArgs: kcmQps ? [`--kube-api-qps=${kcmQps}`, `--kube-api-burst=${2 * Number(kcmQps)}`] : [] });
const kubeconfigPath = given ?? cluster!.kubeconfigPath;
const kc = new KubeConfig();
kc.loadFromFile(kubeconfigPath);
const raw = rawClient(kc);
const childEnv = { ...process.env, ...image.env, NODE_OPTIONS: shipped.nodeOptions };
const policyPath = path.join(os.tmpdir(), `scale-bench-policy-${process.pid}.yaml`);
fs.writeFileSync(policyPath, `limits: { maxJobsPerSweep: ${stuckCount + 1}, maxJobsPerNamespace: ${stuckCount + 1} }\n`);
const sweepArgv = (extra: string[]) => [
  'node',
  ...imageNodeFlags,
  'dist/src/cli/main.js',
  'sweep',
  '--kubeconfig',
  kubeconfigPath,
  '--policy-file',
  policyPath,
  '--output',
  'json',
  ...extra,
];

try {
  if (!jobsMode) {
    const setupStarted = Date.now();
    const tag = Date.now().toString(36);
    const namespaces = await makeNamespaces(raw, `scale-${tag}`, Math.min(NAMESPACES, namespaceCount));
    await makeEmptyNamespaces(raw, `empty-${tag}`, namespaceCount - namespaces.length);
    const plain = await createPods(raw, namespaces, totalPods - stuckCount, 'pod', restartPolicy);
    if (runningCount > 0) await markRunning(kc, plain.slice(0, runningCount));
    await createStuckJobs(kc, namespaces, stuckCount, 'stuck');
    console.log(
      `setup: ${totalPods} pods (${stuckCount} of stuck Jobs, ${runningCount} Running, the rest Pending; restartPolicy ${restartPolicy}) in ${namespaces.length} namespaces, ${namespaceCount - namespaces.length} more namespaces empty, ${s(Date.now() - setupStarted)}`,
    );
    const rows: { floor: Measured & { listMs: number }; sweep: Measured; floorReq: string; sweepReq: string; capKind: string }[] = [];
    for (let r = 0; r < runs; r++) {
      // Alternate the order so neither always runs on a warmer server.
      const order = r % 2 === 0 ? (['floor', 'sweep'] as const) : (['sweep', 'floor'] as const);
      const out: Partial<(typeof rows)[number]> = {};
      for (const what of order) {
        await waitQuiet(raw, what);
        const cap = memoryCap(shipped.memoryLimitBytes, what);
        out.capKind = cap.kind;
        const before = await requestCounts(raw);
        if (what === 'floor') {
          const m = await measure(['node', 'bench/list-floor.ts', kubeconfigPath], childEnv, cap);
          out.floorReq = diffCounts(before, await requestCounts(raw));
          out.floor = { ...m, listMs: (JSON.parse(m.stdout.trim().split('\n').pop() ?? '{}') as { listMs?: number }).listMs ?? NaN };
        } else {
          const m = await measure(sweepArgv(['--dry-run']), childEnv, cap);
          out.sweepReq = diffCounts(before, await requestCounts(raw));
          out.sweep = m;
          const summary = m.stdout
            .trim()
            .split('\n')
            .map((l) => JSON.parse(l) as Record<string, unknown>)
            .find((l) => l.message === 'summary');
          if (!summary) console.log(`  sweep printed no summary (exit ${m.exitCode})`);
          else if (r === 0)
            console.log(
              `  sweep summary: podsScanned ${String(summary.podsScanned)}, stuckContainers ${String(summary.stuckContainers)}, decisions ${String(summary.decisions)}`,
            );
        }
      }
      const row = out as (typeof rows)[number];
      rows.push(row);
      console.log(
        `run ${r + 1}: floor ${s(row.floor.wallMs)} process (LIST ${s(row.floor.listMs)}), CPU ${s(row.floor.cpuMs)}, ${mb(row.floor.maxRssKb)} peak RSS, exit ${row.floor.exitCode} | ` +
          `sweep --dry-run ${s(row.sweep.wallMs)}, CPU ${s(row.sweep.cpuMs)}, ${mb(row.sweep.maxRssKb)} peak RSS (cgroup peak ${row.sweep.cgroupPeakBytes ? mb(row.sweep.cgroupPeakBytes / 1024) : '-'}, limit hits ${row.sweep.limitHits ?? '-'}), exit ${row.sweep.exitCode} | ratio ${(row.sweep.wallMs / row.floor.wallMs).toFixed(2)}`,
      );
      console.log(`  requests, floor: ${row.floorReq}\n  requests, sweep: ${row.sweepReq}`);
    }
    const floorWall = median(rows.map((r) => r.floor.wallMs));
    const floorList = median(rows.map((r) => r.floor.listMs));
    const sweepWall = median(rows.map((r) => r.sweep.wallMs));
    console.log(
      `\nmedian of ${runs} (memory cap: ${rows[0]?.capKind}):\n` +
        `| scenario | full-object paged LIST (client-node, 500/page) | sweep --dry-run | ratio | sweep peak RSS | floor peak RSS |\n|---|---|---|---|---|---|\n` +
        `| ${totalPods} pods, ${runningCount ? `${Math.round((runningCount / totalPods) * 100)}% Running` : 'all Pending'}, ${stuckCount} stuck, ${namespaceCount} namespaces | ` +
        `${s(floorWall)} process (LIST alone ${s(floorList)}) | ${s(sweepWall)} (CPU ${s(median(rows.map((r) => r.sweep.cpuMs)))}) | ` +
        `${(sweepWall / floorWall).toFixed(2)} (vs LIST alone ${(sweepWall / floorList).toFixed(2)}) | ${mb(median(rows.map((r) => r.sweep.maxRssKb)))} | ${mb(median(rows.map((r) => r.floor.maxRssKb)))} |`,
    );
  } else {
    const rows: {
      sweep: Measured;
      writer: Measured & { writeMs: number };
      failedAfterMs: number | undefined;
      sweepCp: string;
      writerCp: string;
      writerFirst: boolean;
      phases: WritePhases;
    }[] = [];
    /** The swept namespaces of the last sweep: the writer's plan when it goes first. */
    let lastSwept: string[] | undefined;
    for (let r = 0; r < runs; r++) {
      const setupStarted = Date.now();
      const tag = `${Date.now().toString(36)}-${r}`;
      const sweepNs = await makeNamespaces(raw, `batch-s-${tag}`, 10);
      const writerNs = await makeNamespaces(raw, `batch-w-${tag}`, 10);
      await createStuckJobs(kc, sweepNs, stuckCount, 'job');
      await createStuckJobs(kc, writerNs, stuckCount, 'job');
      // Alternate the order so neither always runs on the server just after the setup. The writer
      // can go first from the second run on: its plan is the previous sweep's writes.
      const writerFirst = r % 2 === 1 && lastSwept !== undefined;
      console.log(
        `run ${r + 1}: setup 2 × ${stuckCount} stuck Jobs (one batch for the sweep, one for the minimal writer), ${s(Date.now() - setupStarted)}; ` +
          (writerFirst ? "the writer first (the previous sweep's writes)" : 'the sweep first'),
      );
      const writerRun = async (planFrom: string[]) => {
        const plan = await writesPlan(raw, kc, planFrom, writerNs);
        await waitQuiet(raw, 'the minimal writer');
        const writerBefore = await requestCounts(raw);
        const writerCpuBefore = controlPlaneCpu();
        const written = await measure(['node', 'bench/writes-floor.ts', plan.file], process.env, noCap);
        const writerCp = cpuDiff(writerCpuBefore, controlPlaneCpu());
        fs.rmSync(plan.file, { force: true });
        const out = JSON.parse(written.stdout.trim().split('\n').pop() ?? '{}') as {
          requests?: number;
          failures?: number;
          writeMs?: number;
        };
        const writer = { ...written, writeMs: out.writeMs ?? NaN };
        console.log(
          `  minimal writer (the sweep's ${plan.jobs} Job patches and Events, ${WRITE_CONCURRENCY} in flight, keep-alive, answers unread): exit ${written.exitCode}, ` +
            `${out.requests} requests, ${out.failures} non-2xx; ${s(written.wallMs)} wall (writes alone ${s(writer.writeMs)}), ${s(written.cpuMs)} CPU, ${mb(written.maxRssKb)} peak RSS` +
            `\n  requests: ${diffCounts(writerBefore, await requestCounts(raw))}\n  control plane CPU during the writer: ${writerCp}`,
        );
        return { writer, writerCp };
      };
      // The second command starts after the Job controller has finished with the first one's
      // Jobs, on a quiet server: neither competes with the other's aftermath.
      const first = writerFirst ? await writerRun(lastSwept!) : undefined;
      if (first) await watchFailed(kc, writerNs, stuckCount, Date.now());

      await waitQuiet(raw, 'the sweep');
      const cap = memoryCap(shipped.memoryLimitBytes, 'sweep');
      const before = await requestCounts(raw);
      const cpuBefore = controlPlaneCpu();
      const sweep = await measure(sweepArgv(sweepNs.flatMap((n) => ['--namespace', n])), childEnv, cap);
      const sweptAt = Date.now();
      const cpuDuring = cpuDiff(cpuBefore, controlPlaneCpu());
      const requests = diffCounts(before, await requestCounts(raw));
      const lines = sweep.stdout
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as { message?: string; outcomes?: Record<string, number>; timestamp?: string });
      const summary = lines.find((l) => l.message === 'summary');
      const phases = writePhases(sweep.startedAtMs, lines);
      console.log(
        `  sweep: ${summary?.outcomes?.failed ?? '?'} failed, ${summary?.outcomes?.error ?? '?'} errors, exit ${sweep.exitCode}; ${s(sweep.wallMs)} wall, ${s(sweep.cpuMs)} CPU, ${mb(sweep.maxRssKb)} peak RSS` +
          `\n  sweep's writes: the first Job's done ${s(phases.firstMs)} after start, the last ${s(phases.lastMs)} (${s(phases.lastMs - phases.firstMs)} between them)` +
          `\n  requests: ${requests}` +
          `\n  control plane CPU during the sweep: ${cpuDuring} (${os.cpus().length} CPUs × ${s(sweep.wallMs)} wall = ${((os.cpus().length * sweep.wallMs) / 1000).toFixed(1)} CPU-seconds)`,
      );
      const failedAfterMs = await watchFailed(kc, sweepNs, stuckCount, sweptAt);
      console.log(
        failedAfterMs === undefined
          ? `  job controller: not all ${stuckCount} Jobs Failed within ${failedTimeoutS} s of the sweep`
          : `  job controller: all ${stuckCount} swept Jobs Failed ${s(failedAfterMs)} after the sweep ended (kube-controller-manager ${kcmQps ? `--kube-api-qps=${kcmQps}` : 'at its default client QPS'})`,
      );
      lastSwept = sweepNs;
      const { writer, writerCp } = first ?? (await writerRun(sweepNs));
      console.log(`  → sweep wall / writer wall = ${(sweep.wallMs / writer.wallMs).toFixed(2)}`);
      rows.push({ sweep, writer, failedAfterMs, sweepCp: cpuDuring, writerCp, writerFirst, phases });
      // The next run starts on a quiet API server: wait for the writer's Jobs too.
      if (!first && r + 1 < runs) await watchFailed(kc, writerNs, stuckCount, Date.now());
    }
    const sweepWall = median(rows.map((x) => x.sweep.wallMs));
    const writerWall = median(rows.map((x) => x.writer.wallMs));
    const failed = rows.map((x) => x.failedAfterMs).filter((x): x is number => x !== undefined);
    const ratios = rows.map((x) => x.sweep.wallMs / x.writer.wallMs);
    console.log(
      `\nmedian of ${runs} (ratio: median of each run's ${median(ratios).toFixed(2)}; runs: ${ratios.map((x, i) => `${x.toFixed(2)}${rows[i]!.writerFirst ? ' (writer first)' : ''}`).join(', ')}):\n` +
        `| ${stuckCount} stuck Jobs, real sweep | sweep | minimal writer (same writes) | sweep / writer | sweep CPU | sweep peak RSS | time to all Failed |\n|---|---|---|---|---|---|---|\n` +
        `| ${stuckCount} Jobs | ${s(sweepWall)} | ${s(writerWall)} (writes alone ${s(median(rows.map((x) => x.writer.writeMs)))}, CPU ${s(median(rows.map((x) => x.writer.cpuMs)))}) | ` +
        `${(sweepWall / writerWall).toFixed(2)} | ${s(median(rows.map((x) => x.sweep.cpuMs)))} | ${mb(median(rows.map((x) => x.sweep.maxRssKb)))} | ${failed.length === rows.length ? s(median(failed)) : `> ${failedTimeoutS} s in ${rows.length - failed.length} run(s)`} |`,
    );
    const firsts = rows.map((x) => x.phases.firstMs);
    console.log(
      `the sweep's first Job done ${s(median(firsts))} after start (${firsts.map(s).join(', ')}); from the first Job to the last ` +
        `${s(median(rows.map((x) => x.phases.lastMs - x.phases.firstMs)))}, the writer's writes alone ${s(median(rows.map((x) => x.writer.writeMs)))}`,
    );
  }
} finally {
  raw.close();
  fs.rmSync(policyPath, { force: true });
  await cluster?.stop();
}

/** Resolves to ms from `since` until every Job in `namespaces` is Failed (undefined on timeout). */
async function watchFailed(config: KubeConfig, namespaces: string[], expected: number, since: number): Promise<number | undefined> {
  const batch = config.makeApiClient(BatchV1Api);
  while (Date.now() - since < failedTimeoutS * 1000) {
    let failed = 0;
    for (const namespace of namespaces) {
      const list = await batch.listNamespacedJob({ namespace });
      failed += list.items.filter((j) => j.status?.conditions?.some((c) => c.type === 'Failed' && c.status === 'True')).length;
    }
    if (failed >= expected) return Date.now() - since;
    await new Promise((r) => setTimeout(r, 2000));
  }
  return undefined;
}
