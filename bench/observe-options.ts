// Prints figures; asserts nothing. The ways to list Pending pods cluster-wide, measured on the
// same API server (docs/performance.md, "Observation across namespaces"):
//   npx tsx bench/observe-options.ts --pods 20000 [--namespaces 20] [--runs 3] [--kubeconfig FILE]
// Per option: wall time of the whole paged list (500 a page), bytes received, this process's CPU
// (reading and JSON.parse, the rows reduced to what classifying needs) and the API server's CPU.
import * as fs from 'node:fs';
import * as https from 'node:https';
import { spawnSync } from 'node:child_process';
import { KubeConfig } from '@kubernetes/client-node';
import { startCluster } from '../test/support/cluster.ts';
import { createPods, createStuckJobs, rawClient } from './scale-setup.ts';

const flag = (name: string): string | undefined => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? process.argv[i + 1] : undefined;
};
const totalPods = Number(flag('pods') ?? 20_000);
const namespaceCount = Number(flag('namespaces') ?? 20);
const runs = Number(flag('runs') ?? 3);
const given = flag('kubeconfig');

const TABLE = 'application/json;as=Table;g=meta.k8s.io;v=v1';
const METADATA_LIST = 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1';
interface Option {
  name: string;
  accept: string;
  query: Record<string, string>;
  /** Reduces a parsed page to what classifying needs; returns the continue token. */
  reduce(body: Record<string, unknown>): string | undefined;
}
type Rows = { rows: { cells: unknown[]; object?: { metadata?: { namespace?: string } } }[]; metadata?: { continue?: string } };
type Items = { items: { metadata?: { namespace?: string; name?: string }; status?: unknown }[]; metadata?: { continue?: string } };
const kept: unknown[] = [];
const tableReduce = (body: Record<string, unknown>): string | undefined => {
  const t = body as unknown as Rows;
  for (const r of t.rows) kept.push([r.object?.metadata?.namespace, r.cells[0], r.cells[2]]);
  return t.metadata?.continue || undefined;
};
const itemsReduce = (body: Record<string, unknown>): string | undefined => {
  const l = body as unknown as Items;
  for (const p of l.items) kept.push([p.metadata?.namespace, p.metadata?.name]);
  return l.metadata?.continue || undefined;
};
const OPTIONS: Option[] = [
  {
    name: 'Table, includeObject=None (no namespace: not usable cluster-wide)',
    accept: TABLE,
    query: { includeObject: 'None' },
    reduce: tableReduce,
  },
  { name: 'Table, includeObject=Metadata', accept: TABLE, query: { includeObject: 'Metadata' }, reduce: tableReduce },
  { name: 'PartialObjectMetadataList (no status: not usable)', accept: METADATA_LIST, query: {}, reduce: itemsReduce },
  { name: 'full objects, JSON, reduced page by page', accept: 'application/json', query: {}, reduce: itemsReduce },
];

const CLOCK_TICKS = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;
function cpuOf(pid: number | undefined): number {
  if (!pid) return NaN;
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(') ') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
}

const cluster = given ? undefined : await startCluster();
const kc = new KubeConfig();
kc.loadFromFile(given ?? cluster!.kubeconfigPath);
const raw = rawClient(kc);
const server = kc.getCurrentCluster()!;
const agent = new https.Agent({ keepAlive: true, ca: Buffer.from(server.caData ?? '', 'base64') });
const token = kc.getCurrentUser()!.token!;

function get(path: string, query: Record<string, string>, accept: string): Promise<{ text: string; bytes: number }> {
  const url = new URL(server.server + path);
  for (const [k, v] of Object.entries(query)) url.searchParams.set(k, v);
  return new Promise((resolve, reject) => {
    const req = https.request(url, { agent, headers: { Authorization: `Bearer ${token}`, Accept: accept } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const body = Buffer.concat(chunks);
        if ((res.statusCode ?? 0) >= 300) reject(new Error(`HTTP ${res.statusCode}: ${body.toString().slice(0, 200)}`));
        else resolve({ text: body.toString('utf8'), bytes: body.length });
      });
    });
    req.on('error', reject);
    req.end();
  });
}

try {
  const t0 = Date.now();
  const namespaces = Array.from({ length: namespaceCount }, (_, i) => `opts-${i}`);
  for (const name of namespaces) await raw.request('POST', '/api/v1/namespaces', { metadata: { name } });
  const stuck = Math.round(totalPods / 100);
  await createPods(raw, namespaces, totalPods - stuck, 'pod');
  await createStuckJobs(kc, namespaces, stuck, 'stuck');
  console.log(
    `setup: ${totalPods} Pending pods (${stuck} of stuck Jobs) in ${namespaceCount} namespaces, ${((Date.now() - t0) / 1000).toFixed(1)} s`,
  );
  const apiPid = cluster?.state.pids['kube-apiserver'];
  for (const option of OPTIONS) {
    const figures: { wall: number; cpu: number; api: number; bytes: number; pages: number }[] = [];
    for (let r = 0; r < runs; r++) {
      kept.length = 0;
      const cpu0 = process.cpuUsage();
      const api0 = cpuOf(apiPid);
      const w0 = performance.now();
      let bytes = 0;
      let pages = 0;
      let next: string | undefined;
      do {
        const page = await get(
          '/api/v1/pods',
          { fieldSelector: 'status.phase=Pending', limit: '500', ...option.query, ...(next ? { continue: next } : {}) },
          option.accept,
        );
        bytes += page.bytes;
        pages += 1;
        next = option.reduce(JSON.parse(page.text) as Record<string, unknown>);
      } while (next);
      const cpu = process.cpuUsage(cpu0);
      figures.push({ wall: performance.now() - w0, cpu: (cpu.user + cpu.system) / 1000, api: (cpuOf(apiPid) - api0) * 1000, bytes, pages });
    }
    const med = (f: (x: (typeof figures)[number]) => number) => figures.map(f).sort((a, b) => a - b)[Math.floor(figures.length / 2)]!;
    console.log(
      `${option.name}: ${med((x) => x.wall).toFixed(0)} ms wall, ${(med((x) => x.bytes) / 1e6).toFixed(1)} MB (${(med((x) => x.bytes) / totalPods).toFixed(0)} B a pod, ${med((x) => x.pages)} pages), ` +
        `client CPU ${med((x) => x.cpu).toFixed(0)} ms, kube-apiserver CPU ${med((x) => x.api).toFixed(0)} ms (median of ${runs}; ${kept.length} rows)`,
    );
  }
} finally {
  raw.close();
  agent.destroy();
  await cluster?.stop();
}
