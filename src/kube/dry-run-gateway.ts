// A dry run's gateway: reads go to the API server, writes are recorded and never sent. Each
// recorded write answers as if it had landed, so a dry run walks the same write path as a sweep.
import type { V1Pod } from '@kubernetes/client-node';
import type { KubeGateway } from './gateway.ts';

type WriteMethod =
  | 'mergePatchJob'
  | 'jsonPatchJob'
  | 'patchPodStatus'
  | 'patchJobStatus'
  | 'deletePod'
  | 'evictPod'
  | 'createEvent'
  | 'mergePatchCronJob'
  | 'mergePatchJobSet'
  | 'mergePatchPod';

/**
 * What a dry run keeps of the writes it would have sent: their methods in order. Not their
 * bodies: a dry run of thousands of stuck Jobs would hold every patch and Event until it ends.
 */
export interface RecordedWrites {
  methods: WriteMethod[];
}

/** `recorded`: where the writes are kept (a test reads them there). */
export function dryRunGateway(real: KubeGateway, recorded: RecordedWrites = { methods: [] }): KubeGateway {
  const record = (method: WriteMethod): Promise<void> => {
    recorded.methods.push(method);
    return Promise.resolve();
  };
  const gateway: KubeGateway = {
    ...bindReads(real),
    mergePatchJob: () => record('mergePatchJob'),
    jsonPatchJob: () => record('jsonPatchJob'),
    // The pod as the patch would leave it is not known; the caller keeps the resourceVersion it had.
    patchPodStatus: async () => (await record('patchPodStatus'), {} as V1Pod),
    patchJobStatus: () => record('patchJobStatus'),
    deletePod: () => record('deletePod'),
    evictPod: () => record('evictPod'),
    createEvent: () => record('createEvent'),
    mergePatchCronJob: () => record('mergePatchCronJob'),
    mergePatchJobSet: () => record('mergePatchJobSet'),
    mergePatchPod: () => record('mergePatchPod'),
    // Nothing is sent from here, dry run or not.
    serverDryRun: () => gateway,
  };
  return gateway;
}

function bindReads(real: KubeGateway): Omit<KubeGateway, WriteMethod | 'serverDryRun'> {
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
    readServiceAccount: (namespace, name) => real.readServiceAccount(namespace, name),
    readSecretMetadata: (namespace, name) => real.readSecretMetadata(namespace, name),
    readCronJob: (namespace, name) => real.readCronJob(namespace, name),
    readJobSet: (namespace, name) => real.readJobSet(namespace, name),
    readServerVersion: () => real.readServerVersion(),
    lastServerDate: () => real.lastServerDate(),
  };
}
