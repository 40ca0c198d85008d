// A TLS-terminating proxy on loopback between the sweeper and the real API server, injecting
// faults from a seeded PRNG (so a run can be repeated):
//   throttle  429 with Retry-After, before forwarding
//   error     500 or 503, before forwarding
//   reset     the connection is dropped before forwarding
//   slow      held for `slowMs` (longer than the client's --request-timeout), then forwarded anyway
//   lost      forwarded (the write lands), then the connection is dropped instead of the answer
// and, with `stripDate`, answers without a Date header (a proxy that drops it). A `script` names
// the faults of chosen requests exactly (the 1st, 2nd, ... request matching a verb and path), so
// a sequence seen under random faults can be replayed whatever else runs at the time. Watch requests
// are streamed through as the API server sends them; `dropWatches` cuts the open ones and
// `refuseWatches` answers new ones 503 (an API server going away and coming back).
// It has its own self-signed CA; `writeKubeconfig` gives the sweeper a kubeconfig that trusts it
// and carries the test's credentials, which the proxy passes through to the API server.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';

export const FAULT_KINDS = ['throttle', 'error', 'reset', 'slow', 'lost'] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

export interface FaultProxyOptions {
  /** https://127.0.0.1:PORT of the API server. */
  upstream: string;
  /** PEM the API server's certificate chains to. */
  upstreamCa: string;
  seed: number;
  /** Share of requests that get a fault (0..1). */
  faultRate: number;
  /** Kinds to draw from (default: all, equally likely). */
  kinds?: readonly FaultKind[];
  /** How long a `slow` answer is held (default 3 s). */
  slowMs?: number;
  /** Retry-After seconds of a `throttle` (default 1). */
  retryAfterSeconds?: number;
  /** Subject alternative names of the proxy's certificate (default IP:127.0.0.1). */
  altNames?: string[];
  /** Remove the Date header from every answer. */
  stripDate?: boolean;
  /** Faults of chosen requests, taken before (and instead of) the random draw. */
  script?: readonly ScriptedFaults[];
}

/** The faults of the requests matching `method` and `path`, in order; `undefined` lets one through. */
export interface ScriptedFaults {
  method: string;
  path: RegExp;
  faults: readonly (FaultKind | undefined)[];
  /** How long this entry's `slow` faults hold a request (default: the proxy's `slowMs`). */
  slowMs?: number;
}

export interface FaultStats {
  requests: number;
  reads: number;
  writes: number;
  faults: Record<FaultKind, number>;
  /** `lost` faults on writes: the write landed, its answer did not. */
  lostWrites: number;
  /** TCP connections accepted (a client that refuses the certificate makes one and stops). */
  connections: number;
  /** Faults per request line (`PATCH /apis/batch/v1/...`), for debugging. */
  byRequest: Map<string, FaultKind[]>;
}

export interface FaultProxy {
  /** https://127.0.0.1:PORT */
  url: string;
  /** PEM of the proxy's own CA. */
  caPem: string;
  stats(): FaultStats;
  /** One line: requests, faults by kind, fault share. */
  report(): string;
  /** Turn injection on or off (the proxy keeps forwarding). */
  setFaultRate(rate: number): void;
  /** Cuts every watch stream in flight (the connection is reset); returns how many. */
  dropWatches(): number;
  /** Watch streams open now. */
  openWatches(): number;
  /** While on, new watch requests are answered 503 before reaching the API server. */
  refuseWatches(on: boolean): void;
  /** Watch requests seen (their path and query), in order. */
  watchRequests(): string[];
  /** A copy of `kubeconfigPath` whose current cluster is this proxy, trusting its CA. */
  writeKubeconfig(kubeconfigPath: string): string;
  close(): Promise<void>;
}

/** mulberry32: small, fast, good enough to pick faults reproducibly. */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A CA and a serving certificate signed by it, made with the openssl CLI. */
export function makeCertificates(
  dir: string,
  altNames: string[],
  commonName = '127.0.0.1',
): { caPem: string; certPem: string; keyPem: string } {
  const f = (name: string) => join(dir, name);
  const run = (args: string[]) => execFileSync('openssl', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  run([
    'req',
    '-x509',
    ...ec,
    '-subj',
    '/CN=fault-proxy-ca',
    '-days',
    '2',
    '-keyout',
    f('ca.key'),
    '-out',
    f('ca.crt'),
    '-addext',
    'basicConstraints=critical,CA:TRUE',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  ]);
  run(['req', ...ec, '-subj', `/CN=${commonName}`, '-keyout', f('server.key'), '-out', f('server.csr')]);
  writeFileSync(f('ext.cnf'), `subjectAltName=${altNames.join(',')}\nextendedKeyUsage=serverAuth\n`);
  run([
    'x509',
    '-req',
    '-in',
    f('server.csr'),
    '-CA',
    f('ca.crt'),
    '-CAkey',
    f('ca.key'),
    '-CAcreateserial',
    '-days',
    '2',
    '-out',
    f('server.crt'),
    '-extfile',
    f('ext.cnf'),
  ]);
  return {
    caPem: readFileSync(f('ca.crt'), 'utf8'),
    certPem: readFileSync(f('server.crt'), 'utf8'),
    keyPem: readFileSync(f('server.key'), 'utf8'),
  };
}

/** Rewrites a kubeconfig so its current cluster is `server`, trusted through `caPem`. */
export function redirectKubeconfig(kubeconfigPath: string, server: string, caPem: string, outPath: string): string {
  const cfg = parse(readFileSync(kubeconfigPath, 'utf8')) as {
    'current-context': string;
    contexts: { name: string; context: { cluster: string } }[];
    clusters: { name: string; cluster: Record<string, unknown> }[];
  };
  const context = cfg.contexts.find((c) => c.name === cfg['current-context']);
  const cluster = cfg.clusters.find((c) => c.name === context?.context.cluster);
  if (!cluster) throw new Error(`${kubeconfigPath}: no current cluster`);
  delete cluster.cluster['certificate-authority'];
  cluster.cluster.server = server;
  cluster.cluster['certificate-authority-data'] = Buffer.from(caPem).toString('base64');
  writeFileSync(outPath, stringify(cfg, { lineWidth: 0 }), { mode: 0o600 });
  return outPath;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function status(res: ServerResponse, code: number, reason: string, headers: Record<string, string> = {}): void {
  const body = JSON.stringify({
    kind: 'Status',
    apiVersion: 'v1',
    status: 'Failure',
    reason,
    message: `injected by the fault proxy: ${reason}`,
    code,
  });
  res.writeHead(code, { 'Content-Type': 'application/json', ...headers });
  res.end(body);
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

interface Upstream {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: Buffer;
}

export async function startFaultProxy(options: FaultProxyOptions): Promise<FaultProxy> {
  const dir = mkdtempSync(join(tmpdir(), 'ips-fault-proxy-'));
  const certs = makeCertificates(dir, options.altNames ?? ['IP:127.0.0.1']);
  const upstream = new URL(options.upstream);
  const agent = new https.Agent({ ca: options.upstreamCa, keepAlive: true, maxSockets: 32 });
  const random = seededRandom(options.seed);
  const script = (options.script ?? []).map((entry) => ({ entry, next: 0 }));
  /** The scripted fault of this request, if an entry matches it and has faults left. */
  const scripted = (req: IncomingMessage): { fault: FaultKind | undefined; slowMs?: number } | undefined => {
    const path = (req.url ?? '').split('?')[0]!;
    const match = script.find((s) => s.entry.method === req.method && s.entry.path.test(path) && s.next < s.entry.faults.length);
    if (!match) return undefined;
    return { fault: match.entry.faults[match.next++], slowMs: match.entry.slowMs };
  };
  const kinds = options.kinds ?? FAULT_KINDS;
  let faultRate = options.faultRate;
  const slowMs = options.slowMs ?? 3_000;
  const stats: FaultStats = {
    requests: 0,
    reads: 0,
    writes: 0,
    faults: Object.fromEntries(FAULT_KINDS.map((k) => [k, 0])) as Record<FaultKind, number>,
    lostWrites: 0,
    connections: 0,
    byRequest: new Map(),
  };

  const forward = (req: IncomingMessage, body: Buffer): Promise<Upstream> =>
    new Promise((resolve, reject) => {
      const headers = { ...req.headers, host: upstream.host };
      const out = https.request(
        { protocol: 'https:', hostname: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers, agent },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => resolve({ status: res.statusCode ?? 502, headers: res.headers, body: Buffer.concat(chunks) }));
          res.on('error', reject);
        },
      );
      out.on('error', reject);
      out.end(body);
    });

  const openWatches = new Set<IncomingMessage>();
  const watches: string[] = [];
  let refusingWatches = false;
  /** A watch answer is piped as it comes: it ends only when the API server (or a drop) ends it. */
  const streamWatch = (req: IncomingMessage, res: ServerResponse): void => {
    watches.push(req.url ?? '');
    if (refusingWatches) return status(res, 503, 'ServiceUnavailable');
    openWatches.add(req);
    const headers = { ...req.headers, host: upstream.host };
    const out = https.request(
      {
        protocol: 'https:',
        hostname: upstream.hostname,
        port: upstream.port,
        path: req.url,
        method: 'GET',
        headers,
        agent: false,
        ca: options.upstreamCa,
      },
      (answer) => {
        // Sent at once, as the API server flushes a watch's headers before any event: Node would
        // hold them until the first body chunk, and a quiet watch would look unaccepted.
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        res.flushHeaders();
        answer.pipe(res);
        answer.on('error', () => req.socket.destroy());
      },
    );
    const close = () => {
      openWatches.delete(req);
      out.destroy();
    };
    req.socket.once('close', close);
    out.on('error', () => req.socket.destroy());
    out.end();
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    if (/[?&]watch=(true|1)(&|$)/.test(req.url ?? '')) return streamWatch(req, res);
    const body = await readBody(req);
    const write = req.method !== 'GET' && req.method !== 'HEAD';
    stats.requests += 1;
    if (write) stats.writes += 1;
    else stats.reads += 1;
    const chosen = scripted(req);
    const fault = chosen ? chosen.fault : random() < faultRate ? kinds[Math.floor(random() * kinds.length)] : undefined;
    if (fault) {
      stats.faults[fault] += 1;
      if (fault === 'lost' && write) stats.lostWrites += 1;
      const key = `${req.method} ${(req.url ?? '').split('?')[0]}`;
      stats.byRequest.set(key, [...(stats.byRequest.get(key) ?? []), fault]);
    }
    switch (fault) {
      case 'throttle':
        return status(res, 429, 'TooManyRequests', { 'Retry-After': String(options.retryAfterSeconds ?? 1) });
      case 'error':
        return random() < 0.5 ? status(res, 500, 'InternalError') : status(res, 503, 'ServiceUnavailable');
      case 'reset':
        req.socket.destroy();
        return;
      case 'slow':
        await sleep(chosen?.slowMs ?? slowMs);
        break;
      default:
    }
    const answer = await forward(req, body);
    if (fault === 'lost' || res.socket?.destroyed) {
      req.socket.destroy();
      return;
    }
    const headers = { ...answer.headers };
    if (options.stripDate) delete headers.date;
    delete headers['transfer-encoding'];
    delete headers.connection;
    headers['content-length'] = String(answer.body.length);
    res.writeHead(answer.status, headers);
    res.end(answer.body);
  };

  const server = https.createServer({ cert: certs.certPem, key: certs.keyPem }, (req, res) => {
    if (options.stripDate) res.sendDate = false;
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent && !res.socket?.destroyed) status(res, 502, `BadGateway: ${(error as Error).message}`);
      else req.socket.destroy();
    });
  });
  server.on('connection', () => (stats.connections += 1));
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;
  let kubeconfigs = 0;

  return {
    url,
    caPem: certs.caPem,
    stats: () => stats,
    report() {
      const faulted = FAULT_KINDS.reduce((n, k) => n + stats.faults[k], 0);
      const share = stats.requests ? Math.round((faulted / stats.requests) * 100) : 0;
      const byKind = FAULT_KINDS.map((k) => `${k} ${stats.faults[k]}`).join(', ');
      return `${stats.requests} requests (${stats.reads} reads, ${stats.writes} writes), ${faulted} faults (${share}%): ${byKind}; ${stats.lostWrites} writes landed with their answer lost`;
    },
    setFaultRate(rate) {
      faultRate = rate;
    },
    dropWatches() {
      const open = [...openWatches];
      for (const req of open) req.socket.destroy();
      return open.length;
    },
    openWatches: () => openWatches.size,
    refuseWatches(on) {
      refusingWatches = on;
    },
    watchRequests: () => [...watches],
    writeKubeconfig(kubeconfigPath) {
      return redirectKubeconfig(kubeconfigPath, url, certs.caPem, join(dir, `kubeconfig-${++kubeconfigs}`));
    },
    async close() {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
      agent.destroy();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
