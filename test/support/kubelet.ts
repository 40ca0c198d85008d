// Kubelet stand-in for the e2e control plane (which has no nodes): writes a pod's status through
// the `status` subresource the way a kubelet does, so readers of the API (the sweeper) see what
// they would see in a real cluster.
//
//   setImagePullStuck(core, ns, pod, { since, stuck })  phase Pending, named containers waiting
//       with the given reason/message (e.g. ImagePullBackOff). An init (or sidecar) container
//       stuck → Initialized=False (ContainersNotInitialized), later init containers and all
//       regular ones wait in PodInitializing. Only regular containers stuck → Initialized=True
//       with lastTransitionTime=since, init containers Completed, other regular containers
//       running. PodReadyToStartContainers=True at `since`; ContainersReady/Ready=False.
//   setPodRunning(core, ns, pod, { since })  phase Running, every container running and ready.
//   addPodCondition(core, ns, pod, condition) adds/replaces one condition (strategic merge on
//       `type`), as an outside controller does (e.g. before deleting for podFailurePolicy).
//   waitFor(fn, timeoutMs)  polls fn until it returns a truthy value.
//   waitForJobPods(core, ns, job, { count })  the Job controller's pods, once `count` exist.
//
// Like a kubelet, status writes keep conditions the kubelet does not own (custom ones, or
// DisruptionTarget), keep status fields set by others (qosClass), and never touch the spec.
import {
  ApiException,
  PatchStrategy,
  setHeaderOptions,
  type CoreV1Api,
  type V1Container,
  type V1ContainerStatus,
  type V1Pod,
  type V1PodCondition,
  type V1PodStatus,
} from '@kubernetes/client-node';

/** One container that waits on its image. */
export interface WaitingOnImage {
  container: string;
  /** The container is in spec.initContainers (init container or sidecar). */
  init?: boolean;
  /** Waiting reason, e.g. ErrImagePull, ImagePullBackOff, InvalidImageName. */
  reason: string;
  /** Kubelet message, e.g. `Back-off pulling image "x": ErrImagePull: ... not found`. */
  message: string;
}

export interface ImagePullStuckOptions {
  /** When the containers could first start pulling (PodReadyToStartContainers / Initialized time). */
  since: Date;
  stuck: WaitingOnImage[];
  /** status.startTime (default: since). */
  startTime?: Date;
}

const KUBELET_CONDITIONS = new Set([
  'PodScheduled',
  'PodReadyToStartContainers',
  'Initialized',
  'ContainersReady',
  'Ready',
]);

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Polls `fn` (every intervalMs) until it returns something truthy; errors count as "not yet". */
export async function waitFor<T>(
  fn: () => Promise<T | undefined | null | false> | T | undefined | null | false,
  timeoutMs: number,
  what = 'condition',
  intervalMs = 250,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
      last = v;
    } catch (e) {
      last = e;
    }
    if (Date.now() >= deadline) {
      const detail = last instanceof Error ? last.message : JSON.stringify(last);
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${detail})`);
    }
    await sleep(intervalMs);
  }
}

/** Lists the pods the Job controller created for `job`, once at least `count` exist. */
export async function waitForJobPods(
  core: CoreV1Api,
  namespace: string,
  job: string,
  opts: { count?: number; timeoutMs?: number } = {},
): Promise<V1Pod[]> {
  const count = opts.count ?? 1;
  return waitFor(
    async () => {
      const list = await core.listNamespacedPod({ namespace, labelSelector: `batch.kubernetes.io/job-name=${job}` });
      return list.items.length >= count ? list.items : undefined;
    },
    opts.timeoutMs ?? 30_000,
    `${count} pod(s) of Job ${namespace}/${job}`,
  );
}

function condition(
  pod: V1Pod,
  type: string,
  status: 'True' | 'False',
  at: Date,
  reason?: string,
  message?: string,
): V1PodCondition {
  const c: V1PodCondition = { type, status, lastTransitionTime: at, lastProbeTime: undefined };
  if (pod.metadata?.generation !== undefined) c.observedGeneration = pod.metadata.generation;
  if (reason) c.reason = reason;
  if (message) c.message = message;
  return c;
}

function baseStatus(c: V1Container): V1ContainerStatus {
  return { name: c.name, image: c.image ?? '', imageID: '', ready: false, restartCount: 0, started: false };
}

/** Reads the pod, builds the new status with `build`, writes it; retries on write conflicts. */
async function writeStatus(
  core: CoreV1Api,
  namespace: string,
  name: string,
  build: (pod: V1Pod) => V1PodStatus,
): Promise<V1Pod> {
  for (let attempt = 0; ; attempt++) {
    const pod = await core.readNamespacedPod({ name, namespace });
    const status = build(pod);
    // Keep conditions that are not the kubelet's (custom ones, DisruptionTarget, …).
    const foreign = (pod.status?.conditions ?? []).filter((c) => !KUBELET_CONDITIONS.has(c.type));
    status.conditions = [...(status.conditions ?? []), ...foreign];
    if (pod.metadata?.generation !== undefined) status.observedGeneration = pod.metadata.generation;
    try {
      return await core.replaceNamespacedPodStatus({ name, namespace, body: { ...pod, status } });
    } catch (e) {
      if (e instanceof ApiException && e.code === 409 && attempt < 10) continue;
      throw e;
    }
  }
}

function names(list: string[]): string {
  return `[${list.join(' ')}]`;
}

/** Puts the pod in the state a kubelet reports for containers that cannot pull their image. */
export function setImagePullStuck(
  core: CoreV1Api,
  namespace: string,
  podName: string,
  opts: ImagePullStuckOptions,
): Promise<V1Pod> {
  const { since } = opts;
  return writeStatus(core, namespace, podName, (pod) => {
    const spec = pod.spec;
    if (!spec) throw new Error(`pod ${namespace}/${podName} has no spec`);
    const initSpecs = spec.initContainers ?? [];
    const regularSpecs = spec.containers;
    for (const s of opts.stuck) {
      const list = s.init ? initSpecs : regularSpecs;
      if (!list.some((c) => c.name === s.container)) {
        throw new Error(`pod ${namespace}/${podName} has no ${s.init ? 'init ' : ''}container ${s.container}`);
      }
    }
    const stuckOf = (c: V1Container, init: boolean): WaitingOnImage | undefined =>
      opts.stuck.find((s) => s.container === c.name && Boolean(s.init) === init);

    // The kubelet starts init containers one at a time: those before the first stuck one have
    // run (sidecars still run), the stuck one waits, those after it wait for it.
    const firstStuckInit = initSpecs.findIndex((c) => stuckOf(c, true));
    const initBlocked = firstStuckInit >= 0;
    const initStatuses = initSpecs.map((c, i): V1ContainerStatus => {
      const st = baseStatus(c);
      const stuck = stuckOf(c, true);
      const sidecar = c.restartPolicy === 'Always';
      if (stuck) {
        st.state = { waiting: { reason: stuck.reason, message: stuck.message } };
      } else if (initBlocked && i > firstStuckInit) {
        st.state = { waiting: { reason: 'PodInitializing' } };
      } else if (sidecar) {
        Object.assign(st, { ready: true, started: true, state: { running: { startedAt: since } } });
      } else {
        st.state = { terminated: { exitCode: 0, reason: 'Completed', startedAt: since, finishedAt: since } };
      }
      return st;
    });

    const unready: string[] = [];
    const containerStatuses = regularSpecs.map((c): V1ContainerStatus => {
      const st = baseStatus(c);
      const stuck = stuckOf(c, false);
      if (initBlocked) {
        st.state = { waiting: { reason: 'PodInitializing' } };
        unready.push(c.name);
      } else if (stuck) {
        st.state = { waiting: { reason: stuck.reason, message: stuck.message } };
        unready.push(c.name);
      } else {
        Object.assign(st, { ready: true, started: true, state: { running: { startedAt: since } } });
      }
      return st;
    });
    // Init containers (sidecars included) that have not completed / started yet.
    const incompleteInit = initBlocked ? initSpecs.slice(firstStuckInit).map((c) => c.name) : [];
    const sidecarsUnready = initStatuses.filter((s, i) => initSpecs[i]?.restartPolicy === 'Always' && !s.ready);
    const allUnready = [...sidecarsUnready.map((s) => s.name), ...unready];

    const created = pod.metadata?.creationTimestamp ?? since;
    const notReady = `containers with unready status: ${names(allUnready)}`;
    const conditions = [
      condition(pod, 'PodReadyToStartContainers', 'True', since),
      initBlocked
        ? condition(
            pod,
            'Initialized',
            'False',
            since,
            'ContainersNotInitialized',
            `containers with incomplete status: ${names(incompleteInit)}`,
          )
        : condition(pod, 'Initialized', 'True', since),
      condition(pod, 'Ready', 'False', since, 'ContainersNotReady', notReady),
      condition(pod, 'ContainersReady', 'False', since, 'ContainersNotReady', notReady),
      condition(pod, 'PodScheduled', 'True', created),
    ];
    const status: V1PodStatus = {
      ...pod.status,
      phase: 'Pending',
      conditions,
      startTime: pod.status?.startTime ?? opts.startTime ?? since,
      containerStatuses,
    };
    if (initSpecs.length) status.initContainerStatuses = initStatuses;
    else delete status.initContainerStatuses;
    return status;
  });
}

/** Puts the pod in the state a kubelet reports for a healthy running pod. */
export function setPodRunning(
  core: CoreV1Api,
  namespace: string,
  podName: string,
  opts: { since?: Date } = {},
): Promise<V1Pod> {
  const since = opts.since ?? new Date();
  return writeStatus(core, namespace, podName, (pod) => {
    const spec = pod.spec;
    if (!spec) throw new Error(`pod ${namespace}/${podName} has no spec`);
    const running = (c: V1Container): V1ContainerStatus => ({
      ...baseStatus(c),
      ready: true,
      started: true,
      state: { running: { startedAt: since } },
    });
    const initStatuses = (spec.initContainers ?? []).map(
      (c): V1ContainerStatus =>
        c.restartPolicy === 'Always'
          ? running(c)
          : {
              ...baseStatus(c),
              state: { terminated: { exitCode: 0, reason: 'Completed', startedAt: since, finishedAt: since } },
            },
    );
    const status: V1PodStatus = {
      ...pod.status,
      phase: 'Running',
      conditions: [
        condition(pod, 'PodReadyToStartContainers', 'True', since),
        condition(pod, 'Initialized', 'True', since),
        condition(pod, 'Ready', 'True', since),
        condition(pod, 'ContainersReady', 'True', since),
        condition(pod, 'PodScheduled', 'True', pod.metadata?.creationTimestamp ?? since),
      ],
      startTime: pod.status?.startTime ?? since,
      containerStatuses: spec.containers.map(running),
    };
    if (initStatuses.length) status.initContainerStatuses = initStatuses;
    return status;
  });
}

/**
 * Adds (or replaces, by type) one pod condition through the status subresource with a strategic
 * merge patch — what an outside controller does before deleting a pod for podFailurePolicy.
 */
export function addPodCondition(
  core: CoreV1Api,
  namespace: string,
  podName: string,
  cond: { type: string; status: 'True' | 'False' | 'Unknown'; reason?: string; message?: string },
): Promise<V1Pod> {
  const body = { status: { conditions: [{ ...cond, lastTransitionTime: new Date().toISOString() }] } };
  return core.patchNamespacedPodStatus(
    { name: podName, namespace, body },
    setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch),
  );
}
