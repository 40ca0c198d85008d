// A Job's pod restarted in place that cannot pull its image again, on the real node of each runtime
// of the run: restartPolicy OnFailure, imagePullPolicy Always, a container that exits 1, and its
// image deleted from the node's registry while it runs. The kubelet's restart fails to pull; the
// pod stays Running with the container waiting on its image, which the Job controller never counts
// (it counts restarts). The sweep (its listing of Running pods) fails that Job, measured from the
// container's exit; beside it, a Job whose container crash-loops and a Job whose sidecar waits on
// its deleted image while the main container runs are left exactly as they are. What the kubelet
// writes there (restartCount stays 0 after the first exit; the reason alternates with
// CrashLoopBackOff for a few minutes) is in docs/how-it-works.md, "Running pods".
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { before, describe, it } from 'node:test';
import { BatchV1Api, CoreV1Api, type V1Container, type V1ContainerStatus, type V1Job, type V1Pod } from '@kubernetes/client-node';
import { useTestCluster } from '../support/hooks.ts';
import { waitFor, waitForJobPods } from '../support/kubelet.ts';
import { nodeSkipReason, runtimeLabel, testNode, testRuntimes, type TestNodeHandle } from '../support/node.ts';
import { nodePodSpec } from '../support/node-cases.ts';
import { deleteManifest } from '../support/registry-content.ts';
import { policyFile, readJob, runSweep, trueCondition, waitForJobFailed, type SweepRun } from '../support/sweeper.ts';

const skip = nodeSkipReason();
const env = useTestCluster();
// Each test (not the suite) is skipped, so the runner counts them as skipped, with the reason.
const TIMEOUT = { timeout: 240_000, skip };
const FAST = policyFile('defaults: { grace: { permanent: 1s } }\n');
/** How long the containers that exit run first: time enough to delete their image while they run. */
const RUN_FOR = '15s';
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const seconds = (at: Date | string | undefined): number => new Date(at as string).getTime() / 1000;

function job(node: TestNodeHandle, name: string, containers: V1Container[], initContainers?: V1Container[]): V1Job {
  return {
    metadata: { name },
    spec: {
      // Above the crash loop's restarts in the test's minutes (the Job controller counts them).
      backoffLimit: 30,
      template: { spec: nodePodSpec(node, containers, { restartPolicy: 'OnFailure', ...(initContainers ? { initContainers } : {}) }) },
    },
  };
}

const waitingOnImage = (s: V1ContainerStatus | undefined): boolean =>
  ['ErrImagePull', 'ImagePullBackOff'].includes(s?.state?.waiting?.reason ?? '') && s?.lastState?.terminated !== undefined;

// The runtimes side by side: each waits on its containers far more than it computes.
describe('Jobs restarted in place on the real node', { concurrency: true }, () => {
  for (const runtime of testRuntimes())
    describe(runtimeLabel(runtime), () => {
      let node: TestNodeHandle;
      before(async () => {
        if (skip) return;
        node = await testNode(env.cluster.kubeconfigPath, { runtime });
      });

      it(
        'fails the Job whose restarted container cannot pull, while its pod stays Running; leaves the crash loop and the sidecar',
        TIMEOUT,
        async () => {
          const ns = await env.namespace(`restarted-${runtime}`);
          const core = env.kc.makeApiClient(CoreV1Api);
          const batch = env.kc.makeApiClient(BatchV1Api);
          const id = randomBytes(3).toString('hex');
          const [mainImage, sidecarImage] = [`team/restarted-${id}`, `team/proxy-${id}`];
          const exitsOnce = (name: string, image: string): V1Container => ({
            name,
            image: `${node.registry}/${image}:1`,
            imagePullPolicy: 'Always',
            command: ['/pause', RUN_FOR, '1'],
          });
          await Promise.all([node.pushImage(`${mainImage}:1`), node.pushImage(`${sidecarImage}:1`)]);
          await batch.createNamespacedJob({ namespace: ns, body: job(node, 'stuck', [exitsOnce('main', mainImage)]) });
          await batch.createNamespacedJob({
            namespace: ns,
            body: job(node, 'crashing', [{ name: 'main', image: node.pauseImage, command: ['/pause', '1s', '1'] }]),
          });
          await batch.createNamespacedJob({
            namespace: ns,
            body: job(
              node,
              'with-sidecar',
              [{ name: 'main', image: node.pauseImage }],
              [{ ...exitsOnce('proxy', sidecarImage), restartPolicy: 'Always' }],
            ),
          });
          const pods = Object.fromEntries(
            await Promise.all(
              ['stuck', 'crashing', 'with-sidecar'].map(async (j) => [j, (await waitForJobPods(core, ns, j))[0]!.metadata!.name!] as const),
            ),
          );
          const read = (j: string): Promise<V1Pod> => core.readNamespacedPod({ namespace: ns, name: pods[j]! });
          // Both images go while their containers run, before they exit.
          await waitFor(async () => (await read('stuck')).status?.containerStatuses?.[0]?.state?.running, 90_000, 'main running');
          await deleteManifest(node.registry, mainImage, '1');
          await waitFor(
            async () => (await read('with-sidecar')).status?.initContainerStatuses?.[0]?.state?.running,
            90_000,
            'sidecar running',
          );
          await deleteManifest(node.registry, sidecarImage, '1');

          /** The pod once it is Running with that container waiting on its image after an exit. */
          const runningAndWaiting = (j: string, container: (p: V1Pod) => V1ContainerStatus | undefined, what: string): Promise<V1Pod> =>
            waitFor(
              async () => {
                const p = await read(j);
                return p.status?.phase === 'Running' && waitingOnImage(container(p)) ? p : undefined;
              },
              120_000,
              `the restarted ${what} waiting on its image, its pod Running`,
            );
          const stuck = await runningAndWaiting('stuck', (p) => p.status?.containerStatuses?.[0], 'container');
          const sidecar = await runningAndWaiting('with-sidecar', (p) => p.status?.initContainerStatuses?.[0], 'sidecar');
          await waitFor(
            async () => (await read('crashing')).status?.containerStatuses?.[0]?.state?.waiting?.reason === 'CrashLoopBackOff',
            120_000,
            'the crash loop',
          );
          const main = stuck.status!.containerStatuses![0]!;
          process.stderr.write(
            `[restarted ${runtime}] main: restartCount ${main.restartCount}, ${main.state?.waiting?.reason}: ${main.state?.waiting?.message}; ` +
              `sidecar: ${sidecar.status?.initContainerStatuses?.[0]?.state?.waiting?.reason}\n`,
          );
          assert.equal(main.restartCount, 0, 'after its first exit, while it waits on its image');
          const exitedAt = seconds(main.lastState!.terminated!.finishedAt);
          await sleep(1_500); // past the 1 s grace, from the exit

          // Sweeps as a schedule would make them. For up to 5 minutes after its exit the kubelet
          // alternates the container between its image's back-off and its own crash back-off
          // (CrashLoopBackOff, not stuck): a sweep that meets that changes nothing, and the next
          // one that meets the image wait fails the Job. Every sweep is held to that.
          let sweeps = 0;
          let caught: { run: SweepRun; before: number; after: number } | undefined;
          while (!caught) {
            assert.ok(sweeps < 200, `no sweep met the image wait in ${sweeps} sweeps`);
            const before = Date.now() / 1000;
            const run = await runSweep(env.kc, { namespaces: [ns], policy: FAST });
            const after = Date.now() / 1000;
            sweeps += 1;
            assert.equal(run.exitCode, 0, JSON.stringify(run.lines));
            assert.equal(run.summary?.podsScanned, 0, 'no Pending pod: what it found, it found among the Running ones');
            assert.deepEqual(
              run.lines.filter((l) => l.job !== 'stuck'),
              [],
              'the crash loop and the sidecar are not stuck',
            );
            if (run.lines.length > 0) caught = { run, before, after };
            else await sleep(2_000);
          }
          process.stderr.write(`[restarted ${runtime}] failed by sweep ${sweeps}\n`);
          const { run, before, after } = caught;
          const failed = run.lines.filter((l) => l.outcome === 'failed');
          assert.deepEqual(
            failed.map((l) => [l.job, l.pod, l.container, l.containerKind, l.class]),
            [['stuck', pods.stuck, 'main', 'regular', 'permanent']],
            JSON.stringify(run.lines),
          );
          const line = failed[0]!;
          // From the container's exit (its first: restarted at once), not from the pod's start.
          assert.ok(
            line.stuckSeconds >= Math.floor(before - exitedAt) - 1,
            `stuck ${line.stuckSeconds} s, exited ${before - exitedAt} s before`,
          );
          assert.ok(line.stuckSeconds <= Math.ceil(after - exitedAt) + 1, `stuck ${line.stuckSeconds} s`);
          assert.ok(line.stuckSeconds < before - seconds(stuck.status!.startTime), 'shorter than since the pod started');

          const done = await waitForJobFailed(env.kc, ns, 'stuck');
          assert.ok(trueCondition(done, 'Failed'), JSON.stringify(done.status?.conditions));
          for (const other of ['crashing', 'with-sidecar']) {
            const j = await readJob(env.kc, ns, other);
            assert.equal(trueCondition(j, 'Failed'), undefined, other);
            assert.equal(j.metadata?.annotations?.['imagepull-sweeper/failed-at'], undefined, other);
          }
        },
      );
    });
});
