// Prints figures; asserts nothing. `npm run bench:cluster [JOBS]`.
// A dry run and a real sweep of JOBS stuck Jobs (spread over 10 namespaces) on the bundled
// control plane, with the default limits lifted so every Job is failed in one sweep.
import { PassThrough } from 'node:stream';
import { BatchV1Api, CoreV1Api } from '@kubernetes/client-node';
import { exitStatusOf } from '../src/cli/exit.ts';
import { mapBounded } from '../src/concurrency.ts';
import { createGateway } from '../src/kube/gateway.ts';
import { withRetries } from '../src/kube/retrying.ts';
import { createLogger } from '../src/report/logger.ts';
import { sweep } from '../src/sweep.ts';
import { startCluster } from '../test/support/cluster.ts';
import { createNamespace, jobManifest } from '../test/support/fixtures.ts';
import { setImagePullStuck, waitFor, waitForJobPods } from '../test/support/kubelet.ts';
import { NOT_FOUND_MESSAGE, MISSING_IMAGE, policyFile } from '../test/support/sweeper.ts';

const jobs = Number(process.argv[2] ?? 200);
const cluster = await startCluster();
try {
  const kc = cluster.kubeConfig;
  const core = kc.makeApiClient(CoreV1Api);
  const batch = kc.makeApiClient(BatchV1Api);
  const namespaces = await Promise.all(Array.from({ length: 10 }, (_, i) => createNamespace(kc, `bench-${i}`)));
  const setupStarted = Date.now();
  await mapBounded(
    Array.from({ length: jobs }, (_, i) => i),
    8,
    async (i) => {
      const namespace = namespaces[i % namespaces.length]!.name;
      const name = `job-${i}`;
      await batch.createNamespacedJob({ namespace, body: jobManifest(name, MISSING_IMAGE) });
      const [pod] = await waitForJobPods(core, namespace, name, { timeoutMs: 120_000 });
      await setImagePullStuck(core, namespace, pod!.metadata!.name!, {
        since: new Date(Date.now() - 3600_000),
        stuck: [{ container: 'main', reason: 'ImagePullBackOff', message: NOT_FOUND_MESSAGE }],
      });
    },
  );
  console.log(`setup: ${jobs} stuck Jobs in ${namespaces.length} namespaces in ${Date.now() - setupStarted} ms`);

  const policy = policyFile(`limits: { maxJobsPerSweep: ${jobs}, maxJobsPerNamespace: ${jobs} }\n`);
  for (const dryRun of [true, false]) {
    const started = Date.now();
    const result = await sweep(
      { gateway: withRetries(createGateway(kc)), clock: () => new Date(), logger: createLogger({ format: 'json', stream: new PassThrough().resume() }) },
      { dryRun, namespaces: [], policy, instance: 'bench' },
    );
    const s = result.summary!;
    console.log(
      `${dryRun ? 'dry run' : 'sweep  '}: ${s.podsScanned} pending pods, ${s.outcomes.failed} ${dryRun ? 'would fail' : 'failed'}, ` +
        `${s.actionErrors} errors, exit ${exitStatusOf(result.status)}, ${Date.now() - started} ms`,
    );
  }
  const started = Date.now();
  await waitFor(
    async () => {
      const all = await batch.listJobForAllNamespaces({ labelSelector: '' });
      const failed = all.items.filter((j) => j.status?.conditions?.some((c) => c.type === 'Failed' && c.status === 'True')).length;
      return failed >= jobs ? failed : undefined;
    },
    300_000,
    'every Job to be Failed',
    1000,
  );
  console.log(`job controller: all ${jobs} Jobs Failed/DeadlineExceeded ${Date.now() - started} ms after the sweep`);
} finally {
  await cluster.stop();
}
