// Per-file wiring of an e2e test to a cluster (the shared one, or a control plane of its own): hooks, fresh namespaces, cleanup.
import { after, before } from 'node:test';
import type { KubeConfig } from '@kubernetes/client-node';
import { registerKubeconfigSecrets } from './cli.ts';
import { ownTestCluster, testCluster, type TestCluster } from './cluster.ts';
import { createNamespace } from './fixtures.ts';

export interface ClusterHooks {
  /** The cluster; available from the first `before` on. */
  readonly cluster: TestCluster;
  readonly kc: KubeConfig;
  /** A fresh namespace `${prefix}-xxxxx`, deleted after the file's tests. */
  namespace(prefix: string, labels?: Record<string, string>): Promise<string>;
  /** Runs after the file's tests, newest first; failures are ignored. */
  onCleanup(cleanup: () => Promise<unknown>): void;
}

/**
 * Call at the top level of a test file. `setup` runs once the cluster is there (the file's own
 * top-level `before` hooks are not guaranteed to wait for it). `ownControlPlane`: a control plane
 * of the file's own, for a file whose load (hundreds of Jobs) would hold up the shared Job
 * controller for the files beside it.
 */
export function useTestCluster(
  setup?: (hooks: ClusterHooks) => void | Promise<void>,
  opts: { ownControlPlane?: boolean } = {},
): ClusterHooks {
  let current: TestCluster | undefined;
  const cleanups: (() => Promise<unknown>)[] = [];
  before(async () => {
    current = opts.ownControlPlane ? await ownTestCluster() : await testCluster();
    // Its credentials, like the shared cluster's, must never appear in the CLI's output.
    if (opts.ownControlPlane) registerKubeconfigSecrets(current.kubeconfigPath);
    await setup?.(hooks);
  });
  after(async () => {
    for (const cleanup of cleanups.reverse()) await cleanup().catch(() => undefined);
    await current?.release();
  });
  const cluster = (): TestCluster => {
    if (!current) throw new Error('the test cluster is not started yet (use it inside tests or later hooks)');
    return current;
  };
  const hooks: ClusterHooks = {
    get cluster() {
      return cluster();
    },
    get kc() {
      return cluster().kubeConfig;
    },
    async namespace(prefix, labels = {}) {
      const ns = await createNamespace(cluster().kubeConfig, prefix, labels);
      cleanups.push(ns.remove);
      return ns.name;
    },
    onCleanup(cleanup) {
      cleanups.push(cleanup);
    },
  };
  return hooks;
}
