// The README's first command: a real sweep on the bundled local control plane.
// Starts etcd + kube-apiserver + kube-controller-manager and, on Linux as root, a real node
// (kubelet, containerd, a local registry); creates a Job whose image is not in the registry; the
// real kubelet fails to pull it and backs off; shows a dry run, sweeps, shows the failed Job and
// the pod the kubelet stopped, and stops everything. Without a real node (not Linux, not root) it
// plays the kubelet with the status stand-in instead, and says so.
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { BatchV1Api, CoreV1Api, EventsV1Api, type V1ConfigMap } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { CLI, REPO, ensureBuilt } from '../test/support/cli.ts';
import { startCluster } from '../test/support/cluster.ts';
import { jobManifest } from '../test/support/fixtures.ts';
import { realPullMessage, setImagePullStuck, waitFor, waitForJobPods } from '../test/support/kubelet.ts';
import { ensureNodePackages, nodeSupport, startNode, type RunningNode } from '../test/support/node.ts';
import { nodePodSpec, observeReasons } from '../test/support/node-cases.ts';

const NAMESPACE = 'team-analytics';
const JOB = 'nightly-report';
const STAND_IN_IMAGE = 'registry.example.com/analytics/report:2026.11.3';
/** The Job's own grace on the real node (imagepull-sweeper/grace), so the demo need not wait 2m. */
const JOB_GRACE_S = 15;

function step(text: string): void {
  process.stdout.write(`\n\x1b[1m== ${text}\x1b[0m\n`);
}

function sweeper(args: string[], kubeconfig: string): number {
  process.stdout.write(`$ imagepull-sweeper ${args.join(' ')}\n`);
  const r = spawnSync(process.execPath, [CLI, ...args, '--kubeconfig', kubeconfig, '--output', 'text'], {
    stdio: 'inherit',
    env: { ...process.env, POD_NAMESPACE: 'imagepull-sweeper' },
  });
  process.stdout.write(`(exit status ${r.status})\n`);
  return r.status ?? 1;
}

async function main(): Promise<number> {
  step('Building the sweeper');
  ensureBuilt();
  step('Starting the bundled control plane (etcd, kube-apiserver, kube-controller-manager)');
  const cluster = await startCluster();
  process.stdout.write(`ready in ${cluster.startupMs} ms at ${cluster.server}\n`);
  let node: RunningNode | undefined;
  try {
    const noNode = nodeSupport();
    if (noNode) {
      step('No real node on this machine: the kubelet is played by the status stand-in');
      process.stdout.write(`(${noNode})\n`);
    } else {
      step('Starting a real node: kubelet v1.37.2, containerd, a local registry');
      await ensureNodePackages(() => undefined);
      node = await startNode({ kubeconfigPath: cluster.kubeconfigPath, log: (l) => process.stdout.write(`${l}\n`) });
      process.stdout.write(`node ${node.name} Ready; registry ${node.registry}\n`);
    }
    const IMAGE = node ? `${node.registry}/analytics/report:2026.11.3` : STAND_IN_IMAGE;
    const kc = cluster.kubeConfig;
    const core = kc.makeApiClient(CoreV1Api);
    const batch = kc.makeApiClient(BatchV1Api);

    step('Installing the policy ConfigMap from manifests/policy-configmap.yaml');
    await core.createNamespace({ body: { metadata: { name: 'imagepull-sweeper' } } });
    const configMap = parse(readFileSync(join(REPO, 'manifests/policy-configmap.yaml'), 'utf8')) as V1ConfigMap;
    await core.createNamespacedConfigMap({ namespace: 'imagepull-sweeper', body: configMap });

    step(`A Job in ${NAMESPACE} whose image does not exist${node ? ' in the registry' : ''}`);
    await core.createNamespace({ body: { metadata: { name: NAMESPACE } } });
    await waitFor(() => core.readNamespacedServiceAccount({ name: 'default', namespace: NAMESPACE }), 30_000, 'default ServiceAccount');
    const manifest = jobManifest(JOB, IMAGE);
    if (node) {
      manifest.metadata!.annotations = { 'imagepull-sweeper/grace': `${JOB_GRACE_S}s` };
      manifest.spec!.template.spec = nodePodSpec(node, [{ name: 'main', image: IMAGE }]);
    }
    await batch.createNamespacedJob({ namespace: NAMESPACE, body: manifest });
    const [pod] = await waitForJobPods(core, NAMESPACE, JOB);
    const podName = pod!.metadata!.name!;
    process.stdout.write(
      `job/${JOB} created${node ? ` (annotation imagepull-sweeper/grace: ${JOB_GRACE_S}s)` : ''}; the Job controller made pod/${podName}\n`,
    );

    if (node) {
      step(`The real kubelet on ${node.name} pulls from ${node.registry}, fails, and backs off`);
      const c = { container: 'main', containerKind: 'regular' as const };
      const seen = await observeReasons(kc, NAMESPACE, podName, { ...c, reasons: ['ErrImagePull', 'ImagePullBackOff'] });
      for (const [reason, p] of seen) {
        process.stdout.write(
          `pod/${podName}: ${p.status?.phase}, container main waiting: ${reason}\n  ${p.status?.containerStatuses?.[0]?.state?.waiting?.message}\n`,
        );
      }
      step('Dry run: decides everything, writes nothing');
      sweeper(['sweep', '--dry-run'], cluster.kubeconfigPath);
      const p = await core.readNamespacedPod({ namespace: NAMESPACE, name: podName });
      const ready = p.status?.conditions?.find((x) => x.type === 'PodReadyToStartContainers')?.lastTransitionTime;
      const wait = new Date(ready ?? Date.now()).getTime() + (JOB_GRACE_S + 1) * 1000 - Date.now();
      if (wait > 0) {
        step(`Waiting ${Math.ceil(wait / 1000)} s until the Job's ${JOB_GRACE_S}s grace is over (the kubelet keeps retrying)`);
        await new Promise((r) => setTimeout(r, wait));
      }
    } else {
      step('Playing the kubelet (stand-in): the pod has waited 5 minutes in ImagePullBackOff');
      await setImagePullStuck(core, NAMESPACE, podName, {
        since: new Date(Date.now() - 5 * 60_000),
        stuck: [{ container: 'main', reason: 'ImagePullBackOff', message: realPullMessage('tag-missing', IMAGE) }],
      });
      process.stdout.write(`pod/${podName}: Pending, container main waiting: ImagePullBackOff\n`);
      step('Dry run: decides everything, writes nothing');
      sweeper(['sweep', '--dry-run'], cluster.kubeconfigPath);
    }

    step('The real sweep');
    const code = sweeper(['sweep'], cluster.kubeconfigPath);

    step('What the Job controller did with it');
    const job = await waitFor(
      async () => {
        const j = await batch.readNamespacedJob({ namespace: NAMESPACE, name: JOB });
        return j.status?.conditions?.some((c) => c.type === 'Failed' && c.status === 'True') ? j : undefined;
      },
      60_000,
      'the Job to fail',
    );
    const failed = job.status!.conditions!.find((c) => c.type === 'Failed')!;
    process.stdout.write(`job/${JOB}: Failed, reason ${failed.reason}: ${failed.message}\n`);
    process.stdout.write('annotations:\n');
    for (const [k, v] of Object.entries(job.metadata?.annotations ?? {})) {
      if (k.startsWith('imagepull-sweeper/')) process.stdout.write(`  ${k}: ${v}\n`);
    }
    if (node) {
      const gone = await waitFor(
        async () => {
          const list = await core.listNamespacedPod({ namespace: NAMESPACE });
          return list.items.length === 0 ? true : undefined;
        },
        60_000,
        'the pod to be gone',
      ).catch(() => false);
      const procs = execFileSync('ctr', ['--address', node.criSocket, '-n', 'k8s.io', 'tasks', 'ls', '-q'], {
        encoding: 'utf8',
      }).trim();
      process.stdout.write(
        `pod/${podName}: ${gone ? 'stopped by the real kubelet and removed' : 'still there after 60 s'}; ` +
          `containers running on ${node.name}: ${procs ? procs.split('\n').length : 0}\n`,
      );
    }
    const events = await kc.makeApiClient(EventsV1Api).listNamespacedEvent({ namespace: NAMESPACE });
    for (const e of events.items.filter((e) => e.reportingController === 'imagepull-sweeper')) {
      process.stdout.write(
        `event: ${e.type} ${e.reason} (action ${e.action}) on ${e.regarding?.kind}/${e.regarding?.name}:\n  ${e.note}\n`,
      );
    }

    step('A second sweep: the Job is Failed, so only its imagepull-sweeper/pending label comes off');
    sweeper(['sweep', '--namespace', NAMESPACE], cluster.kubeconfigPath);
    return code;
  } finally {
    step(node ? 'Stopping the node and the control plane' : 'Stopping the control plane');
    await node?.stop();
    await cluster.stop();
  }
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    process.stderr.write(`demo failed: ${(error as Error).stack ?? String(error)}\n`);
    process.exitCode = 1;
  },
);
