import {
  BatchV1Api,
  type ConfigurationOptions,
  Observable,
  type ObservableMiddleware,
  CoreV1Api,
  EventsV1Api,
  type EventsV1Event,
  type KubeConfig,
  PatchStrategy,
  type V1ConfigMap,
  type V1CronJob,
  type V1Job,
  type V1Namespace,
  type V1Pod,
  setHeaderOptions,
} from '@kubernetes/client-node';

export interface Page<T> {
  items: T[];
  continueToken: string | undefined;
}

/** Every Kubernetes call the sweeper makes. Nothing else in the code talks to the API. */
export interface KubeGateway {
  listPods(opts: { namespace?: string; fieldSelector: string; limit: number; continueToken?: string }): Promise<Page<V1Pod>>;
  listJobs(opts: { namespace: string; limit: number; continueToken?: string }): Promise<Page<V1Job>>;
  readJob(namespace: string, name: string): Promise<V1Job>;
  readNamespace(name: string): Promise<V1Namespace>;
  readConfigMap(namespace: string, name: string): Promise<V1ConfigMap>;
  /** JSON merge patch (RFC 7386). */
  mergePatchJob(namespace: string, name: string, patch: object): Promise<V1Job>;
  /** Strategic merge patch of the status subresource: conditions merge by type. */
  patchPodStatus(namespace: string, name: string, patch: object): Promise<V1Pod>;
  deletePod(namespace: string, name: string, uid: string): Promise<void>;
  createEvent(namespace: string, event: EventsV1Event): Promise<void>;
  /** The CronJob owning failed Jobs (cronJobs.suspendAfter). */
  readCronJob(namespace: string, name: string): Promise<V1CronJob>;
  /** JSON merge patch (RFC 7386): the run count annotations, and spec.suspend. */
  mergePatchCronJob(namespace: string, name: string, patch: object): Promise<V1CronJob>;
}

export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;

/** Every request is aborted after `timeoutMs`, so a hung API server cannot hang a sweep. */
function requestOptions(timeoutMs: number, contentType?: string): ConfigurationOptions<ObservableMiddleware> {
  const timeout: ObservableMiddleware = {
    pre: (request) => {
      request.setSignal(AbortSignal.timeout(timeoutMs));
      return new Observable(Promise.resolve(request));
    },
    post: (response) => new Observable(Promise.resolve(response)),
  };
  const base: ConfigurationOptions<ObservableMiddleware> = { middleware: [timeout], middlewareMergeStrategy: 'append' };
  return contentType ? setHeaderOptions('Content-Type', contentType, base) : base;
}

export function createGateway(kubeConfig: KubeConfig, options: { timeoutMs?: number } = {}): KubeGateway {
  const timeoutMs = options.timeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  const plain = requestOptions(timeoutMs);
  const mergePatch = requestOptions(timeoutMs, PatchStrategy.MergePatch);
  const strategicMergePatch = requestOptions(timeoutMs, PatchStrategy.StrategicMergePatch);
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const batch = kubeConfig.makeApiClient(BatchV1Api);
  const events = kubeConfig.makeApiClient(EventsV1Api);
  return {
    async listPods({ namespace, fieldSelector, limit, continueToken }) {
      const page = namespace
        ? await core.listNamespacedPod({ namespace, fieldSelector, limit, _continue: continueToken }, plain)
        : await core.listPodForAllNamespaces({ fieldSelector, limit, _continue: continueToken }, plain);
      return { items: page.items, continueToken: page.metadata?._continue || undefined };
    },
    async listJobs({ namespace, limit, continueToken }) {
      const page = await batch.listNamespacedJob({ namespace, limit, _continue: continueToken }, plain);
      return { items: page.items, continueToken: page.metadata?._continue || undefined };
    },
    readJob: (namespace, name) => batch.readNamespacedJob({ namespace, name }, plain),
    readNamespace: (name) => core.readNamespace({ name }, plain),
    readConfigMap: (namespace, name) => core.readNamespacedConfigMap({ namespace, name }, plain),
    mergePatchJob: (namespace, name, body) => batch.patchNamespacedJob({ namespace, name, body }, mergePatch),
    patchPodStatus: (namespace, name, body) =>
      core.patchNamespacedPodStatus({ namespace, name, body }, strategicMergePatch),
    async deletePod(namespace, name, uid) {
      await core.deleteNamespacedPod({ namespace, name, body: { preconditions: { uid } } }, plain);
    },
    async createEvent(namespace, body) {
      await events.createNamespacedEvent({ namespace, body }, plain);
    },
    readCronJob: (namespace, name) => batch.readNamespacedCronJob({ namespace, name }, plain),
    mergePatchCronJob: (namespace, name, body) => batch.patchNamespacedCronJob({ namespace, name, body }, mergePatch),
  };
}
