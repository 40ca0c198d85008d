// The container runtimes a real test node can run, each behind a RuntimeDriver (one file per
// runtime family: runtime-containerd.ts, ...). node.ts starts registries, CNI config, cgroups and
// the kubelet the same way for every runtime and asks the driver for the runtime itself.
//
//   containerd   Debian 12's containerd 1.6 (apt, test/node/setup.sh)
//   containerd2  containerd 2.x built from its Go module (test/runtimes/containerd2, build.sh)
//   crio         CRI-O built from its Go module (test/runtimes/crio, build.sh), Debian's conmon and runc
//
// The e2e runner starts one node per runtime of the run: $IMAGEPULL_SWEEPER_TEST_RUNTIMES (comma
// separated), by default every runtime whose driver says this machine can run it.
import { containerd16, containerd2 } from './runtime-containerd.ts';
import { crio } from './runtime-crio.ts';

export type NodeRuntime = 'containerd' | 'containerd2' | 'crio';
export const NODE_RUNTIMES: readonly NodeRuntime[] = ['containerd', 'containerd2', 'crio'];
/** Env var choosing the runtimes of an e2e run, e.g. `containerd,containerd2`. */
export const TEST_RUNTIMES_ENV = 'IMAGEPULL_SWEEPER_TEST_RUNTIMES';

/** Runtime settings a test may change (each driver says which it honours). */
export interface RuntimeOptions {
  /** containerd ≥ 1.7: cancel a pull that makes no progress for this long (Go duration; default 5m). */
  imagePullProgressTimeout?: string;
}

/** What node.ts hands a driver to start the runtime with. */
export interface RuntimeStartContext {
  nodeName: string;
  runDir: string;
  logDir: string;
  /** The sandbox (pause) image, already in the open registry. */
  pauseImage: string;
  cniConfDir: string;
  cniBinDir: string;
  /** Where per-registry host config lives (the driver's addRegistryHost writes it). */
  registryConfigDir: string;
  options: RuntimeOptions;
  /** Spawns a process of the node (own process group, in the node's cgroup, log in logDir/what.log). */
  launch(what: string, bin: string, args: string[], env?: NodeJS.ProcessEnv): number;
  /** Polls `check` until true; throws when a node process exited or the node's start timed out. */
  waitUntil(what: string, check: () => Promise<boolean> | boolean): Promise<void>;
  log(line: string): void;
}

/** A registry host's config: plain HTTP or HTTPS, and mirrors tried before it (in order). */
export interface RegistryHostConfig {
  scheme?: 'http' | 'https';
  mirrors?: string[];
  /** CRI-O only: `blocked = true` (registries.conf), as OpenShift's image policies write it. */
  blocked?: boolean;
}

export interface RuntimeDriver {
  readonly runtime: NodeRuntime;
  /** Why this machine cannot run it (cheap: no build, no install), or undefined. */
  support(): string | undefined;
  /** Builds or checks its binaries (cached); node packages are installed by setup.sh before. */
  prepare(log: (line: string) => void): Promise<void>;
  /** Starts it (via ctx.launch) and waits until its CRI socket answers; returns that socket. */
  start(ctx: RuntimeStartContext): Promise<{ criSocket: string }>;
  /** Names of the logs (logDir/NAME.log) worth showing when the node fails to start. */
  readonly logs: string[];
  /** Writes the host config of `hostPort` (takes effect for the next pull). */
  addRegistryHost(registryConfigDir: string, hostPort: string, cfg?: RegistryHostConfig): void;
  removeRegistryHost(registryConfigDir: string, hostPort: string): void;
  /**
   * Runs `write` (an add or remove of `hostPort`'s host config) on the running runtime and resolves
   * once pulls see it. Absent: the runtime reads host config on every pull (containerd).
   */
  applyRegistryChange?(
    node: { registryConfigDir: string; logDir: string },
    hostPort: string,
    present: boolean,
    write: () => void,
  ): Promise<void>;
  /** How many containers (including sandboxes) still run; undefined when it cannot tell. */
  runningContainers(criSocket: string): Promise<number | undefined>;
}

const DRIVERS: Partial<Record<NodeRuntime, RuntimeDriver>> = {
  containerd: containerd16,
  containerd2,
  crio,
};

export function isNodeRuntime(s: string): s is NodeRuntime {
  return (NODE_RUNTIMES as readonly string[]).includes(s);
}

export function runtimeDriver(runtime: NodeRuntime): RuntimeDriver {
  const d = DRIVERS[runtime];
  if (!d) throw new Error(`the test node has no driver for runtime ${runtime} yet`);
  return d;
}

/** Why `runtime` cannot run on this machine, or undefined. */
export function runtimeSupport(runtime: NodeRuntime): string | undefined {
  const d = DRIVERS[runtime];
  return d ? d.support() : `the test node has no driver for ${runtime} yet`;
}

/**
 * The runtimes asked for by $IMAGEPULL_SWEEPER_TEST_RUNTIMES (an unknown name is an error), or by
 * default every runtime this machine can run.
 */
export function requestedRuntimes(env: NodeJS.ProcessEnv = process.env): NodeRuntime[] {
  const raw = env[TEST_RUNTIMES_ENV]?.trim();
  if (!raw) return NODE_RUNTIMES.filter((r) => runtimeSupport(r) === undefined);
  const names = [
    ...new Set(
      raw
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean),
    ),
  ];
  const bad = names.filter((n) => !isNodeRuntime(n));
  if (bad.length > 0) throw new Error(`${TEST_RUNTIMES_ENV}: unknown runtime ${bad.join(', ')} (known: ${NODE_RUNTIMES.join(', ')})`);
  return names as NodeRuntime[];
}
