// Runs every image-pull failure case on a real node and saves the statuses the real kubelet
// wrote to test/fixtures/real-node-statuses.json (the classifier's unit tests and the status
// stand-in read them):
//   npm run record:node-statuses
// Uses the running cluster + node of `npm run cluster:up` when there is one, else starts both.
// Linux and root only (it needs a real node).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BatchV1Api, CoreV1Api, Watch, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { connect, startCluster } from '../test/support/cluster.ts';
import { createNamespace, jobManifest } from '../test/support/fixtures.ts';
import { waitFor, waitForJobPods } from '../test/support/kubelet.ts';
import { ensureNodePackages, nodeSupport, pushImage, startNode, type NodeInfo, type TestNodeHandle } from '../test/support/node.ts';
import { createCasePod, nodeCases, nodePodSpec, observeReasons } from '../test/support/node-cases.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const OUT = path.join(root, 'test', 'fixtures', 'real-node-statuses.json');

/** The parts of a pod the sweeper reads; names and uids made stable, times kept as recorded. */
function trim(pod: V1Pod, name: string): V1Pod {
  const m = pod.metadata ?? {};
  return {
    metadata: {
      name,
      namespace: 'recorded',
      uid: `uid-${name}`,
      creationTimestamp: m.creationTimestamp,
      ...(m.deletionTimestamp ? { deletionTimestamp: m.deletionTimestamp } : {}),
      ...(m.ownerReferences
        ? { ownerReferences: m.ownerReferences.map((o) => ({ ...o, uid: `uid-${o.name}` })) }
        : {}),
    },
    spec: {
      nodeName: 'recorded-node',
      restartPolicy: pod.spec?.restartPolicy,
      containers: pod.spec!.containers.map((c) => ({ name: c.name, image: c.image, ...(c.imagePullPolicy ? { imagePullPolicy: c.imagePullPolicy } : {}) })),
      ...(pod.spec?.initContainers
        ? { initContainers: pod.spec.initContainers.map((c) => ({ name: c.name, image: c.image, ...(c.restartPolicy ? { restartPolicy: c.restartPolicy } : {}) })) }
        : {}),
    },
    status: pod.status,
  };
}

async function watchPods(kc: KubeConfig, ns: string): Promise<{ seen: V1Pod[]; stop(): void }> {
  const seen: V1Pod[] = [];
  const req = await new Watch(kc).watch(`/api/v1/namespaces/${ns}/pods`, {}, (_t, o: V1Pod) => seen.push(o), () => undefined);
  return { seen, stop: () => req.abort() };
}

async function record(kc: KubeConfig, node: TestNodeHandle): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  const ns = await createNamespace(kc, 'record');
  try {
    const n = await core.readNode({ name: node.name });
    const cases = await nodeCases(node);
    process.stderr.write(`recording ${cases.length} cases on ${node.name}...\n`);
    await Promise.all(cases.map((c) => createCasePod(kc, ns.name, c.id, c)));
    const recorded = await Promise.all(
      cases.map(async (c) => {
        const seen = await observeReasons(kc, ns.name, c.id, c);
        return {
          id: c.id,
          title: c.title,
          expectedClass: c.expectedClass,
          container: c.container,
          containerKind: c.containerKind,
          image: c.image,
          pods: Object.fromEntries([...seen].map(([reason, pod]) => [reason, trim(pod, `${c.id}`)])),
        };
      }),
    );

    // The stuck clock: an init container runs 4 s, then the regular container cannot pull.
    const clockSpec = nodePodSpec(node, [{ name: 'main', image: `${node.registry}/team/missing:1` }], {
      initContainers: [{ name: 'setup', image: node.pauseImage, command: ['/pause', '4s'] }],
    });
    await core.createNamespacedPod({ namespace: ns.name, body: { metadata: { name: 'clock' }, spec: clockSpec } });
    const clock = await observeReasons(kc, ns.name, 'clock', { container: 'main', containerKind: 'regular', reasons: ['ImagePullBackOff'] });

    // A healthy running pod.
    await core.createNamespacedPod({
      namespace: ns.name,
      body: { metadata: { name: 'running' }, spec: nodePodSpec(node, [{ name: 'main', image: node.pauseImage }]) },
    });
    const running = await waitFor(
      async () => {
        const p = await core.readNamespacedPod({ namespace: ns.name, name: 'running' });
        return p.status?.phase === 'Running' && p.status.containerStatuses?.[0]?.ready ? p : undefined;
      },
      60_000,
      'pod running Ready',
    );

    // What the kubelet leaves of a waiting Job pod that is deleted (the podFailurePolicy path).
    const watch = await watchPods(kc, ns.name);
    const job = jobManifest('deleted', `${node.registry}/team/missing:1`);
    job.spec!.template.spec = nodePodSpec(node, [{ name: 'main', image: `${node.registry}/team/missing:1` }]);
    await kc.makeApiClient(BatchV1Api).createNamespacedJob({ namespace: ns.name, body: job });
    const [jp] = await waitForJobPods(core, ns.name, 'deleted');
    const jpName = jp!.metadata!.name!;
    await observeReasons(kc, ns.name, jpName, { container: 'main', containerKind: 'regular', reasons: ['ImagePullBackOff'] });
    const tDelete = Date.now();
    await core.deleteNamespacedPod({ namespace: ns.name, name: jpName });
    const deleted = await waitFor(
      () => watch.seen.find((p) => p.metadata?.name === jpName && p.status?.phase === 'Failed'),
      30_000,
      'the deleted pod Failed',
      100,
    );
    const failedAfterMs = Date.now() - tDelete;
    watch.stop();

    const fixture = {
      about:
        'Pod statuses written by a real kubelet v1.37.2 + containerd on the test node, recorded by ' +
        'scripts/record-node-statuses.ts. Registry ports are those of the recording run.',
      recordedAt: new Date().toISOString(),
      kubelet: n.status?.nodeInfo?.kubeletVersion,
      containerRuntime: n.status?.nodeInfo?.containerRuntimeVersion,
      cases: recorded,
      clock: trim(clock.get('ImagePullBackOff')!, 'clock'),
      running: trim(running, 'running'),
      deletedWaitingPod: { failedAfterMs, pod: trim(deleted, 'deleted') },
    };
    fs.mkdirSync(path.dirname(OUT), { recursive: true });
    fs.writeFileSync(OUT, JSON.stringify(fixture, null, 2) + '\n');
    process.stderr.write(`wrote ${path.relative(root, OUT)}\n`);
  } finally {
    await ns.remove();
  }
}

async function main(): Promise<void> {
  const why = nodeSupport();
  if (why) throw new Error(why);
  const stateFile = path.join(root, '.cache', 'cluster.json');
  const nodeFile = path.join(root, '.cache', 'node.json');
  if (fs.existsSync(stateFile) && fs.existsSync(nodeFile)) {
    const st = JSON.parse(fs.readFileSync(stateFile, 'utf8')) as { kubeconfigPath: string };
    const info = JSON.parse(fs.readFileSync(nodeFile, 'utf8')) as NodeInfo;
    process.stderr.write(`using the running cluster and node ${info.name}\n`);
    const handle: TestNodeHandle = { ...info, pushImage: (ref) => pushImage(info.pauseLayout, `${info.registry}/${ref}`) };
    await record(connect(st.kubeconfigPath).kubeConfig, handle);
    return;
  }
  const cluster = await startCluster();
  try {
    await ensureNodePackages();
    const node = await startNode({ kubeconfigPath: cluster.kubeconfigPath });
    try {
      await record(cluster.kubeConfig, node);
    } finally {
      await node.stop();
    }
  } finally {
    await cluster.stop();
  }
}

main().catch((e: unknown) => {
  process.stderr.write(`${(e as Error).stack ?? String(e)}\n`);
  process.exitCode = 1;
});
