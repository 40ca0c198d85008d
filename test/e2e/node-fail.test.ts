// Every way of failing a Job, end to end on the real node of each runtime of the run (and on every
// minor, in the compatibility subsets): a real pull fails, the sweeper acts, the real Job
// controller fails the Job and the real kubelet terminates the pod. By the Job's own condition;
// and, where a policy engine refuses that status write, by the deadline or the Job's
// podFailurePolicy. Also the stuck clock on the conditions a real kubelet stamps.
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { BatchV1Api, CoreV1Api, Watch, type KubeConfig, type V1Job, type V1Pod } from '@kubernetes/client-node';
import { createGateway } from '../../src/kube/gateway.ts';
import { jobManifest } from '../support/fixtures.ts';
import { useTestCluster } from '../support/hooks.ts';
import { waitFor, waitForJobPods } from '../support/kubelet.ts';
import { nodeSkipReason, runtimeLabel, testNode, testRuntimes, type TestNodeHandle } from '../support/node.ts';
import { nodePodSpec, observeReasons } from '../support/node-cases.ts';
import { refuseStatusWrites } from '../support/policy-engine.ts';
import { policyFile, runSweep, sweeperEvents, trueCondition, waitForJobFailed } from '../support/sweeper.ts';

const skip = nodeSkipReason();
const env = useTestCluster();
// Each test (not the suite) is skipped, so the runner counts them as skipped, with the reason.
const TIMEOUT = { timeout: 180_000, skip };
// The first failed pull is enough: the sweeper treats ErrImagePull and ImagePullBackOff alike.
const PULL = { container: 'main', containerKind: 'regular' as const, reasons: ['ErrImagePull'] };
const FAST = policyFile('defaults: { grace: { permanent: 1s } }\n');
/** Waits out FAST's grace after the first failed pull (the clock starts at the sandbox). */
const pastGrace = (): Promise<void> => new Promise((r) => setTimeout(r, 2_000));

/** Every version of every pod in the namespace, as the watch delivers them. */
async function watchPods(kc: KubeConfig, ns: string): Promise<{ seen: V1Pod[]; stop(): void }> {
  const seen: V1Pod[] = [];
  const req = await new Watch(kc).watch(
    `/api/v1/namespaces/${ns}/pods`,
    {},
    (_type, obj: V1Pod) => seen.push(obj),
    () => undefined,
  );
  return { seen, stop: () => req.abort() };
}

function onNode(node: TestNodeHandle, name: string, image: string, spec: Partial<NonNullable<V1Job['spec']>> = {}): V1Job {
  const job = jobManifest(name, image, spec);
  job.spec!.template.spec = nodePodSpec(node, [{ name: 'main', image }]);
  return job;
}

async function podGone(kc: KubeConfig, ns: string, name: string, timeoutMs = 60_000): Promise<number> {
  const core = kc.makeApiClient(CoreV1Api);
  const t0 = Date.now();
  await waitFor(
    async () => {
      try {
        await core.readNamespacedPod({ namespace: ns, name });
        return false;
      } catch (e) {
        return (e as { code?: number }).code === 404;
      }
    },
    timeoutMs,
    `pod ${ns}/${name} removed`,
    200,
  );
  return Date.now() - t0;
}

for (const runtime of testRuntimes())
  describe(`failing Jobs on the real node: ${runtimeLabel(runtime)}`, () => {
    let node: TestNodeHandle;
    before(async () => {
      if (skip) return;
      node = await testNode(env.cluster.kubeconfigPath, { runtime });
    });

    /** A Job on the node whose image is missing, past FAST's grace after its first failed pull; resolves to its pod's name. */
    const stuckOnNode = async (ns: string, name: string, spec: Partial<NonNullable<V1Job['spec']>> = {}): Promise<string> => {
      const job = onNode(node, name, `${node.registry}/team/missing:1`, spec);
      await env.kc.makeApiClient(BatchV1Api).createNamespacedJob({ namespace: ns, body: job });
      const [pod] = await waitForJobPods(env.kc.makeApiClient(CoreV1Api), ns, name);
      await observeReasons(env.kc, ns, pod!.metadata!.name!, PULL);
      await pastGrace();
      return pod!.metadata!.name!;
    };

    it(
      "its own condition: Job Failed/ImagePullStuck with the sweeper's message, its spec untouched; the kubelet stops the pod",
      TIMEOUT,
      async () => {
        const ns = await env.namespace('node-condition');
        const podName = await stuckOnNode(ns, 'build');

        const t0 = Date.now();
        const run = await runSweep(env.kc, { namespaces: [ns], policy: FAST });
        assert.equal(run.exitCode, 0);
        assert.deepEqual([run.lines[0]!.mechanism, run.lines[0]!.outcome], ['condition', 'failed']);
        const job = await waitForJobFailed(env.kc, ns, 'build');
        const failedMs = Date.now() - t0;
        const failed = trueCondition(job, 'Failed')!;
        assert.equal(failed.reason, 'ImagePullStuck');
        assert.match(
          failed.message ?? '',
          /^imagepull-sweeper: regular container main of pod build-\S+ waited \S+ on image \S+\/team\/missing:1 \(class permanent, rule defaults, grace 1s from defaults\): the image or tag does not exist .* ErrImagePull: /,
        );
        assert.equal(job.spec?.activeDeadlineSeconds, undefined, 'no spec change');
        assert.equal(job.metadata?.annotations?.['imagepull-sweeper/message'], failed.message?.replace(/^imagepull-sweeper: /, ''));
        const goneMs = await podGone(env.kc, ns, podName);
        process.stderr.write(
          `[node] ${runtime} ${(await createGateway(env.kc).readServerVersion()).gitVersion} condition path: Job Failed ${failedMs} ms after the sweep started (${failed.reason}); pod gone ${goneMs} ms later\n`,
        );
        assert.equal((await sweeperEvents(env.kc, ns)).length, 1);
      },
    );

    it(
      'activeDeadlineSeconds, where the status write is refused: Job Failed/DeadlineExceeded, the kubelet stops the pod',
      TIMEOUT,
      async () => {
        const ns = await env.namespace('node-deadline');
        await refuseStatusWrites(env, ns);
        const podName = await stuckOnNode(ns, 'build');

        const t0 = Date.now();
        const run = await runSweep(env.kc, { namespaces: [ns], policy: FAST });
        assert.equal(run.exitCode, 0);
        assert.match(run.lines[0]!.mechanism ?? '', /^activeDeadlineSeconds \(the status write was refused \(Forbidden: /);
        assert.match(run.lines[0]!.warnings.join('\n'), /the FailureTarget status write was refused/);
        assert.equal(run.lines[0]!.outcome, 'failed');
        const job = await waitForJobFailed(env.kc, ns, 'build');
        const failedMs = Date.now() - t0;
        assert.equal(trueCondition(job, 'Failed')?.reason, 'DeadlineExceeded');
        const goneMs = await podGone(env.kc, ns, podName);
        process.stderr.write(
          `[node] ${runtime} deadline path: Job Failed ${failedMs} ms after the sweep started; pod gone ${goneMs} ms later\n`,
        );
        assert.equal((await sweeperEvents(env.kc, ns)).length, 1);
      },
    );

    it(
      'podFailurePolicy, where the status write is refused: Job Failed/PodFailurePolicy; the kubelet leaves the pod Failed with 137 ContainerStatusUnknown',
      TIMEOUT,
      async () => {
        const ns = await env.namespace('node-pfp');
        await refuseStatusWrites(env, ns);
        const watch = await watchPods(env.kc, ns);
        try {
          const spec = {
            podFailurePolicy: { rules: [{ action: 'FailJob', onPodConditions: [{ type: 'ImagePullStuck', status: 'True' }] }] },
          };
          const podName = await stuckOnNode(ns, 'tenant-run', spec);

          const t0 = Date.now();
          const run = await runSweep(env.kc, { namespaces: [ns], policy: FAST });
          assert.match(run.lines[0]!.mechanism ?? '', /^podFailurePolicy \(the status write was refused /);
          const job = await waitForJobFailed(env.kc, ns, 'tenant-run');
          const failedMs = Date.now() - t0;
          assert.equal(trueCondition(job, 'Failed')?.reason, 'PodFailurePolicy');
          await podGone(env.kc, ns, podName);
          process.stderr.write(`[node] ${runtime} podFailurePolicy path: Job Failed ${failedMs} ms after the sweep started\n`);

          // What the real kubelet wrote for the deleted waiting pod.
          const last = await waitFor(
            () => watch.seen.find((p) => p.metadata?.name === podName && p.status?.phase === 'Failed'),
            10_000,
            'the pod seen Failed',
          );
          const term = last.status!.containerStatuses![0]!.state!.terminated!;
          assert.equal(term.exitCode, 137);
          assert.equal(term.reason, 'ContainerStatusUnknown');
          assert.ok(last.status!.conditions!.some((c) => c.type === 'ImagePullStuck' && c.status === 'True'));
        } finally {
          watch.stop();
        }
      },
    );

    // SPEC "How a Job is failed" (2026-11-30): with an earlier rule that matches the pod the kubelet
    // leaves behind (exit code 137 → Ignore), the pod-condition path cannot end the Job, so the
    // fallback is the deadline.
    it(
      'podFailurePolicy with an earlier onExitCodes In [137] Ignore rule, the status write refused: the Job still ends Failed',
      TIMEOUT,
      async () => {
        const ns = await env.namespace('node-pfp-ignore');
        await refuseStatusWrites(env, ns);
        const spec = {
          podFailurePolicy: {
            rules: [
              { action: 'Ignore', onExitCodes: { operator: 'In', values: [137] } },
              { action: 'FailJob', onPodConditions: [{ type: 'ImagePullStuck', status: 'True' }] },
            ],
          },
        };
        await stuckOnNode(ns, 'ignores-137', spec);
        const run = await runSweep(env.kc, { namespaces: [ns], policy: FAST });
        assert.equal(run.lines[0]!.outcome, 'failed');
        assert.match(
          run.lines[0]!.mechanism ?? '',
          /^activeDeadlineSeconds .*rule 1 \(Ignore on exit code In \[137\]\) would match the deleted pod/,
        );
        // A working mechanism ends the Job within seconds (the other paths take about 2 s).
        const job = await waitForJobFailed(env.kc, ns, 'ignores-137', 30_000);
        assert.equal(trueCondition(job, 'Failed')?.reason, 'DeadlineExceeded');
        assert.equal((await sweeperEvents(env.kc, ns)).filter((e) => e.action === 'FailJob').length, 1);
      },
    );

    it('the stuck clock starts when the container could pull (Initialized), not at pod start', TIMEOUT, async () => {
      const ns = await env.namespace('node-clock');
      const core = env.kc.makeApiClient(CoreV1Api);
      const image = `${node.registry}/team/missing:1`;
      // An init container that runs 4 s: Initialized turns True 4 s after PodReadyToStartContainers.
      const job = onNode(node, 'clock', image);
      job.spec!.template.spec!.initContainers = [{ name: 'setup', image: node.pauseImage, command: ['/pause', '4s'] }];
      await env.kc.makeApiClient(BatchV1Api).createNamespacedJob({ namespace: ns, body: job });
      const [pod] = await waitForJobPods(core, ns, 'clock');
      const podName = pod!.metadata!.name!;
      await observeReasons(env.kc, ns, podName, PULL);
      const p = await core.readNamespacedPod({ namespace: ns, name: podName });
      const at = (type: string): number => {
        const c = p.status!.conditions!.find((x) => x.type === type && x.status === 'True');
        assert.ok(c?.lastTransitionTime, `${type} True with a time`);
        return new Date(c.lastTransitionTime).getTime();
      };
      const sandbox = at('PodReadyToStartContainers');
      const initialized = at('Initialized');
      assert.ok(initialized - sandbox >= 3_000, `Initialized ${initialized - sandbox} ms after PodReadyToStartContainers`);
      const finished = p.status!.initContainerStatuses![0]!.state!.terminated!.finishedAt!;
      assert.ok(Math.abs(new Date(finished).getTime() - initialized) <= 2_000, 'Initialized follows the init container');

      const before = Date.now();
      const run = await runSweep(env.kc, { namespaces: [ns], policy: policyFile('{}'), dryRun: true });
      const after = Date.now();
      const line = run.lines.find((l) => l.pod === podName)!;
      assert.ok(line, 'the stuck container is seen');
      // Whole seconds, measured from Initialized.
      assert.ok(line.stuckSeconds >= Math.floor((before - initialized) / 1000) - 1, `stuck ${line.stuckSeconds}s`);
      assert.ok(line.stuckSeconds <= Math.ceil((after - initialized) / 1000), `stuck ${line.stuckSeconds}s, not from pod start`);
      assert.ok(line.stuckSeconds < Math.floor((before - sandbox) / 1000), 'shorter than since the sandbox was ready');
    });
  });
