// The Kubernetes minor under test ($IMAGEPULL_SWEEPER_K8S_VERSION: 1.37 by default, 1.34 in the
// compatibility run, npm run test:e2e:compat) and what the sweeper detects about older
// clusters: the server's version (a floor at 1.34) and a kubelet that writes no
// PodReadyToStartContainers (the gate is beta, so switchable, before 1.37; on 1.37 it is locked
// on and the kubelet refuses to turn it off, so that case runs on the older pins only).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { BatchV1Api, CoreV1Api, PatchStrategy, setHeaderOptions, type KubeConfig, type V1Job, type V1Pod } from '@kubernetes/client-node';
import { createGateway } from '../../src/kube/gateway.ts';
import { serverVersionWarning } from '../../src/kube/server-version.ts';
import { controlPlaneBinaries, K8S_VERSION_ENV, versionOfBinaries } from '../support/cluster.ts';
import { jobManifest } from '../support/fixtures.ts';
import { useTestCluster } from '../support/hooks.ts';
import { waitFor, waitForJobPods } from '../support/kubelet.ts';
import { addRegistryHost, hungServer, nodeSkipReason, startNode, testNode, type RunningNode } from '../support/node.ts';
import { nodePodSpec } from '../support/node-cases.ts';
import { assertFailedBySweeper, policyFile, runSweep, trueCondition, waitForJobFailed } from '../support/sweeper.ts';

const env = useTestCluster();
const minor = process.env[K8S_VERSION_ENV] ?? '1.37';
const nodeSkip = nodeSkipReason();
const TIMEOUT = { timeout: 240_000 };
const GATE = 'PodReadyToStartContainersCondition';
// Beta (switchable) up to 1.36, GA and locked on from 1.37.
const gateLocked = Number(minor.split('.')[1]) >= 37;
const gateSkip = gateLocked ? `${GATE} is GA and locked on in ${minor}; the gate-off kubelet runs in the 1.34 compatibility run` : nodeSkip;
const POLICY = policyFile('defaults: { grace: { permanent: 1s, stalled: 5s } }\n');
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

function hasCondition(pod: V1Pod, type: string): boolean {
  return pod.status?.conditions?.some((c) => c.type === type) ?? false;
}

async function createJob(kc: KubeConfig, ns: string, node: { name: string }, name: string, image: string): Promise<void> {
  const job: V1Job = jobManifest(name, image);
  job.spec!.template.spec = nodePodSpec(node, [{ name: 'main', image }]);
  await kc.makeApiClient(BatchV1Api).createNamespacedJob({ namespace: ns, body: job });
}

/** The Job's pod once its container waits with one of `reasons`. */
async function waitingPod(kc: KubeConfig, ns: string, job: string, reasons: string[]): Promise<V1Pod> {
  const core = kc.makeApiClient(CoreV1Api);
  const [created] = await waitForJobPods(core, ns, job);
  return waitFor(
    async () => {
      const pod = await core.readNamespacedPod({ namespace: ns, name: created!.metadata!.name! });
      const reason = pod.status?.containerStatuses?.[0]?.state?.waiting?.reason;
      return reason && reasons.includes(reason) ? pod : undefined;
    },
    60_000,
    `Job ${ns}/${job} waiting in ${reasons.join(' or ')}`,
  );
}

describe(`Kubernetes ${minor}`, () => {
  it(
    "a Job's status write carries the claim (conditional on its resourceVersion); on a suspended Job its FailureTarget waits, and the Job is Failed on resume before any pod",
    TIMEOUT,
    async () => {
      const ns = await env.namespace('k8s-failure-target');
      const batch = env.kc.makeApiClient(BatchV1Api);
      const gateway = createGateway(env.kc);
      const job = await batch.createNamespacedJob({
        namespace: ns,
        body: jobManifest('queued', 'registry.invalid/app:1', { suspend: true }),
      });
      const target = { type: 'FailureTarget', status: 'True', reason: 'ImagePullStuck', message: 'imagepull-sweeper: known cause' };
      const stale = job.metadata!.resourceVersion!;
      await waitFor(
        async () => trueCondition(await batch.readNamespacedJob({ namespace: ns, name: 'queued' }), 'Suspended'),
        30_000,
        'Suspended',
      );
      await assert.rejects(
        gateway.patchJobStatus(ns, 'queued', { metadata: { resourceVersion: stale }, status: { conditions: [target] } }),
        (e: unknown) => (e as { code?: number }).code === 409,
        'a stale resourceVersion is a conflict',
      );
      const current = await batch.readNamespacedJob({ namespace: ns, name: 'queued' });
      await gateway.patchJobStatus(ns, 'queued', {
        metadata: {
          resourceVersion: current.metadata!.resourceVersion,
          annotations: { 'imagepull-sweeper/claim': 'k8s-versions' },
          labels: { 'imagepull-sweeper/pending': 'true' },
        },
        status: { conditions: [target] },
      });
      const claimed = await batch.readNamespacedJob({ namespace: ns, name: 'queued' });
      assert.equal(claimed.metadata?.annotations?.['imagepull-sweeper/claim'], 'k8s-versions', 'the status write kept the annotation');
      assert.equal(claimed.metadata?.labels?.['imagepull-sweeper/pending'], 'true', 'and the label');
      await sleep(3_000);
      assert.equal(
        trueCondition(await batch.readNamespacedJob({ namespace: ns, name: 'queued' }), 'Failed'),
        undefined,
        'not while suspended',
      );
      const resumed = Date.now();
      await batch.patchNamespacedJob(
        { namespace: ns, name: 'queued', body: { spec: { suspend: false } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      const failed = await waitForJobFailed(env.kc, ns, 'queued', 30_000);
      const condition = trueCondition(failed, 'Failed')!;
      assert.deepEqual([condition.reason, condition.message], [target.reason, target.message]);
      const pods = await env.kc.makeApiClient(CoreV1Api).listNamespacedPod({ namespace: ns, labelSelector: 'job-name=queued' });
      assert.deepEqual(
        pods.items.map((p) => p.metadata?.name),
        [],
        'no pod created',
      );
      process.stderr.write(`[k8s] ${minor}: a suspended Job's FailureTarget: Failed ${Date.now() - resumed} ms after the resume, no pod\n`);
    },
  );

  it('the API server and the node run the pinned release of the chosen minor', TIMEOUT, async () => {
    const version = await createGateway(env.kc).readServerVersion();
    assert.equal(`${version.major}.${version.minor}`, minor);
    assert.equal(version.gitVersion, versionOfBinaries(await controlPlaneBinaries()));
    assert.equal(serverVersionWarning(version), undefined);
    if (nodeSkip) return;
    const node = await testNode(env.cluster.kubeconfigPath);
    const read = await env.kc.makeApiClient(CoreV1Api).readNode({ name: node.name });
    assert.equal(read.status?.nodeInfo?.kubeletVersion, version.gitVersion);
  });

  it('a sweep against it logs no version warning', TIMEOUT, async () => {
    const ns = await env.namespace('k8s-version');
    const run = await runSweep(env.kc, { namespaces: [ns], policy: POLICY });
    assert.equal(run.exitCode, 0);
    assert.ok(run.summary, 'the sweep reached its summary (and the version check after the pod list)');
    const warnings = run.records.filter((r) => r.level === 'warn').map((r) => String(r.message));
    assert.deepEqual(
      warnings.filter((m) => /Kubernetes|PodReadyToStartContainers/.test(m)),
      [],
    );
  });

  describe('a pull that hangs without an error', () => {
    let node: RunningNode | undefined;
    let hung: Awaited<ReturnType<typeof hungServer>> | undefined;
    before(async () => {
      if (nodeSkip) return;
      hung = await hungServer();
      node = await startNode({ kubeconfigPath: env.cluster.kubeconfigPath, serializeImagePulls: false });
      await addRegistryHost(node, hung.host);
    });
    after(async () => {
      await hung?.close();
      await node?.stop();
    });

    // Kubelets before 1.36 mark the sandbox ready only once the pull ended (1.36 added a
    // callback right after sandbox creation, kubernetes/kubernetes#134460).
    const marksSandboxEarly = Number(minor.split('.')[1]) >= 36;
    it(
      marksSandboxEarly
        ? 'the kubelet marks the sandbox ready during the pull: the sweep sees the pod as stalled, no sandbox warning'
        : 'the kubelet never marks the sandbox ready during the pull: the sweep does not act and warns after 30 s, naming the pod',
      { ...TIMEOUT, skip: nodeSkip },
      async () => {
        const ns = await env.namespace('k8s-hung');
        await createJob(env.kc, ns, node!, 'hung', `${hung!.host}/team/app:1`);
        const pod = await waitingPod(env.kc, ns, 'hung', ['ContainerCreating']);
        await sleep(35_000);
        const read = await env.kc.makeApiClient(CoreV1Api).readNamespacedPod({ namespace: ns, name: pod.metadata!.name! });
        assert.equal(read.status?.containerStatuses?.[0]?.state?.waiting?.reason, 'ContainerCreating');
        assert.ok(hung!.connections() > 0, 'the kubelet is pulling from the hung registry');
        const ready = read.status?.conditions?.find((c) => c.type === 'PodReadyToStartContainers')?.status;
        const run = await runSweep(env.kc, { namespaces: [ns], policy: POLICY, dryRun: true });
        const warning = run.records.find((r) => r.level === 'warn' && /waited over 30 s for their sandbox/.test(String(r.message)));
        if (marksSandboxEarly) {
          assert.equal(ready, 'True');
          assert.deepEqual(
            run.lines.map((l) => [l.job, l.class, l.outcome]),
            [['hung', 'stalled', 'would-fail']],
          );
          assert.equal(warning, undefined);
        } else {
          assert.equal(ready, 'False');
          assert.deepEqual(run.lines, []);
          assert.ok(warning, JSON.stringify(run.records));
          assert.deepEqual(warning.pods, [`${ns}/${pod.metadata!.name}`]);
          assert.deepEqual(warning.nodes, [node!.name]);
        }
      },
    );
  });

  describe(`a kubelet with ${GATE} off`, () => {
    let node: RunningNode | undefined;
    let hung: Awaited<ReturnType<typeof hungServer>> | undefined;
    before(async () => {
      if (gateSkip) return;
      hung = await hungServer();
      node = await startNode({
        kubeconfigPath: env.cluster.kubeconfigPath,
        serializeImagePulls: false,
        kubeletFeatureGates: { [GATE]: false },
      });
      await addRegistryHost(node, hung.host);
    });
    after(async () => {
      // Closing the registry first ends the hung pull, so the kubelet can tear the pod down.
      await hung?.close();
      await node?.stop();
    });

    it(
      'the sweep warns naming the node, still fails a Job whose pull errors, and leaves a hung pull alone',
      { ...TIMEOUT, skip: gateSkip },
      async () => {
        const ns = await env.namespace('k8s-gate-off');
        await createJob(env.kc, ns, node!, 'missing', `${node!.registry}/team/missing:1`);
        await createJob(env.kc, ns, node!, 'hung', `${hung!.host}/team/app:1`);
        const missing = await waitingPod(env.kc, ns, 'missing', ['ErrImagePull', 'ImagePullBackOff']);
        const stalled = await waitingPod(env.kc, ns, 'hung', ['ContainerCreating']);
        // What this kubelet writes: Initialized, and no PodReadyToStartContainers, on both pods.
        for (const pod of [missing, stalled]) {
          assert.ok(hasCondition(pod, 'Initialized'), JSON.stringify(pod.status?.conditions));
          assert.ok(!hasCondition(pod, 'PodReadyToStartContainers'), JSON.stringify(pod.status?.conditions));
        }
        await sleep(6_000); // past both graces

        const run = await runSweep(env.kc, { namespaces: [ns], policy: POLICY });
        assert.equal(run.exitCode, 0);
        const warning = run.records.find((r) => r.level === 'warn' && /PodReadyToStartContainers/.test(String(r.message)));
        assert.ok(warning, JSON.stringify(run.records));
        assert.deepEqual(warning.nodes, [node!.name]);
        assert.deepEqual(
          run.lines.map((l) => [l.job, l.outcome]),
          [['missing', 'failed']],
          'the Job whose pull errors is failed; the hung pull is not seen as stuck',
        );
        const failed = await waitForJobFailed(env.kc, ns, 'missing');
        assertFailedBySweeper(failed);
        const hungJob = await env.kc.makeApiClient(BatchV1Api).readNamespacedJob({ namespace: ns, name: 'hung' });
        assert.equal(trueCondition(hungJob, 'Failed'), undefined);
      },
    );
  });
});
