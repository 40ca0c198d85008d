// The pod mechanism of owners rules on the real node of each runtime of the run, as the shipped
// ServiceAccount under the admission guard: a bare pod and a pod of a custom resource (a CRD this
// file installs) whose image is missing end Failed with DeadlineExceeded, failed by the real
// kubelet; a pod one of whose containers has run is refused by the guard, with the real kubelet's
// status of it.
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { CoreV1Api, PatchStrategy, setHeaderOptions, type KubeConfig, type V1OwnerReference, type V1Pod } from '@kubernetes/client-node';
import { assertGuardDenies, guardEnforced, installGuardedSweeper } from '../support/guard.ts';
import { useTestCluster } from '../support/hooks.ts';
import { waitFor } from '../support/kubelet.ts';
import { nodeSkipReason, runtimeLabel, testNode, testRuntimes, type TestNodeHandle } from '../support/node.ts';
import { nodePodSpec, observeReasons } from '../support/node-cases.ts';
import { runSweep, sweeperEvents } from '../support/sweeper.ts';
import { createOwner, installOwnerCrd, OWNER_KIND, ownersPolicy } from './owners-support.ts';

const skip = nodeSkipReason();
const TIMEOUT = { timeout: 240_000, skip };
const PULL = { container: 'main', containerKind: 'regular' as const, reasons: ['ErrImagePull'] };

let kc: KubeConfig;
let saKc: KubeConfig;
const env = useTestCluster(async (hooks) => {
  if (skip) return;
  kc = hooks.kc;
  saKc = await installGuardedSweeper(hooks);
  await installOwnerCrd(kc);
});

async function createOnNode(ns: string, name: string, spec: V1Pod['spec'], owner?: V1OwnerReference): Promise<void> {
  await kc.makeApiClient(CoreV1Api).createNamespacedPod({
    namespace: ns,
    body: { metadata: { name, ...(owner ? { ownerReferences: [owner] } : {}) }, spec },
  });
}

async function podFailed(ns: string, name: string): Promise<V1Pod> {
  const core = kc.makeApiClient(CoreV1Api);
  return waitFor(
    async () => {
      const pod = await core.readNamespacedPod({ namespace: ns, name });
      return pod.status?.phase === 'Failed' ? pod : undefined;
    },
    120_000,
    `pod ${ns}/${name} Failed`,
    500,
  );
}

for (const runtime of testRuntimes())
  describe(`owners rules on the real node: ${runtimeLabel(runtime)}`, () => {
    let node: TestNodeHandle;
    before(async () => {
      if (skip) return;
      node = await testNode(env.cluster.kubeconfigPath, { runtime });
    });

    it('a bare pod and a custom resource pod whose image is missing end Failed/DeadlineExceeded', TIMEOUT, async () => {
      const ns = await env.namespace('owners-node');
      await guardEnforced(kc, saKc, ns);
      const image = `${node.registry}/team/owners-missing:1`;
      const batchlet = await createOwner(kc, ns, 'etl');
      await createOnNode(ns, 'bare', nodePodSpec(node, [{ name: 'main', image }]));
      await createOnNode(ns, 'etl-driver', nodePodSpec(node, [{ name: 'main', image }]), batchlet);
      for (const name of ['bare', 'etl-driver']) await observeReasons(kc, ns, name, PULL);
      await new Promise((r) => setTimeout(r, 2_000));

      const run = await runSweep(saKc, { namespaces: [ns], policy: ownersPolicy([ns]) });
      const detail = JSON.stringify(run.records, null, 1);
      assert.equal(run.exitCode, 0, detail);
      const byPod = new Map(run.lines.map((l) => [l.pod, l]));
      for (const name of ['bare', 'etl-driver']) assert.equal(byPod.get(name)?.outcome, 'failed', `${name}: ${detail}`);
      assert.deepEqual(byPod.get('etl-driver')?.owners, [`${OWNER_KIND}/etl`]);

      for (const name of ['bare', 'etl-driver']) {
        const pod = await podFailed(ns, name);
        assert.equal(pod.status?.reason, 'DeadlineExceeded', `${name}: ${JSON.stringify(pod.status)}`);
        assert.ok(pod.metadata?.annotations?.['imagepull-sweeper/failed-at'], name);
      }
      const events = await sweeperEvents(kc, ns);
      assert.deepEqual(events.map((e) => `${e.regarding?.name} ${e.action}`).sort(), ['bare FailPod', 'etl-driver FailPod']);
    });

    it('a pod one of whose containers has run is refused by the guard, and the sweeper leaves it', TIMEOUT, async () => {
      const ns = await env.namespace('owners-ran');
      await guardEnforced(kc, saKc, ns);
      const image = `${node.registry}/team/owners-missing:2`;
      await createOnNode(
        ns,
        'half',
        nodePodSpec(node, [
          { name: 'main', image },
          { name: 'side', image: node.pauseImage },
        ]),
      );
      await observeReasons(kc, ns, 'half', PULL);
      const core = kc.makeApiClient(CoreV1Api);
      const ran = await waitFor(
        async () => {
          const pod = await core.readNamespacedPod({ namespace: ns, name: 'half' });
          return pod.status?.containerStatuses?.some((s) => s.name === 'side' && s.state?.running) ? pod : undefined;
        },
        60_000,
        'container side running',
      );
      await assertGuardDenies('lowering the deadline of a pod whose container runs', 'pods: only a pod without a Job', () =>
        saKc.makeApiClient(CoreV1Api).patchNamespacedPod(
          {
            namespace: ns,
            name: 'half',
            body: { metadata: { resourceVersion: ran.metadata?.resourceVersion }, spec: { activeDeadlineSeconds: 1 } },
          },
          setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
        ),
      );
      await new Promise((r) => setTimeout(r, 2_000));
      const run = await runSweep(saKc, { namespaces: [ns], policy: ownersPolicy([ns]) });
      const line = run.lines.find((l) => l.pod === 'half');
      assert.equal(run.exitCode, 0, JSON.stringify(run.records, null, 1));
      // While Pending the sweeper sees it and stands down; once the kubelet calls it Running it is not even listed.
      if (line) {
        assert.equal(line.outcome, 'skipped');
        assert.match(String(line.detail), /container side of the pod has run/);
      }
      assert.equal((await core.readNamespacedPod({ namespace: ns, name: 'half' })).spec?.activeDeadlineSeconds, undefined);
    });
  });
