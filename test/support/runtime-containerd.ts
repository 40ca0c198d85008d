// containerd on the test node: Debian 12's 1.6 (`containerd`, config version 2) and 2.x built
// from its Go module by test/runtimes/build.sh (`containerd2`, config version 3, the format of
// containerd 2.0 to 2.4; 2.4 migrates it to its version 4 on load). Both run runc from Debian
// (1.1.5) through a runc shim, read registry host config from `config_path` (one
// `<host:port>/hosts.toml` per registry) and use the node's CNI bridge.
// Config keys: containerd v2.4.2 internal/cri/config/config.go (ImageConfig, RuntimeConfig,
// ServerConfig, Registry) and 1.6's pkg/cri/config/config.go.
import { execFile, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { buildRuntime } from './runtime-build.ts';
import type { NodeRuntime, RegistryHostConfig, RuntimeDriver, RuntimeStartContext } from './runtimes.ts';

const run = promisify(execFile);

/** containerd's hosts.toml for `hostPort`: its mirrors first, then the host itself. */
function hostsToml(hostPort: string, cfg: RegistryHostConfig = {}): string {
  const url = (h: string): string => `${cfg.scheme ?? 'http'}://${h}`;
  const lines = [`server = "${url(hostPort)}"`, ''];
  // A mirror is plain HTTP on loopback, like the test registries.
  for (const m of cfg.mirrors ?? []) lines.push(`[host."http://${m}"]`, '  capabilities = ["pull", "resolve"]', '');
  lines.push(`[host."${url(hostPort)}"]`, '  capabilities = ["pull", "resolve"]', '');
  return lines.join('\n');
}

function cniNetwork(ctx: RuntimeStartContext): { bin: string; conf: string } {
  return { bin: ctx.cniBinDir, conf: ctx.cniConfDir };
}

/** containerd 1.6 (config version 2, one CRI plugin `io.containerd.grpc.v1.cri`). */
function config16(ctx: RuntimeStartContext, root: string, sock: string): string {
  const cri = 'plugins."io.containerd.grpc.v1.cri"';
  const cni = cniNetwork(ctx);
  return [
    'version = 2',
    `root = "${root}/root"`,
    `state = "${root}/state"`,
    `[grpc]`,
    `  address = "${sock}"`,
    `[ttrpc]`,
    `  address = "${sock}.ttrpc"`,
    `[debug]`,
    `  address = ""`,
    `[metrics]`,
    `  address = ""`,
    `[${cri}]`,
    `  sandbox_image = "${ctx.pauseImage}"`,
    // The VM lacks CAP_SYS_RESOURCE: without this runc fails "can't get final child's PID from pipe".
    `  restrict_oom_score_adj = true`,
    `  stream_server_address = "127.0.0.1"`,
    `  stream_server_port = "0"`,
    `  enable_selinux = false`,
    `  netns_mounts_under_state_dir = true`,
    `  [${cri}.containerd]`,
    `    snapshotter = "overlayfs"`,
    `    default_runtime_name = "runc"`,
    `    [${cri}.containerd.runtimes.runc]`,
    `      runtime_type = "io.containerd.runc.v2"`,
    `      [${cri}.containerd.runtimes.runc.options]`,
    `        SystemdCgroup = false`,
    `  [${cri}.cni]`,
    `    bin_dir = "${cni.bin}"`,
    `    conf_dir = "${cni.conf}"`,
    `    max_conf_num = 1`,
    `  [${cri}.registry]`,
    `    config_path = "${ctx.registryConfigDir}"`,
    '',
  ].join('\n');
}

/**
 * containerd 2.x (config version 3): images (`io.containerd.cri.v1.images`), runtime
 * (`io.containerd.cri.v1.runtime`) and the CRI server (`io.containerd.grpc.v1.cri`) are separate
 * plugins; the sandbox image is the pinned image `sandbox`.
 */
function config2(ctx: RuntimeStartContext, root: string, sock: string): string {
  const images = `plugins.'io.containerd.cri.v1.images'`;
  const rt = `plugins.'io.containerd.cri.v1.runtime'`;
  const cni = cniNetwork(ctx);
  return [
    'version = 3',
    `root = "${root}/root"`,
    `state = "${root}/state"`,
    `[grpc]`,
    `  address = "${sock}"`,
    `[ttrpc]`,
    `  address = "${sock}.ttrpc"`,
    `[debug]`,
    `  address = ""`,
    `[metrics]`,
    `  address = ""`,
    `[${images}]`,
    `  snapshotter = "overlayfs"`,
    ...(ctx.options.imagePullProgressTimeout ? [`  image_pull_progress_timeout = "${ctx.options.imagePullProgressTimeout}"`] : []),
    `  [${images}.pinned_images]`,
    `    sandbox = "${ctx.pauseImage}"`,
    `  [${images}.registry]`,
    `    config_path = "${ctx.registryConfigDir}"`,
    `[${rt}]`,
    `  restrict_oom_score_adj = true`,
    `  enable_selinux = false`,
    `  netns_mounts_under_state_dir = true`,
    `  [${rt}.containerd]`,
    `    default_runtime_name = "runc"`,
    `    [${rt}.containerd.runtimes.runc]`,
    `      runtime_type = "io.containerd.runc.v2"`,
    `      [${rt}.containerd.runtimes.runc.options]`,
    `        SystemdCgroup = false`,
    `  [${rt}.cni]`,
    `    bin_dirs = ["${cni.bin}"]`,
    `    conf_dir = "${cni.conf}"`,
    `    max_conf_num = 1`,
    `[plugins.'io.containerd.grpc.v1.cri']`,
    `  stream_server_address = "127.0.0.1"`,
    `  stream_server_port = "0"`,
    '',
  ].join('\n');
}

function containerdDriver(
  runtime: NodeRuntime,
  binaries: () => Promise<string | undefined>,
  config: (ctx: RuntimeStartContext, root: string, sock: string) => string,
  support: () => string | undefined,
): RuntimeDriver {
  let binDir: string | undefined;
  return {
    runtime,
    support,
    logs: ['containerd'],
    async prepare() {
      binDir = await binaries();
    },
    async start(ctx) {
      const root = path.join(ctx.runDir, 'containerd');
      const sock = path.join(root, 'containerd.sock');
      const file = path.join(ctx.runDir, 'containerd.toml');
      fs.writeFileSync(file, config(ctx, root, sock));
      const bin = binDir ? path.join(binDir, 'containerd') : 'containerd';
      // containerd finds its shim on PATH: the built one must come before Debian's.
      const env = binDir ? { ...process.env, PATH: `${binDir}:${process.env.PATH ?? ''}` } : undefined;
      ctx.log(`starting ${runtime} (${bin}, ${sock})`);
      ctx.launch('containerd', bin, ['--config', file, '--log-level', 'warn'], env);
      await ctx.waitUntil('containerd socket', async () => {
        if (!fs.existsSync(sock)) return false;
        await run('ctr', ['--address', sock, 'version'], { timeout: 5_000 });
        return true;
      });
      return { criSocket: sock };
    },
    addRegistryHost(dir, hostPort, cfg) {
      fs.mkdirSync(path.join(dir, hostPort), { recursive: true });
      fs.writeFileSync(path.join(dir, hostPort, 'hosts.toml'), hostsToml(hostPort, cfg));
    },
    removeRegistryHost(dir, hostPort) {
      fs.rmSync(path.join(dir, hostPort), { recursive: true, force: true });
    },
    async runningContainers(sock) {
      try {
        const { stdout } = await run('ctr', ['--address', sock, '-n', 'k8s.io', 'tasks', 'ls', '-q'], { timeout: 5_000 });
        return stdout.trim() === '' ? 0 : stdout.trim().split('\n').length;
      } catch {
        return undefined;
      }
    },
  };
}

const hasGo = (): string | undefined =>
  spawnSync('go', ['version'], { stdio: 'ignore' }).status === 0
    ? undefined
    : 'containerd2 is built from its Go module and there is no `go` on PATH';

/** Debian's containerd 1.6 (installed by test/node/setup.sh). */
export const containerd16 = containerdDriver(
  'containerd',
  async () => undefined,
  config16,
  () => undefined,
);

/** containerd 2.x from test/runtimes/containerd2 (its build.sh caches the binaries). */
export const containerd2 = containerdDriver(
  'containerd2',
  () => buildRuntime('containerd2', ['containerd', 'containerd-shim-runc-v2']),
  config2,
  hasGo,
);
