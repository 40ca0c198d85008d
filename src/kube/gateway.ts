import type {
  EventsV1Event,
  KubeConfig,
  V1ConfigMap,
  V1CronJob,
  V1Job,
  V1Namespace,
  V1ObjectMeta,
  V1Pod,
  V1ServiceAccount,
} from '@kubernetes/client-node';
import { createKubeHttp, type ClientSettings, type KubeHttp, type ResponseObserver } from './http.ts';
import { DEFAULT_REQUEST_TIMEOUT_MS } from './timeout.ts';
import type { ServerDate } from './server-clock.ts';
import type { ServerVersion } from './server-version.ts';

export interface Page<T> {
  items: T[];
  continueToken: string | undefined;
}

/** One row of a pod list in the server-side Table format: no spec, no status, just the Status column. */
export interface PodRow {
  namespace: string;
  name: string;
  /** What `kubectl get pods` prints as STATUS, e.g. `Pending`, `ImagePullBackOff`, `Init:0/2`. */
  status: string;
}

/**
 * Every Kubernetes call the sweeper makes. Nothing else in the code talks to the API. Reads are
 * plain JSON (`V1Pod`/`V1Job` shapes with RFC 3339 strings for times, no client model objects).
 */
export interface KubeGateway {
  /** Names of all namespaces (Table format, names only). */
  listNamespaceNames(opts: { limit: number; continueToken?: string }): Promise<Page<string>>;
  /** Pods of one namespace as Table rows, without the objects: a few dozen bytes per pod. */
  listPodRows(opts: { namespace: string; fieldSelector: string; limit: number; continueToken?: string }): Promise<Page<PodRow>>;
  /**
   * Pods of every namespace as Table rows, each row's namespace from the metadata the API server
   * sends with it (includeObject=None would drop it): one paged list however many namespaces.
   */
  listAllPodRows(opts: { fieldSelector: string; limit: number; continueToken?: string }): Promise<Page<PodRow>>;
  readPod(namespace: string, name: string): Promise<V1Pod>;
  /** Pods of one namespace in full, by label (a pending Job's pods) or by field (the Pending ones, when many are candidates). */
  listPods(opts: {
    namespace: string;
    labelSelector?: string;
    fieldSelector?: string;
    limit: number;
    continueToken?: string;
  }): Promise<Page<V1Pod>>;
  /** Without a namespace: every namespace. */
  listJobs(opts: { namespace?: string; labelSelector?: string; limit: number; continueToken?: string }): Promise<Page<V1Job>>;
  readJob(namespace: string, name: string): Promise<V1Job>;
  readNamespace(name: string): Promise<V1Namespace>;
  readConfigMap(namespace: string, name: string): Promise<V1ConfigMap>;
  /** JSON merge patch (RFC 7386). */
  mergePatchJob(namespace: string, name: string, patch: object): Promise<void>;
  /** JSON patch (RFC 6902), e.g. with a `test` operation as a precondition. */
  jsonPatchJob(namespace: string, name: string, operations: object[]): Promise<void>;
  /** Strategic merge patch of the status subresource: conditions merge by type. */
  patchPodStatus(namespace: string, name: string, patch: object): Promise<V1Pod>;
  /**
   * Strategic merge patch of a Job's status subresource: conditions merge by type. The Job's status
   * strategy keeps the patch's metadata, so one write carries the claim's annotations and label, a
   * `FailureTarget` condition and the resourceVersion precondition (docs/how-it-works.md).
   */
  patchJobStatus(namespace: string, name: string, patch: object): Promise<void>;
  /**
   * Deletes only that pod (uid) as it was seen (resourceVersion, when given); `gracePeriodSeconds: 0`
   * removes it without waiting for the kubelet (docs/contract.md "How a Job is failed", step 4:
   * never-started pods only).
   */
  deletePod(namespace: string, name: string, uid: string, resourceVersion?: string, options?: DeletePodOptions): Promise<void>;
  /**
   * The Eviction API (policy/v1) for that pod (uid) as it was seen (resourceVersion), with its own
   * grace period: the API server adds DisruptionTarget=True to it and deletes it (healing).
   */
  evictPod(namespace: string, name: string, uid: string, resourceVersion: string): Promise<void>;
  /** A ServiceAccount: its imagePullSecrets (healing, class auth). */
  readServiceAccount(namespace: string, name: string): Promise<V1ServiceAccount>;
  /**
   * A Secret's metadata only (PartialObjectMetadata: its data never reaches the sweeper): when it
   * was created and last written (healing, class auth).
   */
  readSecretMetadata(namespace: string, name: string): Promise<V1ObjectMeta>;
  createEvent(namespace: string, event: EventsV1Event): Promise<void>;
  /** The CronJob owning failed Jobs (cronJobs.suspendAfter). */
  readCronJob(namespace: string, name: string): Promise<V1CronJob>;
  /** JSON merge patch (RFC 7386): the run count annotations, and spec.suspend. */
  mergePatchCronJob(namespace: string, name: string, patch: object): Promise<void>;
  /** The JobSet (jobset.x-k8s.io/v1alpha2) owning a stuck Job: only its metadata is read (docs/jobset.md). */
  readJobSet(namespace: string, name: string): Promise<JobSetObject>;
  /** JSON merge patch (RFC 7386) of the sweeper's one annotation on a JobSet, with a resourceVersion. */
  mergePatchJobSet(namespace: string, name: string, patch: object): Promise<void>;
  /**
   * JSON merge patch (RFC 7386) of a pod: the sweeper's annotations and `spec.activeDeadlineSeconds`
   * of a stuck pod under an `owners` rule (act/fail-owned-pod.ts).
   */
  mergePatchPod(namespace: string, name: string, patch: object): Promise<void>;
  /** GET /version: the API server's Kubernetes version. */
  readServerVersion(): Promise<ServerVersion>;
  /** The API server's clock: the Date header of its newest answer (2xx or its own Status), and that answer's age (docs/clock.md). */
  lastServerDate(): ServerDate | undefined;
  /**
   * The same gateway with every write sent as a server-side dry run (`dryRun=All`): RBAC,
   * admission and webhooks judge it, nothing is persisted. Reads are unchanged.
   */
  serverDryRun(): KubeGateway;
}

/** What the sweeper reads of a JobSet. */
export interface JobSetObject {
  metadata?: V1ObjectMeta;
}

export interface DeletePodOptions {
  gracePeriodSeconds?: 0;
}

export { DEFAULT_REQUEST_TIMEOUT_MS } from './timeout.ts';

const MERGE_PATCH = 'application/merge-patch+json';
const STRATEGIC_MERGE_PATCH = 'application/strategic-merge-patch+json';
const JSON_PATCH = 'application/json-patch+json';

/**
 * Every request goes over the shared keep-alive agent, is aborted after `timeoutMs` (a hung API
 * server cannot hang a sweep), and its answer is parsed with plain JSON.parse: client-node gives
 * the configuration and authentication, not the request path (its typed models cost CPU per call).
 */
export function createGateway(
  kubeConfig: KubeConfig,
  options: { timeoutMs?: number; monotonicMs?: () => number; onResponse?: ResponseObserver; settings?: ClientSettings } = {},
): KubeGateway {
  const http = createKubeHttp(
    kubeConfig,
    options.timeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS,
    options.monotonicMs,
    options.onResponse,
    options.settings,
  );
  return gatewayOver(http, {});
}

/** The query parameter of a server-side dry run: every stage of the request runs, storage is skipped. */
const SERVER_DRY_RUN = { dryRun: 'All' };

/** `writeQuery`: added to every write (never to a read). */
function gatewayOver(http: KubeHttp, writeQuery: Record<string, string>): KubeGateway {
  const raw = {
    getJson: http.getJson,
    send: (method: Parameters<KubeHttp['send']>[0], where: string, options: Parameters<KubeHttp['send']>[2] = {}) =>
      http.send(method, where, { ...options, query: { ...options.query, ...writeQuery } }),
  };
  const path = (s: string) => encodeURIComponent(s);
  // Writes whose echo of the object nobody reads.
  const ignoreAnswer = true;
  return {
    async listNamespaceNames({ limit, continueToken }) {
      const table = asTable(
        await raw.getJson('/api/v1/namespaces', { limit, continue: continueToken, includeObject: 'None' }, { accept: TABLE }),
        'namespaces',
      );
      const name = columnIndex(table, 'Name', 0);
      return { items: table.rows.map((r) => String(r.cells[name])), continueToken: table.metadata?.continue || undefined };
    },
    async listPodRows({ namespace, fieldSelector, limit, continueToken }) {
      const query = { fieldSelector, limit, continue: continueToken, includeObject: 'None' };
      const table = asTable(await raw.getJson(`/api/v1/namespaces/${path(namespace)}/pods`, query, { accept: TABLE }), 'pods');
      const name = columnIndex(table, 'Name', 0);
      const status = columnIndex(table, 'Status', 2);
      const items = table.rows.map((r) => ({ namespace, name: String(r.cells[name]), status: String(r.cells[status]) }));
      return { items, continueToken: table.metadata?.continue || undefined };
    },
    async listAllPodRows({ fieldSelector, limit, continueToken }) {
      const query = { fieldSelector, limit, continue: continueToken, includeObject: 'Metadata' };
      const table = asTable(await raw.getJson('/api/v1/pods', query, { accept: TABLE }), 'pods');
      const name = columnIndex(table, 'Name', 0);
      const status = columnIndex(table, 'Status', 2);
      const items = table.rows.map((r) => ({
        namespace: String(r.object?.metadata?.namespace ?? ''),
        name: String(r.cells[name]),
        status: String(r.cells[status]),
      }));
      return { items, continueToken: table.metadata?.continue || undefined };
    },
    readPod: async (namespace, name) => (await raw.getJson(`/api/v1/namespaces/${path(namespace)}/pods/${path(name)}`, {})) as V1Pod,
    async listPods({ namespace, labelSelector, fieldSelector, limit, continueToken }) {
      const query = { labelSelector, fieldSelector, limit, continue: continueToken };
      return asPage<V1Pod>(await raw.getJson(`/api/v1/namespaces/${path(namespace)}/pods`, query));
    },
    async listJobs({ namespace, labelSelector, limit, continueToken }) {
      const where = namespace === undefined ? '/apis/batch/v1/jobs' : `/apis/batch/v1/namespaces/${path(namespace)}/jobs`;
      return asPage<V1Job>(await raw.getJson(where, { labelSelector, limit, continue: continueToken }));
    },
    readJob: async (namespace, name) => (await raw.getJson(`/apis/batch/v1/namespaces/${path(namespace)}/jobs/${path(name)}`, {})) as V1Job,
    readNamespace: async (name) => (await raw.getJson(`/api/v1/namespaces/${path(name)}`, {})) as V1Namespace,
    readConfigMap: async (namespace, name) =>
      (await raw.getJson(`/api/v1/namespaces/${path(namespace)}/configmaps/${path(name)}`, {})) as V1ConfigMap,
    async mergePatchJob(namespace, name, body) {
      await raw.send('PATCH', `/apis/batch/v1/namespaces/${path(namespace)}/jobs/${path(name)}`, {
        body,
        contentType: MERGE_PATCH,
        ignoreAnswer,
      });
    },
    async jsonPatchJob(namespace, name, body) {
      await raw.send('PATCH', `/apis/batch/v1/namespaces/${path(namespace)}/jobs/${path(name)}`, {
        body,
        contentType: JSON_PATCH,
        ignoreAnswer,
      });
    },
    async patchJobStatus(namespace, name, body) {
      await raw.send('PATCH', `/apis/batch/v1/namespaces/${path(namespace)}/jobs/${path(name)}/status`, {
        body,
        contentType: STRATEGIC_MERGE_PATCH,
        ignoreAnswer,
      });
    },
    patchPodStatus: async (namespace, name, body) =>
      (await raw.send('PATCH', `/api/v1/namespaces/${path(namespace)}/pods/${path(name)}/status`, {
        body,
        contentType: STRATEGIC_MERGE_PATCH,
      })) as V1Pod,
    async deletePod(namespace, name, uid, resourceVersion, options = {}) {
      // In the body: with a body, the API server ignores the query's gracePeriodSeconds and dryRun.
      const dryRun = writeQuery.dryRun ? { dryRun: [writeQuery.dryRun] } : {};
      const body = { preconditions: { uid, resourceVersion }, gracePeriodSeconds: options.gracePeriodSeconds, ...dryRun };
      await raw.send('DELETE', `/api/v1/namespaces/${path(namespace)}/pods/${path(name)}`, { body, ignoreAnswer });
    },
    async evictPod(namespace, name, uid, resourceVersion) {
      // The query's dryRun (a server dry run) is carried into the eviction's own deleteOptions.
      const body = {
        apiVersion: 'policy/v1',
        kind: 'Eviction',
        metadata: { name, namespace },
        deleteOptions: { preconditions: { uid, resourceVersion } },
      };
      await raw.send('POST', `/api/v1/namespaces/${path(namespace)}/pods/${path(name)}/eviction`, { body, ignoreAnswer });
    },
    readServiceAccount: async (namespace, name) =>
      (await raw.getJson(`/api/v1/namespaces/${path(namespace)}/serviceaccounts/${path(name)}`, {})) as V1ServiceAccount,
    async readSecretMetadata(namespace, name) {
      const answer = (await raw.getJson(`/api/v1/namespaces/${path(namespace)}/secrets/${path(name)}`, {}, { accept: METADATA })) as {
        kind?: string;
        metadata?: V1ObjectMeta;
      };
      // Only the metadata was asked for: anything else is not kept.
      if (answer.kind !== 'PartialObjectMetadata')
        throw new Error(`reading Secret ${namespace}/${name}: the API server did not answer with its metadata only`);
      return answer.metadata ?? {};
    },
    async createEvent(namespace, body) {
      await raw.send('POST', `/apis/events.k8s.io/v1/namespaces/${path(namespace)}/events`, { body, ignoreAnswer });
    },
    readCronJob: async (namespace, name) =>
      (await raw.getJson(`/apis/batch/v1/namespaces/${path(namespace)}/cronjobs/${path(name)}`, {})) as V1CronJob,
    async mergePatchCronJob(namespace, name, body) {
      await raw.send('PATCH', `/apis/batch/v1/namespaces/${path(namespace)}/cronjobs/${path(name)}`, {
        body,
        contentType: MERGE_PATCH,
        ignoreAnswer,
      });
    },
    readJobSet: async (namespace, name) => (await raw.getJson(jobSetPath(namespace, name), {})) as JobSetObject,
    async mergePatchJobSet(namespace, name, body) {
      await raw.send('PATCH', jobSetPath(namespace, name), { body, contentType: MERGE_PATCH, ignoreAnswer });
    },
    async mergePatchPod(namespace, name, body) {
      await raw.send('PATCH', `/api/v1/namespaces/${path(namespace)}/pods/${path(name)}`, { body, contentType: MERGE_PATCH, ignoreAnswer });
    },
    lastServerDate: () => http.lastServerDate(),
    readServerVersion: async () => (await raw.getJson('/version', {})) as ServerVersion,
    serverDryRun: () => gatewayOver(http, SERVER_DRY_RUN),
  };
}

const jobSetPath = (namespace: string, name: string) =>
  `/apis/jobset.x-k8s.io/v1alpha2/namespaces/${encodeURIComponent(namespace)}/jobsets/${encodeURIComponent(name)}`;

const TABLE = 'application/json;as=Table;g=meta.k8s.io;v=v1';
const METADATA = 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1';

interface Table {
  kind: 'Table';
  columnDefinitions?: { name: string }[];
  rows: { cells: unknown[]; object?: { metadata?: { namespace?: string } } }[];
  metadata?: { continue?: string };
}

function asPage<T>(body: unknown): Page<T> {
  const list = body as { items?: T[] | null; metadata?: { continue?: string } } | undefined;
  return { items: list?.items ?? [], continueToken: list?.metadata?.continue || undefined };
}

function asTable(body: unknown, what: string): Table {
  const t = body as Partial<Table> | undefined;
  if (t?.kind !== 'Table' || !Array.isArray(t.rows)) throw new Error(`listing ${what}: the API server did not answer in the Table format`);
  return t as Table;
}

/** Column positions come with the table; the fallback is the built-in printer's layout. */
function columnIndex(table: Table, name: string, fallback: number): number {
  const i = (table.columnDefinitions ?? []).findIndex((c) => c.name === name);
  return i >= 0 ? i : fallback;
}
