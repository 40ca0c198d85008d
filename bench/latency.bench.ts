// npm run bench:latency -- [--pending 1000] [--jobs 60] [--runs 3] [--idle-seconds 60] [--modes watch,minute,second] [--formats] [--faults 0.3]
//
// How soon after its grace runs out a Job is written to and Failed, by `run --watch` against
// `run --schedule` every minute and every second, on the bundled control plane. `--pending` plain
// Pending pods (never stuck; unscheduled, as in a busy cluster) stand around; `--jobs` Jobs, spread
// over 10 namespaces, get their pod stuck (the kubelet stand-in of test/support/kubelet.ts) at
// random moments over a minute, each with a 10 s grace. Prints per mode: grace expiry -> first
// write (the claim, seen by a watch on the Jobs) p50/p99/max, -> Job Failed p50/p99, the pod
// LIST/GET/WATCH requests of a minute in which nothing changes, and the sweeper's peak RSS and CPU.
// The median of the runs is printed last. `--formats` first prints what one Pending pod costs in a
// list and one status change in a watch, in each format a watch could use. `--faults RATE` puts
// the fault proxy between the sweeper and the API server (bench/latency-faults.ts) and prints what
// the fault targets count (the proxy's counts are cumulative over the runs). Prints figures,
// asserts nothing.
import { spawn } from 'node:child_process';
import * as https from 'node:https';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { BatchV1Api, CoreV1Api } from '@kubernetes/client-node';
import { findStuckContainers } from '../src/classify/index.ts';
import { mapBounded } from '../src/concurrency.ts';
import { CLI, ensureBuilt, jsonLines } from '../test/support/cli.ts';
import { startCluster } from '../test/support/cluster.ts';
import { createNamespace, jobManifest } from '../test/support/fixtures.ts';
import { setImagePullStuck, waitFor, waitForJobPods } from '../test/support/kubelet.ts';
import { MISSING_IMAGE, NOT_FOUND_MESSAGE } from '../test/support/sweeper.ts';
import { countFaultOutcomes, createHealthyJobs, startFaults, watchJobs, type FaultFigures, type Faults } from './latency-faults.ts';
import { createPods, rawClient, type Raw } from './scale-setup.ts';

const flag = (name: string, fallback: string) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1]! : fallback;
};
const PENDING = Number(flag('pending', '1000'));
const JOBS = Number(flag('jobs', '60'));
const RUNS = Number(flag('runs', '3'));
const IDLE_S = Number(flag('idle-seconds', '60'));
const GRACE_S = 10;
const SPREAD_MS = 60_000;
const MODES: Record<string, string[]> = {
  watch: ['--watch', '--schedule', '0 0 1 1 *'],
  minute: ['--schedule', '* * * * *'],
  second: ['--schedule', '* * * * * *'],
};
const modes = flag('modes', 'watch,minute,second').split(',');
const FAULT_RATE = Number(flag('faults', '0'));
const HEALTHY = 20;

interface Figures {
  write: number[];
  failed: number[];
  idle: string;
  rssMb: number;
  cpuS: number;
  faults?: FaultFigures & { cuts: number; expiries: number; proxy: string };
}

const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length === 0 ? NaN : s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)]!;
};
const median = (xs: number[]) => pct(xs, 50);
const f1 = (x: number) => (Number.isNaN(x) ? 'n/a' : x.toFixed(2));

async function podRequests(raw: Raw): Promise<Map<string, number>> {
  const res = await raw.request('GET', '/metrics');
  const counts = new Map<string, number>();
  for (const line of res.body.split('\n')) {
    if (!line.startsWith('apiserver_request_total{') || !line.includes('resource="pods"') || /subresource="[^"]/.test(line)) continue;
    const verb = /verb="(\w+)"/.exec(line)?.[1] ?? '?';
    counts.set(verb, (counts.get(verb) ?? 0) + Number(line.split(' ').pop()));
  }
  return counts;
}

function procFigures(pid: number): { rssMb: number; cpuS: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const hwm = Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? 0);
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return { rssMb: hwm / 1024, cpuS: (Number(stat[11]) + Number(stat[12])) / 100 };
}

async function runMode(
  mode: string,
  run: number,
  kc: import('@kubernetes/client-node').KubeConfig,
  raw: Raw,
  policy: string,
  kubeconfig: string,
  faults: Faults | undefined,
): Promise<Figures> {
  const namespaces = await mapBounded([...Array(10).keys()], 4, async (i) => (await createNamespace(kc, `lat-${mode}-${run}-${i}`)).name);
  const batch = kc.makeApiClient(BatchV1Api);
  const core = kc.makeApiClient(CoreV1Api);
  const jobs = Array.from({ length: JOBS }, (_, i) => ({ namespace: namespaces[i % 10]!, name: `job-${i}` }));
  await mapBounded(jobs, 16, (j) => batch.createNamespacedJob({ namespace: j.namespace, body: jobManifest(j.name, MISSING_IMAGE) }));
  const pods = await mapBounded(jobs, 16, async (j) => (await waitForJobPods(core, j.namespace, j.name))[0]!.metadata!.name!);

  const healthy = faults ? await createHealthyJobs(kc, namespaces, HEALTHY) : [];

  const claimed = new Map<string, number>();
  const failed = new Map<string, number>();
  const unwatch = namespaces.map((ns) =>
    watchJobs(kc, ns, (job) => {
      const key = `${ns}/${job.metadata?.name}`;
      if (job.metadata?.annotations?.['imagepull-sweeper/failed-at'] && !claimed.has(key)) claimed.set(key, Date.now());
      if (job.status?.conditions?.some((c) => c.type === 'Failed' && c.status === 'True') && !failed.has(key)) failed.set(key, Date.now());
    }),
  );
  const args = [CLI, 'run', ...MODES[mode]!, '--policy-file', policy, '--kubeconfig', faults?.kubeconfig ?? kubeconfig, '--output', 'json'];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  let stopFaults: (() => { cuts: number; expiries: number }) | undefined;
  try {
    if (mode === 'watch') await waitFor(() => jsonLines(out).some((l) => l.message === 'summary'), 300_000, 'the first sweep', 100);
    stopFaults = faults?.begin();
    // A minute in which nothing changes.
    const before = await podRequests(raw);
    await new Promise((r) => setTimeout(r, IDLE_S * 1000));
    const after = await podRequests(raw);
    const idle = ['LIST', 'GET', 'WATCH'].map((v) => `${v} ${(((after.get(v) ?? 0) - (before.get(v) ?? 0)) * 60) / IDLE_S}`).join(', ');

    // Each Job's pod gets stuck at a random moment of the next minute.
    const due = new Map<string, number>();
    await Promise.all(
      jobs.map(async (j, i) => {
        await new Promise((r) => setTimeout(r, Math.random() * SPREAD_MS));
        const pod = await setImagePullStuck(core, j.namespace, pods[i]!, {
          since: new Date(),
          stuck: [{ container: 'main', reason: 'ErrImagePull', message: NOT_FOUND_MESSAGE }],
        });
        due.set(`${j.namespace}/${j.name}`, findStuckContainers(pod)[0]!.stuckSince.getTime() + GRACE_S * 1000);
      }),
    );
    await waitFor(() => failed.size >= JOBS, 180_000, 'every Job Failed', 250).catch(() => undefined);
    const figures = procFigures(child.pid!);
    const after2 = (m: Map<string, number>) => [...due].filter(([k]) => m.has(k)).map(([k, d]) => (m.get(k)! - d) / 1000);
    const injected = stopFaults?.();
    // Healthy Jobs get a few more seconds in which a wrong write could still land.
    if (faults) await new Promise((r) => setTimeout(r, 5_000));
    const counted = faults &&
      injected && { ...(await countFaultOutcomes(kc, namespaces, jobs, healthy, out)), ...injected, proxy: faults.proxy.report() };
    return { write: after2(claimed), failed: after2(failed), idle, ...figures, ...(counted ? { faults: counted } : {}) };
  } finally {
    stopFaults?.();
    child.kill('SIGTERM');
    await new Promise((r) => child.on('close', r));
    for (const stop of unwatch) stop();
    await mapBounded(namespaces, 4, (ns) => core.deleteNamespace({ name: ns }).catch(() => undefined));
  }
}

const FORMATS: [string, string, Record<string, string>][] = [
  ['full objects', 'application/json', {}],
  ['Table rows, with metadata', 'application/json;as=Table;g=meta.k8s.io;v=v1', { includeObject: 'Metadata' }],
  ['Table rows, bare', 'application/json;as=Table;g=meta.k8s.io;v=v1', { includeObject: 'None' }],
  ['metadata only', 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1', {}],
];

/** Bytes per pod of a list, and per event of a watch, in each format the watch could use (the choice of src/kube/watch.ts). */
async function formatProbe(kc: import('@kubernetes/client-node').KubeConfig, namespace: string): Promise<void> {
  const cluster = kc.getCurrentCluster()!;
  const token = kc.getCurrentUser()!.token!;
  const ca = Buffer.from(cluster.caData ?? '', 'base64');
  const get = (path: string, accept: string, onData: (chunk: string) => void, signal?: AbortSignal) =>
    new Promise<void>((resolve, reject) => {
      const req = https.request(
        new URL(cluster.server + path),
        { headers: { Authorization: `Bearer ${token}`, Accept: accept }, ca, signal },
        (res) => {
          res.setEncoding('utf8');
          res.on('data', onData);
          res.on('end', resolve);
          res.on('error', () => resolve());
        },
      );
      req.on('error', (e) => (signal?.aborted ? resolve() : reject(e)));
      req.end();
    });
  const core = kc.makeApiClient(CoreV1Api);
  await kc.makeApiClient(BatchV1Api).createNamespacedJob({ namespace, body: jobManifest('probe', MISSING_IMAGE) });
  const [pod] = await waitForJobPods(core, namespace, 'probe');
  const selector = 'fieldSelector=status.phase%3DPending';
  for (const [name, accept, query] of FORMATS) {
    const q = new URLSearchParams(query).toString();
    let listed = 0;
    await get(`/api/v1/pods?${selector}&${q}`, accept, (c) => (listed += Buffer.byteLength(c)));
    const rv = String((await core.listNamespacedPod({ namespace, limit: 1 })).metadata?.resourceVersion ?? '');
    let watched = '';
    const stop = new AbortController();
    const path = `/api/v1/namespaces/${namespace}/pods?watch=true&resourceVersion=${rv}&${selector}&${q}`;
    const watching = get(path, accept, (c) => (watched += c), stop.signal);
    // Two changes: whether the second event carries what the first did (a Table's column definitions).
    for (const reason of ['ErrImagePull', 'ImagePullBackOff']) {
      await setImagePullStuck(core, namespace, pod!.metadata!.name!, {
        since: new Date(),
        stuck: [{ container: 'main', reason, message: NOT_FOUND_MESSAGE }],
      });
    }
    await new Promise((r) => setTimeout(r, 1_000));
    stop.abort();
    await watching;
    const sizes = watched
      .split('\n')
      .filter((l) => l.trim() !== '')
      .map((e) => Buffer.byteLength(e));
    console.log(
      `format ${name}: list ${Math.round(listed / PENDING)} bytes per Pending pod; watch: ${sizes.length} event(s) of ${sizes.join(', ')} bytes`,
    );
  }
}

async function main(): Promise<void> {
  ensureBuilt();
  // With faults, the watch cache is off: an etcd compaction then expires a watch (the real 410).
  const cluster = await startCluster(FAULT_RATE > 0 ? { apiserverArgs: ['--watch-cache=false'] } : {});
  const faults = FAULT_RATE > 0 ? await startFaults(cluster, FAULT_RATE) : undefined;
  const raw = rawClient(cluster.kubeConfig);
  const dir = mkdtempSync(join(tmpdir(), 'ips-latency-'));
  const policy = join(dir, 'policy.yaml');
  writeFileSync(policy, `defaults: { grace: { permanent: ${GRACE_S}s } }\nlimits: { maxJobsPerSweep: 1000, maxJobsPerNamespace: 1000 }\n`);
  try {
    const background = await mapBounded(
      [...Array(10).keys()],
      4,
      async (i) => (await createNamespace(cluster.kubeConfig, `lat-pending-${i}`)).name,
    );
    const started = Date.now();
    await createPods(raw, background, PENDING, 'waiting');
    console.log(
      `${PENDING} Pending pods in ${(Date.now() - started) / 1000} s; ${JOBS} Jobs stuck at random moments over ${SPREAD_MS / 1000} s, grace ${GRACE_S} s`,
    );
    if (process.argv.includes('--formats')) await formatProbe(cluster.kubeConfig, background[0]!);
    const all = new Map<string, Figures[]>();
    for (let run = 1; run <= RUNS; run += 1) {
      for (const mode of modes) {
        const f = await runMode(mode, run, cluster.kubeConfig, raw, policy, cluster.kubeconfigPath, faults);
        all.set(mode, [...(all.get(mode) ?? []), f]);
        console.log(
          `run ${run} ${mode.padEnd(6)} grace -> first write p50 ${f1(pct(f.write, 50))} s, p99 ${f1(pct(f.write, 99))} s, max ${f1(Math.max(...f.write))} s ` +
            `(${f.write.length}/${JOBS}); -> Failed p50 ${f1(pct(f.failed, 50))} s, p99 ${f1(pct(f.failed, 99))} s; idle minute pods ${f.idle}; ` +
            `peak RSS ${f.rssMb.toFixed(0)} MB, CPU ${f.cpuS.toFixed(1)} s`,
        );
        if (f.faults)
          console.log(
            `run ${run} ${mode.padEnd(6)} faults at ${FAULT_RATE}: ${f.faults.cuts} watch cuts (${f.faults.expiries} past a compaction; the sweeper resumed ${f.faults.resumed}, listed again after 410 ${f.faults.relisted}); ` +
              `Jobs past grace left unfailed ${f.faults.unfailed}/${JOBS}; failed without an Event ${f.faults.lostEvents}; duplicate Events ${f.faults.duplicateEvents}; ` +
              `duplicate failed decisions ${f.faults.duplicateDecisions}; healthy Jobs touched ${f.faults.healthyTouched}/${HEALTHY}; proxy: ${f.faults.proxy}`,
          );
      }
    }
    for (const [mode, fs] of all) {
      const m = (pick: (f: Figures) => number) => f1(median(fs.map(pick)));
      console.log(
        `median of ${fs.length}: ${mode.padEnd(6)} first write p50 ${m((f) => pct(f.write, 50))} s, p99 ${m((f) => pct(f.write, 99))} s, max ${m((f) => Math.max(...f.write))} s; ` +
          `Failed p50 ${m((f) => pct(f.failed, 50))} s, p99 ${m((f) => pct(f.failed, 99))} s; peak RSS ${m((f) => f.rssMb)} MB, CPU ${m((f) => f.cpuS)} s`,
      );
    }
  } finally {
    await faults?.proxy.close();
    raw.close();
    await cluster.stop();
  }
}

await main();
