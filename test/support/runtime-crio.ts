// CRI-O on the test node: crio built from its Go module (test/runtimes/crio, build.sh), pinns
// compiled from that module's C source, Debian's conmon and runc (test/node/setup.sh); Debian's
// crun 1.8.1 refuses the OCI spec version CRI-O 1.34 writes ("unknown version specified"). All its
// state is under the node's run dir. Its registries.conf defines no unqualified-search registry,
// so a short name fails as on a node configured so; each registry host is a drop-in of
// registries.conf.d (the node's registryConfigDir), which CRI-O re-reads when it changes
// (auto_reload_registries). policy.json accepts anything; `<namespace>.json` in policyDir
// replaces it for that namespace's pulls (CRI-O's per-namespace signature policy).
// Config keys: cri-o v1.34.0 pkg/config/config.go; registries.conf: containers/image
// docs/containers-registries.conf.5.md.
import { execFile, spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { buildRuntime } from './runtime-build.ts';
import type { RegistryHostConfig, RuntimeDriver, RuntimeStartContext } from './runtimes.ts';

const run = promisify(execFile);
const MODULE_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', 'runtimes', 'crio');
const CONMON = '/usr/bin/conmon';
const RUNC = '/usr/sbin/runc';

/** The per-namespace signature policy dir of the node whose CRI socket is `criSocket`. */
export function crioPolicyDir(criSocket: string): string {
  return path.join(path.dirname(criSocket), 'policies');
}

const q = (s: string): string => JSON.stringify(s);

/** crio.conf: state under `dir`, cgroupfs, conmon in the pod's cgroup, the node's CNI and pause image. */
function crioConfig(ctx: RuntimeStartContext, dir: string, pinns: string): string {
  const at = (p: string): string => q(path.join(dir, p));
  return [
    '[crio]',
    `root = ${at('storage')}`,
    `runroot = ${at('run')}`,
    'storage_driver = "overlay"',
    `log_dir = ${at('pod-logs')}`,
    `version_file = ${at('version')}`,
    `version_file_persist = ${at('version-persist')}`,
    `clean_shutdown_file = ${at('clean.shutdown')}`,
    '[crio.api]',
    `listen = ${at('crio.sock')}`,
    'stream_address = "127.0.0.1"',
    'stream_port = "0"',
    '[crio.runtime]',
    'default_runtime = "runc"',
    'cgroup_manager = "cgroupfs"',
    'conmon_cgroup = "pod"',
    'selinux = false',
    'hooks_dir = []',
    `namespaces_dir = ${at('ns')}`,
    `pinns_path = ${q(pinns)}`,
    `container_exits_dir = ${at('exits')}`,
    `container_attach_socket_dir = ${at('attach')}`,
    'enable_criu_support = false',
    'irqbalance_config_file = ""',
    'irqbalance_config_restore_file = "disable"',
    '[crio.runtime.runtimes.runc]',
    `runtime_path = ${q(RUNC)}`,
    'runtime_type = "oci"',
    `runtime_root = ${at('runc')}`,
    `monitor_path = ${q(CONMON)}`,
    'monitor_cgroup = "pod"',
    '[crio.image]',
    `pause_image = ${q(ctx.pauseImage)}`,
    `signature_policy = ${at('policy.json')}`,
    `signature_policy_dir = ${at('policies')}`,
    'auto_reload_registries = true',
    // Like containerd's image_pull_progress_timeout (CRI-O's default: 0, never).
    `pull_progress_timeout = ${q(ctx.options.imagePullProgressTimeout ?? '0s')}`,
    `big_files_temporary_dir = ${at('tmp')}`,
    '[crio.network]',
    `network_dir = ${q(ctx.cniConfDir)}`,
    `plugin_dirs = [${q(ctx.cniBinDir)}]`,
    '[crio.metrics]',
    'enable_metrics = false',
    '[crio.nri]',
    'enable_nri = false',
    '',
  ].join('\n');
}

/** CRI-O's "Applied new registry configuration" log lines, oldest first. */
function appliedRegistryConfigs(logFile: string): string[] {
  const text = fs.existsSync(logFile) ? fs.readFileSync(logFile, 'utf8') : '';
  return text.split('\n').filter((line) => line.includes('msg="Applied new registry configuration'));
}

function dropInFile(dir: string, hostPort: string): string {
  return path.join(dir, `${hostPort.replace(/[^A-Za-z0-9.-]/g, '_')}.conf`);
}

/** A registries.conf drop-in for `hostPort`: its mirrors (plain HTTP) first, then the host. */
function registryDropIn(hostPort: string, cfg: RegistryHostConfig = {}): string {
  const lines = ['[[registry]]', `prefix = ${q(hostPort)}`, `location = ${q(hostPort)}`, `insecure = ${(cfg.scheme ?? 'http') === 'http'}`];
  if (cfg.blocked) lines.push('blocked = true');
  for (const m of cfg.mirrors ?? []) lines.push('', '[[registry.mirror]]', `location = ${q(m)}`, 'insecure = true');
  return lines.join('\n') + '\n';
}

function cacheRoot(): string {
  const xdg = process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache');
  return path.join(xdg, 'imagepull-sweeper', 'node');
}

/**
 * Compiles pinns (CRI-O's namespace pinner, C, not a Go package) from the cri-o module source
 * that build.sh downloaded; cached by the source's hash.
 */
async function buildPinns(log: (l: string) => void): Promise<string> {
  const { stdout } = await run('go', ['list', '-m', '-f', '{{.Dir}}', 'github.com/cri-o/cri-o'], { cwd: MODULE_DIR });
  const srcDir = path.join(stdout.trim(), 'pinns', 'src');
  const sources = fs
    .readdirSync(srcDir)
    .filter((f) => f.endsWith('.c'))
    .sort()
    .map((f) => path.join(srcDir, f));
  const h = createHash('sha256');
  for (const f of fs.readdirSync(srcDir).sort()) h.update(f).update(fs.readFileSync(path.join(srcDir, f)));
  const dir = path.join(cacheRoot(), `pinns-${h.digest('hex').slice(0, 16)}`);
  const bin = path.join(dir, 'pinns');
  if (fs.existsSync(bin)) return bin;
  const t0 = Date.now();
  fs.mkdirSync(dir, { recursive: true });
  const tmp = `${bin}.tmp.${process.pid}`;
  // Flags of cri-o's pinns/Makefile (without -Werror: a newer compiler's new warning must not fail it).
  await run('cc', ['-std=c99', '-Os', '-Wall', '-Wextra', '-static', '-o', tmp, ...sources]);
  fs.renameSync(tmp, bin);
  log(`pinns built in ${Date.now() - t0} ms (${bin})`);
  return bin;
}

function haveExecutable(p: string): boolean {
  try {
    fs.accessSync(p, fs.constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** Whether something accepts connections on the unix socket `sock`. */
function socketAnswers(sock: string): Promise<boolean> {
  return new Promise((resolve) => {
    const c = net.connect(sock);
    c.once('connect', () => {
      c.destroy();
      resolve(true);
    });
    c.once('error', () => resolve(false));
  });
}

/**
 * On cgroup v1, mounts the hugetlb hierarchy when the kernel has the controller but nothing mounts
 * it (as on these VMs; a systemd host mounts it). CRI-O asks /proc/cgroups, puts hugepage limits
 * in every container's spec, and runc then fails "cannot set hugetlb limit: container could not
 * join or create cgroup". containerd leaves hugetlb out (disable_hugetlb_controller).
 */
async function ensureHugetlbHierarchy(log: (l: string) => void): Promise<void> {
  const v1Options = fs
    .readFileSync('/proc/mounts', 'utf8')
    .split('\n')
    .map((l) => l.split(' '))
    .filter((f) => f[2] === 'cgroup')
    .map((f) => (f[3] ?? '').split(','));
  if (v1Options.length === 0 || v1Options.some((o) => o.includes('hugetlb'))) return;
  if (!/^hugetlb\s+\d+\s+\d+\s+1$/m.test(fs.readFileSync('/proc/cgroups', 'utf8'))) return;
  const dir = '/sys/fs/cgroup/hugetlb';
  fs.mkdirSync(dir, { recursive: true });
  await run('mount', ['-t', 'cgroup', '-o', 'hugetlb', 'cgroup', dir]);
  log(`mounted the cgroup v1 hugetlb hierarchy on ${dir} (CRI-O sets hugetlb limits when the kernel has the controller)`);
}

let binaries: { crio: string; pinns: string } | undefined;

/** CRI-O from test/runtimes/crio. */
export const crio: RuntimeDriver = {
  runtime: 'crio',
  logs: ['crio'],
  support() {
    if (spawnSync('go', ['version'], { stdio: 'ignore' }).status !== 0)
      return 'crio is built from its Go module and there is no `go` on PATH';
    if (spawnSync('cc', ['--version'], { stdio: 'ignore' }).status !== 0)
      return "crio's pinns is built from C and there is no `cc` on PATH";
    return undefined;
  },
  async prepare(log) {
    const dir = await buildRuntime('crio', ['crio']);
    binaries = { crio: path.join(dir, 'crio'), pinns: await buildPinns(log) };
    await ensureHugetlbHierarchy(log);
    for (const b of [CONMON, RUNC]) if (!haveExecutable(b)) throw new Error(`crio needs ${b} (test/node/setup.sh installs it)`);
  },
  async start(ctx) {
    if (!binaries) throw new Error('crio: start() before prepare()');
    const dir = path.join(ctx.runDir, 'crio');
    for (const d of ['policies', 'conf.d', 'tmp']) fs.mkdirSync(path.join(dir, d), { recursive: true });
    fs.mkdirSync(ctx.registryConfigDir, { recursive: true });
    const configFile = path.join(dir, 'crio.conf');
    fs.writeFileSync(configFile, crioConfig(ctx, dir, binaries.pinns));
    const registriesConf = path.join(dir, 'registries.conf');
    // No unqualified-search registries: short names resolve nowhere.
    fs.writeFileSync(registriesConf, 'unqualified-search-registries = []\nshort-name-mode = "enforcing"\n');
    fs.writeFileSync(path.join(dir, 'policy.json'), JSON.stringify({ default: [{ type: 'insecureAcceptAnything' }] }) + '\n');
    const sock = path.join(dir, 'crio.sock');
    ctx.log(`starting crio (${binaries.crio}, ${sock})`);
    ctx.launch('crio', binaries.crio, [
      '--config',
      configFile,
      // Empty: nothing from /etc/crio/crio.conf.d or /etc/containers/registries.conf.d.
      '--config-dir',
      path.join(dir, 'conf.d'),
      '--registries-conf',
      registriesConf,
      '--registries-conf-dir',
      ctx.registryConfigDir,
      '--log-level',
      'info',
    ]);
    await ctx.waitUntil('crio socket', () => fs.existsSync(sock) && socketAnswers(sock));
    return { criSocket: sock };
  },
  addRegistryHost(dir, hostPort, cfg) {
    fs.mkdirSync(dir, { recursive: true });
    const file = dropInFile(dir, hostPort);
    fs.writeFileSync(`${file}.tmp`, registryDropIn(hostPort, cfg));
    fs.renameSync(`${file}.tmp`, file);
  },
  removeRegistryHost(dir, hostPort) {
    fs.rmSync(dropInFile(dir, hostPort), { force: true });
  },
  // The reload is asynchronous (fsnotify): a pull started before CRI-O logs the new registry
  // configuration still uses the old one (a mirror not yet tried).
  async applyRegistryChange({ registryConfigDir, logDir }, hostPort, present, write) {
    const unchanged = !present && !fs.existsSync(dropInFile(registryConfigDir, hostPort));
    const logFile = path.join(logDir, 'crio.log');
    const appliedBefore = appliedRegistryConfigs(logFile).length;
    write();
    if (unchanged) return;
    const deadline = Date.now() + 15_000;
    for (;;) {
      const fresh = appliedRegistryConfigs(logFile).slice(appliedBefore);
      if (fresh.some((line) => line.includes(`{Prefix:${hostPort} `) === present)) return;
      if (Date.now() > deadline) {
        throw new Error(
          `CRI-O did not reload its registries configuration with ${hostPort} ${present ? 'added' : 'removed'} within 15 s (${logFile})`,
        );
      }
      await new Promise((r) => setTimeout(r, 50));
    }
  },
  async runningContainers(criSocket) {
    try {
      const { stdout } = await run(RUNC, ['--root', path.join(path.dirname(criSocket), 'runc'), 'list', '--quiet'], { timeout: 5_000 });
      return stdout.trim() === '' ? 0 : stdout.trim().split('\n').length;
    } catch {
      return undefined;
    }
  },
};
