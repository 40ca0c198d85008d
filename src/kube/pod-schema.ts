// The fields of a pod that the watch's cache reads (classify/, observe/kubelet-conditions.ts,
// observe/pod-requests.ts), by their numbers in k8s.io/api core/v1 and apimachinery meta/v1
// generated.proto; a pod decoded with it is the JSON pod with everything else left out.
// test/support/watch-protobuf.ts checks it against the API server's JSON of the same real pods.
import type { Schema } from './protobuf.ts';

const OWNER_REFERENCE: Schema = {
  1: { name: 'kind', type: 'string' },
  3: { name: 'name', type: 'string' },
  4: { name: 'uid', type: 'string' },
  5: { name: 'apiVersion', type: 'string' },
  6: { name: 'controller', type: 'bool' },
};

const OBJECT_META: Schema = {
  1: { name: 'name', type: 'string' },
  3: { name: 'namespace', type: 'string' },
  5: { name: 'uid', type: 'string' },
  6: { name: 'resourceVersion', type: 'string' },
  8: { name: 'creationTimestamp', type: 'time' },
  9: { name: 'deletionTimestamp', type: 'time' },
  12: { name: 'annotations', type: 'stringMap' },
  13: { name: 'ownerReferences', type: OWNER_REFERENCE, repeated: true },
};

const RESOURCES: Schema = {
  1: { name: 'limits', type: 'quantityMap' },
  2: { name: 'requests', type: 'quantityMap' },
};

const CONTAINER: Schema = {
  1: { name: 'name', type: 'string' },
  2: { name: 'image', type: 'string' },
  8: { name: 'resources', type: RESOURCES },
  9: { name: 'volumeMounts', type: { 1: { name: 'name', type: 'string' } }, repeated: true },
  24: { name: 'restartPolicy', type: 'string' },
};

const VOLUME: Schema = {
  1: { name: 'name', type: 'string' },
  2: { name: 'volumeSource', type: { 30: { name: 'image', type: { 1: { name: 'reference', type: 'string' } } } }, inline: true },
};

const POD_SPEC: Schema = {
  1: { name: 'volumes', type: VOLUME, repeated: true },
  2: { name: 'containers', type: CONTAINER, repeated: true },
  3: { name: 'restartPolicy', type: 'string' },
  8: { name: 'serviceAccountName', type: 'string' },
  10: { name: 'nodeName', type: 'string' },
  15: { name: 'imagePullSecrets', type: { 1: { name: 'name', type: 'string' } }, repeated: true },
  20: { name: 'initContainers', type: CONTAINER, repeated: true },
  32: { name: 'overhead', type: 'quantityMap' },
  40: { name: 'resources', type: RESOURCES },
};

const TERMINATED: Schema = {
  1: { name: 'exitCode', type: 'int' },
  5: { name: 'startedAt', type: 'time' },
  6: { name: 'finishedAt', type: 'time' },
  7: { name: 'containerID', type: 'string' },
};

const CONTAINER_STATE: Schema = {
  1: { name: 'waiting', type: { 1: { name: 'reason', type: 'string' }, 2: { name: 'message', type: 'string' } } },
  2: { name: 'running', type: { 1: { name: 'startedAt', type: 'time' } } },
  3: { name: 'terminated', type: TERMINATED },
};

const CONTAINER_STATUS: Schema = {
  1: { name: 'name', type: 'string' },
  2: { name: 'state', type: CONTAINER_STATE },
  3: { name: 'lastState', type: CONTAINER_STATE },
  5: { name: 'restartCount', type: 'int' },
  6: { name: 'image', type: 'string' },
  8: { name: 'containerID', type: 'string' },
  9: { name: 'started', type: 'bool' },
};

const POD_CONDITION: Schema = {
  1: { name: 'type', type: 'string' },
  2: { name: 'status', type: 'string' },
  4: { name: 'lastTransitionTime', type: 'time' },
};

const POD_STATUS: Schema = {
  1: { name: 'phase', type: 'string' },
  2: { name: 'conditions', type: POD_CONDITION, repeated: true },
  7: { name: 'startTime', type: 'time' },
  8: { name: 'containerStatuses', type: CONTAINER_STATUS, repeated: true },
  10: { name: 'initContainerStatuses', type: CONTAINER_STATUS, repeated: true },
  13: { name: 'ephemeralContainerStatuses', type: CONTAINER_STATUS, repeated: true },
};

export const POD: Schema = {
  1: { name: 'metadata', type: OBJECT_META },
  2: { name: 'spec', type: POD_SPEC },
  3: { name: 'status', type: POD_STATUS },
};
