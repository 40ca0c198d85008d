// The Lease calls of leader election (coordination.k8s.io/v1), over the gateway's HTTP path and
// its retry policy (kube/retrying.ts withLeaseRetries).
import type { KubeConfig } from '@kubernetes/client-node';
import { DEFAULT_REQUEST_TIMEOUT_MS } from './timeout.ts';
import { type ClientSettings, type ResponseObserver, createKubeHttp } from './http.ts';
import { judgeWriteError, tryRead } from './write-outcome.ts';

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

/** A write of the Lease that landed: the record's new resourceVersion, when the answer gave it. */
export interface LeaseWritten {
  resourceVersion: string | undefined;
}

/** One Lease. `create` and `replace` answer false on a conflict (another candidate wrote first). */
export interface LeaseStore {
  readonly namespace: string;
  readonly name: string;
  read(): Promise<Lease | undefined>;
  create(spec: LeaseSpec): Promise<LeaseWritten | false>;
  replace(resourceVersion: string, spec: LeaseSpec): Promise<LeaseWritten | false>;
}

/** The Lease calls of the gateway: the same HTTP path, and (kube/retrying.ts) the same retry policy. */
export interface LeaseGateway {
  readLease(namespace: string, name: string): Promise<Lease>;
  /** Resolves to the written record's resourceVersion (undefined when the answer did not give it). */
  createLease(namespace: string, name: string, spec: LeaseSpec): Promise<string | undefined>;
  replaceLease(namespace: string, name: string, resourceVersion: string, spec: LeaseSpec): Promise<string | undefined>;
}

export function createLeaseGateway(
  kubeConfig: KubeConfig,
  options: { timeoutMs?: number; onResponse?: ResponseObserver; settings?: ClientSettings } = {},
): LeaseGateway {
  const raw = createKubeHttp(kubeConfig, options.timeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS, undefined, options.onResponse, options.settings);
  const collection = (namespace: string) => `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}/leases`;
  const lease = (namespace: string, name: string, spec: LeaseSpec, resourceVersion?: string) => ({
    apiVersion: 'coordination.k8s.io/v1',
    kind: 'Lease',
    metadata: { name, namespace, ...(resourceVersion === undefined ? {} : { resourceVersion }) },
    spec,
  });
  return {
    readLease: async (namespace, name) => (await raw.getJson(`${collection(namespace)}/${encodeURIComponent(name)}`, {})) as Lease,
    createLease: async (namespace, name, spec) =>
      ((await raw.send('POST', collection(namespace), { body: lease(namespace, name, spec) })) as Lease | undefined)?.metadata
        ?.resourceVersion,
    replaceLease: async (namespace, name, resourceVersion, spec) => {
      const body = lease(namespace, name, spec, resourceVersion);
      return ((await raw.send('PUT', `${collection(namespace)}/${encodeURIComponent(name)}`, { body })) as Lease | undefined)?.metadata
        ?.resourceVersion;
    },
  };
}

/**
 * One Lease, by namespace and name: read (undefined when absent), create, and replace with the
 * resourceVersion it was read at (a 409 Conflict means someone else wrote it first: `false`).
 */
export function createLeaseStore(gateway: LeaseGateway, namespace: string, name: string): LeaseStore {
  const conflictIsFalse = (error: unknown): false => {
    const outcome = judgeWriteError('update', error);
    if (!outcome.landed && outcome.why === 'conflict') return false;
    throw error;
  };
  return {
    namespace,
    name,
    read: async () => {
      const read = await tryRead(() => gateway.readLease(namespace, name));
      if (read.found) return read.value;
      if (read.gone) return undefined;
      throw read.error;
    },
    create: (spec) => gateway.createLease(namespace, name, spec).then((rv) => ({ resourceVersion: rv }), conflictIsFalse),
    replace: (resourceVersion, spec) =>
      gateway.replaceLease(namespace, name, resourceVersion, spec).then((rv) => ({ resourceVersion: rv }), conflictIsFalse),
  };
}
