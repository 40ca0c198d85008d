// The gateway a watch-triggered sweep is given: the same calls, plus the local monotonic time of
// the first write to each object (for the reaction-latency metric) and the policy ConfigMap the
// sweep read (its limits set the next timers without reading it again).
import type { V1ConfigMap } from '@kubernetes/client-node';
import type { KubeGateway } from '../kube/gateway.ts';

export interface RecordingGateway {
  gateway: KubeGateway;
  /** When the sweep first wrote to the Job (or pod) `namespace/name`. */
  firstWrite(namespace: string, name: string | undefined): number | undefined;
  /** A gateway answering readConfigMap as it was answered to the sweep (once it was). */
  replayingPolicy(): KubeGateway;
}

export function recordingWrites(gateway: KubeGateway, monotonicMs: () => number): RecordingGateway {
  const writes = new Map<string, number>();
  const noted = (namespace: string, name: string) => {
    const key = `${namespace}/${name}`;
    if (!writes.has(key)) writes.set(key, monotonicMs());
  };
  let policyAnswer: { configMap: V1ConfigMap } | { error: unknown } | undefined;
  // A server dry run's variant is recorded the same way (its policy read is replayed too).
  const recording = (g: KubeGateway): KubeGateway => ({
    ...g,
    mergePatchJob: (namespace, name, patch) => (noted(namespace, name), g.mergePatchJob(namespace, name, patch)),
    jsonPatchJob: (namespace, name, ops) => (noted(namespace, name), g.jsonPatchJob(namespace, name, ops)),
    patchPodStatus: (namespace, name, patch) => (noted(namespace, name), g.patchPodStatus(namespace, name, patch)),
    patchJobStatus: (namespace, name, patch) => (noted(namespace, name), g.patchJobStatus(namespace, name, patch)),
    deletePod: (namespace, name, ...rest) => (noted(namespace, name), g.deletePod(namespace, name, ...rest)),
    evictPod: (namespace, name, ...rest) => (noted(namespace, name), g.evictPod(namespace, name, ...rest)),
    readConfigMap: async (namespace, name) => {
      try {
        const configMap = await g.readConfigMap(namespace, name);
        policyAnswer = { configMap };
        return configMap;
      } catch (error) {
        policyAnswer = { error };
        throw error;
      }
    },
    serverDryRun: () => recording(g.serverDryRun()),
  });
  return {
    gateway: recording(gateway),
    firstWrite: (namespace, name) => (name === undefined ? undefined : writes.get(`${namespace}/${name}`)),
    replayingPolicy: () => ({
      ...gateway,
      readConfigMap: async (namespace, name) => {
        if (!policyAnswer) return gateway.readConfigMap(namespace, name);
        if ('error' in policyAnswer) throw policyAnswer.error;
        return policyAnswer.configMap;
      },
    }),
  };
}
