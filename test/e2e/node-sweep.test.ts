// Sweep scenarios of sweep.test.ts (which plays the kubelet) on pods of the real node: stuck init
// containers and sidecars fail their Job, a Job's grace annotation applies, healthy or
// within-grace Jobs are left exactly as they are, and a burst of not-found on one registry is
// held by the outage breaker.
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { BatchV1Api, CoreV1Api, type V1Container, type V1Job } from '@kubernetes/client-node';
import { jobManifest } from '../support/fixtures.ts';
import { useTestCluster } from '../support/hooks.ts';
import { waitFor, waitForJobPods } from '../support/kubelet.ts';
import { nodeSkipReason, testNode, type TestNodeHandle } from '../support/node.ts';
import { nodePodSpec, observeReasons } from '../support/node-cases.ts';
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
const TIMEOUT = { timeout: 180_000, skip };
const FAST = policyFile('defaults: { grace: { permanent: 1s } }\n');
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('sweeping pods of the real node', { timeout: 600_000 }, () => {
  let node: TestNodeHandle;
  let missing: string;
  before(async () => {
    if (skip) return;
    node = await testNode(env.cluster.kubeconfigPath);
    missing = `${node.registry}/team/missing:1`;
  });

  const job = (name: string, containers: V1Container[], initContainers?: V1Container[], annotations?: Record<string, string>): V1Job => {
    const j = jobManifest(name, containers[0]!.image!);
    j.metadata!.annotations = annotations;
    j.spec!.template.spec = nodePodSpec(node, containers, initContainers ? { initContainers } : {});
    return j;
  };

  async function stuckJob(ns: string, j: V1Job, container: string, kind: 'regular' | 'init' | 'sidecar'): Promise<string> {
    await env.kc.makeApiClient(BatchV1Api).createNamespacedJob({ namespace: ns, body: j });
    const [pod] = await waitForJobPods(env.kc.makeApiClient(CoreV1Api), ns, j.metadata!.name!);
    const name = pod!.metadata!.name!;
    await observeReasons(env.kc, ns, name, { container, containerKind: kind, reasons: ['ErrImagePull'] });
    return name;
  }

  it('a stuck init container fails its Job', TIMEOUT, async () => {
    const ns = await env.namespace('node-init');
    const pod = await stuckJob(
      ns,
      job('with-init', [{ name: 'main', image: node.pauseImage }], [{ name: 'fetch', image: missing }]),
      'fetch',
      'init',
    );
    await sleep(2_000);
    const run = await runSweep(env.kc, { namespaces: [ns], policy: FAST });
    const [line] = run.lines;
    assert.equal(line!.pod, pod);
    assert.equal(line!.container, 'fetch');
    assert.equal(line!.containerKind, 'init');
    assert.equal(line!.outcome, 'failed');
    assertFailedBySweeper(await waitForJobFailed(env.kc, ns, 'with-init'));
  });

  it('a stuck sidecar fails its Job', TIMEOUT, async () => {
    const ns = await env.namespace('node-sidecar');
    const j = job('with-sidecar', [{ name: 'main', image: node.pauseImage }], [{ name: 'proxy', image: missing, restartPolicy: 'Always' }]);
    await stuckJob(ns, j, 'proxy', 'sidecar');
    await sleep(2_000);
    const run = await runSweep(env.kc, { namespaces: [ns], policy: FAST });
    assert.equal(run.lines[0]!.containerKind, 'sidecar');
    assert.equal(run.lines[0]!.outcome, 'failed');
    assertFailedBySweeper(await waitForJobFailed(env.kc, ns, 'with-sidecar'));
  });

  it("uses the Job's grace annotation", TIMEOUT, async () => {
    const ns = await env.namespace('node-annotation');
    await Promise.all([
      stuckJob(ns, job('short', [{ name: 'main', image: missing }], undefined, { 'imagepull-sweeper/grace': '1s' }), 'main', 'regular'),
      stuckJob(ns, job('default-grace', [{ name: 'main', image: missing }]), 'main', 'regular'),
    ]);
    await sleep(2_000);
    // The default policy (permanent 2m) waits; the annotation says 1 s.
    const run = await runSweep(env.kc, { namespaces: [ns], policy: policyFile('{}') });
    const byJob = Object.fromEntries(run.lines.map((l) => [l.job, l]));
    assert.equal(byJob.short!.outcome, 'failed');
    assert.equal(byJob.short!.graceSeconds, 1);
    assert.equal(byJob['default-grace']!.outcome, 'skipped');
    await waitForJobFailed(env.kc, ns, 'short');
    assert.equal(
      trueCondition(await env.kc.makeApiClient(BatchV1Api).readNamespacedJob({ namespace: ns, name: 'default-grace' }), 'Failed'),
      undefined,
    );
  });

  it('a Job within grace and a running Job: nothing written', TIMEOUT, async () => {
    const ns = await env.namespace('node-untouched');
    const core = env.kc.makeApiClient(CoreV1Api);
    await stuckJob(ns, job('within-grace', [{ name: 'main', image: missing }]), 'main', 'regular');
    await env.kc
      .makeApiClient(BatchV1Api)
      .createNamespacedJob({ namespace: ns, body: job('healthy', [{ name: 'main', image: node.pauseImage }]) });
    const [healthy] = await waitForJobPods(core, ns, 'healthy');
    await waitFor(
      async () => (await core.readNamespacedPod({ namespace: ns, name: healthy!.metadata!.name! })).status?.phase === 'Running',
      60_000,
      'the healthy Job running',
    );
    // The kubelet keeps writing the stuck pod's status as it retries; compare Jobs and Events only.
    const jobsBefore = (await settledSnapshot(env.kc, ns)) as Record<string, string>;
    const run = await runSweep(env.kc, { namespaces: [ns], policy: policyFile('{}') });
    assert.equal(run.exitCode, 0);
    assert.deepEqual(
      run.lines.map((l) => [l.job, l.outcome]),
      [['within-grace', 'skipped']],
    );
    const jobsAfter = await settledSnapshot(env.kc, ns);
    for (const k of Object.keys(jobsBefore).filter((x) => x.startsWith('job/'))) assert.equal(jobsAfter[k], jobsBefore[k], k);
    assert.deepEqual(await sweeperEvents(env.kc, ns), []);
  });

  it('a burst of not-found across repositories of one registry is reported, not failed', TIMEOUT, async () => {
    const ns = await env.namespace('node-not-found-burst');
    // Four Jobs on two repositories the node's registry does not have: what a mirror answering 404
    // for an upstream that is down looks like (the real kubelet's `REF: not found`).
    const images = ['team/gone-a:1', 'team/gone-b:1', 'team/gone-a:2', 'team/gone-b:2'].map((r) => `${node.registry}/${r}`);
    await Promise.all(images.map((image, i) => stuckJob(ns, job(`burst-${i}`, [{ name: 'main', image }]), 'main', 'regular')));
    await sleep(2_000);
    const policy = policyFile('defaults: { grace: { permanent: 1s } }\nlimits: { outage: { minStuckPods: 4, minImages: 2 } }\n');
    const run = await runSweep(env.kc, { namespaces: [ns], policy });
    assert.equal(run.exitCode, 0);
    assert.deepEqual(
      run.lines.map((l) => [l.job, l.class, l.outcome]).sort(),
      images.map((_, i) => [`burst-${i}`, 'permanent', 'reported']),
    );
    for (const l of run.lines)
      assert.match(
        l.detail,
        new RegExp(`registry ${node.registry.replace(/\./g, '\\.')}: 4 of 4 stuck pods \\(100%\\) across 2 repositories are not found`),
      );
    assert.deepEqual(
      run.summary!.outage.trips.map((t) => [t.host, t.pullClass, t.repositories]),
      [[node.registry, 'permanent', 2]],
    );
    const batch = env.kc.makeApiClient(BatchV1Api);
    for (let i = 0; i < images.length; i++) {
      assert.equal(trueCondition(await batch.readNamespacedJob({ namespace: ns, name: `burst-${i}` }), 'Failed'), undefined);
    }
  });
});
