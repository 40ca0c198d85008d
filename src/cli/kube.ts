import { existsSync, readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { KUEUE_CONFIGURATION } from '../observe/kueue-timeout.ts';
import { DEFAULT_POLICY_CONFIGMAP, type PolicyLocation } from '../policy/load.ts';
import { UsageError } from './errors.ts';

const SERVICE_ACCOUNT_NAMESPACE_FILE = '/var/run/secrets/kubernetes.io/serviceaccount/namespace';
/** Where the shipped manifests install the sweeper. */
export const INSTALL_NAMESPACE = 'imagepull-sweeper';

/** The namespace this sweeper runs in: POD_NAMESPACE, the pod's ServiceAccount, else the install namespace. */
export function ownNamespace(env: NodeJS.ProcessEnv = process.env): string {
  if (env.POD_NAMESPACE) return env.POD_NAMESPACE;
  if (existsSync(SERVICE_ACCOUNT_NAMESPACE_FILE)) return readFileSync(SERVICE_ACCOUNT_NAMESPACE_FILE, 'utf8').trim();
  return INSTALL_NAMESPACE;
}

/** `kubectl imagepull-sweeper` when run as the kubectl plugin (kubectl-imagepull_sweeper), else imagepull-sweeper. */
export function invokedName(script: string | undefined = process.argv[1]): string {
  return /(^|[\\/])kubectl-imagepull_sweeper(\.[cm]?js)?$/.test(script ?? '') ? 'kubectl imagepull-sweeper' : 'imagepull-sweeper';
}

export function instanceName(env: NodeJS.ProcessEnv = process.env): string {
  return env.POD_NAME || hostname();
}

/** --kueue-config NS/NAME, else where Kueue's manifests and chart keep its configuration. */
export function kueueConfigLocation(flag: string | undefined): { namespace: string; name: string } {
  if (flag === undefined) return { namespace: KUEUE_CONFIGURATION.namespace, name: KUEUE_CONFIGURATION.name };
  const match = OBJECT_REFERENCE.exec(flag);
  if (!match) throw new UsageError(`--kueue-config ${flag}: expected NAMESPACE/NAME`);
  return { namespace: match[1]!, name: match[3]! };
}

const OBJECT_REFERENCE = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?)\/([a-z0-9]([-.a-z0-9]*[a-z0-9])?)$/;

/** --policy-file wins; else --policy-configmap NS/NAME; else the default ConfigMap in our namespace. */
export function policyLocation(options: { policyFile?: string; policyConfigmap?: string }, stdin?: () => Promise<string>): PolicyLocation {
  if (options.policyFile && options.policyConfigmap) {
    throw new UsageError('--policy-file and --policy-configmap cannot be used together');
  }
  if (options.policyFile) return { kind: 'file', path: options.policyFile, ...(options.policyFile === '-' && stdin ? { stdin } : {}) };
  if (options.policyConfigmap) {
    const match = OBJECT_REFERENCE.exec(options.policyConfigmap);
    if (!match) throw new UsageError(`--policy-configmap ${options.policyConfigmap}: expected NAMESPACE/NAME`);
    return { kind: 'configmap', namespace: match[1]!, name: match[3]! };
  }
  return { kind: 'configmap', namespace: ownNamespace(), name: DEFAULT_POLICY_CONFIGMAP, isDefault: true };
}
