// A pull that stops making progress, on runtimes that cancel it (containerd ≥ 1.7:
// `image_pull_progress_timeout`, 5 min by default; CRI-O: `pull_progress_timeout`, off by
// default; 5 s here). The registry serves the manifest
// and config, then holds the layer download open after its first 1.5 MiB (stalling-registry.ts):
// containerd cancels the pull and the kubelet shows ErrImagePull `code = Canceled ... context
// canceled`, then ImagePullBackOff. The sweeper must class it `stalled` and fail its Job on the
// stalled grace. A registry that never answers at all (hungServer) is not cancelled: containerd
// 2's progress reporter only counts layer downloads, so that pull hangs in ContainerCreating,
// still `stalled` by its waiting state (stalling-registry.ts says why). Runs on a private node
// (its own progress timeout).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { BatchV1Api, CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { jobManifest } from '../support/fixtures.ts';
import { useTestCluster } from '../support/hooks.ts';
import { waitForJobPods } from '../support/kubelet.ts';
import {
  addRegistryHost,
  hungServer,
  nodeSkipReason,
  runtimeLabel,
  startNode,
  testRuntimes,
  type NodeRuntime,
  type RunningNode,
} from '../support/node.ts';
import { caseContainerStatus, nodePodSpec, observeReasons, observeStates } from '../support/node-cases.ts';
import { stallingRegistry, type StallingRegistry } from '../support/stalling-registry.ts';
import { assertFailedBySweeper, policyFile, runSweep, waitForJobFailed } from '../support/sweeper.ts';

const skip = nodeSkipReason();
const env = useTestCluster();
const TIMEOUT = { timeout: 240_000, skip };
/** Runtimes with a pull progress timeout, and the message of a pull it cancelled. */
const CANCELLED: Partial<Record<NodeRuntime, RegExp>> = {
  // containerd v2.4.2 internal/cri/server/images/image_pull.go: "failed to pull and unpack image %q: %w".
  containerd2: /^rpc error: code = Canceled desc = failed to pull and unpack image ".*": context canceled$/,
  // cri-o v1.34.0 server/image_pull.go (consumeImagePullProgress cancels the pull's context);
  // containers/image's storage destination words it.
  crio: /^rpc error: code = Canceled desc = writing blob: storing blob to file ".*": happened during read: context canceled$/,
};
/** The runtime's log line saying it cancelled `image` (log file under the node's logDir). */
const CANCEL_LOG: Partial<Record<NodeRuntime, { file: string; line: (image: string) => RegExp }>> = {
  containerd2: {
    file: 'containerd.log',
    line: (image) => new RegExp(`cancel pulling image ${image.replace(/[.]/g, '\\.')} because of no progress in ${PROGRESS_TIMEOUT}`),
  },
  crio: { file: 'crio.log', line: () => new RegExp(`Timed out on waiting up to ${PROGRESS_TIMEOUT} for image pull progress updates`) },
};
const PROGRESS_TIMEOUT = '5s';
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

const runtimes = testRuntimes().filter((r) => CANCELLED[r]);
if (runtimes.length === 0) {
  it(
    'a pull cancelled for lack of progress is stalled',
    { skip: `no runtime of this run cancels pulls (${testRuntimes().join(', ')})` },
    () => {},
  );
}

for (const runtime of runtimes) {
  describe(`a pull that stops making progress: ${runtimeLabel(runtime)}`, { timeout: 600_000 }, () => {
    let node: RunningNode | undefined;
    let stalling: StallingRegistry | undefined;
    let hung: Awaited<ReturnType<typeof hungServer>> | undefined;
    before(async () => {
      if (skip) return;
      stalling = await stallingRegistry();
      hung = await hungServer();
      node = await startNode({
        kubeconfigPath: env.cluster.kubeconfigPath,
        runtime,
        runtimeOptions: { imagePullProgressTimeout: PROGRESS_TIMEOUT },
        serializeImagePulls: false,
      });
      await addRegistryHost(node, stalling.host);
      await addRegistryHost(node, hung.host);
    });
    after(async () => {
      await hung?.close();
      await stalling?.close();
      await node?.stop();
    });

    it(
      `is cancelled after image_pull_progress_timeout (${PROGRESS_TIMEOUT}): code = Canceled, class stalled, its Job failed on the stalled grace`,
      TIMEOUT,
      async () => {
        const n = node!;
        const ns = await env.namespace(`node-cancelled-${runtime}`);
        const core = env.kc.makeApiClient(CoreV1Api);
        const image = `${stalling!.host}/team/app:1`;
        const job = jobManifest('stalls', image);
        job.spec!.template.spec = nodePodSpec(n, [{ name: 'main', image }]);
        await env.kc.makeApiClient(BatchV1Api).createNamespacedJob({ namespace: ns, body: job });
        const neverImage = `${hung!.host}/team/app:1`;
        await core.createNamespacedPod({
          namespace: ns,
          body: { metadata: { name: 'never-answers' }, spec: nodePodSpec(n, [{ name: 'main', image: neverImage }]) },
        });
        const [pod] = await waitForJobPods(core, ns, 'stalls');
        const podName = pod!.metadata!.name!;
        const c = { container: 'main', containerKind: 'regular' as const, reasons: ['ErrImagePull', 'ImagePullBackOff'] };
        const t0 = Date.now();
        const seen = await observeReasons(env.kc, ns, podName, c, 120_000);
        const first = caseContainerStatus(seen.get('ErrImagePull')!, c)!.state!.waiting!;
        process.stderr.write(
          `[cancelled] ${runtime}: ErrImagePull after ${Date.now() - t0} ms: ${first.message}; layer downloads held open: ${stalling!.stalledDownloads()}\n`,
        );
        assert.match(first.message ?? '', CANCELLED[runtime]!);
        assert.ok(stalling!.stalledDownloads() >= 1, `the layer download started: ${stalling!.requests().join(', ')}`);
        const back = caseContainerStatus(seen.get('ImagePullBackOff')!, c)!.state!.waiting!;
        assert.equal(back.message, `Back-off pulling image "${image}": ErrImagePull: ${first.message}`);
        const cancelLog = CANCEL_LOG[runtime]!;
        assert.match(fs.readFileSync(path.join(n.logDir, cancelLog.file), 'utf8'), cancelLog.line(image));

        // The registry that never answers: no cancel, no message, still ContainerCreating.
        const never = await observeStates(env.kc, ns, 'never-answers', {
          ContainerCreating: (p: V1Pod) =>
            p.status?.conditions?.some((x) => x.type === 'PodReadyToStartContainers' && x.status === 'True') === true &&
            p.status?.containerStatuses?.[0]?.state?.waiting?.reason === 'ContainerCreating',
        });
        await sleep(2_000);
        const neverNow = await core.readNamespacedPod({ namespace: ns, name: 'never-answers' });
        const neverWaiting = neverNow.status?.containerStatuses?.[0]?.state?.waiting;
        process.stderr.write(
          `[cancelled] ${runtime}: a registry that never answers, ${Date.now() - t0} ms in: ${neverWaiting?.reason} ${neverWaiting?.message ?? '(no message)'}; connections: ${hung!.connections()}\n`,
        );
        assert.ok(never.get('ContainerCreating'));
        assert.equal(neverWaiting?.reason, 'ContainerCreating', 'a pull with no layer download started is not cancelled');
        assert.equal(neverWaiting?.message, undefined);

        const dry = await runSweep(env.kc, { namespaces: [ns], policy: policyFile('{}'), dryRun: true });
        const line = dry.lines.find((l) => l.job === 'stalls');
        assert.ok(line, `the cancelled pull is seen: ${JSON.stringify(dry.lines)}`);
        assert.equal(line.class, 'stalled', line.waitingMessage);
        assert.equal(line.outcome, 'skipped', 'within the default stalled grace (30m)');
        assert.equal(dry.lines.find((l) => l.pod === 'never-answers')?.class, 'stalled');

        const run = await runSweep(env.kc, { namespaces: [ns], policy: policyFile('defaults: { grace: { stalled: 5s } }\n') });
        const done = run.lines.find((l) => l.job === 'stalls')!;
        assert.equal(done.class, 'stalled');
        assert.equal(done.graceSeconds, 5);
        assert.equal(done.outcome, 'failed');
        const failed = await waitForJobFailed(env.kc, ns, 'stalls', 60_000);
        assertFailedBySweeper(failed);
      },
    );
  });
}
