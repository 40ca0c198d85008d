// The image-pull failure cases the real node is put through: each a pod spec (for a bare pod or a
// Job template) pinned to the node, and how to recognise the state it must reach. Shared by the
// node e2e tests and scripts/record-node-statuses.ts, which saves the real statuses to
// test/fixtures/real-node-statuses.json for the classifier's unit tests. registryFaultCases and
// stalledCases pull from the stand-ins of registry-faults.ts and hungServer() (node.ts).
import { CoreV1Api, type KubeConfig, type V1Container, type V1ContainerStatus, type V1Pod, type V1PodSpec } from '@kubernetes/client-node';
import type { PullClass } from '../../src/model.ts';
import { closedPort } from './cluster.ts';
import { waitFor } from './kubelet.ts';
import type { NodeRuntime, TestNodeHandle } from './node.ts';

export interface NodeCase {
  /** Stable id, also the fixture key. */
  id: string;
  title: string;
  /** The class the classifier must give it. */
  expectedClass: PullClass;
  /** Which container gets stuck. */
  container: string;
  containerKind: 'regular' | 'init' | 'sidecar';
  /** Waiting reasons to record, in the order the kubelet reaches them. */
  reasons: string[];
  /** The image of the stuck container. */
  image: string;
  spec: V1PodSpec;
  /** Objects the pod needs (pull secrets), created in its namespace first. */
  secrets?: { name: string; dockerconfigjson: string }[];
}

/** A pod spec on the node: restartPolicy Never, no token mount, quick termination. */
export function nodePodSpec(node: { name: string }, containers: V1Container[], extra: Partial<V1PodSpec> = {}): V1PodSpec {
  return {
    nodeName: node.name,
    restartPolicy: 'Never',
    automountServiceAccountToken: false,
    terminationGracePeriodSeconds: 5,
    containers,
    ...extra,
  };
}

/** A `.dockerconfigjson` for one registry. */
export function dockerConfig(registry: string, user: string, password: string): string {
  const auth = Buffer.from(`${user}:${password}`).toString('base64');
  return JSON.stringify({ auths: { [registry]: { username: user, password, auth } } });
}

const PULL = ['ErrImagePull', 'ImagePullBackOff'];
const main = (image: string, extra: Partial<V1Container> = {}): V1Container => ({ name: 'main', image, ...extra });

/** CRI-O reports a refused connection as RegistryUnavailable (cri-o v1.34.0 server/image_pull.go). */
export function refusedReasons(runtime: NodeRuntime): string[] {
  return runtime === 'crio' ? ['RegistryUnavailable', 'ImagePullBackOff'] : PULL;
}

/** A bare pod whose one regular container `main` pulls `image`. */
function regularCase(
  node: { name: string },
  id: string,
  title: string,
  expectedClass: NodeCase['expectedClass'],
  image: string,
  extra: Partial<NodeCase> = {},
): NodeCase {
  return {
    id,
    title,
    expectedClass,
    container: 'main',
    containerKind: 'regular',
    reasons: PULL,
    image,
    spec: nodePodSpec(node, [main(image)]),
    ...extra,
  };
}

/** Every failure case, built for this node (ports and credentials are per run). */
export async function nodeCases(node: TestNodeHandle): Promise<NodeCase[]> {
  const refusedPort = await closedPort();
  const pull = PULL;
  const regular = (
    id: string,
    title: string,
    expectedClass: NodeCase['expectedClass'],
    image: string,
    extra: Partial<NodeCase> = {},
  ): NodeCase => regularCase(node, id, title, expectedClass, image, extra);
  // Never pulled with credentials before (node-basics pulls pause:3.10 with them): the kubelet on
  // CRI-O starts a pod without a pull secret from an image already on the node, no pull, no 401.
  const authImage = await node.pushImage('team/private:1', { auth: true });
  const missing = `${node.registry}/team/missing:1`;
  return [
    regular('repo-missing', 'repository missing', 'permanent', `${node.registry}/team/no-such-repo:1`),
    regular('tag-missing', 'tag missing', 'permanent', `${node.registry}/pause:no-such-tag`),
    regular('auth-no-secret', '401 without a pull secret', 'auth', authImage),
    regular('auth-wrong-password', '401 with a wrong password', 'auth', authImage, {
      spec: nodePodSpec(node, [main(authImage)], { imagePullSecrets: [{ name: 'wrong-password' }] }),
      secrets: [{ name: 'wrong-password', dockerconfigjson: dockerConfig(node.authRegistry, node.authUser, 'not-the-password') }],
    }),
    regular('unresolvable-host', 'registry host does not resolve', 'transient', 'registry.no-such-host.invalid/team/app:1'),
    regular('connection-refused', 'registry refuses connections', 'transient', `127.0.0.1:${refusedPort}/team/app:1`, {
      reasons: refusedReasons(node.runtime),
    }),
    regular('invalid-name', 'InvalidImageName', 'permanent', `${node.registry}/Team/App:1`, { reasons: ['InvalidImageName'] }),
    regular('never-pull', 'ErrImageNeverPull', 'permanent', `${node.registry}/team/never-pulled:1`, {
      reasons: ['ErrImageNeverPull'],
      spec: nodePodSpec(node, [main(`${node.registry}/team/never-pulled:1`, { imagePullPolicy: 'Never' })]),
    }),
    {
      id: 'init-container',
      title: 'init container stuck',
      expectedClass: 'permanent',
      container: 'fetch',
      containerKind: 'init',
      reasons: pull,
      image: missing,
      spec: nodePodSpec(node, [main(node.pauseImage)], { initContainers: [{ name: 'fetch', image: missing }] }),
    },
    {
      id: 'sidecar',
      title: 'sidecar (init container with restartPolicy Always) stuck',
      expectedClass: 'permanent',
      container: 'proxy',
      containerKind: 'sidecar',
      reasons: pull,
      image: missing,
      spec: nodePodSpec(node, [main(node.pauseImage)], {
        initContainers: [{ name: 'proxy', image: missing, restartPolicy: 'Always' }],
      }),
    },
  ];
}

/** The stand-ins' hosts (registry-faults.ts). */
export type FaultHosts = Record<'tooManyRequests' | 'rateLimitedFetch' | 'unavailable' | 'tokenUnavailable' | 'untrusted', string>;

/**
 * The stand-ins' hosts as the node of `runtime` must address them. CRI-O never verifies TLS for
 * 127.0.0.0/8 (cri-o v1.34.0 internal/storage/image.go adds it to the insecure registries), so it
 * reaches the untrusted one at 0.0.0.0:PORT: the same loopback server (Linux connects 0.0.0.0 to
 * the local host) at an address outside that range.
 */
export function faultHostsFor(runtime: NodeRuntime, f: FaultHosts): FaultHosts {
  const { tooManyRequests, rateLimitedFetch, unavailable, tokenUnavailable, untrusted } = f;
  return {
    tooManyRequests,
    rateLimitedFetch,
    unavailable,
    tokenUnavailable,
    untrusted: runtime === 'crio' ? untrusted.replace(/^127\.0\.0\.1:/, '0.0.0.0:') : untrusted,
  };
}

/**
 * Retry-After of the stand-ins' 429s for a node of `runtime`: CRI-O honours it (5 tries), which
 * with the default 30 s holds every serialized pull on the node for minutes; 0 keeps its 5 tries.
 */
export function faultRetryAfterSeconds(runtime: NodeRuntime): number | undefined {
  return runtime === 'crio' ? 0 : undefined;
}

/**
 * Transient registry answers, from the stand-ins of registry-faults.ts (containerd needs their
 * hosts: addRegistryHost, https for `untrusted`).
 */
export function registryFaultCases(node: { name: string }, hosts: FaultHosts): NodeCase[] {
  return [
    regularCase(node, 'too-many-requests', 'registry answers 429 Too Many Requests', 'transient', `${hosts.tooManyRequests}/team/app:1`),
    regularCase(
      node,
      'too-many-requests-on-fetch',
      'registry answers 429 to the manifest GET (its HEAD succeeds)',
      'transient',
      `${hosts.rateLimitedFetch}/team/app:1`,
    ),
    regularCase(node, 'service-unavailable', 'registry answers 503 Service Unavailable', 'transient', `${hosts.unavailable}/team/app:1`),
    regularCase(node, 'token-unavailable', "registry's token endpoint answers 503", 'transient', `${hosts.tokenUnavailable}/team/app:1`),
    regularCase(
      node,
      'untrusted-certificate',
      'registry certificate the node does not trust (x509)',
      'transient',
      `${hosts.untrusted}/team/app:1`,
    ),
  ];
}

/** The class a mirror's 404 for a stopped upstream gets, by runtime (node-mirror-outage.test.ts shows the messages). */
const MIRROR_OUTAGE_CLASS: Partial<Record<NodeRuntime, PullClass>> = {
  containerd: 'transient',
  containerd2: 'permanent',
  crio: 'transient',
};

/**
 * Cases that depend on the runtime's config: `mirror-outage` (the node's host config for
 * `hosts.stoppedUpstream` lists the open registry as a mirror; nothing listens upstream) and, on a
 * node started with `imagePullProgressTimeout`, `cancelled` (a layer download that stalls, from
 * stalling-registry.ts, cancelled by the runtime: class stalled).
 */
export function runtimeCases(
  node: Pick<TestNodeHandle, 'name' | 'runtime' | 'runtimeOptions'>,
  hosts: { stoppedUpstream: string; stallingBlob: string },
): NodeCase[] {
  const out: NodeCase[] = [];
  const mirrorClass = MIRROR_OUTAGE_CLASS[node.runtime];
  if (mirrorClass) {
    out.push(
      regularCase(
        node,
        'mirror-outage',
        'mirror lacks the image, upstream registry stopped',
        mirrorClass,
        `${hosts.stoppedUpstream}/team/app:1`,
        {
          reasons: refusedReasons(node.runtime),
        },
      ),
    );
  }
  if (node.runtimeOptions.imagePullProgressTimeout) {
    out.push(
      regularCase(
        node,
        'cancelled',
        `pull cancelled after ${node.runtimeOptions.imagePullProgressTimeout} without progress (image_pull_progress_timeout)`,
        'stalled',
        `${hosts.stallingBlob}/team/app:1`,
      ),
    );
  }
  return out;
}

function isTrue(pod: V1Pod, type: string): boolean {
  return pod.status?.conditions?.some((c) => c.type === type && c.status === 'True') ?? false;
}

/** A case whose pull hangs (class stalled): states to record, each the first pod a predicate accepts. */
export interface StalledCase extends Omit<NodeCase, 'reasons' | 'expectedClass'> {
  expectedClass: 'stalled';
  /** State name -> when the pod is in it. The state named after the waiting reason is the stalled one. */
  states: Record<string, (pod: V1Pod) => boolean>;
}

/**
 * Pulls from `hungHost` (a registry that never answers: no error, no message): a regular container
 * (ContainerCreating), an init container and a sidecar (PodInitializing), the first of two init
 * containers, a regular container after a 4 s init container, and an init container after a 4 s
 * one (PodInitializing, also recorded while the one before it runs). With serialized pulls every later pull on the node queues behind the
 * first hung one; run these last.
 */
export function stalledCases(node: TestNodeHandle, hungHost: string): StalledCase[] {
  const image = `${hungHost}/team/app:1`;
  const setup: V1Container = { name: 'setup', image: node.pauseImage, command: ['/pause', '4s'] };
  const status = (c: Pick<NodeCase, 'container' | 'containerKind'>, pod: V1Pod): V1ContainerStatus | undefined =>
    caseContainerStatus(pod, c);
  const waitingIn = (reason: string, c: Pick<NodeCase, 'container' | 'containerKind'>) => (pod: V1Pod) =>
    isTrue(pod, 'PodReadyToStartContainers') && status(c, pod)?.state?.waiting?.reason === reason;
  const setupState = (pod: V1Pod, state: 'running' | 'terminated'): boolean =>
    pod.status?.initContainerStatuses?.find((s) => s.name === 'setup')?.state?.[state] !== undefined;
  const regular = { container: 'main', containerKind: 'regular' } as const;
  const init = { container: 'fetch', containerKind: 'init' } as const;
  return [
    {
      id: 'stalled',
      title: 'pull hangs: regular container',
      expectedClass: 'stalled',
      ...regular,
      image,
      spec: nodePodSpec(node, [main(image)]),
      states: {
        // The kubelet's first status, before the sandbox is up: not stalled yet.
        'sandbox-not-ready': (pod) =>
          pod.status?.conditions?.some((c) => c.type === 'PodReadyToStartContainers' && c.status === 'False') === true &&
          status(regular, pod)?.state?.waiting?.reason === 'ContainerCreating',
        ContainerCreating: waitingIn('ContainerCreating', regular),
      },
    },
    {
      id: 'stalled-init',
      title: 'pull hangs: init container',
      expectedClass: 'stalled',
      ...init,
      image,
      spec: nodePodSpec(node, [main(node.pauseImage)], { initContainers: [{ name: 'fetch', image }] }),
      states: { PodInitializing: waitingIn('PodInitializing', init) },
    },
    {
      id: 'stalled-sidecar',
      title: 'pull hangs: sidecar (init container with restartPolicy Always)',
      expectedClass: 'stalled',
      container: 'proxy',
      containerKind: 'sidecar',
      image,
      spec: nodePodSpec(node, [main(node.pauseImage)], { initContainers: [{ name: 'proxy', image, restartPolicy: 'Always' }] }),
      states: { PodInitializing: waitingIn('PodInitializing', { container: 'proxy', containerKind: 'sidecar' }) },
    },
    {
      id: 'stalled-first-of-two-init',
      title: 'pull hangs: the first of two init containers',
      expectedClass: 'stalled',
      ...init,
      image,
      spec: nodePodSpec(node, [main(node.pauseImage)], { initContainers: [{ name: 'fetch', image }, setup] }),
      states: {
        PodInitializing: (pod) =>
          waitingIn('PodInitializing', init)(pod) &&
          status({ container: 'setup', containerKind: 'init' }, pod)?.state?.waiting?.reason === 'PodInitializing',
      },
    },
    {
      id: 'stalled-after-init',
      title: 'pull hangs: regular container after a 4 s init container',
      expectedClass: 'stalled',
      ...regular,
      image,
      spec: nodePodSpec(node, [main(image)], { initContainers: [setup] }),
      states: {
        'setup-running': (pod) => waitingIn('PodInitializing', regular)(pod) && setupState(pod, 'running'),
        PodInitializing: (pod) => waitingIn('PodInitializing', regular)(pod) && isTrue(pod, 'Initialized'),
      },
    },
    {
      id: 'stalled-second-init',
      title: 'pull hangs: init container after a 4 s init container',
      expectedClass: 'stalled',
      ...init,
      image,
      spec: nodePodSpec(node, [main(node.pauseImage)], { initContainers: [setup, { name: 'fetch', image }] }),
      states: {
        'setup-running': (pod) => waitingIn('PodInitializing', init)(pod) && setupState(pod, 'running'),
        PodInitializing: (pod) => waitingIn('PodInitializing', init)(pod) && setupState(pod, 'terminated'),
      },
    },
  ];
}

/**
 * Polls the pod (every 100 ms) until each of `states` has been seen; returns the first pod each
 * state's predicate accepted.
 */
export async function observeStates(
  kc: KubeConfig,
  namespace: string,
  name: string,
  states: Record<string, (pod: V1Pod) => boolean>,
  timeoutMs = 90_000,
): Promise<Map<string, V1Pod>> {
  const core = kc.makeApiClient(CoreV1Api);
  const seen = new Map<string, V1Pod>();
  await waitFor(
    async () => {
      const pod = await core.readNamespacedPod({ name, namespace });
      for (const [state, is] of Object.entries(states)) if (!seen.has(state) && is(pod)) seen.set(state, pod);
      return Object.keys(states).every((s) => seen.has(s));
    },
    timeoutMs,
    `pod ${namespace}/${name} in states ${Object.keys(states).join(' and ')}`,
    100,
  );
  return seen;
}

/** The status of the case's container, if it is there. */
export function caseContainerStatus(pod: V1Pod, c: Pick<NodeCase, 'container' | 'containerKind'>): V1ContainerStatus | undefined {
  const list = c.containerKind === 'regular' ? pod.status?.containerStatuses : pod.status?.initContainerStatuses;
  return list?.find((s) => s.name === c.container);
}

/** Creates the case's secrets and a bare pod `name` in `namespace`. */
export async function createCasePod(
  kc: KubeConfig,
  namespace: string,
  name: string,
  c: Pick<NodeCase, 'spec' | 'secrets'>,
): Promise<V1Pod> {
  const core = kc.makeApiClient(CoreV1Api);
  for (const s of c.secrets ?? []) {
    await core.createNamespacedSecret({
      namespace,
      body: {
        metadata: { name: s.name },
        type: 'kubernetes.io/dockerconfigjson',
        stringData: { '.dockerconfigjson': s.dockerconfigjson },
      },
    });
  }
  return core.createNamespacedPod({ namespace, body: { metadata: { name }, spec: c.spec } });
}

/**
 * Polls the pod (every 200 ms) until its case container has been seen waiting with every reason
 * in `c.reasons`; returns the pod as it was when each reason was first seen.
 */
export async function observeReasons(
  kc: KubeConfig,
  namespace: string,
  name: string,
  c: Pick<NodeCase, 'container' | 'containerKind' | 'reasons'>,
  timeoutMs = 90_000,
): Promise<Map<string, V1Pod>> {
  const waitingWith = (reason: string) => (pod: V1Pod) => caseContainerStatus(pod, c)?.state?.waiting?.reason === reason;
  return observeStates(kc, namespace, name, Object.fromEntries(c.reasons.map((r) => [r, waitingWith(r)])), timeoutMs);
}
