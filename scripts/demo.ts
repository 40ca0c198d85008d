// The README's first command: a real sweep on the bundled local control plane.
// Starts etcd + kube-apiserver + kube-controller-manager, creates a Job whose image does not
// exist, plays the kubelet (ImagePullBackOff), shows a dry run, sweeps, shows the failed Job, stops.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { BatchV1Api, CoreV1Api, EventsV1Api, type V1ConfigMap } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { CLI, REPO, ensureBuilt } from '../test/support/cli.ts';
import { startCluster } from '../test/support/cluster.ts';
import { jobManifest } from '../test/support/fixtures.ts';
import { setImagePullStuck, waitFor, waitForJobPods } from '../test/support/kubelet.ts';

const NAMESPACE = 'team-analytics';
const JOB = 'nightly-report';
const IMAGE = 'registry.example.com/analytics/report:2026.11.3';
const PULL_MESSAGE =
  `Back-off pulling image "${IMAGE}": ErrImagePull: failed to pull and unpack image "${IMAGE}": ` +
  `failed to resolve reference "${IMAGE}": ${IMAGE}: not found`;

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
  try {
    const kc = cluster.kubeConfig;
    const core = kc.makeApiClient(CoreV1Api);
    const batch = kc.makeApiClient(BatchV1Api);

    step('Installing the policy ConfigMap from manifests/policy-configmap.yaml');
    await core.createNamespace({ body: { metadata: { name: 'imagepull-sweeper' } } });
    const configMap = parse(readFileSync(join(REPO, 'manifests/policy-configmap.yaml'), 'utf8')) as V1ConfigMap;
    await core.createNamespacedConfigMap({ namespace: 'imagepull-sweeper', body: configMap });

    step(`A Job in ${NAMESPACE} whose image does not exist`);
    await core.createNamespace({ body: { metadata: { name: NAMESPACE } } });
    await waitFor(() => core.readNamespacedServiceAccount({ name: 'default', namespace: NAMESPACE }), 30_000, 'default ServiceAccount');
    await batch.createNamespacedJob({ namespace: NAMESPACE, body: jobManifest(JOB, IMAGE) });
    const [pod] = await waitForJobPods(core, NAMESPACE, JOB);
    const podName = pod!.metadata!.name!;
    process.stdout.write(`job/${JOB} created; the Job controller made pod/${podName}\n`);

    step('Playing the kubelet: the pod has waited 5 minutes in ImagePullBackOff');
    await setImagePullStuck(core, NAMESPACE, podName, {
      since: new Date(Date.now() - 5 * 60_000),
      stuck: [{ container: 'main', reason: 'ImagePullBackOff', message: PULL_MESSAGE }],
    });
    process.stdout.write(`pod/${podName}: Pending, container main waiting: ImagePullBackOff\n`);

    step('Dry run: decides everything, writes nothing');
    sweeper(['sweep', '--dry-run'], cluster.kubeconfigPath);

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
    const events = await kc.makeApiClient(EventsV1Api).listNamespacedEvent({ namespace: NAMESPACE });
    for (const e of events.items.filter((e) => e.reportingController === 'imagepull-sweeper')) {
      process.stdout.write(`event: ${e.type} ${e.reason} (action ${e.action}) on ${e.regarding?.kind}/${e.regarding?.name}:\n  ${e.note}\n`);
    }

    step('A second sweep changes nothing');
    sweeper(['sweep', '--namespace', NAMESPACE], cluster.kubeconfigPath);
    return code;
  } finally {
    step('Stopping the control plane');
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
