// A real node for the e2e control plane: the kubelet built with the control plane (v1.37.2, or
// v1.34.4 with IMAGEPULL_SWEEPER_K8S_VERSION=1.34), a container runtime (runtimes.ts: Debian's
// containerd 1.6, containerd 2.x and CRI-O built from their modules), runc + CNI bridge from the
// distribution, two local registries (one open, one with htpasswd auth) and a locally built
// pause image. Everything is per run: temp dirs, its own runtime socket, a CNI bridge and
// cgroup named after the node, free loopback ports.
//
//   nodeSupport()        why a node cannot run here (not Linux, not root), or undefined.
//   startNode(opts)      start one (opts.runtime, default containerd), joined to the cluster of
//                        opts.kubeconfigPath; stop() ends it.
//   testRuntimes()       the runtimes of this test run (one shared node each).
//   testNode(kc, {runtime}) the node of that runtime for a test file: the shared one
//                        ($IMAGEPULL_SWEEPER_TEST_NODES, set by run-e2e.ts) or a private one;
//                        nodeSkipReason() says when to skip.
//   addRegistryHost()    registry host config (plain HTTP, HTTPS, mirrors) on a running node,
//                        resolved once the runtime's pulls see it.
//   hungServer()         a loopback TCP server that accepts connections and never answers.
//
// Processes are tracked by pid (each leads its own process group) and by cgroup (the runtime,
// its shims and every container live under the node's cgroup); test/node/cleanup.sh kills
// them and unmounts/removes what they left, also from a watchdog when this process dies.
import { execFile, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { CoreV1Api, RbacAuthorizationV1Api, type KubeConfig } from '@kubernetes/client-node';
import { stringify as toYaml } from 'yaml';
import { connect, controlPlaneBinaries, freePort } from './cluster.ts';
import {
  NODE_RUNTIMES,
  requestedRuntimes,
  runtimeDriver,
  type NodeRuntime,
  type RegistryHostConfig,
  type RuntimeDriver,
  type RuntimeOptions,
} from './runtimes.ts';

export type { NodeRuntime, RuntimeOptions } from './runtimes.ts';

const run = promisify(execFile);
const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const NODE_DIR = path.join(REPO_ROOT, 'test', 'node');
const SETUP_SCRIPT = path.join(NODE_DIR, 'setup.sh');
const CLEANUP_SCRIPT = path.join(NODE_DIR, 'cleanup.sh');
const PAUSE_SRC = path.join(NODE_DIR, 'pause', 'main.go');

/** Env var naming the node.json of a node already running for the tests (hands-on: npm run cluster:up). */
export const TEST_NODE_ENV = 'IMAGEPULL_SWEEPER_TEST_NODE';
/** Env var with a JSON object runtime -> node.json of the shared node of each runtime (set by run-e2e.ts). */
export const TEST_NODES_ENV = 'IMAGEPULL_SWEEPER_TEST_NODES';
/** Env var with the reason the node tests are skipped (set by run-e2e.ts when no node can run). */
export const TEST_NODE_SKIP_ENV = 'IMAGEPULL_SWEEPER_TEST_NODE_SKIP';

/** What a test needs to know about a running node (also written to runDir/node.json). */
export interface NodeInfo {
  /** The Node object's name; pods set spec.nodeName to it (there is no scheduler). */
  name: string;
  runtime: NodeRuntime;
  /** As the kubelet reports it (Node status nodeInfo.containerRuntimeVersion), e.g. `containerd://2.4.2`. */
  runtimeVersion: string;
  /** host:port of the open registry (plain HTTP on 127.0.0.1). */
  registry: string;
  /** host:port of the registry that requires htpasswd auth. */
  authRegistry: string;
  authUser: string;
  authPassword: string;
  /** A small image that runs (sleeps until SIGTERM): `${registry}/pause:3.10`, also the sandbox image. */
  pauseImage: string;
  /** OCI layout of the pause image, for pushing copies under other names. */
  pauseLayout: string;
  /** The runtime's CRI socket (containerd: also for `ctr --address`). */
  criSocket: string;
  /** The runtime's registry host config dir (addRegistryHost writes it). */
  registryConfigDir: string;
  /** Runtime settings it was started with. */
  runtimeOptions: RuntimeOptions;
  runDir: string;
  logDir: string;
  /** Process ids; each leads its own process group. */
  pids: Record<string, number>;
  /** From the first spawn until the Node is Ready. */
  startupMs: number;
  /** Image and binaries preparation (build cache, pause image) before the first spawn. */
  prepareMs: number;
}

export interface TestNodeHandle extends NodeInfo {
  /** Pushes the pause image as `${registry}/${repoTag}` (or to the auth registry). */
  pushImage(repoTag: string, opts?: { auth?: boolean }): Promise<string>;
}

export interface RunningNode extends TestNodeHandle {
  stop(opts?: { keepLogs?: boolean }): Promise<void>;
}

export interface StartNodeOptions {
  /** Admin kubeconfig of the cluster to join. */
  kubeconfigPath: string;
  /** Leave the processes running when this process exits (npm run node:up). */
  detached?: boolean;
  log?: (line: string) => void;
  baseDir?: string;
  readyTimeoutMs?: number;
  /** Kubelet serializeImagePulls (default true, the kubelet default). */
  serializeImagePulls?: boolean;
  /** The container runtime (default containerd, Debian's 1.6). */
  runtime?: NodeRuntime;
  runtimeOptions?: RuntimeOptions;
  /** Kubelet featureGates (e.g. a beta gate turned off, as some managed clusters do). */
  kubeletFeatureGates?: Record<string, boolean>;
}

const defaultLog = (line: string): void => {
  process.stderr.write(`[node] ${line}\n`);
};
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Why this machine cannot run a node, or undefined when it can. */
export function nodeSupport(): string | undefined {
  if (process.platform !== 'linux') return `a real node needs Linux (this is ${process.platform})`;
  if (typeof process.getuid === 'function' && process.getuid() !== 0) {
    return 'a real node needs root (containerd, runc, cgroups, mounts); run the e2e suite as root to include it';
  }
  if (!fs.existsSync('/sys/fs/cgroup')) return 'a real node needs cgroups (/sys/fs/cgroup is missing)';
  return undefined;
}

/** Runs test/node/setup.sh: installs containerd, runc, CNI plugins, registry, skopeo, umoci when missing. */
export async function ensureNodePackages(log = defaultLog): Promise<void> {
  const t0 = Date.now();
  const child = spawn('bash', [SETUP_SCRIPT], { stdio: ['ignore', 'inherit', 'inherit'] });
  const code = await new Promise<number | null>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', resolve);
  });
  if (code !== 0) throw new Error(`${SETUP_SCRIPT} failed with exit code ${code}`);
  log(`packages checked in ${Date.now() - t0} ms`);
}

function cacheRoot(): string {
  const xdg = process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache');
  return path.join(xdg, 'imagepull-sweeper', 'node');
}

/** Builds (once, cached by source hash) the pause binary and its OCI layout; returns the layout dir. */
async function pauseLayout(log: (l: string) => void): Promise<string> {
  const src = fs.readFileSync(PAUSE_SRC);
  const goVersion = (await run('go', ['env', 'GOVERSION'])).stdout.trim();
  const hash = createHash('sha256').update(src).update(goVersion).digest('hex').slice(0, 16);
  const dir = path.join(cacheRoot(), `pause-${hash}`);
  const layout = path.join(dir, 'oci');
  if (fs.existsSync(path.join(dir, '.complete'))) return layout;
  const t0 = Date.now();
  fs.mkdirSync(cacheRoot(), { recursive: true });
  const tmp = fs.mkdtempSync(path.join(cacheRoot(), `pause-${hash}.tmp.`));
  try {
    const bin = path.join(tmp, 'pause');
    await run('go', ['build', '-trimpath', '-ldflags', '-s -w', '-o', bin, PAUSE_SRC], {
      env: { ...process.env, CGO_ENABLED: '0', GOOS: 'linux' },
    });
    const img = `${path.join(tmp, 'oci')}:latest`;
    await run('umoci', ['init', '--layout', path.join(tmp, 'oci')]);
    await run('umoci', ['new', '--image', img]);
    await run('umoci', ['insert', '--image', img, bin, '/pause']);
    await run('umoci', [
      'config',
      '--image',
      img,
      '--config.entrypoint',
      '/pause',
      '--architecture',
      'amd64',
      '--os',
      'linux',
      '--no-history',
    ]);
    fs.rmSync(bin);
    fs.writeFileSync(path.join(tmp, '.complete'), '');
    fs.rmSync(dir, { recursive: true, force: true });
    fs.renameSync(tmp, dir);
  } catch (e) {
    fs.rmSync(tmp, { recursive: true, force: true });
    throw e;
  }
  log(`pause image built in ${Date.now() - t0} ms (${layout})`);
  return layout;
}

/** Copies the pause image's OCI layout to a registry with skopeo. */
export async function pushImage(layout: string, ref: string, creds?: { user: string; password: string }): Promise<string> {
  const args = ['copy', '--quiet', '--dest-tls-verify=false'];
  if (creds) args.push('--dest-creds', `${creds.user}:${creds.password}`);
  args.push(`oci:${layout}:latest`, `docker://${ref}`);
  await run('skopeo', args, { timeout: 60_000 });
  return ref;
}

/** A node's registry host config (containerd: `<registryConfigDir>/<host:port>/hosts.toml`). */
type RegistryConfigRef = Pick<NodeInfo, 'runtime' | 'registryConfigDir' | 'logDir'>;

/**
 * Makes the node pull from `hostPort` over plain HTTP (or HTTPS trusting only the system's CAs),
 * trying `mirrors` first when given.
 */
export async function addRegistryHost(
  node: RegistryConfigRef,
  hostPort: string,
  cfg: RegistryHostConfig | 'http' | 'https' = {},
): Promise<void> {
  await applyRegistryChange(node, hostPort, true, (driver) =>
    driver.addRegistryHost(node.registryConfigDir, hostPort, typeof cfg === 'string' ? { scheme: cfg } : cfg),
  );
}

/** Removes what addRegistryHost wrote for `hostPort`. */
export async function removeRegistryHost(node: RegistryConfigRef, hostPort: string): Promise<void> {
  await applyRegistryChange(node, hostPort, false, (driver) => driver.removeRegistryHost(node.registryConfigDir, hostPort));
}

async function applyRegistryChange(
  node: RegistryConfigRef,
  hostPort: string,
  present: boolean,
  write: (driver: RuntimeDriver) => void,
): Promise<void> {
  const driver = runtimeDriver(node.runtime);
  if (!driver.applyRegistryChange) return write(driver);
  await driver.applyRegistryChange(node, hostPort, present, () => write(driver));
}

/** Cgroup hierarchies: the v1 controller mounts, or the single v2 one. */
function cgroupHierarchies(): { version: 1 | 2; dirs: string[] } {
  const mounts = fs.readFileSync('/proc/mounts', 'utf8').trim().split('\n');
  const v1 = mounts
    .map((l) => l.split(' '))
    .filter((f) => f[2] === 'cgroup' && f[1]?.startsWith('/sys/fs/cgroup/'))
    .map((f) => f[1] as string);
  if (v1.length > 0) return { version: 1, dirs: v1 };
  return { version: 2, dirs: ['/sys/fs/cgroup'] };
}

/**
 * Creates the node's cgroup (kubelet's cgroupRoot) in every hierarchy, with a leaf `runtime`
 * for containerd and the kubelet; returns the cgroup.procs files to put those processes in.
 */
function createCgroups(name: string): string[] {
  const { version, dirs } = cgroupHierarchies();
  const procs: string[] = [];
  if (version === 2) {
    const root = dirs[0] as string;
    const want = fs.readFileSync(path.join(root, 'cgroup.controllers'), 'utf8').trim().split(/\s+/);
    const enable = want.filter((c) => ['cpu', 'cpuset', 'memory', 'pids', 'io', 'hugetlb'].includes(c));
    const mine = path.join(root, name);
    fs.mkdirSync(path.join(mine, 'runtime'), { recursive: true });
    for (const dir of [root, mine]) {
      for (const c of enable) {
        try {
          fs.writeFileSync(path.join(dir, 'cgroup.subtree_control'), `+${c}`);
        } catch {
          // a controller the parent cannot delegate; the kubelet says so if it needs it
        }
      }
    }
    procs.push(path.join(mine, 'runtime', 'cgroup.procs'));
    return procs;
  }
  for (const h of dirs) {
    const mine = path.join(h, name);
    fs.mkdirSync(path.join(mine, 'runtime'), { recursive: true });
    if (path.basename(h).split(',').includes('cpuset')) {
      for (const f of ['cpuset.cpus', 'cpuset.mems']) {
        const v = fs.readFileSync(path.join(h, f), 'utf8');
        fs.writeFileSync(path.join(mine, f), v);
        fs.writeFileSync(path.join(mine, 'runtime', f), v);
      }
    }
    procs.push(path.join(mine, 'runtime', 'cgroup.procs'));
  }
  return procs;
}

function kubeconfigYaml(server: string, caData: string, token: string): string {
  return toYaml(
    {
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'local', cluster: { server, 'certificate-authority-data': caData } }],
      users: [{ name: 'kubelet', user: { token } }],
      contexts: [{ name: 'local', context: { cluster: 'local', user: 'kubelet' } }],
      'current-context': 'local',
    },
    { lineWidth: 0 },
  );
}

/**
 * The kubelet's credentials: a ServiceAccount bound to the bootstrap `system:node` ClusterRole
 * (the cluster has no Node authorizer), with a token from the TokenRequest API.
 */
async function kubeletToken(kc: KubeConfig, nodeName: string): Promise<string> {
  const core = kc.makeApiClient(CoreV1Api);
  const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
  const ns = 'kube-system';
  const sa = nodeName;
  const ignoreConflict = (e: unknown): void => {
    if ((e as { code?: number }).code !== 409) throw e;
  };
  await core.createNamespacedServiceAccount({ namespace: ns, body: { metadata: { name: sa } } }).catch(ignoreConflict);
  await rbac
    .createClusterRoleBinding({
      body: {
        metadata: { name: `imagepull-sweeper-node:${nodeName}` },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'system:node' },
        subjects: [{ kind: 'ServiceAccount', name: sa, namespace: ns }],
      },
    })
    .catch(ignoreConflict);
  const tr = await core.createNamespacedServiceAccountToken({
    name: sa,
    namespace: ns,
    body: { spec: { audiences: [], expirationSeconds: 48 * 3600 } },
  });
  const token = tr.status?.token;
  if (!token) throw new Error(`TokenRequest for ${ns}/${sa} returned no token`);
  return token;
}

async function removeKubeletIdentity(kc: KubeConfig, nodeName: string): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
  await rbac.deleteClusterRoleBinding({ name: `imagepull-sweeper-node:${nodeName}` }).catch(() => undefined);
  await core.deleteNamespacedServiceAccount({ name: nodeName, namespace: 'kube-system' }).catch(() => undefined);
  await core.deleteNode({ name: nodeName }).catch(() => undefined);
}

/** A detached shell that runs cleanup.sh on runDir once `parentPid` is gone (covers SIGKILL). */
function startWatchdog(parentPid: number, runDir: string): ChildProcess {
  const script = `while kill -0 ${parentPid} 2>/dev/null; do sleep 1; done; exec bash "$1" "$2"`;
  const w = spawn('bash', ['-c', script, 'watchdog', CLEANUP_SCRIPT, runDir], { detached: true, stdio: 'ignore' });
  w.unref();
  return w;
}

// Nodes this process owns, torn down synchronously on exit.
const owned = new Set<string>();
let exitHooksInstalled = false;
function installExitHooks(): void {
  if (exitHooksInstalled) return;
  exitHooksInstalled = true;
  const now = (): void => {
    for (const runDir of owned) spawnSyncCleanup(runDir);
    owned.clear();
  };
  process.on('exit', now);
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(sig, () => {
      now();
      process.kill(process.pid, sig);
    });
  }
}
function spawnSyncCleanup(runDir: string): void {
  spawnSync('bash', [CLEANUP_SCRIPT, runDir], { stdio: 'ignore', timeout: 30_000 });
}

/** Runs cleanup.sh (kill, unmount, delete bridge and cgroups, remove run dir). */
export async function cleanupNode(runDir: string, keepLogs = false): Promise<void> {
  await run('bash', [CLEANUP_SCRIPT, runDir, ...(keepLogs ? ['--keep-logs'] : [])], { timeout: 60_000 });
}

/** Starts registries, the container runtime and the kubelet, and waits until the Node is Ready. */
export async function startNode(opts: StartNodeOptions): Promise<RunningNode> {
  const log = opts.log ?? defaultLog;
  const why = nodeSupport();
  if (why) throw new Error(why);
  const runtime = opts.runtime ?? 'containerd';
  const runtimeOptions = opts.runtimeOptions ?? {};
  const driver = runtimeDriver(runtime);
  const cannot = driver.support();
  if (cannot) throw new Error(cannot);
  const readyTimeoutMs = opts.readyTimeoutMs ?? 90_000;
  const tPrep = Date.now();
  const [binDir, layout] = await Promise.all([controlPlaneBinaries(), pauseLayout(log), driver.prepare(log)]);
  const kubeletBin = path.join(binDir, 'kubelet');
  if (!fs.existsSync(kubeletBin)) throw new Error(`${binDir} has no kubelet (test/controlplane/build.sh builds it)`);
  const prepareMs = Date.now() - tPrep;

  const id = randomBytes(3).toString('hex');
  const name = `ips-node-${id}`;
  const bridge = `ipsbr${id}`;
  const cgname = `imagepull-sweeper-${name}`;
  const runDir = fs.mkdtempSync(path.join(opts.baseDir ?? os.tmpdir(), 'imagepull-sweeper-node-'));
  const logDir = path.join(runDir, 'logs');
  fs.mkdirSync(logDir, { recursive: true });
  // Read by cleanup.sh; written before anything exists that it must remove.
  fs.writeFileSync(path.join(runDir, 'node.env'), `cgname=${cgname}\nbridge=${bridge}\n`);

  const { kubeConfig: adminKc, server } = connect(opts.kubeconfigPath);
  const caData = adminKc.getCurrentCluster()?.caData;
  if (!caData) throw new Error(`${opts.kubeconfigPath} has no certificate-authority-data`);

  const pids: Record<string, number> = {};
  let exited: string | undefined;
  let watchdog: ChildProcess | undefined;
  if (!opts.detached) {
    installExitHooks();
    owned.add(runDir);
    watchdog = startWatchdog(process.pid, runDir);
  }
  const stopWatchdog = (): void => {
    if (watchdog?.pid !== undefined) {
      try {
        process.kill(-watchdog.pid, 'SIGKILL');
      } catch {
        // gone
      }
    }
  };

  const launch = (what: string, bin: string, args: string[], cgroupProcs: string[] = [], env?: NodeJS.ProcessEnv): number => {
    const fd = fs.openSync(path.join(logDir, `${what}.log`), 'a');
    const child = spawn(bin, args, { detached: true, stdio: ['ignore', fd, fd], ...(env ? { env } : {}) });
    fs.closeSync(fd);
    if (child.pid === undefined) throw new Error(`could not start ${what}`);
    pids[what] = child.pid;
    fs.appendFileSync(path.join(runDir, 'pids'), `${child.pid}\n`);
    for (const f of cgroupProcs) fs.writeFileSync(f, String(child.pid));
    child.on('exit', (code, signal) => {
      exited ??= `${what} exited (code ${code}, signal ${signal}); log ${path.join(logDir, `${what}.log`)}`;
    });
    if (opts.detached) child.unref();
    return child.pid;
  };

  const logTail = (what: string, lines = 30): string => {
    const f = path.join(logDir, `${what}.log`);
    if (!fs.existsSync(f)) return '';
    return `----- ${f} -----\n${fs.readFileSync(f, 'utf8').trimEnd().split('\n').slice(-lines).join('\n')}`;
  };
  const t0 = Date.now();
  const waitUntil = async (what: string, check: () => Promise<boolean> | boolean): Promise<void> => {
    let lastErr = '';
    for (;;) {
      if (exited) throw new Error(`${exited} while waiting for ${what}`);
      try {
        if (await check()) return;
      } catch (e) {
        lastErr = String(e);
      }
      if (Date.now() - t0 > readyTimeoutMs) {
        throw new Error(`timed out after ${readyTimeoutMs} ms waiting for ${what}${lastErr ? ` (${lastErr})` : ''}`);
      }
      await sleep(100);
    }
  };

  try {
    // Registries.
    const authUser = 'sweeper';
    const authPassword = randomBytes(12).toString('hex');
    const htpasswd = path.join(runDir, 'htpasswd');
    const { stdout: hp } = await run('htpasswd', ['-nbB', authUser, authPassword]);
    fs.writeFileSync(htpasswd, hp.trim() + '\n', { mode: 0o600 });
    const registries: Record<'registry' | 'auth-registry', string> = { registry: '', 'auth-registry': '' };
    for (const r of ['registry', 'auth-registry'] as const) {
      const port = await freePort();
      const cfg = {
        version: 0.1,
        log: { level: 'warn', accesslog: { disabled: true } },
        storage: { filesystem: { rootdirectory: path.join(runDir, r) }, delete: { enabled: true } },
        http: { addr: `127.0.0.1:${port}`, secret: randomBytes(16).toString('hex') },
        ...(r === 'auth-registry' ? { auth: { htpasswd: { realm: 'imagepull-sweeper', path: htpasswd } } } : {}),
      };
      const cfgFile = path.join(runDir, `${r}.yml`);
      fs.writeFileSync(cfgFile, toYaml(cfg));
      launch(r, 'docker-registry', ['serve', cfgFile]);
      registries[r] = `127.0.0.1:${port}`;
    }
    for (const r of Object.values(registries)) {
      await waitUntil(`registry ${r}`, async () => {
        const res = await fetch(`http://${r}/v2/`, { signal: AbortSignal.timeout(2_000) });
        return res.status === 200 || res.status === 401;
      });
    }
    const registry = registries.registry;
    const authRegistry = registries['auth-registry'];
    const pauseImage = await pushImage(layout, `${registry}/pause:3.10`);
    await pushImage(layout, `${authRegistry}/pause:3.10`, { user: authUser, password: authPassword });

    // The runtime.
    const cgroupProcs = createCgroups(cgname);
    const registryConfigDir = path.join(runDir, 'certs.d');
    for (const r of [registry, authRegistry]) driver.addRegistryHost(registryConfigDir, r);
    const cniConfDir = path.join(runDir, 'cni', 'net.d');
    fs.mkdirSync(cniConfDir, { recursive: true });
    fs.writeFileSync(
      path.join(cniConfDir, '10-bridge.conflist'),
      JSON.stringify(
        {
          cniVersion: '1.0.0',
          name: name,
          plugins: [
            {
              // No host address, gateway or masquerade: pods reach nothing but each other.
              type: 'bridge',
              bridge,
              isGateway: false,
              isDefaultGateway: false,
              ipMasq: false,
              hairpinMode: false,
              ipam: {
                type: 'host-local',
                ranges: [[{ subnet: '10.244.0.0/24' }]],
                dataDir: path.join(runDir, 'cni', 'ipam'),
              },
            },
          ],
        },
        null,
        2,
      ),
    );
    log(`starting ${runtime}, registries ${registry} and ${authRegistry} (auth)`);
    const { criSocket: sock } = await driver.start({
      nodeName: name,
      runDir,
      logDir,
      pauseImage,
      cniConfDir,
      cniBinDir: '/usr/lib/cni',
      registryConfigDir,
      options: runtimeOptions,
      launch: (what, bin, args, env) => launch(what, bin, args, cgroupProcs, env),
      waitUntil,
      log,
    });

    // kubelet.
    const token = await kubeletToken(adminKc, name);
    const kubeletDir = path.join(runDir, 'kubelet');
    fs.mkdirSync(kubeletDir, { recursive: true });
    const kubeletKubeconfig = path.join(runDir, 'kubelet.kubeconfig');
    fs.writeFileSync(kubeletKubeconfig, kubeconfigYaml(server, caData, token), { mode: 0o600 });
    const kubeletPort = await freePort();
    const kubeletConfig = {
      apiVersion: 'kubelet.config.k8s.io/v1beta1',
      kind: 'KubeletConfiguration',
      address: '127.0.0.1',
      port: kubeletPort,
      readOnlyPort: 0,
      healthzPort: 0,
      // These VMs run cgroup v1 and may have swap.
      failCgroupV1: false,
      failSwapOn: false,
      cgroupDriver: 'cgroupfs',
      cgroupRoot: `/${cgname}`,
      containerRuntimeEndpoint: `unix://${sock}`,
      imageServiceEndpoint: `unix://${sock}`,
      podLogsDir: path.join(runDir, 'pod-logs'),
      authentication: { anonymous: { enabled: false }, webhook: { enabled: false } },
      authorization: { mode: 'AlwaysAllow' },
      serializeImagePulls: opts.serializeImagePulls ?? true,
      // No kubelet pull throttle (default 5/s, burst 10): with 20 cases at once on a fast runtime
      // (CRI-O) the kubelet's own "pull QPS exceeded" replaced the runtime's message.
      registryPullQPS: 0,
      // A test machine's disk may be fuller than a production node's: never evict for it.
      evictionHard: { 'memory.available': '1Mi', 'nodefs.available': '1%', 'imagefs.available': '1%' },
      imageGCHighThresholdPercent: 100,
      imageGCLowThresholdPercent: 99,
      resolvConf: '',
      syncFrequency: '10s',
      fileCheckFrequency: '10s',
      nodeStatusReportFrequency: '10s',
      registerNode: true,
      logging: { format: 'text' },
      ...(opts.kubeletFeatureGates ? { featureGates: opts.kubeletFeatureGates } : {}),
    };
    const kubeletConfigFile = path.join(runDir, 'kubelet.yaml');
    fs.writeFileSync(kubeletConfigFile, toYaml(kubeletConfig));
    log(`starting kubelet as node ${name}`);
    const tKubelet = Date.now();
    launch(
      'kubelet',
      kubeletBin,
      [
        `--config=${kubeletConfigFile}`,
        `--kubeconfig=${kubeletKubeconfig}`,
        `--root-dir=${kubeletDir}`,
        `--cert-dir=${path.join(kubeletDir, 'pki')}`,
        `--volume-plugin-dir=${path.join(kubeletDir, 'volume-plugins')}`,
        `--hostname-override=${name}`,
        '--node-ip=127.0.0.1',
        '--v=2',
      ],
      cgroupProcs,
    );
    const core = adminKc.makeApiClient(CoreV1Api);
    let runtimeVersion = '';
    await waitUntil(`node ${name} Ready`, async () => {
      const n = await core.readNode({ name });
      runtimeVersion = n.status?.nodeInfo?.containerRuntimeVersion ?? '';
      return n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
    });
    const startupMs = Date.now() - t0;
    log(`node ${name} (${runtimeVersion}) Ready ${Date.now() - tKubelet} ms after kubelet start (${startupMs} ms in all)`);

    const info: NodeInfo = {
      name,
      runtime,
      runtimeVersion,
      registry,
      authRegistry,
      authUser,
      authPassword,
      pauseImage,
      pauseLayout: layout,
      criSocket: sock,
      registryConfigDir,
      runtimeOptions,
      runDir,
      logDir,
      pids,
      startupMs,
      prepareMs,
    };
    fs.writeFileSync(path.join(runDir, 'node.json'), JSON.stringify(info, null, 2) + '\n', { mode: 0o600 });

    let stopped = false;
    return {
      ...handle(info),
      async stop(stopOpts: { keepLogs?: boolean } = {}): Promise<void> {
        if (stopped) return;
        stopped = true;
        await drainNode(adminKc, info, log);
        await removeKubeletIdentity(adminKc, name);
        await cleanupNode(runDir, stopOpts.keepLogs ?? process.env.IMAGEPULL_SWEEPER_KEEP_CLUSTER_LOGS === '1');
        owned.delete(runDir);
        stopWatchdog();
      },
    };
  } catch (e) {
    const tails = ['kubelet', ...driver.logs, 'registry', 'auth-registry'].map((w) => logTail(w)).join('\n');
    await cleanupNode(runDir, true).catch(() => undefined);
    await removeKubeletIdentity(adminKc, name).catch(() => undefined);
    owned.delete(runDir);
    stopWatchdog();
    throw new Error(`node did not start: ${(e as Error).message}\nlogs kept in ${logDir}\n${tails}`);
  }
}

/**
 * Deletes the node's pods (grace 0) and waits up to 20 s for the kubelet to stop their
 * containers and sandboxes, so the network and mounts are released cleanly before the kill.
 */
export async function drainNode(kc: KubeConfig, info: NodeInfo, log = defaultLog): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  try {
    const pods = await core.listPodForAllNamespaces({ fieldSelector: `spec.nodeName=${info.name}` });
    await Promise.all(
      pods.items.map((p) =>
        core
          .deleteNamespacedPod({ name: p.metadata!.name!, namespace: p.metadata!.namespace!, gracePeriodSeconds: 0 })
          .catch(() => undefined),
      ),
    );
  } catch {
    // the API server may already be gone; cleanup.sh kills what is left
  }
  const deadline = Date.now() + 20_000;
  const driver = runtimeDriver(info.runtime);
  while (Date.now() < deadline) {
    const left = await driver.runningContainers(info.criSocket);
    if (left === undefined || left === 0) return;
    await sleep(250);
  }
  log('pods still running after 20 s; killing them');
}

function handle(info: NodeInfo): TestNodeHandle {
  return {
    ...info,
    pushImage: (repoTag, o = {}) =>
      o.auth
        ? pushImage(info.pauseLayout, `${info.authRegistry}/${repoTag}`, {
            user: info.authUser,
            password: info.authPassword,
          })
        : pushImage(info.pauseLayout, `${info.registry}/${repoTag}`),
  };
}

/** The reason node tests are skipped in this process, or undefined when they run. */
export function nodeSkipReason(): string | undefined {
  return process.env[TEST_NODE_SKIP_ENV] || nodeSupport();
}

/** node.json of the shared node of each runtime: $IMAGEPULL_SWEEPER_TEST_NODES, else $IMAGEPULL_SWEEPER_TEST_NODE. */
function sharedNodes(): Partial<Record<NodeRuntime, string>> {
  const many = process.env[TEST_NODES_ENV];
  if (many) return JSON.parse(many) as Partial<Record<NodeRuntime, string>>;
  const one = process.env[TEST_NODE_ENV];
  if (!one) return {};
  const info = JSON.parse(fs.readFileSync(one, 'utf8')) as Partial<NodeInfo>;
  return { [info.runtime ?? 'containerd']: one };
}

/**
 * The runtimes of this test run: those with a shared node, else those asked for by
 * $IMAGEPULL_SWEEPER_TEST_RUNTIMES (default: every runtime this machine can run).
 */
export function testRuntimes(): NodeRuntime[] {
  const shared = Object.keys(sharedNodes());
  if (shared.length > 0) return NODE_RUNTIMES.filter((r) => shared.includes(r));
  return requestedRuntimes();
}

/** `containerd2 (containerd://2.4.2)` for the shared node of `runtime`, else the runtime's name. */
export function runtimeLabel(runtime: NodeRuntime): string {
  const file = sharedNodes()[runtime];
  if (!file || !fs.existsSync(file)) return runtime;
  const info = JSON.parse(fs.readFileSync(file, 'utf8')) as NodeInfo;
  return `${runtime} (${info.runtimeVersion})`;
}

const testNodes = new Map<NodeRuntime, Promise<TestNodeHandle & { release(): Promise<void> }>>();

/**
 * The node of `runtime` (default: the first of testRuntimes()) for a test file: the shared one
 * (run-e2e.ts), else a private one joined to `kubeconfigPath`, stopped by release(). Check
 * nodeSkipReason() first.
 */
export function testNode(
  kubeconfigPath: string,
  opts: { runtime?: NodeRuntime } = {},
): Promise<TestNodeHandle & { release(): Promise<void> }> {
  const runtime = opts.runtime ?? testRuntimes()[0] ?? 'containerd';
  let p = testNodes.get(runtime);
  if (!p) {
    p = (async () => {
      const shared = sharedNodes()[runtime];
      if (shared) {
        const info = JSON.parse(fs.readFileSync(shared, 'utf8')) as NodeInfo;
        return { ...handle(info), release: async () => {} };
      }
      await ensureNodePackages();
      const node = await startNode({ kubeconfigPath, runtime });
      return { ...node, release: () => node.stop() };
    })();
    testNodes.set(runtime, p);
  }
  return p;
}

/** A TCP server on 127.0.0.1 that accepts connections and never answers (a hung registry). */
export async function hungServer(): Promise<{ host: string; connections: () => number; close(): Promise<void> }> {
  const sockets = new Set<net.Socket>();
  let total = 0;
  const srv = net.createServer((s) => {
    total++;
    sockets.add(s);
    s.on('error', () => undefined);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((resolve, reject) => {
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', resolve);
  });
  const addr = srv.address() as net.AddressInfo;
  return {
    host: `127.0.0.1:${addr.port}`,
    connections: () => total,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        srv.close(() => resolve());
      }),
  };
}
