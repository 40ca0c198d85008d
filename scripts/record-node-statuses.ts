// Runs every image-pull failure case on a real node of each runtime and saves the statuses the
// real kubelet wrote, one file per runtime: test/fixtures/real-node-statuses.json (containerd,
// Debian's 1.6) and real-node-statuses.<runtime>.json (e.g. containerd2); the classifier's unit
// tests and the status stand-in read them. Transient registry answers (429, 503, a 503 token
// endpoint, an untrusted certificate) come from loopback stand-ins (test/support/registry-faults.ts);
// a mirror outage from host config naming the open registry as mirror of a stopped one; on
// runtimes with a pull progress timeout (set to 5 s) a cancelled pull from a registry whose layer
// download stalls (stalling-registry.ts); pulls that hang (class stalled) from a registry that
// never answers, recorded last as they block the node's serialized pulls:
//   npm run record:node-statuses [-- RUNTIME...]   (default: $IMAGEPULL_SWEEPER_TEST_RUNTIMES, else every runtime this machine can run)
// Uses the running cluster + node of `npm run cluster:up` when there is one (its runtime only),
// else starts both. Linux and root only (it needs a real node).
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { BatchV1Api, CoreV1Api, Watch, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { connect, startCluster } from '../test/support/cluster.ts';
import { createNamespace, jobManifest } from '../test/support/fixtures.ts';
import { waitFor, waitForJobPods } from '../test/support/kubelet.ts';
import { freePort } from '../test/support/cluster.ts';
import {
  addRegistryHost,
  ensureNodePackages,
  hungServer,
  nodeSupport,
  pushImage,
  removeRegistryHost,
  startNode,
  type NodeInfo,
  type TestNodeHandle,
} from '../test/support/node.ts';
import {
  createCasePod,
  faultHostsFor,
  faultRetryAfterSeconds,
  nodeCases,
  nodePodSpec,
  observeReasons,
  observeStates,
  registryFaultCases,
  runtimeCases,
  stalledCases,
  type NodeCase,
  type StalledCase,
} from '../test/support/node-cases.ts';
import { crioCases, prepareCrioCases } from '../test/support/node-cases-crio.ts';
import { startFaultRegistries } from '../test/support/registry-faults.ts';
import { isNodeRuntime, requestedRuntimes, runtimeSupport, type NodeRuntime, type RuntimeOptions } from '../test/support/runtimes.ts';
import { stallingRegistry } from '../test/support/stalling-registry.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const outFile = (runtime: NodeRuntime): string =>
  path.join(root, 'test', 'fixtures', runtime === 'containerd' ? 'real-node-statuses.json' : `real-node-statuses.${runtime}.json`);
/** Per runtime: settings the recording node starts with. */
const RECORDING_OPTIONS: Partial<Record<NodeRuntime, RuntimeOptions>> = {
  containerd2: { imagePullProgressTimeout: '5s' },
  crio: { imagePullProgressTimeout: '5s' },
};

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
      ...(m.ownerReferences ? { ownerReferences: m.ownerReferences.map((o) => ({ ...o, uid: `uid-${o.name}` })) } : {}),
    },
    spec: {
      nodeName: 'recorded-node',
      restartPolicy: pod.spec?.restartPolicy,
      containers: pod.spec!.containers.map((c) => ({
        name: c.name,
        image: c.image,
        ...(c.imagePullPolicy ? { imagePullPolicy: c.imagePullPolicy } : {}),
      })),
      ...(pod.spec?.initContainers
        ? {
            initContainers: pod.spec.initContainers.map((c) => ({
              name: c.name,
              image: c.image,
              ...(c.restartPolicy ? { restartPolicy: c.restartPolicy } : {}),
            })),
          }
        : {}),
    },
    status: pod.status,
  };
}

async function watchPods(kc: KubeConfig, ns: string): Promise<{ seen: V1Pod[]; stop(): void }> {
  const seen: V1Pod[] = [];
  const req = await new Watch(kc).watch(
    `/api/v1/namespaces/${ns}/pods`,
    {},
    (_t, o: V1Pod) => seen.push(o),
    () => undefined,
  );
  return { seen, stop: () => req.abort() };
}

function recordedCase(c: NodeCase | StalledCase, seen: Map<string, V1Pod>): object {
  return {
    id: c.id,
    title: c.title,
    expectedClass: c.expectedClass,
    container: c.container,
    containerKind: c.containerKind,
    image: c.image,
    pods: Object.fromEntries([...seen].map(([state, pod]) => [state, trim(pod, c.id)])),
  };
}

async function record(kc: KubeConfig, node: TestNodeHandle): Promise<void> {
  const t0 = Date.now();
  const core = kc.makeApiClient(CoreV1Api);
  const ns = await createNamespace(kc, 'record');
  const faults = await startFaultRegistries({ retryAfterSeconds: faultRetryAfterSeconds(node.runtime) });
  const faultHosts = faultHostsFor(node.runtime, faults);
  const hung = await hungServer();
  const stalling = await stallingRegistry();
  const stoppedUpstream = `127.0.0.1:${await freePort()}`;
  const hosts = [
    faultHosts.tooManyRequests,
    faultHosts.rateLimitedFetch,
    faultHosts.unavailable,
    faultHosts.tokenUnavailable,
    hung.host,
    stalling.host,
  ];
  for (const h of hosts) addRegistryHost(node, h);
  addRegistryHost(node, faultHosts.untrusted, 'https');
  addRegistryHost(node, stoppedUpstream, { mirrors: [node.registry] });
  try {
    const n = await core.readNode({ name: node.name });
    const cases = [
      ...(await nodeCases(node)),
      ...registryFaultCases(node, faultHosts),
      ...runtimeCases(node, { stoppedUpstream, stallingBlob: stalling.host }),
      ...(node.runtime === 'crio' ? crioCases(node) : []),
    ];
    if (node.runtime === 'crio') await prepareCrioCases(node, ns.name);
    process.stderr.write(`recording ${cases.length} cases on ${node.name}...\n`);
    await Promise.all(cases.map((c) => createCasePod(kc, ns.name, c.id, c)));
    const recorded = await Promise.all(cases.map(async (c) => recordedCase(c, await observeReasons(kc, ns.name, c.id, c))));

    // The stuck clock: an init container runs 4 s, then the regular container cannot pull.
    const clockSpec = nodePodSpec(node, [{ name: 'main', image: `${node.registry}/team/missing:1` }], {
      initContainers: [{ name: 'setup', image: node.pauseImage, command: ['/pause', '4s'] }],
    });
    await core.createNamespacedPod({ namespace: ns.name, body: { metadata: { name: 'clock' }, spec: clockSpec } });
    const clock = await observeReasons(kc, ns.name, 'clock', {
      container: 'main',
      containerKind: 'regular',
      reasons: ['ImagePullBackOff'],
    });

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

    // Last: pulls that hang. The first blocks the node's (serialized) pulls; the rest queue behind it.
    const stalled = stalledCases(node, hung.host);
    process.stderr.write(`recording ${stalled.length} stalled cases (registry ${hung.host} never answers)...\n`);
    await Promise.all(stalled.map((c) => createCasePod(kc, ns.name, c.id, c)));
    const recordedStalled = await Promise.all(stalled.map(async (c) => recordedCase(c, await observeStates(kc, ns.name, c.id, c.states))));

    const fixture = {
      about:
        `Pod statuses written by a real kubelet v1.37.2 + ${node.runtime} on the test node, recorded by ` +
        'scripts/record-node-statuses.ts. Registry ports are those of the recording run. The 429, 503 and ' +
        'untrusted-certificate registries are loopback stand-ins (test/support/registry-faults.ts); the ' +
        'stalled pods pull from one that accepts connections and never answers' +
        (node.runtimeOptions.imagePullProgressTimeout
          ? `; the cancelled pod from one whose layer download stalls (test/support/stalling-registry.ts), with image_pull_progress_timeout ${node.runtimeOptions.imagePullProgressTimeout}.`
          : '.'),
      runtime: node.runtime,
      runtimeOptions: node.runtimeOptions,
      recordedAt: new Date().toISOString(),
      kubelet: n.status?.nodeInfo?.kubeletVersion,
      containerRuntime: n.status?.nodeInfo?.containerRuntimeVersion,
      cases: recorded,
      stalled: recordedStalled,
      /** What the stand-ins were asked (untrusted: nothing gets past the TLS handshake). */
      registryRequests: Object.fromEntries(Object.entries(faults.requests()).map(([k, v]) => [k, [...new Set(v)]])),
      clock: trim(clock.get('ImagePullBackOff')!, 'clock'),
      running: trim(running, 'running'),
      deletedWaitingPod: { failedAfterMs, pod: trim(deleted, 'deleted') },
    };
    const out = outFile(node.runtime);
    fs.mkdirSync(path.dirname(out), { recursive: true });
    fs.writeFileSync(out, JSON.stringify(fixture, null, 2) + '\n');
    process.stderr.write(`wrote ${path.relative(root, out)} (recording took ${Date.now() - t0} ms)\n`);
  } finally {
    // Ends the hung pulls so the node can tear their pods down.
    await hung.close();
    await stalling.close();
    await faults.close();
    await ns.remove();
    for (const h of [...hosts, faultHosts.untrusted, stoppedUpstream]) removeRegistryHost(node, h);
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
  const args = process.argv.slice(2);
  const bad = args.filter((a) => !isNodeRuntime(a));
  if (bad.length > 0) throw new Error(`unknown runtime ${bad.join(', ')}`);
  const runtimes = args.length > 0 ? (args as NodeRuntime[]) : requestedRuntimes();
  for (const r of runtimes) {
    const why = runtimeSupport(r);
    if (why) throw new Error(`runtime ${r}: ${why}`);
  }
  const cluster = await startCluster();
  try {
    await ensureNodePackages();
    for (const runtime of runtimes) {
      const node = await startNode({ kubeconfigPath: cluster.kubeconfigPath, runtime, runtimeOptions: RECORDING_OPTIONS[runtime] ?? {} });
      try {
        await record(cluster.kubeConfig, node);
      } finally {
        await node.stop();
      }
    }
  } finally {
    await cluster.stop();
  }
}

main().catch((e: unknown) => {
  process.stderr.write(`${(e as Error).stack ?? String(e)}\n`);
  process.exitCode = 1;
});
