import {
  BatchV1Api,
  CoreV1Api,
  EventsV1Api,
  type EventsV1Event,
  type KubeConfig,
  PatchStrategy,
  type V1ConfigMap,
  type V1Job,
  type V1Namespace,
  type V1Pod,
  setHeaderOptions,
} from '@kubernetes/client-node';

export interface PodPage {
  pods: V1Pod[];
  continueToken: string | undefined;
}

export interface JobPage {
  jobs: V1Job[];
  continueToken: string | undefined;
}

/** Every Kubernetes call the sweeper makes. Nothing else in the code talks to the API. */
export interface KubeGateway {
  listPods(opts: { namespace?: string; fieldSelector: string; limit: number; continueToken?: string }): Promise<PodPage>;
  listJobs(opts: { namespace: string; limit: number; continueToken?: string }): Promise<JobPage>;
  readJob(namespace: string, name: string): Promise<V1Job>;
  readNamespace(name: string): Promise<V1Namespace>;
  readConfigMap(namespace: string, name: string): Promise<V1ConfigMap>;
  /** JSON merge patch (RFC 7386). */
  mergePatchJob(namespace: string, name: string, patch: object): Promise<V1Job>;
  /** Strategic merge patch of the status subresource: conditions merge by type. */
  patchPodStatus(namespace: string, name: string, patch: object): Promise<V1Pod>;
  deletePod(namespace: string, name: string, uid: string): Promise<void>;
  createEvent(namespace: string, event: EventsV1Event): Promise<void>;
}

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const strategicMergePatch = setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch);

export function createGateway(kubeConfig: KubeConfig): KubeGateway {
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const batch = kubeConfig.makeApiClient(BatchV1Api);
  const events = kubeConfig.makeApiClient(EventsV1Api);
  return {
    async listPods({ namespace, fieldSelector, limit, continueToken }) {
      const page = namespace
        ? await core.listNamespacedPod({ namespace, fieldSelector, limit, _continue: continueToken })
        : await core.listPodForAllNamespaces({ fieldSelector, limit, _continue: continueToken });
      return { pods: page.items, continueToken: page.metadata?._continue || undefined };
    },
    async listJobs({ namespace, limit, continueToken }) {
      const page = await batch.listNamespacedJob({ namespace, limit, _continue: continueToken });
      return { jobs: page.items, continueToken: page.metadata?._continue || undefined };
    },
    readJob: (namespace, name) => batch.readNamespacedJob({ namespace, name }),
    readNamespace: (name) => core.readNamespace({ name }),
    readConfigMap: (namespace, name) => core.readNamespacedConfigMap({ namespace, name }),
    mergePatchJob: (namespace, name, body) => batch.patchNamespacedJob({ namespace, name, body }, mergePatch),
    patchPodStatus: (namespace, name, body) =>
      core.patchNamespacedPodStatus({ namespace, name, body }, strategicMergePatch),
    async deletePod(namespace, name, uid) {
      await core.deleteNamespacedPod({ namespace, name, body: { preconditions: { uid } } });
    },
    async createEvent(namespace, body) {
      await events.createNamespacedEvent({ namespace, body });
    },
  };
}
