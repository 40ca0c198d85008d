// Class `stalled` on real nodes: a registry that accepts connections and never answers (containerd
// 1.6 has no pull timeout). The pull hangs with no error and no message; with the kubelet's
// serialized pulls (its default) every later pull on the node queues behind it, without them it
// does not. The sweeper must see such pods (a regular container waits in ContainerCreating, STATUS
// `ContainerCreating`; an init container in PodInitializing, STATUS `Init:0/1`) and fail their Jobs.
// The Job controller then gives up on them (FailureTarget) but they end `Failed` only once the
// pull ends: the kubelet cannot end a pod whose pull hangs (unless a later sweep force-deletes
// the pods: test/e2e/node-force-delete.test.ts).
// Each scenario runs on a private node: a hung pull would block the shared one.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { BatchV1Api, CoreV1Api, type KubeConfig, type V1Container, type V1Job, type V1Pod } from '@kubernetes/client-node';
import { createGateway } from '../../src/kube/gateway.ts';
import type { AuditLine } from '../../src/report/audit.ts';
import { jobManifest } from '../support/fixtures.ts';
import { useTestCluster } from '../support/hooks.ts';
import { waitFor, waitForJobPods } from '../support/kubelet.ts';
import { addRegistryHost, hungServer, nodeSkipReason, startNode, type RunningNode } from '../support/node.ts';
import { nodePodSpec } from '../support/node-cases.ts';
import {
  assertFailedBySweeper,
  policyFile,
  runSweep,
  settledSnapshot,
  sweeperEvents,
  trueCondition,
  waitForJobFailed,
} from '../support/sweeper.ts';

const skip = nodeSkipReason();
const env = useTestCluster();
// Each test (not the suite) is skipped, so the runner counts them as skipped, with the reason.
const TIMEOUT = { timeout: 240_000, skip };
const STALLED = policyFile('defaults: { grace: { stalled: 5s } }\n');
/** How long a pull queued behind the hung one is watched before it counts as blocked. */
const QUEUE_WATCH_MS = 10_000;
/** How long the pods of failed Jobs are watched staying Terminating while their pull hangs. */
const HOLD_MS = 15_000;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

type Hung = Awaited<ReturnType<typeof hungServer>>;

/** A private node and a hung registry it pulls from over plain HTTP; stopped in `after`. */
function privateNode(serializeImagePulls: boolean): { node: () => RunningNode; hung: () => Hung } {
  let node: RunningNode | undefined;
  let hung: Hung | undefined;
  before(async () => {
    if (skip) return;
    hung = await hungServer();
    node = await startNode({ kubeconfigPath: env.cluster.kubeconfigPath, serializeImagePulls });
    await addRegistryHost(node, hung.host);
  });
  after(async () => {
    // Closing the registry first ends the hung pulls, so the kubelet can tear the pods down.
    await hung?.close();
    await node?.stop();
  });
  return { node: () => node!, hung: () => hung! };
}

function isTrue(pod: V1Pod, type: string): boolean {
  return pod.status?.conditions?.some((c) => c.type === type && c.status === 'True') ?? false;
}

function stalledJob(node: RunningNode, name: string, containers: V1Container[], initContainers?: V1Container[]): V1Job {
  const j = jobManifest(name, containers[0]!.image!);
  j.spec!.template.spec = nodePodSpec(node, containers, initContainers ? { initContainers } : {});
  return j;
}

/** Creates the Job and waits until `container` waits with `reason` while the sandbox is ready. */
async function createStalled(
  kc: KubeConfig,
  ns: string,
  job: V1Job,
  container: { name: string; init: boolean; reason: string },
): Promise<V1Pod> {
  await kc.makeApiClient(BatchV1Api).createNamespacedJob({ namespace: ns, body: job });
  const core = kc.makeApiClient(CoreV1Api);
  const [created] = await waitForJobPods(core, ns, job.metadata!.name!);
  return waitFor(
    async () => {
      const pod = await core.readNamespacedPod({ namespace: ns, name: created!.metadata!.name! });
      const list = container.init ? pod.status?.initContainerStatuses : pod.status?.containerStatuses;
      const st = list?.find((s) => s.name === container.name);
      return isTrue(pod, 'PodReadyToStartContainers') && st?.state?.waiting?.reason === container.reason ? pod : undefined;
    },
    60_000,
    `Job ${ns}/${job.metadata!.name} container ${container.name} waiting in ${container.reason} with its sandbox ready`,
    200,
  );
}

/** What `kubectl get pods` prints as STATUS, from the API server's Table. */
async function tableStatus(kc: KubeConfig, ns: string): Promise<Record<string, string>> {
  const page = await createGateway(kc).listPodRows({ namespace: ns, fieldSelector: 'status.phase=Pending', limit: 100 });
  return Object.fromEntries(page.items.map((r) => [r.name, r.status]));
}

/** Creates a bare pod pulling an image the node does not have yet; returns ms until Running, or undefined. */
async function timeToRunning(kc: KubeConfig, node: RunningNode, ns: string, name: string, watchMs: number): Promise<number | undefined> {
  const image = await node.pushImage(`team/${name}:1`);
  const core = kc.makeApiClient(CoreV1Api);
  const t0 = Date.now();
  await core.createNamespacedPod({ namespace: ns, body: { metadata: { name }, spec: nodePodSpec(node, [{ name: 'main', image }]) } });
  while (Date.now() - t0 < watchMs) {
    const pod = await core.readNamespacedPod({ namespace: ns, name });
    if (pod.status?.phase === 'Running') return Date.now() - t0;
    await sleep(100);
  }
  return undefined;
}

function byJob(lines: AuditLine[]): Record<string, AuditLine> {
  return Object.fromEntries(lines.filter((l) => l.job).map((l) => [l.job!, l]));
}

describe('a hung registry with serialized pulls (the kubelet default)', { timeout: 900_000 }, () => {
  const { node, hung } = privateNode(true);
  let ns: string;
  let hungPod: V1Pod;
  let hungInitPod: V1Pod;
  let hungSidecarPod: V1Pod;

  it('the pull sits in ContainerCreating (init: PodInitializing) with no message, and a later pull queues behind it', TIMEOUT, async () => {
    ns = await env.namespace('node-stalled');
    const n = node();
    const image = (repo: string): string => `${hung().host}/team/${repo}:1`;
    [hungPod, hungInitPod, hungSidecarPod] = await Promise.all([
      createStalled(env.kc, ns, stalledJob(n, 'hung', [{ name: 'main', image: image('app') }]), {
        name: 'main',
        init: false,
        reason: 'ContainerCreating',
      }),
      createStalled(
        env.kc,
        ns,
        stalledJob(n, 'hung-init', [{ name: 'main', image: n.pauseImage }], [{ name: 'fetch', image: image('init') }]),
        {
          name: 'fetch',
          init: true,
          reason: 'PodInitializing',
        },
      ),
      createStalled(
        env.kc,
        ns,
        stalledJob(
          n,
          'hung-sidecar',
          [{ name: 'main', image: n.pauseImage }],
          [{ name: 'proxy', image: image('side'), restartPolicy: 'Always' }],
        ),
        { name: 'proxy', init: true, reason: 'PodInitializing' },
      ),
    ]);
    assert.equal(hungPod.status!.containerStatuses![0]!.state!.waiting!.message, undefined, 'no message: no pull error');
    assert.equal(hungInitPod.status!.initContainerStatuses![0]!.state!.waiting!.message, undefined);
    assert.equal(hungInitPod.status!.containerStatuses![0]!.state!.waiting!.reason, 'PodInitializing');
    assert.ok(!isTrue(hungInitPod, 'Initialized'));

    const queuedMs = await timeToRunning(env.kc, n, ns, 'queued', QUEUE_WATCH_MS);
    const queued = await env.kc.makeApiClient(CoreV1Api).readNamespacedPod({ namespace: ns, name: 'queued' });
    const status = await tableStatus(env.kc, ns);
    process.stderr.write(
      `[stalled] serialized pulls: STATUS ${JSON.stringify(status)}; a pull from the local registry queued behind the hung one: ` +
        `${queuedMs === undefined ? `not Running after ${QUEUE_WATCH_MS} ms` : `Running after ${queuedMs} ms`}; ` +
        `connections to the hung registry: ${hung().connections()}\n`,
    );
    assert.equal(queuedMs, undefined, 'the later pull waits behind the hung one');
    assert.equal(queued.status?.containerStatuses?.[0]?.state?.waiting?.reason, 'ContainerCreating');
    assert.equal(hung().connections(), 1, 'one pull at a time: the second hung pull has not even started');
    assert.equal(status[hungPod.metadata!.name!], 'ContainerCreating');
    assert.equal(status[hungInitPod.metadata!.name!], 'Init:0/1', 'the printer shows a stalled init container as Init:0/1');
    assert.equal(status[hungSidecarPod.metadata!.name!], 'Init:0/1', 'and a stalled sidecar too');
    assert.equal(status.queued, 'ContainerCreating');
  });

  it(
    'a dry run says would-fail with class stalled; the sweep fails the Jobs (FailJob Event; Failed once the pull ends)',
    TIMEOUT,
    async () => {
      const jobsBefore = await settledSnapshot(env.kc, ns);
      const dry = await runSweep(env.kc, { namespaces: [ns], policy: STALLED, dryRun: true });
      assert.equal(dry.exitCode, 0);
      const planned = byJob(dry.lines);
      assert.deepEqual(
        Object.keys(planned)
          .sort()
          .map((j) => [j, planned[j]!.container, planned[j]!.containerKind, planned[j]!.reason, planned[j]!.class, planned[j]!.outcome]),
        [
          ['hung', 'main', 'regular', 'ContainerCreating', 'stalled', 'would-fail'],
          ['hung-init', 'fetch', 'init', 'PodInitializing', 'stalled', 'would-fail'],
          ['hung-sidecar', 'proxy', 'sidecar', 'PodInitializing', 'stalled', 'would-fail'],
        ],
      );
      assert.equal(planned.hung!.waitingMessage, '');
      assert.equal(planned.hung!.graceSeconds, 5);
      // The pull queued behind them is stalled too, but a bare pod is only reported.
      const queuedLine = dry.lines.find((l) => l.pod === 'queued');
      assert.equal(queuedLine?.class, 'stalled');
      assert.ok(!['failed', 'would-fail'].includes(queuedLine!.outcome), queuedLine!.outcome);
      const jobsAfter = await settledSnapshot(env.kc, ns);
      for (const k of Object.keys(jobsBefore).filter((x) => x.startsWith('job/')))
        assert.equal(jobsAfter[k], jobsBefore[k], `${k} untouched by the dry run`);
      assert.deepEqual(await sweeperEvents(env.kc, ns), []);

      const t0 = Date.now();
      const run = await runSweep(env.kc, { namespaces: [ns], policy: STALLED });
      assert.equal(run.exitCode, 0);
      const done = byJob(run.lines);
      assert.equal(done.hung!.outcome, 'failed');
      assert.equal(done['hung-init']!.outcome, 'failed');
      assert.equal(done['hung-sidecar']!.outcome, 'failed');
      const events = await sweeperEvents(env.kc, ns);
      assert.deepEqual(events.map((e) => [e.regarding?.name, e.reason, e.action, e.type]).sort(), [
        ['hung', 'ImagePullStuck', 'FailJob', 'Warning'],
        ['hung-init', 'ImagePullStuck', 'FailJob', 'Warning'],
        ['hung-sidecar', 'ImagePullStuck', 'FailJob', 'Warning'],
      ]);

      // The Job controller gives up on the Jobs at once (the sweeper's FailureTarget) and
      // deletes their pods, but the kubelet cannot end a pod whose pull hangs: it stays
      // Terminating, and the Jobs are not `Failed` until their pods are gone.
      const batch = env.kc.makeApiClient(BatchV1Api);
      const core = env.kc.makeApiClient(CoreV1Api);
      for (const job of ['hung', 'hung-init', 'hung-sidecar']) {
        await waitFor(
          async () =>
            trueCondition(await batch.readNamespacedJob({ namespace: ns, name: job }), 'FailureTarget')?.reason === 'ImagePullStuck',
          60_000,
          `Job ${job} FailureTarget ImagePullStuck`,
          200,
        );
      }
      const targetMs = Date.now() - t0;
      await sleep(HOLD_MS);
      for (const [job, pod] of [
        ['hung', hungPod],
        ['hung-init', hungInitPod],
        ['hung-sidecar', hungSidecarPod],
      ] as const) {
        const j = await batch.readNamespacedJob({ namespace: ns, name: job });
        assert.equal(trueCondition(j, 'Failed'), undefined, `${job}: not Failed while its pod's pull hangs`);
        assert.equal(j.status?.terminating, 1, `${job}: its pod is terminating`);
        const p = await core.readNamespacedPod({ namespace: ns, name: pod.metadata!.name! });
        assert.ok(p.metadata?.deletionTimestamp, `${job}: pod deleted`);
        assert.equal(p.status?.phase, 'Pending', `${job}: the kubelet has not ended the pod ${HOLD_MS} ms later`);
      }

      // The registry lets go (here: it closes its connections): the pull fails, the kubelet ends
      // the pods, the Job controller marks the Jobs Failed, and the queued pull goes ahead.
      const tRelease = Date.now();
      await hung().close();
      for (const job of ['hung', 'hung-init', 'hung-sidecar']) {
        assertFailedBySweeper(await waitForJobFailed(env.kc, ns, job, 120_000));
      }
      const failedMs = Date.now() - tRelease;
      const queuedMs = await waitFor(
        async () =>
          (await core.readNamespacedPod({ namespace: ns, name: 'queued' })).status?.phase === 'Running' ? Date.now() - tRelease : undefined,
        120_000,
        'the queued pod Running once the hung pulls are gone',
        200,
      );
      process.stderr.write(
        `[stalled] serialized pulls: FailureTarget on the three Jobs ${targetMs} ms after the sweep started; pods still Terminating ${HOLD_MS} ms later; ` +
          `once the registry closed: the three Jobs Failed after ${failedMs} ms, the queued pod Running after ${queuedMs} ms\n`,
      );
    },
  );
});

describe('a hung registry with parallel pulls (serializeImagePulls: false)', { timeout: 900_000 }, () => {
  const { node, hung } = privateNode(false);

  it('a later pull does not wait for the hung one; the hung pod is still stalled', TIMEOUT, async () => {
    const ns = await env.namespace('node-stalled-par');
    const n = node();
    const hungPod = await createStalled(env.kc, ns, stalledJob(n, 'hung', [{ name: 'main', image: `${hung().host}/team/app:1` }]), {
      name: 'main',
      init: false,
      reason: 'ContainerCreating',
    });
    const queuedMs = await timeToRunning(env.kc, n, ns, 'queued', 60_000);
    process.stderr.write(
      `[stalled] parallel pulls: a pull next to the hung one Running after ${queuedMs} ms; connections to the hung registry: ${hung().connections()}\n`,
    );
    assert.ok(queuedMs !== undefined, 'the later pull went ahead');
    assert.equal((await tableStatus(env.kc, ns))[hungPod.metadata!.name!], 'ContainerCreating');
    await sleep(5_000);
    const dry = await runSweep(env.kc, { namespaces: [ns], policy: STALLED, dryRun: true });
    assert.deepEqual(
      dry.lines.map((l) => [l.job, l.container, l.class, l.outcome]),
      [['hung', 'main', 'stalled', 'would-fail']],
      'the running pod is not Pending: only the hung Job',
    );

    // Parallel pulls do not help the kill: the failed Job's pod stays Terminating while its pull hangs.
    const run = await runSweep(env.kc, { namespaces: [ns], policy: STALLED });
    assert.deepEqual(
      run.lines.map((l) => [l.job, l.outcome]),
      [['hung', 'failed']],
    );
    const batch = env.kc.makeApiClient(BatchV1Api);
    await waitFor(
      async () => trueCondition(await batch.readNamespacedJob({ namespace: ns, name: 'hung' }), 'FailureTarget'),
      60_000,
      'Job hung FailureTarget',
      200,
    );
    await sleep(5_000);
    const p = await env.kc.makeApiClient(CoreV1Api).readNamespacedPod({ namespace: ns, name: hungPod.metadata!.name! });
    assert.ok(p.metadata?.deletionTimestamp && p.status?.phase === 'Pending', 'the pod is still Terminating');
    assert.equal(trueCondition(await batch.readNamespacedJob({ namespace: ns, name: 'hung' }), 'Failed'), undefined);
    await hung().close();
    assertFailedBySweeper(await waitForJobFailed(env.kc, ns, 'hung', 120_000));
  });
});
