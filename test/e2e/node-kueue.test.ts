// Jobs Kueue queues, on the real node, with the real Kueue (v0.17.0, built from its Go module:
// test/support/kueue.ts; waitForPodsReady with a 20 s timeout and a 15 s requeuing back-off), its
// webhooks, a ClusterQueue and a LocalQueue. The sweeper fails a queued Job by its own condition,
// and Kueue's Workload finishes with the sweeper's message; a Job Kueue evicts before its grace
// keeps its time stuck across admissions; a known permanent cause gets its FailureTarget while the
// Job waits suspended, and the Job ends when Kueue admits it again, before any pod is created
// (docs/kueue.md).
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { BatchV1Api, CoreV1Api, type KubeConfig, type V1Job, type V1Pod } from '@kubernetes/client-node';
import { readStuckMemory } from '../../src/judge/queue.ts';
import { ANNOTATIONS, LABELS } from '../../src/policy/annotations.ts';
import type { AuditLine } from '../../src/report/audit.ts';
import { ensureBuilt, runCli } from '../support/cli.ts';
import { useTestCluster } from '../support/hooks.ts';
import { waitFor } from '../support/kubelet.ts';
import {
  createQueues,
  KUEUE_CONFIG,
  kueue,
  kueueUnavailable,
  PODS_READY,
  QUEUE_LABEL,
  workloadCondition,
  workloadOf,
  type Workload,
} from '../support/kueue.ts';
import { nodePodSpec } from '../support/node-cases.ts';
import { nodeSkipReason, runtimeLabel, testNode, testRuntimes, type TestNodeHandle } from '../support/node.ts';
import { policyFile, readJob, runSweep, trueCondition } from '../support/sweeper.ts';

const skip = nodeSkipReason() ?? kueueUnavailable();
const TIMEOUT = { timeout: 300_000, skip };
const TIMEOUT_WARNING = new RegExp(
  `grace .* is not shorter than Kueue's timeout 20s \\(waitForPodsReady\\.timeout in ConfigMap ${KUEUE_CONFIG.namespace}/${KUEUE_CONFIG.name}\\)`,
);

const env = useTestCluster(async (hooks) => {
  if (skip) return;
  ensureBuilt();
  const controller = await kueue(hooks.kc, hooks.cluster.kubeconfigPath);
  hooks.onCleanup(() => controller.stop());
});

/** A Job in LocalQueue `queue` whose one pod pulls `image` on the node; Kueue's webhook suspends it until admitted. */
async function createQueuedJob(
  kc: KubeConfig,
  ns: string,
  name: string,
  queue: string,
  node: TestNodeHandle,
  image: string,
): Promise<V1Job> {
  const body: V1Job = {
    metadata: { name, labels: { [QUEUE_LABEL]: queue } },
    spec: {
      backoffLimit: 0,
      template: { spec: nodePodSpec(node, [{ name: 'main', image, command: ['true'], resources: { requests: { cpu: '10m' } } }]) },
    },
  };
  return kc.makeApiClient(BatchV1Api).createNamespacedJob({ namespace: ns, body });
}

async function podsOf(kc: KubeConfig, ns: string, job: V1Job): Promise<V1Pod[]> {
  const list = await kc.makeApiClient(CoreV1Api).listNamespacedPod({
    namespace: ns,
    labelSelector: `batch.kubernetes.io/controller-uid=${job.metadata!.uid}`,
  });
  return list.items;
}

interface Swept {
  lines: AuditLine[];
  job: V1Job;
}

/** Sweeps `ns` every 2 s until `done` says so (each run's lines kept); every sweep exits 0. */
async function sweepUntil(
  ns: string,
  policy: ReturnType<typeof policyFile>,
  name: string,
  done: (job: V1Job, lines: AuditLine[]) => boolean,
  timeoutMs: number,
  onEach?: (job: V1Job) => Promise<void>,
): Promise<Swept> {
  const lines: AuditLine[] = [];
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const run = await runSweep(env.kc, { namespaces: [ns], policy, kueueConfig: KUEUE_CONFIG });
    assert.equal(run.exitCode, 0, JSON.stringify(run.records.filter((r) => r.level === 'error')));
    lines.push(...run.lines);
    const job = await readJob(env.kc, ns, name);
    await onEach?.(job);
    if (done(job, lines)) return { lines, job };
    assert.ok(
      Date.now() < deadline,
      `Job ${name}: not done after ${timeoutMs} ms; lines: ${JSON.stringify(lines.map((l) => [l.outcome, l.detail]))}`,
    );
    await new Promise((r) => setTimeout(r, 2_000));
  }
}

const workloadFinishedWithJobMessage = async (ns: string, job: V1Job): Promise<Workload> =>
  waitFor(
    async () => {
      const w = await workloadOf(env.kc, ns, job.metadata!.uid!);
      return workloadCondition(w, 'Finished') ? w : undefined;
    },
    30_000,
    `the Workload of Job ${job.metadata!.name} Finished`,
  );

for (const runtime of testRuntimes().slice(0, 1))
  describe(`Jobs Kueue queues, on the real node: ${runtimeLabel(runtime)}`, () => {
    let node: TestNodeHandle;
    before(async () => {
      if (skip) return;
      node = await testNode(env.cluster.kubeconfigPath, { runtime });
    });

    it(
      'admitted and stuck past its grace on a missing image: failed by its own condition; its Workload finishes with that message',
      TIMEOUT,
      async () => {
        const ns = await env.namespace('kueue-fail');
        const queue = await createQueues(env.kc, ns);
        const policy = policyFile('defaults: { grace: { permanent: 5s } }\n');
        const created = await createQueuedJob(env.kc, ns, 'build', queue, node, `${node.registry}/team/missing-kueue:1`);
        const { lines, job } = await sweepUntil(ns, policy, 'build', (j) => trueCondition(j, 'Failed') !== undefined, 120_000);
        const failedLine = lines.find((l) => l.outcome === 'failed');
        assert.equal(failedLine?.mechanism, 'condition');
        assert.deepEqual(failedLine?.warnings, [], 'the permanent grace 5s is shorter than Kueue timeout 20s');
        const failed = trueCondition(job, 'Failed')!;
        assert.equal(failed.reason, 'ImagePullStuck');
        assert.match(
          failed.message ?? '',
          /^imagepull-sweeper: regular container main of pod build-\S+ waited \S+ on image \S+missing-kueue:1 \(class permanent/,
        );
        const workload = await workloadFinishedWithJobMessage(ns, created);
        const finished = workloadCondition(workload, 'Finished')!;
        assert.deepEqual([finished.reason, finished.message], ['Failed', failed.message]);
        process.stderr.write(
          `[kueue] ${runtime} Workload ${workload.metadata?.name}: Finished, reason ${finished.reason}: ${finished.message}\n`,
        );
      },
    );

    it(
      'evicted by waitForPodsReady before its grace, on a known permanent cause: its FailureTarget written while it waits; it ends when admitted again, before a pod is created',
      TIMEOUT,
      async () => {
        const ns = await env.namespace('kueue-known');
        const queue = await createQueues(env.kc, ns);
        const policy = policyFile('defaults: { grace: { permanent: 5m } }\n');
        const created = await createQueuedJob(env.kc, ns, 'known', queue, node, `${node.registry}/team/missing-kueue:2`);
        let evicted: Workload | undefined;
        // Until the sweeper has written the FailureTarget on the suspended Job.
        const { lines, job } = await sweepUntil(
          ns,
          policy,
          'known',
          (j) => j.spec?.suspend === true && trueCondition(j, 'FailureTarget') !== undefined,
          120_000,
          async (j) => {
            if (j.spec?.suspend === true && trueCondition(j, 'FailureTarget'))
              evicted = await workloadOf(env.kc, ns, created.metadata!.uid!);
          },
        );
        const within = lines.find((l) => /^within grace/.test(l.detail));
        assert.ok(within, 'it was seen stuck within its grace, while admitted');
        assert.match(within.warnings.join('\n'), TIMEOUT_WARNING);
        const memory = readStuckMemory(job.metadata?.annotations?.[ANNOTATIONS.stuck]);
        assert.deepEqual([memory?.pullClass, memory?.evictions], ['permanent', 1]);
        const whileQueued = lines.find((l) => l.outcome === 'failed');
        assert.equal(whileQueued?.mechanism, 'condition');
        assert.match(
          whileQueued!.detail,
          /^suspended by Kueue while stuck, stuck \S+ in 1 earlier admission\(s\) Kueue ended; its permanent cause is known: failed while it waits/,
        );
        const target = trueCondition(job, 'FailureTarget')!;
        assert.equal(target.reason, 'ImagePullStuck');
        assert.equal(trueCondition(job, 'Failed'), undefined, 'the Job controller does not finish a suspended Job');
        const suspended = job.status?.conditions?.find((c) => c.type === 'Suspended' && c.status === 'True');
        assert.ok(suspended, 'suspended by Kueue');
        const writtenAt = new Date();

        // Kueue admits it again after its back-off: the Job controller fails it on resume.
        const failedJob = await waitFor(
          async () => {
            const j = await readJob(env.kc, ns, 'known');
            return trueCondition(j, 'Failed') ? j : undefined;
          },
          (PODS_READY.backoffMaxSeconds + 30) * 1000,
          'Job known Failed once admitted again',
        );
        const failed = trueCondition(failedJob, 'Failed')!;
        assert.deepEqual([failed.reason, failed.message], [target.reason, target.message]);
        const later = (await podsOf(env.kc, ns, created)).filter((p) => new Date(p.metadata!.creationTimestamp!) >= writtenAt);
        assert.deepEqual(
          later.map((p) => p.metadata?.name),
          [],
          'no pod created after the FailureTarget',
        );
        const workload = await workloadFinishedWithJobMessage(ns, created);
        const finished = workloadCondition(workload, 'Finished')!;
        assert.deepEqual([finished.reason, finished.message], ['Failed', failed.message]);
        assert.ok((workload.status?.requeueState?.count ?? 0) >= 1, 'it was requeued by Kueue');
        const conditions = (w: Workload | undefined) =>
          (w?.status?.conditions ?? []).map((c) => `${c.type}=${c.status} ${c.reason ?? ''}: ${c.message ?? ''}`).join(' | ');
        process.stderr.write(
          `[kueue] ${runtime} the Workload while the Job waited suspended: ${conditions(evicted)}\n` +
            `[kueue] ${runtime} after the FailureTarget and re-admission: ${conditions(workload)}; requeues ${workload.status?.requeueState?.count}\n`,
        );
        assert.equal(failedJob.metadata?.labels?.[LABELS.pending], 'true', 'claimed: the next sweep settles it');
      },
    );

    it(
      'stuck across admissions on one cause (auth): its time stuck adds up, and it is failed in a later admission with only the rest of its grace',
      TIMEOUT,
      async () => {
        const ns = await env.namespace('kueue-carried');
        const queue = await createQueues(env.kc, ns);
        // Longer than Kueue's 20 s timeout: no single admission reaches it.
        const policy = policyFile('defaults: { grace: { auth: 25s } }\n');
        await createQueuedJob(env.kc, ns, 'private', queue, node, `${node.authRegistry}/team/private:1`);
        const { lines, job } = await sweepUntil(
          ns,
          policy,
          'private',
          (j) => trueCondition(j, 'FailureTarget') !== undefined || trueCondition(j, 'Failed') !== undefined,
          200_000,
        );
        const failedLine = lines.find((l) => l.outcome === 'failed')!;
        assert.equal(failedLine.class, 'auth');
        assert.match(failedLine.detail, /^stuck past grace \(25s from defaults\); stuck \S+ in [1-9] earlier admission\(s\) Kueue ended$/);
        assert.ok(failedLine.stuckSeconds >= 25);
        const closed = lines.find((l) => /^suspended by Kueue while stuck/.test(l.detail));
        assert.match(closed?.detail ?? '', /: waits in its queue; the auth class is judged while its pods are stuck/);
        const firstPod = lines.find((l) => l.outcome === 'skipped' && /^within grace/.test(l.detail))!.pod;
        assert.notEqual(failedLine.pod, firstPod, 'failed in a later admission, with another pod');
        const failed = await waitFor(
          async () => trueCondition(await readJob(env.kc, ns, 'private'), 'Failed'),
          60_000,
          'Job private Failed',
        );
        assert.equal(failed.reason, 'ImagePullStuck');
        assert.match(failed.message ?? '', /stuck \S+ in [1-9] earlier admission\(s\) Kueue ended[;)]/);
        process.stderr.write(
          `[kueue] ${runtime} auth grace 25 s across admissions: failed after ${failedLine.stuckSeconds} s stuck (${failedLine.detail})\n`,
        );
        assert.ok(job.metadata?.annotations?.[ANNOTATIONS.stuck]);
      },
    );

    it("policy explain says Kueue's timeout and each grace not shorter", TIMEOUT, async () => {
      const ns = await env.namespace('kueue-explain');
      const policy = policyFile('defaults: { grace: { permanent: 10s, auth: 20s } }\n');
      const at = `${KUEUE_CONFIG.namespace}/${KUEUE_CONFIG.name}`;
      const file = policy.kind === 'file' ? policy.path : '';
      const out = await runCli(['policy', 'explain', '-n', ns, '--policy-file', file, '--kueue-config', at, '-o', 'text'], {
        env: { KUBECONFIG: env.cluster.kubeconfigPath },
      });
      assert.equal(out.code, 0, out.stderr);
      assert.ok(
        out.stdout.includes(`Kueue:       Kueue's waitForPodsReady timeout: 20s (waitForPodsReady.timeout in ConfigMap ${at})\n`),
        out.stdout,
      );
      const warnings = out.stdout.split('\n').filter((l) => /^ {2}warning: the \w+ grace/.test(l));
      assert.deepEqual(
        warnings.map((w) => /the (\w+) grace/.exec(w)![1]),
        ['auth', 'transient', 'unknown', 'stalled'],
        'permanent 10s is shorter than 20s; auth 20s is not',
      );
    });
  });
