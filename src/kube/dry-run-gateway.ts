// A dry run's gateway: reads go to the API server, writes are recorded and never sent. Each
// recorded write answers as if it had landed, so a dry run walks the same write path as a sweep.
import type { V1Pod } from '@kubernetes/client-node';
import type { KubeGateway } from './gateway.ts';

/** One write a dry run would have sent: the gateway method and its arguments. */
export interface RecordedWrite {
  method: 'mergePatchJob' | 'jsonPatchJob' | 'patchPodStatus' | 'deletePod' | 'createEvent' | 'mergePatchCronJob';
  args: readonly unknown[];
}

const recordings = new WeakMap<KubeGateway, RecordedWrite[]>();

export function dryRunGateway(real: KubeGateway): KubeGateway {
  const writes: RecordedWrite[] = [];
  const record = (method: RecordedWrite['method'], ...args: unknown[]): Promise<void> => {
    writes.push({ method, args });
    return Promise.resolve();
  };
  const gateway: KubeGateway = {
    ...bindReads(real),
    mergePatchJob: (...args) => record('mergePatchJob', ...args),
    jsonPatchJob: (...args) => record('jsonPatchJob', ...args),
    // The pod as the patch would leave it is not known; the caller keeps the resourceVersion it had.
    patchPodStatus: async (...args) => (await record('patchPodStatus', ...args), {} as V1Pod),
    deletePod: (...args) => record('deletePod', ...args),
    createEvent: (...args) => record('createEvent', ...args),
    mergePatchCronJob: (...args) => record('mergePatchCronJob', ...args),
  };
  recordings.set(gateway, writes);
  return gateway;
}

/** The writes recorded so far, or undefined for a gateway that sends them (not a dry run). */
export function recordedWrites(gateway: KubeGateway): readonly RecordedWrite[] | undefined {
  return recordings.get(gateway);
}

function bindReads(real: KubeGateway): Omit<KubeGateway, RecordedWrite['method']> {
  return {
    listNamespaceNames: (opts) => real.listNamespaceNames(opts),
    listPodRows: (opts) => real.listPodRows(opts),
    listAllPodRows: (opts) => real.listAllPodRows(opts),
    readPod: (namespace, name) => real.readPod(namespace, name),
    listPods: (opts) => real.listPods(opts),
    listJobs: (opts) => real.listJobs(opts),
    readJob: (namespace, name) => real.readJob(namespace, name),
    readNamespace: (name) => real.readNamespace(name),
    readConfigMap: (namespace, name) => real.readConfigMap(namespace, name),
    readCronJob: (namespace, name) => real.readCronJob(namespace, name),
    readServerVersion: () => real.readServerVersion(),
    lastServerDate: () => real.lastServerDate(),
  };
}
