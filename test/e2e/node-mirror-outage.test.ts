// A registry outage behind a mirror, on the real node of each runtime of the run: the node's
// host config for an upstream registry lists a mirror first (the node's local registry, which
// lacks the images); the upstream's registry is stopped (nothing listens on its port). What the
// kubelet then shows depends on the runtime's resolver: containerd 2 reports the mirror's 404
// (`REF: not found`, core/remotes/docker/resolver.go ranks a 404 above a connection error),
// containerd 1.6 the upstream's `connection refused`, CRI-O both (the mirror's `manifest unknown`,
// then the upstream's refusal, waiting reason RegistryUnavailable). Either way the outage breaker must hold
// the Jobs stuck on distinct repositories of that host: the sweep fails nothing.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { BatchV1Api, CoreV1Api } from '@kubernetes/client-node';
import { closedPort } from '../support/cluster.ts';
import { jobManifest } from '../support/fixtures.ts';
import { useTestCluster } from '../support/hooks.ts';
import { waitForJobPods } from '../support/kubelet.ts';
import {
  addRegistryHost,
  nodeSkipReason,
  removeRegistryHost,
  runtimeLabel,
  testNode,
  testRuntimes,
  type NodeRuntime,
  type TestNodeHandle,
} from '../support/node.ts';
import { caseContainerStatus, nodePodSpec, observeReasons, refusedReasons } from '../support/node-cases.ts';
import { policyFile, runSweep, trueCondition } from '../support/sweeper.ts';

const skip = nodeSkipReason();
const env = useTestCluster();
const TIMEOUT = { timeout: 180_000, skip };
/** The first pull error each runtime shows, and the class (so the breaker) it falls in. */
const OUTAGE: Partial<Record<NodeRuntime, { message: RegExp; class: 'permanent' | 'transient' }>> = {
  containerd: {
    message:
      /failed to resolve reference ".*": failed to do request: Head "http:\/\/127\.0\.0\.1:\d+\/v2\/.*": dial tcp 127\.0\.0\.1:\d+: connect: connection refused$/,
    class: 'transient',
  },
  containerd2: {
    message: /^rpc error: code = NotFound desc = failed to pull and unpack image ".*": failed to resolve image: .*: not found$/,
    class: 'permanent',
  },
  // containers/image v5.35 docker/docker_image_src.go: "(Mirrors also failed: %s): %s: %w", the
  // upstream's error last; CRI-O sees the refused connection in it: RegistryUnavailable.
  crio: {
    message:
      /^image pull failed for .* because the registry is unavailable: unable to try pulling possible OCI artifact: build image source: \(Mirrors also failed: \[.*: manifest unknown\]\): .*: connect: connection refused$/,
    class: 'transient',
  },
};
const REPOS = ['team/api', 'team/web', 'team/worker', 'batch/etl'];

for (const runtime of testRuntimes()) {
  const expected = OUTAGE[runtime];
  const pull = { container: 'main', containerKind: 'regular' as const, reasons: refusedReasons(runtime).slice(0, 1) };
  describe(`a registry outage behind a mirror: ${runtimeLabel(runtime)}`, () => {
    let node: TestNodeHandle;
    let upstream: string;
    before(async () => {
      if (skip) return;
      if (!expected) throw new Error(`node-mirror-outage.test.ts has no expected message for ${runtime}`);
      node = await testNode(env.cluster.kubeconfigPath, { runtime });
      upstream = `127.0.0.1:${await closedPort()}`;
      await addRegistryHost(node, upstream, { mirrors: [node.registry] });
    });
    after(async () => {
      if (node && upstream) await removeRegistryHost(node, upstream);
    });

    it(
      `Jobs on ${REPOS.length} repositories of the stopped upstream: the kubelet's message, and the breaker holds them all`,
      TIMEOUT,
      async () => {
        const ns = await env.namespace(`node-mirror-${runtime}`);
        const core = env.kc.makeApiClient(CoreV1Api);
        const batch = env.kc.makeApiClient(BatchV1Api);
        const images = REPOS.map((r) => `${upstream}/${r}:1`);
        const names = REPOS.map((r) => r.replace('/', '-'));
        await Promise.all(
          images.map((image, i) => {
            const j = jobManifest(names[i]!, image);
            j.spec!.template.spec = nodePodSpec(node, [{ name: 'main', image }]);
            return batch.createNamespacedJob({ namespace: ns, body: j });
          }),
        );
        const messages = await Promise.all(
          names.map(async (name) => {
            const [pod] = await waitForJobPods(core, ns, name);
            const seen = await observeReasons(env.kc, ns, pod!.metadata!.name!, pull);
            return caseContainerStatus(seen.get(pull.reasons[0]!)!, pull)!.state!.waiting!.message ?? '';
          }),
        );
        process.stderr.write(`[mirror] ${runtime}: upstream ${upstream} stopped, mirror ${node.registry}: ${messages[0]}\n`);
        for (const m of messages) assert.match(m, expected!.message);
        await new Promise((r) => setTimeout(r, 2_000));

        const policy = policyFile(
          'defaults: { grace: { permanent: 1s, transient: 1s } }\nlimits: { outage: { minStuckPods: 4, minImages: 4 } }\n',
        );
        const run = await runSweep(env.kc, { namespaces: [ns], policy });
        assert.equal(run.exitCode, 0);
        assert.deepEqual(
          run.lines.map((l) => [l.job, l.class, l.outcome]).sort(),
          names.map((n) => [n, expected!.class, 'reported']).sort(),
          run.lines.map((l) => l.detail).join('\n'),
        );
        const trips = run.summary!.outage.trips.filter((t) => t.host === upstream);
        assert.deepEqual(
          trips.map((t) => t.pullClass),
          [expected!.class],
          JSON.stringify(run.summary!.outage.trips),
        );
        for (const name of names) {
          assert.equal(trueCondition(await batch.readNamespacedJob({ namespace: ns, name }), 'Failed'), undefined, `${name} not failed`);
        }
      },
    );
  });
}
