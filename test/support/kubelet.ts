// Kubelet stand-in, kept for scale (benchmarks with thousands of pods, where a real node is
// impractical) and for laptops without a real node: writes a pod's status through the `status`
// subresource the way the real kubelet on the test node does (test/support/node.ts). Its shape,
// condition times and messages follow what that kubelet wrote (test/fixtures/real-node-statuses.json):
// the pod starts (startTime, Initialized for pods without init containers, Ready/ContainersReady
// False) a sandbox-creation delay before PodReadyToStartContainers, and `since` is that last time.
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
import { readFileSync } from 'node:fs';
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
  /** status.startTime (default: SANDBOX_DELAY_MS before since, as the real node stamps it). */
  startTime?: Date;
}

interface Recorded {
  cases: { id: string; image: string; pods: Record<string, V1Pod> }[];
}
const RECORDED = JSON.parse(readFileSync(new URL('../fixtures/real-node-statuses.json', import.meta.url), 'utf8')) as Recorded;

/** Median time the real node took from the pod's start to PodReadyToStartContainers. */
export const SANDBOX_DELAY_MS = ((): number => {
  const delays = RECORDED.cases
    .flatMap((c) => Object.values(c.pods))
    .map((p) => {
      const ready = p.status?.conditions?.find((x) => x.type === 'PodReadyToStartContainers')?.lastTransitionTime;
      return new Date(ready ?? 0).getTime() - new Date(p.status?.startTime ?? 0).getTime();
    })
    .sort((a, b) => a - b);
  return delays[Math.floor(delays.length / 2)] ?? 0;
})();

/** Recorded cases whose message the stand-in can replay for another image. */
export type RecordedPullCase =
  | 'repo-missing'
  | 'tag-missing'
  | 'auth-no-secret'
  | 'unresolvable-host'
  | 'connection-refused'
  | 'too-many-requests'
  | 'too-many-requests-on-fetch'
  | 'service-unavailable'
  | 'token-unavailable'
  | 'untrusted-certificate';

/**
 * The waiting message the real kubelet wrote for `kind` with `reason` (ErrImagePull or
 * ImagePullBackOff), with the recorded image (and its registry host) replaced by `image`'s.
 */
export function realPullMessage(
  kind: RecordedPullCase,
  image: string,
  reason: 'ErrImagePull' | 'ImagePullBackOff' = 'ImagePullBackOff',
): string {
  const c = RECORDED.cases.find((x) => x.id === kind);
  const pod = c?.pods[reason];
  const st = [...(pod?.status?.containerStatuses ?? []), ...(pod?.status?.initContainerStatuses ?? [])].find(
    (s) => s.state?.waiting?.reason === reason,
  );
  const message = st?.state?.waiting?.message;
  if (!c || !message) throw new Error(`test/fixtures/real-node-statuses.json has no ${reason} message for ${kind}`);
  const host = (ref: string): string => ref.split('/')[0] ?? ref;
  const path = (ref: string): string => ref.slice(host(ref).length + 1).replace(/[:@].*$/, '');
  let out = message.replaceAll(c.image, image);
  // URLs name the repository path and the host on their own (…/v2/team/app/manifests/1).
  const tag = (ref: string): string => ref.split(':').pop() ?? '';
  out = out.replaceAll(`/v2/${path(c.image)}/manifests/${tag(c.image)}`, `/v2/${path(image)}/manifests/${tag(image)}`);
  out = out.replaceAll(`[manifests ${tag(c.image)}]`, `[manifests ${tag(image)}]`);
  return out.replaceAll(host(c.image), host(image));
}

const KUBELET_CONDITIONS = new Set(['PodScheduled', 'PodReadyToStartContainers', 'Initialized', 'ContainersReady', 'Ready']);

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

function condition(pod: V1Pod, type: string, status: 'True' | 'False', at: Date, reason?: string, message?: string): V1PodCondition {
  const c: V1PodCondition = { type, status, lastTransitionTime: at, lastProbeTime: undefined };
  if (pod.metadata?.generation !== undefined) c.observedGeneration = pod.metadata.generation;
  if (reason) c.reason = reason;
  if (message) c.message = message;
  return c;
}

function baseStatus(c: V1Container): V1ContainerStatus {
  return { name: c.name, image: c.image ?? '', imageID: '', lastState: {}, ready: false, restartCount: 0, started: false };
}

/** Reads the pod, builds the new status with `build`, writes it; retries on write conflicts. */
async function writeStatus(core: CoreV1Api, namespace: string, name: string, build: (pod: V1Pod) => V1PodStatus): Promise<V1Pod> {
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
export function setImagePullStuck(core: CoreV1Api, namespace: string, podName: string, opts: ImagePullStuckOptions): Promise<V1Pod> {
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

    // As on the real node: the kubelet starts the pod (startTime; Initialized True at once when
    // there are no init containers; Ready False), then the sandbox is ready SANDBOX_DELAY_MS later.
    // Init containers that ran end at `since`, so Initialized (True) is stamped then.
    const started = opts.startTime ?? new Date(since.getTime() - SANDBOX_DELAY_MS);
    const sandboxReady =
      initSpecs.length > 0 && !initBlocked ? new Date(Math.min(since.getTime(), started.getTime() + SANDBOX_DELAY_MS)) : since;
    const initializedAt = initSpecs.length > 0 ? since : started;
    const notReady = `containers with unready status: ${names(allUnready)}`;
    const conditions = [
      condition(pod, 'PodReadyToStartContainers', 'True', sandboxReady),
      initBlocked
        ? condition(
            pod,
            'Initialized',
            'False',
            started,
            'ContainersNotInitialized',
            `containers with incomplete status: ${names(incompleteInit)}`,
          )
        : condition(pod, 'Initialized', 'True', initializedAt),
      condition(pod, 'Ready', 'False', started, 'ContainersNotReady', notReady),
      condition(pod, 'ContainersReady', 'False', started, 'ContainersNotReady', notReady),
      condition(pod, 'PodScheduled', 'True', started),
    ];
    const status: V1PodStatus = {
      ...pod.status,
      phase: 'Pending',
      conditions,
      qosClass: pod.status?.qosClass ?? 'BestEffort',
      startTime: pod.status?.startTime ?? started,
      containerStatuses,
    };
    if (initSpecs.length) status.initContainerStatuses = initStatuses;
    else delete status.initContainerStatuses;
    return status;
  });
}

/**
 * Puts the pod in the state a kubelet reports while its first init container runs: that one
 * running, every other container waiting in PodInitializing, Initialized False (STATUS `Init:0/<n>`).
 */
export function setInitRunning(core: CoreV1Api, namespace: string, podName: string, opts: { since?: Date } = {}): Promise<V1Pod> {
  const since = opts.since ?? new Date();
  return writeStatus(core, namespace, podName, (pod) => {
    const spec = pod.spec;
    const initSpecs = spec?.initContainers ?? [];
    if (!spec || initSpecs.length === 0) throw new Error(`pod ${namespace}/${podName} has no init containers`);
    const waiting = (c: V1Container): V1ContainerStatus => ({ ...baseStatus(c), state: { waiting: { reason: 'PodInitializing' } } });
    const first = { ...baseStatus(initSpecs[0]!), started: true, state: { running: { startedAt: since } } };
    const started = new Date(since.getTime() - SANDBOX_DELAY_MS);
    const incomplete = `containers with incomplete status: ${names(initSpecs.map((c) => c.name))}`;
    const notReady = `containers with unready status: ${names(spec.containers.map((c) => c.name))}`;
    return {
      ...pod.status,
      phase: 'Pending',
      conditions: [
        condition(pod, 'PodReadyToStartContainers', 'True', since),
        condition(pod, 'Initialized', 'False', started, 'ContainersNotInitialized', incomplete),
        condition(pod, 'Ready', 'False', started, 'ContainersNotReady', notReady),
        condition(pod, 'ContainersReady', 'False', started, 'ContainersNotReady', notReady),
        condition(pod, 'PodScheduled', 'True', started),
      ],
      qosClass: pod.status?.qosClass ?? 'BestEffort',
      startTime: pod.status?.startTime ?? started,
      initContainerStatuses: [first, ...initSpecs.slice(1).map(waiting)],
      containerStatuses: spec.containers.map(waiting),
    };
  });
}

/** Puts the pod in the state a kubelet reports for a healthy running pod. */
export function setPodRunning(
  core: CoreV1Api,
  namespace: string,
  podName: string,
  opts: { since?: Date; imageID?: string } = {},
): Promise<V1Pod> {
  const since = opts.since ?? new Date();
  return writeStatus(core, namespace, podName, (pod) => {
    const spec = pod.spec;
    if (!spec) throw new Error(`pod ${namespace}/${podName} has no spec`);
    const running = (c: V1Container): V1ContainerStatus => ({
      ...baseStatus(c),
      ...(opts.imageID ? { imageID: opts.imageID } : {}),
      ready: true,
      started: true,
      state: { running: { startedAt: since } },
    });
    const initStatuses = (spec.initContainers ?? []).map((c): V1ContainerStatus =>
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
