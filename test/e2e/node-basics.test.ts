// The real node itself: Ready, runs a pod from the local registry, pulls with credentials from
// the auth registry, refuses that image to a Job's pod without the secret (ensure secret pulled
// images, on by default since 1.35) in words the sweep passes on as ambiguous, and listens on
// nothing but 127.0.0.1.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { before, describe, it } from 'node:test';
import { BatchV1Api, CoreV1Api } from '@kubernetes/client-node';
import { useTestCluster } from '../support/hooks.ts';
import { jobManifest } from '../support/fixtures.ts';
import { waitFor, waitForJobPods } from '../support/kubelet.ts';
import { nodeSkipReason, runtimeLabel, testNode, testRuntimes, type NodeRuntime, type TestNodeHandle } from '../support/node.ts';
import { nodePodSpec } from '../support/node-cases.ts';
import { policyFile, runSweep, sweeperEvents, waitForJobFailed } from '../support/sweeper.ts';
import { NEVER_PULL_AMBIGUOUS } from '../../src/classify/index.ts';

const skip = nodeSkipReason();
const env = useTestCluster();
// Each test (not the suite) is skipped, so the runner counts them as skipped, with the reason.
const TIMEOUT = { timeout: 120_000, skip };
const FAST = policyFile('defaults: { grace: { permanent: 1s } }\n');
/** What the kubelet reports as the node's runtime (CRI Version), per runtime. */
const RUNTIME_VERSION: Record<NodeRuntime, RegExp> = {
  containerd: /^containerd:\/\/1\.6\./,
  containerd2: /^containerd:\/\/2\.4\./,
  crio: /^cri-o:\/\/1\./,
};

/** Pids of the node: its own processes and everything in its cgroup (shims, containers). */
function nodePids(node: TestNodeHandle): Set<number> {
  const pids = new Set(Object.values(node.pids));
  const envFile = fs.readFileSync(path.join(node.runDir, 'node.env'), 'utf8');
  const cgname = /cgname=(.*)/.exec(envFile)?.[1] ?? '';
  for (const base of ['/sys/fs/cgroup/pids', '/sys/fs/cgroup']) {
    const root = path.join(base, cgname);
    if (!cgname || !fs.existsSync(root)) continue;
    const walk = (dir: string): void => {
      for (const p of fs.readFileSync(path.join(dir, 'cgroup.procs'), 'utf8').split('\n').filter(Boolean)) pids.add(Number(p));
      for (const e of fs.readdirSync(dir, { withFileTypes: true })) if (e.isDirectory()) walk(path.join(dir, e.name));
    };
    walk(root);
    break;
  }
  return pids;
}

for (const runtime of testRuntimes())
  describe(`the real node: ${runtimeLabel(runtime)}`, () => {
    let node: TestNodeHandle;
    before(async () => {
      if (skip) return;
      node = await testNode(env.cluster.kubeconfigPath, { runtime });
    });

    it('is Ready and runs a pod whose image comes from the local registry', TIMEOUT, async () => {
      const core = env.kc.makeApiClient(CoreV1Api);
      const n = await core.readNode({ name: node.name });
      assert.ok(n.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True'));
      assert.equal(n.status?.nodeInfo?.kubeletVersion, 'v1.37.2');
      assert.match(n.status?.nodeInfo?.containerRuntimeVersion ?? '', RUNTIME_VERSION[runtime]);
      assert.equal(node.runtimeVersion, n.status?.nodeInfo?.containerRuntimeVersion);

      const ns = await env.namespace(`node-run-${runtime}`);
      await core.createNamespacedSecret({
        namespace: ns,
        body: {
          metadata: { name: 'pull' },
          type: 'kubernetes.io/dockerconfigjson',
          stringData: {
            '.dockerconfigjson': JSON.stringify({
              auths: { [node.authRegistry]: { username: node.authUser, password: node.authPassword } },
            }),
          },
        },
      });
      await core.createNamespacedPod({
        namespace: ns,
        body: {
          metadata: { name: 'runs' },
          spec: nodePodSpec(
            node,
            [
              { name: 'open', image: node.pauseImage },
              { name: 'private', image: `${node.authRegistry}/pause:3.10` },
            ],
            { imagePullSecrets: [{ name: 'pull' }] },
          ),
        },
      });
      const pod = await waitFor(
        async () => {
          const p = await core.readNamespacedPod({ namespace: ns, name: 'runs' });
          return p.status?.phase === 'Running' && p.status.containerStatuses?.every((c) => c.ready) ? p : undefined;
        },
        60_000,
        'pod runs Running and ready',
        250,
      );
      assert.equal(pod.status?.containerStatuses?.length, 2);
      assert.ok(pod.status?.podIP, 'the CNI bridge gave the pod an address');
    });

    it(
      runtime === 'crio'
        ? 'lets a Job without the secret run an image pulled with it under pull policy Never (as CRI-O 1.34.0 does)'
        : 'refuses an image pulled with a secret to a Job without it under pull policy Never, and the sweep says it may be either',
      TIMEOUT,
      async () => {
        const core = env.kc.makeApiClient(CoreV1Api);
        const ns = await env.namespace(`node-secret-pulled-${runtime}`);
        const image = `${node.authRegistry}/pause:3.10`;
        const auths = { [node.authRegistry]: { username: node.authUser, password: node.authPassword } };
        await core.createNamespacedSecret({
          namespace: ns,
          body: {
            metadata: { name: 'pull' },
            type: 'kubernetes.io/dockerconfigjson',
            stringData: { '.dockerconfigjson': JSON.stringify({ auths }) },
          },
        });
        const pod = (name: string, pullPolicy: 'Always' | 'Never') =>
          core.createNamespacedPod({
            namespace: ns,
            body: {
              metadata: { name },
              spec: nodePodSpec(node, [{ name: 'main', image, imagePullPolicy: pullPolicy }], { imagePullSecrets: [{ name: 'pull' }] }),
            },
          });
        const running = (name: string) =>
          waitFor(
            async () => {
              const p = await core.readNamespacedPod({ namespace: ns, name });
              return p.status?.phase === 'Running' ? p : undefined;
            },
            60_000,
            `pod ${name} Running`,
            250,
          );
        await pod('pulled', 'Always');
        await running('pulled');

        const job = jobManifest('without-secret', image);
        job.spec!.template.spec = nodePodSpec(node, [{ name: 'main', image, imagePullPolicy: 'Never' }]);
        await env.kc.makeApiClient(BatchV1Api).createNamespacedJob({ namespace: ns, body: job });
        const [refused] = await waitForJobPods(core, ns, 'without-secret');
        const state = await waitFor(
          async () => {
            const p = await core.readNamespacedPod({ namespace: ns, name: refused!.metadata!.name! });
            const s = p.status?.containerStatuses?.[0]?.state;
            return s?.waiting?.reason === 'ErrImageNeverPull' || s?.running ? s : undefined;
          },
          60_000,
          "the Job's pod waits in ErrImageNeverPull or runs",
          250,
        );
        if (runtime === 'crio') {
          // Seen with CRI-O 1.34.0 and this kubelet: the pod without the secret runs the image (the
          // kubelet logs no pull and no credential check for it), so there is nothing to sweep.
          assert.ok(state.running, JSON.stringify(state));
          return;
        }
        const waiting = state.waiting!;
        // The image is on the node (a pod with the secret runs it without pulling), yet the kubelet
        // words the refusal as it words an absent image (image_manager.go v1.37.2).
        await pod('with-secret', 'Never');
        await running('with-secret');
        assert.match(waiting.message ?? '', /is not present with pull policy of Never/);

        // Past the 1 s grace on the API server's clock, which counts whole seconds.
        await new Promise((r) => setTimeout(r, 2_500));
        const run = await runSweep(env.kc, { namespaces: [ns], policy: FAST });
        const line = run.lines.find((l) => l.job === 'without-secret');
        assert.equal(line?.class, 'permanent', JSON.stringify(run.lines));
        assert.equal(line?.outcome, 'failed', JSON.stringify(run.lines));
        const failed = await waitForJobFailed(env.kc, ns, 'without-secret');
        assert.ok(failed.metadata?.annotations?.['imagepull-sweeper/message']?.includes(NEVER_PULL_AMBIGUOUS));
        const [event] = (await sweeperEvents(env.kc, ns)).filter((e) => e.regarding?.name === 'without-secret');
        assert.ok(event?.note?.includes(NEVER_PULL_AMBIGUOUS), String(event?.note));
      },
    );

    it('listens on nothing but 127.0.0.1', TIMEOUT, () => {
      const pids = nodePids(node);
      const out = execFileSync('ss', ['-H', '-l', '-t', '-n', '-p'], { encoding: 'utf8' });
      const ours = out.split('\n').filter((l) => [...l.matchAll(/pid=(\d+)/g)].some((m) => pids.has(Number(m[1]))));
      assert.ok(ours.length >= 3, `the kubelet, the registries and the runtime's stream server listen:\n${out}`);
      for (const l of ours) {
        const local = l.trim().split(/\s+/)[3] ?? '';
        assert.match(local, /^127\.0\.0\.1:\d+$/, `listening beyond loopback: ${l}`);
      }
    });
  });
