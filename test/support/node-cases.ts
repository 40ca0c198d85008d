// The image-pull failure cases the real node is put through: each a pod spec (for a bare pod or a
// Job template) pinned to the node, and how to recognise the state it must reach. Shared by the
// node e2e tests and scripts/record-node-statuses.ts, which saves the real statuses to
// test/fixtures/real-node-statuses.json for the classifier's unit tests.
import {
  CoreV1Api,
  type KubeConfig,
  type V1Container,
  type V1ContainerStatus,
  type V1Pod,
  type V1PodSpec,
} from '@kubernetes/client-node';
import { freePort } from './cluster.ts';
import { waitFor } from './kubelet.ts';
import type { TestNodeHandle } from './node.ts';

export interface NodeCase {
  /** Stable id, also the fixture key. */
  id: string;
  title: string;
  /** The class the classifier must give it. */
  expectedClass: 'permanent' | 'auth' | 'transient' | 'unknown';
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

function dockerConfig(registry: string, user: string, password: string): string {
  const auth = Buffer.from(`${user}:${password}`).toString('base64');
  return JSON.stringify({ auths: { [registry]: { username: user, password, auth } } });
}

/** Every failure case, built for this node (ports and credentials are per run). */
export async function nodeCases(node: TestNodeHandle): Promise<NodeCase[]> {
  const refusedPort = await freePort();
  const pull = ['ErrImagePull', 'ImagePullBackOff'];
  const main = (image: string, extra: Partial<V1Container> = {}): V1Container => ({ name: 'main', image, ...extra });
  const regular = (
    id: string,
    title: string,
    expectedClass: NodeCase['expectedClass'],
    image: string,
    extra: Partial<NodeCase> = {},
  ): NodeCase => ({
    id,
    title,
    expectedClass,
    container: 'main',
    containerKind: 'regular',
    reasons: pull,
    image,
    spec: nodePodSpec(node, [main(image)]),
    ...extra,
  });
  const authImage = `${node.authRegistry}/pause:3.10`;
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
    regular('connection-refused', 'registry refuses connections', 'transient', `127.0.0.1:${refusedPort}/team/app:1`),
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

/** The status of the case's container, if it is there. */
export function caseContainerStatus(pod: V1Pod, c: Pick<NodeCase, 'container' | 'containerKind'>): V1ContainerStatus | undefined {
  const list = c.containerKind === 'regular' ? pod.status?.containerStatuses : pod.status?.initContainerStatuses;
  return list?.find((s) => s.name === c.container);
}

/** Creates the case's secrets and a bare pod `name` in `namespace`. */
export async function createCasePod(kc: KubeConfig, namespace: string, name: string, c: NodeCase): Promise<V1Pod> {
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
  const core = kc.makeApiClient(CoreV1Api);
  const seen = new Map<string, V1Pod>();
  await waitFor(
    async () => {
      const pod = await core.readNamespacedPod({ name, namespace });
      const reason = caseContainerStatus(pod, c)?.state?.waiting?.reason;
      if (reason && c.reasons.includes(reason) && !seen.has(reason)) seen.set(reason, pod);
      return c.reasons.every((r) => seen.has(r));
    },
    timeoutMs,
    `pod ${namespace}/${name} container ${c.container} waiting with ${c.reasons.join(' and ')} (seen: ${[...seen.keys()].join(', ') || 'none'})`,
    200,
  );
  return seen;
}
