// The watch requests of `run --watch` (docs/how-it-works.md "Event-driven mode"): the Pending
// pods as Table rows with their metadata (the STATUS column and what identifies a version of the
// pod, never the spec or status), and the policy ConfigMap. Over the same lean HTTP path as the
// gateway (kube/http.ts): client-node's Watch would parse every event into its models and needs
// its fetch stack, which the bundle leaves out.
import type { KubeConfig, V1ConfigMap } from '@kubernetes/client-node';
import { DEFAULT_REQUEST_TIMEOUT_MS } from './gateway.ts';
import { createKubeHttp, type KubeHttp, type ResponseObserver } from './http.ts';

const TABLE = 'application/json;as=Table;g=meta.k8s.io;v=v1';

/** One Pending pod as the watch keeps it: who it is, which version, and its STATUS column. */
export interface PodRowVersion {
  namespace: string;
  name: string;
  uid: string;
  resourceVersion: string;
  /** What `kubectl get pods` prints as STATUS. */
  status: string;
}

export type PodRowEvent =
  { type: 'ADDED' | 'MODIFIED' | 'DELETED'; row: PodRowVersion; resourceVersion: string } | { type: 'BOOKMARK'; resourceVersion: string };

export type ConfigMapEvent =
  | { type: 'ADDED' | 'MODIFIED' | 'DELETED'; configMap: V1ConfigMap; resourceVersion: string }
  | { type: 'BOOKMARK'; resourceVersion: string };

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
}

export interface WatchGateway {
  /** One page of the Pending pods (every namespace without `namespace`) with the list's resourceVersion. */
  listPodRows(opts: {
    namespace?: string;
    fieldSelector: string;
    limit: number;
    continueToken?: string;
  }): Promise<{ rows: PodRowVersion[]; continueToken: string | undefined; resourceVersion: string }>;
  watchPodRows(opts: WatchStream & { namespace?: string; fieldSelector: string }, onEvent: (e: PodRowEvent) => void): Promise<void>;
  /** The one ConfigMap (field selector on its name) and the resourceVersion to watch it from. */
  listConfigMap(namespace: string, name: string): Promise<{ configMap: V1ConfigMap | undefined; resourceVersion: string }>;
  watchConfigMap(opts: WatchStream & { namespace: string; name: string }, onEvent: (e: ConfigMapEvent) => void): Promise<void>;
}

interface TableRow {
  cells: unknown[];
  object?: { metadata?: { namespace?: string; name?: string; uid?: string; resourceVersion?: string } };
}
interface Table {
  kind?: string;
  columnDefinitions?: { name: string }[];
  rows?: TableRow[];
  metadata?: { continue?: string; resourceVersion?: string };
}
interface RawEvent {
  type?: string;
  object?: Table & { code?: number; message?: string; metadata?: { resourceVersion?: string } };
}

export function createWatchGateway(
  kubeConfig: KubeConfig,
  options: { timeoutMs?: number; onResponse?: ResponseObserver } = {},
): WatchGateway {
  const raw = createKubeHttp(kubeConfig, options.timeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS, undefined, options.onResponse);
  const podsPath = (namespace: string | undefined) =>
    namespace === undefined ? '/api/v1/pods' : `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods`;
  // Column positions come with the first Table of a list or watch; the built-in printer's otherwise.
  let columns = { name: 0, status: 2 };
  const learnColumns = (table: Table) => {
    const defs = table.columnDefinitions ?? [];
    if (defs.length === 0) return;
    const at = (name: string, fallback: number) => {
      const i = defs.findIndex((c) => c.name === name);
      return i >= 0 ? i : fallback;
    };
    columns = { name: at('Name', 0), status: at('Status', 2) };
  };
  const rowOf = (r: TableRow): PodRowVersion => ({
    namespace: r.object?.metadata?.namespace ?? '',
    name: r.object?.metadata?.name ?? String(r.cells[columns.name]),
    uid: r.object?.metadata?.uid ?? '',
    resourceVersion: r.object?.metadata?.resourceVersion ?? '',
    status: String(r.cells[columns.status]),
  });
  return {
    async listPodRows({ namespace, fieldSelector, limit, continueToken }) {
      const query = { fieldSelector, limit, continue: continueToken, includeObject: 'Metadata' };
      const table = (await raw.getJson(podsPath(namespace), query, { accept: TABLE })) as Table;
      if (table.kind !== 'Table' || !Array.isArray(table.rows))
        throw new Error('listing pods: the API server did not answer in the Table format');
      learnColumns(table);
      return {
        rows: table.rows.map(rowOf),
        continueToken: table.metadata?.continue || undefined,
        resourceVersion: table.metadata?.resourceVersion ?? '',
      };
    },
    watchPodRows(opts, onEvent) {
      const query = { ...watchQuery(opts), fieldSelector: opts.fieldSelector, includeObject: 'Metadata' };
      return watchEvents(raw, podsPath(opts.namespace), query, opts, TABLE, 'pod watch', (type, object) => {
        learnColumns(object);
        const rows = object.rows ?? [];
        // A bookmark carries only a resourceVersion (no row, or a row with only that).
        const rv = object.metadata?.resourceVersion || rows[0]?.object?.metadata?.resourceVersion || '';
        if (type === 'BOOKMARK' || rows.length === 0) return onEvent({ type: 'BOOKMARK', resourceVersion: rv });
        for (const r of rows) {
          const row = rowOf(r);
          onEvent({ type: type as 'ADDED' | 'MODIFIED' | 'DELETED', row, resourceVersion: row.resourceVersion || rv });
        }
      });
    },
    async listConfigMap(namespace, name) {
      const list = (await raw.getJson(`/api/v1/namespaces/${encodeURIComponent(namespace)}/configmaps`, {
        fieldSelector: `metadata.name=${name}`,
      })) as { items?: V1ConfigMap[]; metadata?: { resourceVersion?: string } };
      return { configMap: list.items?.[0], resourceVersion: list.metadata?.resourceVersion ?? '' };
    },
    watchConfigMap(opts, onEvent) {
      const query = { ...watchQuery(opts), fieldSelector: `metadata.name=${opts.name}` };
      const path = `/api/v1/namespaces/${encodeURIComponent(opts.namespace)}/configmaps`;
      return watchEvents(raw, path, query, opts, undefined, 'policy ConfigMap watch', (type, object) => {
        const rv = object.metadata?.resourceVersion ?? '';
        if (type === 'BOOKMARK') return onEvent({ type, resourceVersion: rv });
        onEvent({ type: type as 'ADDED' | 'MODIFIED' | 'DELETED', configMap: object as V1ConfigMap, resourceVersion: rv });
      });
    },
  };
}

function watchQuery(opts: WatchStream): Record<string, string | number> {
  return { watch: 'true', allowWatchBookmarks: 'true', resourceVersion: opts.resourceVersion, timeoutSeconds: opts.timeoutSeconds };
}

/** The events of one watch request; an ERROR event (410 Gone above all) ends it with an error. */
async function watchEvents(
  raw: KubeHttp,
  path: string,
  query: Record<string, string | number>,
  opts: WatchStream,
  accept: string | undefined,
  what: string,
  onObject: (type: string, object: NonNullable<RawEvent['object']>) => void,
): Promise<void> {
  let failure: Error | undefined;
  const ended = new AbortController();
  const stop = () => ended.abort();
  opts.signal.addEventListener('abort', stop, { once: true });
  try {
    await raw.watch(path, query, {
      accept,
      idleTimeoutMs: opts.idleTimeoutMs,
      signal: ended.signal,
      onEvent: (event) => {
        if (failure) return;
        const { type, object } = event as RawEvent;
        if (!object || !type) return;
        if (type === 'ERROR') {
          failure =
            object.code === 410
              ? new WatchExpiredError(what)
              : new Error(`${what}: ${object.message ?? 'ERROR event'} (${object.code ?? '?'})`);
          ended.abort();
          return;
        }
        onObject(type, object);
      },
    });
  } catch (error) {
    if ((error as { code?: unknown }).code === 410) throw new WatchExpiredError(what);
    throw error;
  } finally {
    opts.signal.removeEventListener('abort', stop);
  }
  if (failure) throw failure;
}
