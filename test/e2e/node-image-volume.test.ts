// Image volumes (spec.volumes[].image, GA in Kubernetes 1.36) on the real node of each runtime of
// the run: a Job whose container image exists but whose image volume's reference does not is
// stuck on the volume's pull. The real kubelet reports it on the container that mounts it; the
// sweeper names the volume and its reference (not the container's image), classes it permanent
// and fails the Job.
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { BatchV1Api, CoreV1Api } from '@kubernetes/client-node';
import { jobManifest } from '../support/fixtures.ts';
import { useTestCluster } from '../support/hooks.ts';
import { waitForJobPods } from '../support/kubelet.ts';
import { nodeSkipReason, runtimeLabel, testNode, testRuntimes, type TestNodeHandle } from '../support/node.ts';
import { nodePodSpec, observeReasons } from '../support/node-cases.ts';
import { assertFailedBySweeper, policyFile, runSweep, waitForJobFailed } from '../support/sweeper.ts';
import { assertProtobufReadsAsJson } from '../support/watch-protobuf.ts';
import { registryHost } from '../../src/classify/index.ts';

const skip = nodeSkipReason();
const env = useTestCluster();
const TIMEOUT = { timeout: 180_000, skip };
const FAST = policyFile('defaults: { grace: { permanent: 1s } }\n');

for (const runtime of testRuntimes())
  describe(`image volumes on the real node: ${runtimeLabel(runtime)}`, () => {
    let node: TestNodeHandle;
    before(async () => {
      if (skip) return;
      node = await testNode(env.cluster.kubeconfigPath, { runtime });
    });

    it('a missing image volume is permanent, named by its volume and reference, and fails the Job', TIMEOUT, async () => {
      const ns = await env.namespace('node-image-volume');
      const reference = `${node.registry}/team/volume-missing:1`;
      const job = jobManifest('with-volume', node.pauseImage);
      job.spec!.template.spec = nodePodSpec(
        node,
        [{ name: 'main', image: node.pauseImage, volumeMounts: [{ name: 'data', mountPath: '/data' }] }],
        {
          volumes: [{ name: 'data', image: { reference, pullPolicy: 'IfNotPresent' } }],
        },
      );
      await env.kc.makeApiClient(BatchV1Api).createNamespacedJob({ namespace: ns, body: job });
      const core = env.kc.makeApiClient(CoreV1Api);
      const [pod] = await waitForJobPods(core, ns, 'with-volume');
      const seen = await observeReasons(env.kc, ns, pod!.metadata!.name!, {
        container: 'main',
        containerKind: 'regular',
        reasons: ['ErrImagePull'],
      });
      const waiting = seen.get('ErrImagePull')?.status?.containerStatuses?.find((s) => s.name === 'main')?.state?.waiting;
      assert.equal(await assertProtobufReadsAsJson(env.kc, ns), 1, "the watch's protobuf reads the volume's pull as JSON has it");
      await new Promise((r) => setTimeout(r, 2_000));

      const run = await runSweep(env.kc, { namespaces: [ns], policy: FAST });
      const detail = `${JSON.stringify(waiting)}\n${JSON.stringify(run.records, null, 1)}`;
      const line = run.lines.find((l) => l.job === 'with-volume');
      assert.equal(line?.image, reference, detail);
      assert.equal(line?.volume, 'data', detail);
      assert.equal(line?.class, 'permanent', detail);
      assert.equal(line?.outcome, 'failed', detail);
      assert.equal(registryHost(line.image), registryHost(reference));
      assert.match(String(line.waitingMessage), /volume-missing/, detail);
      const failed = await waitForJobFailed(env.kc, ns, 'with-volume');
      assertFailedBySweeper(failed);
      assert.match(failed.metadata?.annotations?.['imagepull-sweeper/message'] ?? '', /of volume data \(class permanent/);
    });
  });
