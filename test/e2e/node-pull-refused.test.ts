// Images the runtime refuses for good, from real pulls on the real node of each runtime of the run,
// judged by the sweeper (dry run), as docs/classification.md lists them:
// - an OCI artifact that is not a container image (a Helm chart as `helm push` stores it, a model
//   typed by its artifactType): containerd 1.6 refuses to unpack it (`permanent`); containerd 2.x
//   and CRI-O 1.34 pull it, and it is the container's creation that fails (CreateContainerError),
//   which is no pull wait: nothing to judge;
// - a Docker schema-1 manifest (a loopback stand-in: no registry stores them any more), which
//   containerd 2.x's transfer service refuses (`permanent`); containerd 1.6 and CRI-O still
//   convert schema 1;
// - on CRI-O, a registry prefix its registries.conf blocks (`blocked = true`, as OpenShift's image
//   policies write it): `permanent`.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { CoreV1Api } from '@kubernetes/client-node';
import { useTestCluster } from '../support/hooks.ts';
import {
  addRegistryHost,
  nodeSkipReason,
  runtimeLabel,
  testNode,
  testRuntimes,
  type NodeRuntime,
  type TestNodeHandle,
} from '../support/node.ts';
import { nodePodSpec, observeStates } from '../support/node-cases.ts';
import { HELM_CHART, pushArtifact, startSchema1Registry } from '../support/registry-content.ts';
import { policyFile, runSweep } from '../support/sweeper.ts';

const skip = nodeSkipReason();
const env = useTestCluster();
// Each test (not the suite) is skipped, so the runner counts them as skipped, with the reason.
const TIMEOUT = { timeout: 180_000, skip };

const MODEL = {
  configMediaType: 'application/vnd.oci.empty.v1+json',
  config: Buffer.from('{}'),
  layerMediaType: 'application/vnd.cncf.model.weights.v1.tar',
  artifactType: 'application/vnd.cncf.model.manifest.v1+json',
};

type Source = 'chart' | 'model' | 'schema-1' | 'blocked';

/** What the runtime does with each source: refuse the pull in these words, or pull it and fail to create the container. */
const EXPECTED: Record<NodeRuntime, Partial<Record<Source, RegExp | 'CreateContainerError'>>> = {
  containerd: {
    chart:
      /^failed to pull and unpack image ".*": failed to unpack image on snapshotter overlayfs: mismatched image rootfs and manifest layers$/,
    model:
      /^failed to pull and unpack image ".*": failed to unpack image on snapshotter overlayfs: mismatched image rootfs and manifest layers$/,
  },
  containerd2: {
    chart: 'CreateContainerError',
    'schema-1':
      /^rpc error: code = InvalidArgument desc = failed to pull and unpack image ".*": schema 1 image manifests are no longer supported: invalid argument$/,
  },
  crio: {
    chart: 'CreateContainerError',
    blocked:
      /^unable to try pulling possible OCI artifact: build image source: registry [^ ]+\/blocked is blocked in .*registries\.conf or .*$/,
  },
};

describe('images the runtime refuses for good, on the real node', { concurrency: true }, () => {
  for (const runtime of testRuntimes())
    describe(runtimeLabel(runtime), () => {
      let node: TestNodeHandle;
      let schema1: Awaited<ReturnType<typeof startSchema1Registry>> | undefined;
      const images: Partial<Record<Source, string>> = {};
      const expected = EXPECTED[runtime];
      before(async () => {
        if (skip) return;
        node = await testNode(env.cluster.kubeconfigPath, { runtime });
        if (expected.chart) images.chart = await pushArtifact(node.registry, `charts/app-${runtime}`, '1.0.0', HELM_CHART);
        if (expected.model) images.model = await pushArtifact(node.registry, `models/llm-${runtime}`, 'v1', MODEL);
        if (expected['schema-1']) {
          schema1 = await startSchema1Registry();
          await addRegistryHost(node, schema1.host, 'http');
          images['schema-1'] = `${schema1.host}/legacy/app:1`;
        }
        if (expected.blocked) {
          await node.pushImage('blocked/app:1');
          await addRegistryHost(node, `${node.registry}/blocked`, { scheme: 'http', blocked: true });
          images.blocked = `${node.registry}/blocked/app:1`;
        }
      });
      after(async () => schema1?.close());

      it(
        'a refused pull waits in ErrImagePull with the runtime words and is judged permanent; a pulled artifact is no pull wait',
        TIMEOUT,
        async () => {
          const ns = await env.namespace(`refused-${runtime}`);
          const core = env.kc.makeApiClient(CoreV1Api);
          const cases = Object.entries(expected) as [Source, RegExp | 'CreateContainerError'][];
          const messages = new Map<Source, string>();
          await Promise.all(
            cases.map(async ([id, want]) => {
              const spec = nodePodSpec(node, [{ name: 'main', image: images[id]!, imagePullPolicy: 'Always' }]);
              await core.createNamespacedPod({ namespace: ns, body: { metadata: { name: id }, spec } });
              const state = want === 'CreateContainerError' ? want : 'ErrImagePull';
              const seen = await observeStates(env.kc, ns, id, {
                [state]: (p) => p.status?.containerStatuses?.[0]?.state?.waiting?.reason === state,
              });
              messages.set(id, seen.get(state)!.status!.containerStatuses![0]!.state!.waiting!.message ?? '');
            }),
          );
          const run = await runSweep(env.kc, { namespaces: [ns], policy: policyFile('{}'), dryRun: true });
          for (const [id, want] of cases) {
            const message = messages.get(id)!;
            process.stderr.write(`[refused ${runtime}] ${id}: ${message}\n`);
            const line = run.lines.find((l) => l.pod === id);
            if (want === 'CreateContainerError') {
              assert.equal(line, undefined, `${id}: pulled, then not created: not stuck on its image`);
              continue;
            }
            assert.match(message, want, id);
            assert.ok(line, `${id}: no audit line (${JSON.stringify(run.lines.map((l) => l.pod))})`);
            assert.equal(line.class, 'permanent', `${id}: ${line.reason}: ${line.waitingMessage}`);
            assert.ok(['ErrImagePull', 'ImagePullBackOff'].includes(line.reason), `${id}: ${line.reason}`);
          }
        },
      );
    });
});
