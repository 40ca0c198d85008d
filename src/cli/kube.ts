import { existsSync, readFileSync } from 'node:fs';
import { homedir, hostname } from 'node:os';
import { join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { DEFAULT_POLICY_CONFIGMAP, type PolicyLocation } from '../policy/load.ts';
import { UsageError } from './errors.ts';

const SERVICE_ACCOUNT_NAMESPACE_FILE = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';
/** Where the shipped manifests install the sweeper. */
export const INSTALL_NAMESPACE = 'imagepull-sweeper';

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

/** The namespace this sweeper runs in: POD_NAMESPACE, the pod's ServiceAccount, else the install namespace. */
export function ownNamespace(env: NodeJS.ProcessEnv = process.env): string {
  if (env.POD_NAMESPACE) return env.POD_NAMESPACE;
  if (existsSync(SERVICE_ACCOUNT_NAMESPACE_FILE)) return readFileSync(SERVICE_ACCOUNT_NAMESPACE_FILE, 'utf8').trim();
  return INSTALL_NAMESPACE;
}

export function instanceName(env: NodeJS.ProcessEnv = process.env): string {
  return env.POD_NAME || hostname();
}

/** --policy-file wins; else --policy-configmap NS/NAME; else the default ConfigMap in our namespace. */
export function policyLocation(options: { policyFile?: string; policyConfigmap?: string }): PolicyLocation {
  if (options.policyFile && options.policyConfigmap) {
    throw new UsageError('--policy-file and --policy-configmap cannot be used together');
  }
  if (options.policyFile) return { kind: 'file', path: options.policyFile };
  if (options.policyConfigmap) {
    const match = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?)\/([a-z0-9]([-.a-z0-9]*[a-z0-9])?)$/.exec(options.policyConfigmap);
    if (!match) throw new UsageError(`--policy-configmap ${options.policyConfigmap}: expected NAMESPACE/NAME`);
    return { kind: 'configmap', namespace: match[1]!, name: match[3]! };
  }
  return { kind: 'configmap', namespace: ownNamespace(), name: DEFAULT_POLICY_CONFIGMAP, isDefault: true };
}

function hasDefaultCredentials(env: NodeJS.ProcessEnv = process.env): boolean {
  if (env.KUBECONFIG) return true;
  if (existsSync(join(homedir(), '.kube', 'config'))) return true;
  return Boolean(env.KUBERNETES_SERVICE_HOST && env.KUBERNETES_SERVICE_PORT);
}
