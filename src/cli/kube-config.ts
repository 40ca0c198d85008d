// Loaded only by commands that talk to a cluster (client-node is most of the start-up cost).
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { UsageError } from './errors.ts';

export interface ConnectionOptions {
  kubeconfig?: string;
  context?: string;
}

/** Credentials the way kubectl finds them: --kubeconfig, then KUBECONFIG, ~/.kube/config, in-cluster. */
export function loadKubeConfig(options: ConnectionOptions): KubeConfig {
  const kc = new KubeConfig();
  if (options.kubeconfig) {
    if (!existsSync(options.kubeconfig)) throw new UsageError(`--kubeconfig ${options.kubeconfig}: no such file`);
    try {
      kc.loadFromFile(options.kubeconfig);
    } catch (error) {
      throw new UsageError(`--kubeconfig ${options.kubeconfig}: ${(error as Error).message}`);
    }
  } else {
    if (!hasDefaultCredentials()) {
      throw new UsageError('no kubeconfig found (use --kubeconfig, set KUBECONFIG, create ~/.kube/config, or run in a pod)');
    }
    try {
      kc.loadFromDefault();
    } catch (error) {
      throw new UsageError(`cannot load a kubeconfig: ${(error as Error).message}`);
    }
  }
  if (options.context) {
    if (!kc.getContextObject(options.context)) {
      const known = kc.getContexts().map((c) => c.name);
      throw new UsageError(`--context ${options.context}: no such context (known: ${known.join(', ') || 'none'})`);
    }
    kc.setCurrentContext(options.context);
  }
  if (!kc.getCurrentCluster()) throw new UsageError('no cluster in the kubeconfig (use --kubeconfig, KUBECONFIG or run in a pod)');
  return kc;
}

function hasDefaultCredentials(env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.KUBECONFIG) return true;
  if (existsSync(join(homedir(), '.kube', 'config'))) return true;
  return Boolean(env.KUBERNETES_SERVICE_HOST && env.KUBERNETES_SERVICE_PORT);
}
