// The list and watch requests of `run --watch` (docs/how-it-works.md "Event-driven mode"): one
// collection (the Pending pods, the policy ConfigMap), listed in pages and watched from the list's
// resourceVersion, each object handed on as it arrives to be reduced at once (src/watch/reflector.ts).
// Over the same lean HTTP path as the gateway (kube/http.ts): client-node's Watch would parse every
// event into its models and needs its fetch stack, which the bundle leaves out.
import type { KubeConfig } from '@kubernetes/client-node';
import { DEFAULT_REQUEST_TIMEOUT_MS } from './gateway.ts';
import { createKubeHttp, type Answer, type ClientSettings, type KubeHttp, type ResponseObserver } from './http.ts';
import { POD } from './pod-schema.ts';
import { decodeList, decodeWatchEvent, PROTOBUF, type Schema } from './protobuf.ts';

/** A collection as the watch asks for it: its path and field selector. */
export interface Collection {
  path: string;
  fieldSelector?: string;
  /** How it is named in logs and errors, e.g. `pod watch`. */
  what: string;
  /** Asked for in protobuf, read only as far as this schema (JSON when the answer is JSON). */
  protobuf?: Schema;
}

export interface ListPage<T> {
  /** Iterated once (a protobuf page is decoded item by item as it is). */
  items: Iterable<T>;
  continueToken: string | undefined;
  resourceVersion: string;
}

export type WatchEvent<T> =
  { type: 'ADDED' | 'MODIFIED' | 'DELETED'; object: T; resourceVersion: string } | { type: 'BOOKMARK'; resourceVersion: string };

/** The watch's resourceVersion is too old (410 Gone, as a status or an ERROR event): list again. */
export class WatchExpiredError extends Error {
  constructor(what: string) {
    super(`${what}: resourceVersion expired (410 Gone)`);
    this.name = 'WatchExpiredError';
  }
}

export interface WatchStream {
  resourceVersion: string;
  /** Server-side end of the watch (the API server closes it then; `timeoutSeconds`). */
  timeoutSeconds: number;
  idleTimeoutMs: number;
  signal: AbortSignal;
  /** The API server accepted the watch. */
  onAccepted?: () => void;
}

export interface WatchGateway {
  /** One page of the collection, with the list's resourceVersion. */
  list<T>(collection: Collection, opts: { limit?: number; continueToken?: string; signal?: AbortSignal }): Promise<ListPage<T>>;
  /** One watch request: resolves when the server ends it (or `signal` aborts); an ERROR event rejects. */
  watch<T>(collection: Collection, opts: WatchStream, onEvent: (e: WatchEvent<T>) => void): Promise<void>;
  /** One GET /version within `timeoutMs`, not retried: the Date of its answer (clock calibration). */
  probeDate(signal: AbortSignal, timeoutMs: number): Promise<Date | undefined>;
}

interface RawEvent {
  type?: string;
  object?: { code?: number; message?: string; metadata?: { resourceVersion?: string } };
}

/** The Pending pods of one namespace, or of every namespace. */
export function podCollection(namespace: string | undefined, fieldSelector: string): Collection {
  const path = namespace === undefined ? '/api/v1/pods' : `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods`;
  return { path, fieldSelector, what: `pod watch ${namespace ?? '*'}`, protobuf: POD };
}

/** The ServiceAccounts of one namespace, or of every namespace (healing's evidence, docs/policy.md "Healing"). */
export function serviceAccountCollection(namespace: string | undefined): Collection {
  const path = namespace === undefined ? '/api/v1/serviceaccounts' : `/api/v1/namespaces/${encodeURIComponent(namespace)}/serviceaccounts`;
  return { path, what: `serviceaccount watch ${namespace ?? '*'}` };
}

/** One ConfigMap, by a field selector on its name. */
export function configMapCollection(namespace: string, name: string): Collection {
  return {
    path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/configmaps`,
    fieldSelector: `metadata.name=${name}`,
    what: `configmap ${namespace}/${name}`,
  };
}

/** One Lease, by a field selector on its name (leader election's followers). */
export function leaseCollection(namespace: string, name: string): Collection {
  return {
    path: `/apis/coordination.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}/leases`,
    fieldSelector: `metadata.name=${name}`,
    what: `lease ${namespace}/${name}`,
  };
}

export function createWatchGateway(
  kubeConfig: KubeConfig,
  options: { timeoutMs?: number; onResponse?: ResponseObserver; settings?: ClientSettings; monotonicMs?: () => number } = {},
): WatchGateway {
  const raw = createKubeHttp(
    kubeConfig,
    options.timeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS,
    options.monotonicMs,
    options.onResponse,
    options.settings,
  );
  return {
    async list<T>(
      collection: Collection,
      { limit, continueToken, signal }: { limit?: number; continueToken?: string; signal?: AbortSignal },
    ) {
      const query = { fieldSelector: collection.fieldSelector, limit, continue: continueToken };
      const list = (
        collection.protobuf
          ? await listEither(raw, collection.path, query, collection.protobuf, signal)
          : await raw.getJson(collection.path, query, { signal })
      ) as { items?: Iterable<T> | null; metadata?: { continue?: string; resourceVersion?: string } };
      return {
        items: list.items ?? [],
        continueToken: list.metadata?.continue || undefined,
        resourceVersion: list.metadata?.resourceVersion ?? '',
      };
    },
    async probeDate(signal, timeoutMs) {
      await raw.getJson('/version', {}, { signal, timeoutMs });
      return raw.lastServerDate()?.date;
    },
    watch<T>(collection: Collection, opts: WatchStream, onEvent: (e: WatchEvent<T>) => void) {
      const query = {
        watch: 'true',
        allowWatchBookmarks: 'true',
        resourceVersion: opts.resourceVersion,
        timeoutSeconds: opts.timeoutSeconds,
        fieldSelector: collection.fieldSelector,
      };
      const schema = collection.protobuf;
      const protobuf = schema
        ? { accept: `${PROTOBUF};stream=watch, application/json`, decodeFrame: (f: Buffer) => decodeWatchEvent(f, schema) }
        : {};
      return watchEvents(raw, collection, query, opts, protobuf, (type, object) => {
        const resourceVersion = object.metadata?.resourceVersion ?? '';
        if (type === 'BOOKMARK') return onEvent({ type, resourceVersion });
        onEvent({ type: type as 'ADDED' | 'MODIFIED' | 'DELETED', object: object as T, resourceVersion });
      });
    },
  };
}

/** The events of one watch request; an ERROR event (410 Gone above all) ends it with an error. */
async function watchEvents(
  raw: KubeHttp,
  collection: Collection,
  query: Record<string, string | number | undefined>,
  opts: WatchStream,
  protobuf: { accept?: string; decodeFrame?: (frame: Buffer) => unknown },
  onObject: (type: string, object: NonNullable<RawEvent['object']>) => void,
): Promise<void> {
  let failure: Error | undefined;
  const ended = new AbortController();
  const stop = () => ended.abort();
  opts.signal.addEventListener('abort', stop, { once: true });
  try {
    await raw.watch(collection.path, query, {
      ...protobuf,
      idleTimeoutMs: opts.idleTimeoutMs,
      signal: ended.signal,
      onAccepted: opts.onAccepted,
      onEvent: (event) => {
        if (failure) return;
        const { type, object } = event as RawEvent;
        if (!object || !type) return;
        if (type === 'ERROR') {
          failure =
            object.code === 410
              ? new WatchExpiredError(collection.what)
              : new Error(`${collection.what}: ${object.message ?? 'ERROR event'} (${object.code ?? '?'})`);
          ended.abort();
          return;
        }
        onObject(type, object);
      },
    });
  } catch (error) {
    if ((error as { code?: unknown }).code === 410) throw new WatchExpiredError(collection.what);
    throw error;
  } finally {
    opts.signal.removeEventListener('abort', stop);
  }
  if (failure) throw failure;
}

/** One page in protobuf (read as far as `schema`), or in JSON when the answer is JSON. */
async function listEither(
  raw: KubeHttp,
  path: string,
  query: Record<string, string | number | undefined>,
  schema: Schema,
  signal: AbortSignal | undefined,
): Promise<unknown> {
  const answer = (await raw.send('GET', path, { query, signal, accept: `${PROTOBUF}, application/json`, bytes: true })) as Answer;
  return 'protobuf' in answer ? decodeList(answer.protobuf, schema) : answer.json;
}
