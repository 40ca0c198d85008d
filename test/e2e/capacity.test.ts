// The capacity a failed Job frees, on the real control plane: a Job of two pods, each requesting
// cpu, memory and an extended resource (by its limit, defaulted to the request by the API server)
// beside a sidecar, stuck on its image; the sweep names what failing it frees in the audit line,
// the summary (JSON, and text in the CronJob mode's `sweep`), the Job's message and the Event.
// Then on the real node, which is made to advertise the extended resource (as an operator
// advertises one, by patching the Node's status): a real failed pull, the same freed requests.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BatchV1Api, CoreV1Api, PatchStrategy, setHeaderOptions, type KubeConfig } from '@kubernetes/client-node';
import type { StuckCapacity } from '../../src/judge/capacity.ts';
import { ensureBuilt, runCli } from '../support/cli.ts';
import { jobManifest } from '../support/fixtures.ts';
import { useTestCluster } from '../support/hooks.ts';
import { setImagePullStuck, waitFor, waitForJobPods } from '../support/kubelet.ts';
import { nodeSkipReason, testNode } from '../support/node.ts';
import { nodePodSpec, observeReasons } from '../support/node-cases.ts';
import {
  MISSING_IMAGE,
  NOT_FOUND_MESSAGE,
  policyFile,
  readJob,
  runSweep,
  sweeperEvents,
  trueCondition,
  waitForJobFailed,
} from '../support/sweeper.ts';

const TIMEOUT = { timeout: 180_000 };
const MI = 2 ** 20;
let kc: KubeConfig;
let kubeconfig: string;
const env = useTestCluster((hooks) => {
  ensureBuilt();
  kc = hooks.kc;
  kubeconfig = hooks.cluster.kubeconfigPath;
});

/** Two pods of: a 100m/32Mi sidecar, and main 500m/256Mi with a limit of 2 example.com/widget. */
async function stuckTrainingJob(ns: string, name: string, stuckFor: number): Promise<void> {
  const job = jobManifest(name, MISSING_IMAGE, { parallelism: 2, completions: 2 });
  const spec = job.spec!.template.spec!;
  spec.initContainers = [
    { name: 'proxy', image: 'busybox:1.36', restartPolicy: 'Always', resources: { requests: { cpu: '100m', memory: '32Mi' } } },
  ];
  spec.containers[0]!.resources = { requests: { cpu: '500m', memory: '256Mi' }, limits: { 'example.com/widget': '2' } };
  await kc.makeApiClient(BatchV1Api).createNamespacedJob({ namespace: ns, body: job });
  const core = kc.makeApiClient(CoreV1Api);
  const pods = await waitForJobPods(core, ns, name, { count: 2 });
  assert.equal(pods.length, 2);
  for (const pod of pods) {
    // The API server defaulted the extended resource's request from its limit.
    assert.equal(pod.spec!.containers[0]!.resources!.requests!['example.com/widget'], '2');
    await setImagePullStuck(core, ns, pod.metadata!.name!, {
      since: new Date(Date.now() - stuckFor * 1000),
      stuck: [{ container: 'main', reason: 'ImagePullBackOff', message: NOT_FOUND_MESSAGE }],
    });
  }
}

const FREED = /4 example\.com\/widget, 1\.2 cpu, 576Mi memory held (\d+h)?(\d+m)?(\d+s)? in total by 2 pods/;

describe('the capacity a failed Job frees', () => {
  it('is named in the audit line, the summary, the Job message and the Event', TIMEOUT, async () => {
    const ns = await env.namespace('capacity');
    await stuckTrainingJob(ns, 'train', 600);
    const policy = policyFile('{}\n');

    // The CronJob mode's command, as text: what a dry run would free.
    const dry = await runCli([
      'sweep',
      '--dry-run',
      '--namespace',
      ns,
      '--policy-file',
      policy.kind === 'file' ? policy.path : '',
      '--kubeconfig',
      kubeconfig,
      '--output',
      'text',
    ]);
    assert.equal(dry.code, 0, dry.stderr);
    assert.match(dry.stdout, new RegExp(`would free ${FREED.source}`));
    assert.match(dry.stdout, new RegExp(`^Would free ${FREED.source}\\.$`, 'm'));

    const run = await runSweep(kc, { namespaces: [ns], policy });
    assert.equal(run.exitCode, 0);
    const [line, ...others] = run.lines;
    assert.equal(others.length, 0);
    assert.equal(line!.outcome, 'failed');
    const freed = line!.freed as StuckCapacity;
    assert.equal(freed.pods, 2);
    assert.deepEqual(Object.keys(freed.requests).sort(), ['cpu', 'example.com/widget', 'memory']);
    assert.ok(Math.abs(freed.requests.cpu! - 1.2) < 1e-9, `cpu ${freed.requests.cpu}`);
    assert.equal(freed.requests.memory, 576 * MI);
    assert.equal(freed.requests['example.com/widget'], 4);
    // Held since each pod was bound (its PodScheduled condition), which precedes its stuck clock.
    assert.ok(freed.heldSeconds >= 2 * 600, `held ${freed.heldSeconds} s`);
    assert.ok(Math.abs(freed.resourceSeconds['example.com/widget']! - 2 * freed.heldSeconds) < 1e-6);
    assert.deepEqual(run.summary!.freed, freed);

    const job = await waitForJobFailed(kc, ns, 'train');
    assert.ok(trueCondition(job, 'Failed'));
    assert.match(
      (await readJob(kc, ns, 'train')).metadata!.annotations!['imagepull-sweeper/message']!,
      // The capacity, then the hint for the cause, then the kubelet's words.
      new RegExp(`; frees ${FREED.source}\\): the image or tag does not exist in that repository.*\\. ImagePullBackOff: `),
    );
    const events = await sweeperEvents(kc, ns);
    assert.equal(events.length, 1);
    assert.match(events[0]!.note!, new RegExp(`^Failing Job: .*frees ${FREED.source}`));
  });
});

describe('the capacity a failed Job frees, on the real node', () => {
  const skip = nodeSkipReason();
  it('a real failed pull of a pod requesting an extended resource', { timeout: 240_000, skip }, async () => {
    const node = await testNode(env.cluster.kubeconfigPath);
    const core = kc.makeApiClient(CoreV1Api);
    const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
    const advertise = (count: string | null) =>
      core.patchNodeStatus(
        { name: node.name, body: { status: { capacity: { 'example.com/widget': count }, allocatable: { 'example.com/widget': count } } } },
        merge,
      );
    await advertise('3');
    try {
      await waitFor(
        async () => (await core.readNode({ name: node.name })).status?.allocatable?.['example.com/widget'] === '3',
        30_000,
        'the node advertises example.com/widget',
      );
      const ns = await env.namespace('capacity-node');
      const image = `${node.registry}/team/missing:1`;
      const job = jobManifest('infer', image);
      job.spec!.template.spec = nodePodSpec(node, [
        {
          name: 'main',
          image,
          resources: { requests: { cpu: '100m', memory: '32Mi', 'example.com/widget': '2' }, limits: { 'example.com/widget': '2' } },
        },
      ]);
      await kc.makeApiClient(BatchV1Api).createNamespacedJob({ namespace: ns, body: job });
      const [pod] = await waitForJobPods(core, ns, 'infer');
      await observeReasons(kc, ns, pod!.metadata!.name!, {
        container: 'main',
        containerKind: 'regular',
        reasons: ['ErrImagePull', 'ImagePullBackOff'],
      });
      await new Promise((r) => setTimeout(r, 2_000)); // past the 1 s grace

      const run = await runSweep(kc, { namespaces: [ns], policy: policyFile('defaults: { grace: { permanent: 1s } }\n') });
      assert.equal(run.exitCode, 0);
      assert.equal(run.lines[0]!.outcome, 'failed');
      const freed = run.lines[0]!.freed as StuckCapacity;
      assert.deepEqual(freed.requests, { cpu: 0.1, memory: 32 * MI, 'example.com/widget': 2 });
      assert.equal(freed.pods, 1);
      assert.ok(freed.heldSeconds > 0);
      assert.deepEqual(run.summary!.freed, freed);
      await waitForJobFailed(kc, ns, 'infer');
      const [event] = await sweeperEvents(kc, ns);
      assert.match(event!.note!, /; frees 2 example\.com\/widget, 100m cpu, 32Mi memory held (\d+m)?(\d+s)?\): /);
    } finally {
      await advertise(null);
    }
  });
});
