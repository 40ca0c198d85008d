// The faults of `npm run bench:latency -- --faults`: test/support/fault-proxy.ts between the
// sweeper and the real API server (the watch cache off, so an etcd compaction expires a watch's
// resourceVersion as on a cluster whose cache cannot serve it), with a share of every request
// faulted, every watch cut every 10 s, and every 30 s the cut watches resumed past an etcd
// compaction (the API server's own 410 Gone). Then what the targets count: stuck Jobs left
// unfailed, duplicate Events and decisions, healthy Jobs touched.
import { readFileSync } from 'node:fs';
import { BatchV1Api, CoreV1Api, Watch, type KubeConfig, type V1Job } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { EVENT_REASON_STUCK } from '../src/act/events.ts';
import { mapBounded } from '../src/concurrency.ts';
import { compactEtcd, type Cluster } from '../test/support/cluster.ts';
import { jsonLines } from '../test/support/cli.ts';
import { startFaultProxy, type FaultProxy } from '../test/support/fault-proxy.ts';
import { jobManifest } from '../test/support/fixtures.ts';
import { setPodRunning, waitForJobPods } from '../test/support/kubelet.ts';
import { sweeperEvents } from '../test/support/sweeper.ts';

const DROP_EVERY_MS = 10_000;
const EXPIRE_EVERY = 3; // every third cut resumes past a compaction: a 410 every 30 s

export interface Faults {
  proxy: FaultProxy;
  /** The sweeper's kubeconfig: through the proxy. */
  kubeconfig: string;
  /** Starts injecting; the returned function stops it and says how many cuts and 410s there were. */
  begin(): () => { cuts: number; expiries: number };
}

export async function startFaults(cluster: Cluster, faultRate: number): Promise<Faults> {
  const cfg = parse(readFileSync(cluster.kubeconfigPath, 'utf8')) as { clusters: { cluster: Record<string, string> }[] };
  const upstreamCa = Buffer.from(cfg.clusters[0]!.cluster['certificate-authority-data']!, 'base64').toString('utf8');
  const proxy = await startFaultProxy({ upstream: cluster.server, upstreamCa, seed: 37, faultRate: 0 });
  const core = cluster.kubeConfig.makeApiClient(CoreV1Api);
  const begin = () => {
    proxy.setFaultRate(faultRate);
    let cuts = 0;
    let expiries = 0;
    let busy = false;
    const timer = setInterval(() => {
      if (busy) return;
      busy = true;
      cuts += 1;
      const expire = cuts % EXPIRE_EVERY === 0;
      void (async () => {
        if (!expire) {
          proxy.dropWatches();
          return;
        }
        // Held off while etcd moves on and compacts: the resumed watch's resourceVersion is gone.
        proxy.refuseWatches(true);
        proxy.dropWatches();
        const name = `bump-${Date.now()}`;
        await core.createNamespacedConfigMap({ namespace: 'default', body: { metadata: { name } } });
        await compactEtcd(cluster.state.etcdUrl);
        await core.deleteNamespacedConfigMap({ name, namespace: 'default' });
        expiries += 1;
      })()
        .catch((e: unknown) => process.stderr.write(`[faults] ${String(e)}\n`))
        .finally(() => {
          proxy.refuseWatches(false);
          busy = false;
        });
    }, DROP_EVERY_MS);
    return () => {
      clearInterval(timer);
      proxy.setFaultRate(0);
      return { cuts, expiries };
    };
  };
  return { proxy, kubeconfig: proxy.writeKubeconfig(cluster.kubeconfigPath), begin };
}

/** A watch on a namespace's Jobs that starts again (from the current state) when it ends. */
export function watchJobs(kc: KubeConfig, namespace: string, onJob: (job: V1Job) => void): () => void {
  let stopped = false;
  let current: AbortController | undefined;
  const start = (): void => {
    if (stopped) return;
    void new Watch(kc)
      .watch(
        `/apis/batch/v1/namespaces/${namespace}/jobs`,
        {},
        (_type, job: V1Job) => onJob(job),
        () => setTimeout(start, 100),
      )
      .then(
        (c) => (current = c),
        () => setTimeout(start, 500),
      );
  };
  start();
  return () => {
    stopped = true;
    current?.abort();
  };
}

export interface HealthyJob {
  namespace: string;
  name: string;
}

/** Jobs that must never be touched: half with a running pod, half with a pod still Pending. */
export async function createHealthyJobs(kc: KubeConfig, namespaces: string[], count: number): Promise<HealthyJob[]> {
  const batch = kc.makeApiClient(BatchV1Api);
  const core = kc.makeApiClient(CoreV1Api);
  const jobs = Array.from({ length: count }, (_, i) => ({
    namespace: namespaces[i % namespaces.length]!,
    name: `healthy-${i}`,
    running: i % 2 === 0,
  }));
  await mapBounded(jobs, 8, async (j) => {
    await batch.createNamespacedJob({ namespace: j.namespace, body: jobManifest(j.name, 'registry.local/team/app:1') });
    const [pod] = await waitForJobPods(core, j.namespace, j.name);
    if (j.running) await setPodRunning(core, j.namespace, pod!.metadata!.name!);
  });
  return jobs;
}

export interface FaultFigures {
  unfailed: number;
  /** Stuck Jobs the Job controller failed that carry no ImagePullStuck Event. */
  lostEvents: number;
  duplicateEvents: number;
  duplicateDecisions: number;
  healthyTouched: number;
  /** The sweeper's own lines: watches it resumed, and 410s after which it listed again. */
  resumed: number;
  relisted: number;
}

/**
 * Waits (up to `timeoutMs`) until every stuck Job has its ImagePullStuck Event: an Event whose
 * write a kill or a fault cut short is owed, and a later sweep writes it. Returns the seconds waited.
 */
export async function waitForStuckEvents(kc: KubeConfig, namespaces: string[], stuck: HealthyJob[], timeoutMs: number): Promise<number> {
  const started = Date.now();
  for (;;) {
    const { stuckEvents } = await eventsByJob(kc, namespaces);
    if (stuck.every((j) => stuckEvents.has(`${j.namespace}/${j.name}`)) || Date.now() - started >= timeoutMs)
      return (Date.now() - started) / 1000;
    await new Promise((resolve) => setTimeout(resolve, 500));
  }
}

/** The sweeper's Events by `namespace/Job`: ImagePullStuck ones counted, the Jobs any other one regards. */
async function eventsByJob(kc: KubeConfig, namespaces: string[]): Promise<{ stuckEvents: Map<string, number>; otherEvents: Set<string> }> {
  const stuckEvents = new Map<string, number>();
  const otherEvents = new Set<string>();
  for (const ns of namespaces) {
    for (const e of await sweeperEvents(kc, ns)) {
      const k = `${ns}/${e.regarding?.name}`;
      if (e.reason === EVENT_REASON_STUCK) stuckEvents.set(k, (stuckEvents.get(k) ?? 0) + 1);
      else otherEvents.add(k);
    }
  }
  return { stuckEvents, otherEvents };
}

export async function countFaultOutcomes(
  kc: KubeConfig,
  namespaces: string[],
  stuck: HealthyJob[],
  healthy: HealthyJob[],
  sweeperOutput: string,
): Promise<FaultFigures> {
  const batch = kc.makeApiClient(BatchV1Api);
  const key = (ns: string | undefined, name: string | undefined) => `${ns}/${name}`;
  const jobs = new Map<string, V1Job>();
  for (const ns of namespaces) {
    for (const job of (await batch.listNamespacedJob({ namespace: ns })).items) jobs.set(key(ns, job.metadata?.name), job);
  }
  const { stuckEvents: events, otherEvents: touchedByEvent } = await eventsByJob(kc, namespaces);
  const failed = (job: V1Job | undefined) => job?.status?.conditions?.some((c) => c.type === 'Failed' && c.status === 'True') ?? false;
  const decisions = new Map<string, number>();
  const lines = jsonLines(sweeperOutput);
  const said = (pattern: RegExp) => lines.filter((l) => pattern.test(String(l.message))).length;
  for (const line of lines) {
    if (line.message !== 'decision' || line.outcome !== 'failed') continue;
    const k = key(String(line.namespace), String(line.job));
    decisions.set(k, (decisions.get(k) ?? 0) + 1);
  }
  const extra = (counts: Map<string, number>) => [...counts.values()].reduce((sum, n) => sum + Math.max(0, n - 1), 0);
  const touched = healthy.filter((j) => {
    const job = jobs.get(key(j.namespace, j.name));
    const annotated = Object.keys(job?.metadata?.annotations ?? {}).some((a) => a.startsWith('imagepull-sweeper/'));
    const k = key(j.namespace, j.name);
    return annotated || failed(job) || events.has(k) || touchedByEvent.has(k);
  });
  return {
    unfailed: stuck.filter((j) => !failed(jobs.get(key(j.namespace, j.name)))).length,
    lostEvents: stuck.filter((j) => failed(jobs.get(key(j.namespace, j.name))) && !events.has(key(j.namespace, j.name))).length,
    duplicateEvents: extra(events),
    duplicateDecisions: extra(decisions),
    healthyTouched: touched.length,
    resumed: said(/^watch failed; resuming/),
    relisted: said(/^watch expired \(410 Gone\)/),
  };
}
