// A real, local Kubernetes control plane for the e2e tests: etcd, kube-apiserver and
// kube-controller-manager (v1.37.2, or v1.34.4 with IMAGEPULL_SWEEPER_K8S_VERSION=1.34), each its
// own process, built from source by test/controlplane/build.sh (cached outside the clone). There is no scheduler: pods stay
// unscheduled unless they name a node (test/support/node.ts runs a real kubelet where it can).
//
//   startCluster()   start a fresh control plane (temp dirs, free loopback ports), wait until
//                    ready; stop() tears it down. Children die with this process (exit, signals,
//                    and a watchdog for SIGKILL) unless { detached: true }.
//   testCluster()    the cluster for a test file: the shared one named by
//                    $IMAGEPULL_SWEEPER_TEST_KUBECONFIG (set by test/support/run-e2e.ts), or a
//                    private one started on first use and stopped at process exit.
import { spawn, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync, randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as https from 'node:https';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { stringify as toYaml } from 'yaml';

/** Env var choosing the pinned Kubernetes minor of the control plane and the kubelet (build.sh): 1.37 (default) or 1.34. */
export const K8S_VERSION_ENV = 'IMAGEPULL_SWEEPER_K8S_VERSION';
/** Env var naming the admin kubeconfig of a cluster already running for the tests. */
export const TEST_KUBECONFIG_ENV = 'IMAGEPULL_SWEEPER_TEST_KUBECONFIG';

const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const BUILD_SCRIPT = path.join(REPO_ROOT, 'test', 'controlplane', 'build.sh');
const COMPONENTS = ['etcd', 'kube-apiserver', 'kube-controller-manager'] as const;
type Component = (typeof COMPONENTS)[number];

/** Controllers the tests rely on (job, cronjob, GC, podgc, service accounts) plus a few cheap ones. */
export const CONTROLLERS = [
  'job-controller',
  'cronjob-controller',
  'garbage-collector-controller',
  'pod-garbage-collector-controller',
  'serviceaccount-controller',
  'serviceaccount-token-controller',
  'namespace-controller',
  'ttl-after-finished-controller',
  'replicaset-controller',
  'deployment-controller',
  'root-ca-certificate-publisher-controller',
] as const;

/** Enough to talk to a running cluster as admin. */
export interface ClusterConnection {
  /** Admin kubeconfig file (token of a system:masters user, CA of the self-signed serving cert). */
  kubeconfigPath: string;
  /** https://127.0.0.1:PORT */
  server: string;
  /** The admin kubeconfig, loaded. */
  kubeConfig: KubeConfig;
}

/** What is needed to stop a cluster from another process (scripts/cluster.ts down). */
export interface ClusterState {
  version: string;
  runDir: string;
  logDir: string;
  kubeconfigPath: string;
  server: string;
  /** http://127.0.0.1:PORT of etcd (its gRPC gateway serves /v3/kv/...). */
  etcdUrl: string;
  /** Process ids; each component leads its own process group. */
  pids: Record<Component, number>;
  startedAt: string;
}

export interface Cluster extends ClusterConnection {
  /** Temp dir holding etcd data, keys, kubeconfigs and logs. */
  runDir: string;
  /** One log file per component: etcd.log, kube-apiserver.log, kube-controller-manager.log. */
  logDir: string;
  /** From spawning etcd until /readyz is ok and the controllers have made the `default` ServiceAccount. */
  startupMs: number;
  state: ClusterState;
  /** Stops every component (SIGTERM, then SIGKILL after 10 s) and removes runDir (logs too unless keepLogs). */
  stop(opts?: { keepLogs?: boolean }): Promise<void>;
}

export interface StartClusterOptions {
  /** Leave the processes running when this process exits (for `npm run cluster:up`). */
  detached?: boolean;
  /** Where progress lines go (default: stderr). */
  log?: (line: string) => void;
  /** Parent of the run dir (default: os.tmpdir()). */
  baseDir?: string;
  /** Max wait for the control plane to become ready (default 120 s). */
  readyTimeoutMs?: number;
  /** Extra kube-apiserver flags (e.g. --watch-cache=false, so lists are served by etcd). */
  apiserverArgs?: string[];
  /** Controllers to run (default CONTROLLERS). */
  controllers?: readonly string[];
  /** Extra kube-controller-manager flags (e.g. --kube-api-qps for a benchmark). */
  controllerManagerArgs?: string[];
}

const defaultLog = (line: string): void => {
  process.stderr.write(`[cluster] ${line}\n`);
};

/**
 * Builds the control-plane binaries of the chosen minor ($IMAGEPULL_SWEEPER_K8S_VERSION) if the
 * cache lacks them (progress on stderr) and returns the directory holding etcd, kube-apiserver,
 * kube-controller-manager and kubelet.
 */
export async function controlPlaneBinaries(): Promise<string> {
  // build.sh reads the minor from the inherited environment.
  const child = spawn('bash', [BUILD_SCRIPT], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  child.stdout.setEncoding('utf8');
  child.stdout.on('data', (d: string) => (out += d));
  const code = await new Promise<number | null>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', resolve);
  });
  if (code !== 0) throw new Error(`${BUILD_SCRIPT} failed with exit code ${code}`);
  const dir = out.trim().split('\n').pop() ?? '';
  for (const c of COMPONENTS) {
    if (!fs.existsSync(path.join(dir, c))) throw new Error(`${BUILD_SCRIPT} printed ${dir}, which has no ${c}`);
  }
  return dir;
}

/** The release a binaries dir holds: build.sh names it `<version>-<hash>`. */
export function versionOfBinaries(dir: string): string {
  const version = /^(v\d+\.\d+\.\d+)-[0-9a-f]+$/.exec(path.basename(dir))?.[1];
  if (!version) throw new Error(`${dir} is not named <version>-<hash> (test/controlplane/build.sh)`);
  return version;
}

/** Ports this process has handed out: the kernel may offer a released port again before its taker has bound it. */
const handedOut = new Set<number>();

/**
 * A free TCP port on 127.0.0.1 (bound then released), never one this process handed out before:
 * two calls in a row once returned the same port, and etcd and the API server raced for it.
 */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt += 1) {
    const port = await anyFreePort();
    if (handedOut.has(port)) continue;
    handedOut.add(port);
    return port;
  }
  throw new Error('no free port that this process has not handed out already');
}

/**
 * A TCP port on 127.0.0.1 where nothing listens, and nothing will unless the caller binds it: one
 * below the kernel's ephemeral range, so no port-0 bind (another lane's proxy or registry) is given
 * it, and no connection to it is given it as its source port and so meets itself.
 */
export async function closedPort(): Promise<number> {
  const [low] = fs.readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8').trim().split(/\s+/).map(Number);
  const top = Math.min(low ?? 32768, 32768);
  for (let attempt = 0; attempt < 50; attempt += 1) {
    const port = top - 1 - Math.floor(Math.random() * 8192);
    if (handedOut.has(port) || !(await canBind(port))) continue;
    handedOut.add(port);
    return port;
  }
  throw new Error(`no closed port below ${top} that this process has not handed out already`);
}

function canBind(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.unref();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

function anyFreePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.unref();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const addr = srv.address();
      srv.close(() => (typeof addr === 'object' && addr ? resolve(addr.port) : reject(new Error('no port'))));
    });
  });
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function groupAlive(pid: number): boolean {
  try {
    process.kill(-pid, 0);
    return true;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code === 'EPERM';
  }
}

function signalGroup(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pid, signal);
  } catch {
    // already gone
  }
}

/**
 * Stops process groups one after the other, in the order given (controller manager, apiserver,
 * etcd: each still has what it talks to while it shuts down): SIGTERM, up to graceMs, SIGKILL.
 */
export async function stopProcesses(pids: number[], graceMs = 10_000): Promise<void> {
  for (const pid of pids) {
    if (!groupAlive(pid)) continue;
    signalGroup(pid, 'SIGTERM');
    const deadline = Date.now() + graceMs;
    while (groupAlive(pid) && Date.now() < deadline) await sleep(50);
    if (groupAlive(pid)) signalGroup(pid, 'SIGKILL');
    const killDeadline = Date.now() + 5_000;
    while (groupAlive(pid) && Date.now() < killDeadline) await sleep(50);
  }
}

/** The last `lines` lines of every component log, for failure reports. */
export function logTails(logDir: string, lines = 40): string {
  const parts: string[] = [];
  for (const c of COMPONENTS) {
    const file = path.join(logDir, `${c}.log`);
    if (!fs.existsSync(file)) continue;
    const text = fs.readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
    parts.push(`----- ${file} (last ${lines} lines) -----\n${text}`);
  }
  return parts.join('\n');
}

function kubeconfigYaml(server: string, caPem: string, user: string, token: string): string {
  // The layout kubectl writes (YAML, one `key: value` a line).
  const cfg = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'local', cluster: { server, 'certificate-authority-data': Buffer.from(caPem).toString('base64') } }],
    users: [{ name: user, user: { token } }],
    contexts: [{ name: 'local', context: { cluster: 'local', user, namespace: 'default' } }],
    'current-context': 'local',
  };
  return toYaml(cfg, { lineWidth: 0 });
}

/** GET an https URL with a bearer token, trusting `ca`; resolves to [status, body]. */
function httpsGet(url: string, ca: string, token: string, timeoutMs = 5_000): Promise<[number, string]> {
  return new Promise((resolve, reject) => {
    const req = https.get(url, { ca, headers: { Authorization: `Bearer ${token}` }, timeout: timeoutMs }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve([res.statusCode ?? 0, body]));
    });
    req.on('timeout', () => req.destroy(new Error('timeout')));
    req.on('error', reject);
  });
}

function httpGet(url: string, timeoutMs = 2_000): Promise<[number, string]> {
  return fetch(url, { signal: AbortSignal.timeout(timeoutMs) }).then(async (r) => [r.status, await r.text()]);
}

// Every cluster this process started and still owns, killed synchronously on exit.
const owned = new Set<ClusterState>();
let exitHooksInstalled = false;

function killOwnedNow(): void {
  for (const st of owned) {
    for (const pid of Object.values(st.pids)) signalGroup(pid, 'SIGKILL');
    try {
      fs.rmSync(st.runDir, { recursive: true, force: true });
    } catch {
      // best effort
    }
  }
  owned.clear();
}

function installExitHooks(): void {
  if (exitHooksInstalled) return;
  exitHooksInstalled = true;
  process.on('exit', killOwnedNow);
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(sig, () => {
      killOwnedNow();
      // Re-raise with default handling so the exit status says which signal it was.
      process.kill(process.pid, sig);
    });
  }
}

/**
 * A detached shell that SIGKILLs the components (their pids are appended to runDir/pids as they
 * start) and removes runDir once `parentPid` is gone: covers a parent killed by SIGKILL, where
 * no exit hook runs.
 */
function startWatchdog(parentPid: number, runDir: string): ChildProcess {
  const script =
    `while kill -0 ${parentPid} 2>/dev/null; do sleep 1; done; ` +
    `for p in $(cat "$1/pids" 2>/dev/null); do kill -KILL -- "-$p" 2>/dev/null; done; sleep 1; rm -rf -- "$1"`;
  const w = spawn('bash', ['-c', script, 'watchdog', runDir], { detached: true, stdio: 'ignore' });
  w.unref();
  return w;
}

/** Loads a kubeconfig file and reads its server. */
export function connect(kubeconfigPath: string): ClusterConnection {
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kubeconfigPath);
  const server = kubeConfig.getCurrentCluster()?.server;
  if (!server) throw new Error(`${kubeconfigPath} names no server`);
  return { kubeconfigPath, server, kubeConfig };
}

/** Starts etcd, kube-apiserver and kube-controller-manager and waits until they are ready. */
export async function startCluster(opts: StartClusterOptions = {}): Promise<Cluster> {
  const log = opts.log ?? defaultLog;
  const readyTimeoutMs = opts.readyTimeoutMs ?? 120_000;
  const bin = await controlPlaneBinaries();
  const version = versionOfBinaries(bin);

  const runDir = fs.mkdtempSync(path.join(opts.baseDir ?? os.tmpdir(), 'imagepull-sweeper-cluster-'));
  const logDir = path.join(runDir, 'logs');
  const pki = path.join(runDir, 'pki');
  const certDir = path.join(pki, 'apiserver');
  for (const d of [logDir, certDir, path.join(runDir, 'etcd')]) fs.mkdirSync(d, { recursive: true, mode: 0o700 });

  // Service-account signing key, fresh per run.
  const { publicKey, privateKey } = generateKeyPairSync('rsa', {
    modulusLength: 2048,
    publicKeyEncoding: { type: 'spki', format: 'pem' },
    privateKeyEncoding: { type: 'pkcs8', format: 'pem' },
  });
  const saPub = path.join(pki, 'sa.pub');
  const saKey = path.join(pki, 'sa.key');
  fs.writeFileSync(saPub, publicKey, { mode: 0o600 });
  fs.writeFileSync(saKey, privateKey, { mode: 0o600 });

  // Static bearer tokens: the tests' admin (system:masters) and the controller manager's own
  // identity, which the bootstrap RBAC policy already knows (system:kube-controller-manager).
  const adminToken = randomBytes(24).toString('hex');
  const kcmToken = randomBytes(24).toString('hex');
  const tokenFile = path.join(pki, 'tokens.csv');
  fs.writeFileSync(
    tokenFile,
    `${adminToken},imagepull-sweeper-admin,uid-admin,"system:masters"\n` + `${kcmToken},system:kube-controller-manager,uid-kcm\n`,
    { mode: 0o600 },
  );

  const [etcdClientPort, etcdPeerPort, apiPort] = [await freePort(), await freePort(), await freePort()];
  const etcdUrl = `http://127.0.0.1:${etcdClientPort}`;
  const server = `https://127.0.0.1:${apiPort}`;

  const pids: Partial<Record<Component, number>> = {};
  let exited: string | undefined;
  const t0 = Date.now();

  const launch = (c: Component, args: string[]): void => {
    const fd = fs.openSync(path.join(logDir, `${c}.log`), 'a');
    const child = spawn(path.join(bin, c), args, { detached: true, stdio: ['ignore', fd, fd] });
    fs.closeSync(fd);
    if (child.pid === undefined) throw new Error(`could not start ${c}`);
    pids[c] = child.pid;
    fs.appendFileSync(path.join(runDir, 'pids'), `${child.pid}\n`);
    child.on('exit', (code, signal) => {
      exited ??= `${c} exited (code ${code}, signal ${signal})`;
    });
    if (opts.detached) child.unref();
  };

  const killAll = async (): Promise<void> => {
    await stopProcesses(
      COMPONENTS.slice()
        .reverse()
        .map((c) => pids[c])
        .filter((p): p is number => p !== undefined),
    );
  };

  const fail = async (why: string): Promise<never> => {
    const tails = logTails(logDir);
    await killAll();
    throw new Error(`control plane did not start: ${why}\nlogs kept in ${logDir}\n${tails}`);
  };

  const waitUntil = async (what: string, check: () => Promise<boolean>): Promise<void> => {
    const deadline = t0 + readyTimeoutMs;
    let lastErr = '';
    for (;;) {
      if (exited) await fail(`${exited} while waiting for ${what}`);
      try {
        if (await check()) return;
      } catch (e) {
        lastErr = String(e);
      }
      if (Date.now() > deadline) {
        const last = lastErr ? ` (last error: ${lastErr})` : '';
        await fail(`timed out after ${readyTimeoutMs} ms waiting for ${what}${last}`);
      }
      await sleep(100);
    }
  };

  // Registered before anything starts, so an exit at any point kills what was started.
  const state: ClusterState = {
    version,
    runDir,
    logDir,
    kubeconfigPath: path.join(runDir, 'admin.kubeconfig'),
    server,
    etcdUrl,
    pids: pids as Record<Component, number>,
    startedAt: new Date().toISOString(),
  };
  let watchdog: ChildProcess | undefined;
  if (!opts.detached) {
    installExitHooks();
    owned.add(state);
    watchdog = startWatchdog(process.pid, runDir);
  }
  const stopWatchdog = (): void => {
    if (watchdog?.pid !== undefined) signalGroup(watchdog.pid, 'SIGKILL');
  };

  try {
    log(`starting etcd on ${etcdUrl} (run dir ${runDir})`);
    launch('etcd', [
      '--name=e2e',
      `--data-dir=${path.join(runDir, 'etcd')}`,
      `--listen-client-urls=${etcdUrl}`,
      `--advertise-client-urls=${etcdUrl}`,
      `--listen-peer-urls=http://127.0.0.1:${etcdPeerPort}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPeerPort}`,
      `--initial-cluster=e2e=http://127.0.0.1:${etcdPeerPort}`,
      '--unsafe-no-fsync',
      '--log-level=warn',
    ]);
    await waitUntil('etcd /health', async () => {
      const [status, body] = await httpGet(`${etcdUrl}/health`);
      return status === 200 && body.includes('"true"');
    });

    log(`starting kube-apiserver on ${server}`);
    launch('kube-apiserver', [
      `--etcd-servers=${etcdUrl}`,
      '--bind-address=127.0.0.1',
      '--advertise-address=127.0.0.1',
      `--secure-port=${apiPort}`,
      `--cert-dir=${certDir}`,
      `--token-auth-file=${tokenFile}`,
      '--authorization-mode=RBAC',
      '--service-cluster-ip-range=10.96.0.0/24',
      '--service-account-issuer=https://kubernetes.default.svc.cluster.local',
      `--service-account-key-file=${saPub}`,
      `--service-account-signing-key-file=${saKey}`,
      // The "kubernetes" Service endpoints would point at 127.0.0.1, which Endpoints validation
      // rejects; nothing in the tests needs that Service.
      '--endpoint-reconciler-type=none',
      '--profiling=false',
      '--v=1',
      ...(opts.apiserverArgs ?? []),
    ]);

    // With --cert-dir and no --tls-cert-file the apiserver writes a self-signed CA and a serving
    // cert signed by it to apiserver.crt (cert then CA); that bundle is our CA data.
    const crtFile = path.join(certDir, 'apiserver.crt');
    let caPem = '';
    await waitUntil('kube-apiserver /readyz', async () => {
      if (!caPem) {
        if (!fs.existsSync(crtFile)) return false;
        caPem = fs.readFileSync(crtFile, 'utf8');
        if (!caPem.includes('END CERTIFICATE')) {
          caPem = '';
          return false;
        }
      }
      const [status] = await httpsGet(`${server}/readyz`, caPem, adminToken);
      return status === 200;
    });
    const apiReadyMs = Date.now() - t0;

    fs.writeFileSync(state.kubeconfigPath, kubeconfigYaml(server, caPem, 'admin', adminToken), { mode: 0o600 });
    const kcmKubeconfig = path.join(runDir, 'kube-controller-manager.kubeconfig');
    fs.writeFileSync(kcmKubeconfig, kubeconfigYaml(server, caPem, 'kube-controller-manager', kcmToken), {
      mode: 0o600,
    });

    log(`kube-apiserver ready after ${apiReadyMs} ms; starting kube-controller-manager`);
    launch('kube-controller-manager', [
      `--kubeconfig=${kcmKubeconfig}`,
      `--controllers=${(opts.controllers ?? CONTROLLERS).join(',')}`,
      '--leader-elect=false',
      // Each controller talks to the API as its own ServiceAccount (kube-system/job-controller…),
      // bound by the bootstrap RBAC roles, as in a real cluster.
      '--use-service-account-credentials=true',
      `--service-account-private-key-file=${saKey}`,
      `--root-ca-file=${crtFile}`,
      '--cluster-name=imagepull-sweeper-e2e',
      // No HTTPS endpoint for the controller manager (nothing scrapes it).
      '--secure-port=0',
      '--v=2',
      ...(opts.controllerManagerArgs ?? []),
    ]);

    const conn = connect(state.kubeconfigPath);
    const core = conn.kubeConfig.makeApiClient(CoreV1Api);
    await waitUntil('the serviceaccount controller to create default/default', async () => {
      await core.readNamespacedServiceAccount({ name: 'default', namespace: 'default' });
      return true;
    });
    const startupMs = Date.now() - t0;
    log(`control plane ${version} ready in ${startupMs} ms (apiserver ${apiReadyMs} ms)`);
    fs.writeFileSync(path.join(runDir, 'state.json'), JSON.stringify(state, null, 2) + '\n');

    let stopped = false;
    return {
      ...conn,
      runDir,
      logDir,
      startupMs,
      state,
      async stop(stopOpts: { keepLogs?: boolean } = {}): Promise<void> {
        if (stopped) return;
        stopped = true;
        await killAll();
        owned.delete(state);
        stopWatchdog();
        removeRunDir(runDir, stopOpts.keepLogs ?? process.env.IMAGEPULL_SWEEPER_KEEP_CLUSTER_LOGS === '1');
      },
    };
  } catch (e) {
    await killAll();
    owned.delete(state);
    stopWatchdog();
    removeRunDir(runDir, true);
    throw e;
  }
}

/** Removes a cluster's run dir; with keepLogs only the etcd data, keys and kubeconfigs go. */
/**
 * Compacts etcd (physically) up to its current revision, so every older resourceVersion is gone:
 * the API server then answers 410 Gone to a watch or continue token it cannot serve from its cache.
 */
export async function compactEtcd(etcdUrl: string): Promise<number> {
  const post = async (path: string, body: object) => {
    const res = await fetch(`${etcdUrl}${path}`, { method: 'POST', body: JSON.stringify(body) });
    if (res.status !== 200) throw new Error(`etcd ${path}: ${res.status} ${await res.text()}`);
    return (await res.json()) as { header: { revision: string } };
  };
  const { header } = await post('/v3/kv/range', { key: Buffer.from('/registry/namespaces/default').toString('base64') });
  const revision = Number(header.revision);
  await post('/v3/kv/compaction', { revision, physical: true });
  return revision;
}

export function removeRunDir(runDir: string, keepLogs: boolean): void {
  if (!keepLogs) {
    fs.rmSync(runDir, { recursive: true, force: true });
    return;
  }
  for (const entry of fs.readdirSync(runDir)) {
    if (entry !== 'logs') fs.rmSync(path.join(runDir, entry), { recursive: true, force: true });
  }
}

/** Env var with the shared cluster's startup-to-ready time (ms), set by run-e2e.ts. */
export const TEST_STARTUP_MS_ENV = 'IMAGEPULL_SWEEPER_TEST_CLUSTER_STARTUP_MS';

/** A cluster for a test file. `release()` stops it only if this process started it. */
export interface TestCluster extends ClusterConnection {
  /** True when the cluster came from $IMAGEPULL_SWEEPER_TEST_KUBECONFIG. */
  shared: boolean;
  /** Startup-to-ready time of the control plane, when known. */
  startupMs: number | undefined;
  release(): Promise<void>;
}

let testClusterPromise: Promise<TestCluster> | undefined;

/**
 * The cluster a test file should use: the shared one from $IMAGEPULL_SWEEPER_TEST_KUBECONFIG
 * (run-e2e.ts), else a private one started now (so `node --import tsx --test test/e2e/x.test.ts`
 * works alone). Call it from a top-level `before`, and `release()` it in a top-level `after`.
 */
export function testCluster(): Promise<TestCluster> {
  testClusterPromise ??= (async (): Promise<TestCluster> => {
    const shared = process.env[TEST_KUBECONFIG_ENV];
    if (shared) {
      const ms = Number(process.env[TEST_STARTUP_MS_ENV]);
      return { ...connect(shared), shared: true, startupMs: ms > 0 ? ms : undefined, release: async () => {} };
    }
    return ownTestCluster();
  })();
  return testClusterPromise;
}

/** A control plane of this file's own, stopped by `release()`, even under run-e2e.ts. */
export async function ownTestCluster(): Promise<TestCluster> {
  const cluster = await startCluster();
  return {
    kubeconfigPath: cluster.kubeconfigPath,
    server: cluster.server,
    kubeConfig: cluster.kubeConfig,
    shared: false,
    startupMs: cluster.startupMs,
    release: () => cluster.stop(),
  };
}
