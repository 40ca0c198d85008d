// The Lease calls of leader election (coordination.k8s.io/v1), over the gateway's HTTP path.
import type { KubeConfig } from '@kubernetes/client-node';
import { ApiStatusError } from './errors.ts';
import { DEFAULT_REQUEST_TIMEOUT_MS } from './timeout.ts';
import { createKubeHttp } from './http.ts';

export interface LeaseSpec {
  holderIdentity?: string | null;
  leaseDurationSeconds?: number | null;
  acquireTime?: string | null;
  renewTime?: string | null;
  leaseTransitions?: number | null;
}

export interface Lease {
  metadata?: { resourceVersion?: string };
  spec?: LeaseSpec;
}

/** One Lease. `create` and `replace` answer false on a conflict (another candidate wrote first). */
export interface LeaseStore {
  readonly namespace: string;
  readonly name: string;
  read(): Promise<Lease | undefined>;
  create(spec: LeaseSpec): Promise<boolean>;
  replace(resourceVersion: string, spec: LeaseSpec): Promise<boolean>;
}

/**
 * One Lease, by namespace and name: read (undefined when absent), create, and replace with the
 * resourceVersion it was read at (a 409 Conflict means someone else wrote it first: `false`).
 */
export function createLeaseStore(
  kubeConfig: KubeConfig,
  namespace: string,
  name: string,
  options: { timeoutMs?: number } = {},
): LeaseStore {
  const raw = createKubeHttp(kubeConfig, options.timeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS);
  const collection = `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}/leases`;
  const item = `${collection}/${encodeURIComponent(name)}`;
  const conflictIsFalse = (error: unknown): false => {
    if (error instanceof ApiStatusError && error.code === 409) return false;
    throw error;
  };
  return {
    namespace,
    name,
    read: () =>
      (raw.getJson(item, {}) as Promise<Lease>).catch((error: unknown) => {
        if (error instanceof ApiStatusError && error.code === 404) return undefined;
        throw error;
      }),
    create: (spec) =>
      raw
        .send('POST', collection, {
          body: { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name, namespace }, spec },
          ignoreAnswer: true,
        })
        .then(() => true as const, conflictIsFalse),
    replace: (resourceVersion, spec) =>
      raw
        .send('PUT', item, {
          body: { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name, namespace, resourceVersion }, spec },
          ignoreAnswer: true,
        })
        .then(() => true as const, conflictIsFalse),
  };
}
