// JobSets (jobset.x-k8s.io) on the real node, with the real JobSet controller (v0.12.0, built from
// its Go module: test/support/jobset.ts) and the sweeper running as the shipped ServiceAccount,
// under the shipped RBAC and admission guard: a JobSet whose image does not exist, restarted by
// its failurePolicy, has every restart failed at once; with the documented failurePolicy rule
// (docs/jobset.md: on the sweeper's message, as the webhook refuses the reason) it ends after its
// first grace.
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import {
  ApiException,
  BatchV1Api,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
  type V1JobSpec,
} from '@kubernetes/client-node';
import { ANNOTATIONS } from '../../src/policy/annotations.ts';
import type { AuditLine } from '../../src/report/audit.ts';
import { useTestCluster } from '../support/hooks.ts';
import { jobSetController } from '../support/jobset.ts';
import { waitFor } from '../support/kubelet.ts';
import { installShipped } from '../support/manifests.ts';
import { nodePodSpec } from '../support/node-cases.ts';
import { nodeSkipReason, runtimeLabel, testNode, testRuntimes, type TestNodeHandle } from '../support/node.ts';
import { policyFile, runSweep, sweeperEvents } from '../support/sweeper.ts';

const skip = nodeSkipReason();
const TIMEOUT = { timeout: 300_000, skip };
const GRACE_SECONDS = 15;
const POLICY = policyFile(`defaults: { grace: { permanent: ${GRACE_SECONDS}s } }\n`);
const MAX_RESTARTS = 3;
const JOBSETS = { group: 'jobset.x-k8s.io', version: 'v1alpha2', plural: 'jobsets' } as const;
const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

interface JobSet {
  metadata?: { name?: string; uid?: string; resourceVersion?: string; annotations?: Record<string, string> };
  status?: { restarts?: number; conditions?: { type: string; status: string; reason?: string; message?: string }[] };
}

let saKc: KubeConfig;
const env = useTestCluster(async (hooks) => {
  if (skip) return;
  saKc = (await installShipped(hooks)).kc;
  const controller = await jobSetController(hooks.kc, hooks.cluster.kubeconfigPath);
  hooks.onCleanup(() => controller.stop());
});

function jobSetManifest(
  name: string,
  node: TestNodeHandle,
  image: string,
  o: { rules?: unknown[]; jobSpec?: Partial<V1JobSpec>; suspend?: boolean } = {},
): object {
  return {
    apiVersion: `${JOBSETS.group}/${JOBSETS.version}`,
    kind: 'JobSet',
    metadata: { name },
    spec: {
      ...(o.suspend ? { suspend: true } : {}),
      failurePolicy: { maxRestarts: MAX_RESTARTS, ...(o.rules ? { rules: o.rules } : {}) },
      replicatedJobs: [
        {
          name: 'worker',
          replicas: 1,
          template: {
            spec: { backoffLimit: 0, ...o.jobSpec, template: { spec: nodePodSpec(node, [{ name: 'main', image, command: ['true'] }]) } },
          },
        },
      ],
    },
  };
}

const jobSets = (kc: KubeConfig) => kc.makeApiClient(CustomObjectsApi);

async function createJobSet(namespace: string, body: object): Promise<JobSet> {
  return (await jobSets(env.kc).createNamespacedCustomObject({ ...JOBSETS, namespace, body })) as JobSet;
}

async function readJobSet(namespace: string, name: string): Promise<JobSet> {
  return (await jobSets(env.kc).getNamespacedCustomObject({ ...JOBSETS, namespace, name })) as JobSet;
}

const failed = (js: JobSet) => js.status?.conditions?.find((c) => c.type === 'Failed' && c.status === 'True');

/** Sweeps the namespace as the shipped ServiceAccount, once a second, until the JobSet is Failed. */
async function sweepUntilFailed(namespace: string, name: string, timeoutMs: number): Promise<{ failedLines: AuditLine[]; jobSet: JobSet }> {
  const failedLines: AuditLine[] = [];
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const run = await runSweep(saKc, { namespaces: [namespace], policy: POLICY });
    assert.equal(run.exitCode, 0, JSON.stringify(run.records.filter((r) => r.level === 'error')));
    failedLines.push(...run.lines.filter((l) => l.outcome === 'failed'));
    const jobSet = await readJobSet(namespace, name);
    if (failed(jobSet)) return { failedLines, jobSet };
    assert.ok(Date.now() < deadline, `JobSet ${name} not Failed after ${timeoutMs} ms; failed so far: ${failedLines.length}`);
    await new Promise((r) => setTimeout(r, 1_000));
  }
}

const seconds = (ms: number) => (ms / 1000).toFixed(1);

for (const runtime of testRuntimes().slice(0, 1))
  describe(`JobSets on the real node: ${runtimeLabel(runtime)}`, () => {
    let node: TestNodeHandle;
    before(async () => {
      if (skip) return;
      node = await testNode(env.cluster.kubeconfigPath, { runtime });
    });

    it(
      `maxRestarts: ${MAX_RESTARTS}, image missing: one grace, then every restart is failed at once; Events name the JobSet`,
      TIMEOUT,
      async () => {
        const ns = await env.namespace('node-jobset');
        const t0 = Date.now();
        const created = await createJobSet(ns, jobSetManifest('train', node, `${node.registry}/team/missing-jobset:1`));
        const { failedLines, jobSet } = await sweepUntilFailed(ns, 'train', 240_000);
        const failedMs = Date.now() - t0;

        assert.equal(jobSet.status?.restarts, MAX_RESTARTS);
        assert.equal(failed(jobSet)?.reason, 'ReachedMaxRestarts');
        assert.equal(failedLines.length, MAX_RESTARTS + 1, JSON.stringify(failedLines.map((l) => l.detail)));
        const [first, ...restarts] = failedLines;
        assert.match(first!.detail, /^stuck past grace/);
        assert.ok(first!.stuckSeconds >= GRACE_SECONDS);
        for (const line of restarts) {
          assert.equal(line.job, 'train-worker-0');
          assert.match(
            line.detail,
            /^grace already spent: imagepull-sweeper failed Job train-worker-0 \(restart attempt \d\) of JobSet train /,
          );
          assert.ok(line.stuckSeconds < GRACE_SECONDS, `a restart failed at once, not after its grace: ${line.stuckSeconds}s`);
        }
        const spent = JSON.parse(jobSet.metadata?.annotations?.[ANNOTATIONS.jobSetSpent] ?? '[]') as {
          restartAttempt: number;
          class: string;
        }[];
        assert.deepEqual(
          spent.map((e) => [e.restartAttempt, e.class]),
          [0, 1, 2, 3].map((a) => [a, 'permanent']),
        );
        assert.equal(jobSet.metadata?.uid, created.metadata?.uid);

        const events = (await sweeperEvents(env.kc, ns)).filter((e) => e.action === 'FailJob');
        assert.equal(events.length, MAX_RESTARTS + 1);
        for (const e of events) assert.match(e.note ?? '', /owners JobSet\/train\b/, 'every Event names the JobSet');
        assert.equal(events.filter((e) => /grace already spent: .* of JobSet train\b/.test(e.note ?? '')).length, MAX_RESTARTS);
        process.stderr.write(
          `[node] ${runtime} JobSet maxRestarts ${MAX_RESTARTS}: Failed ${seconds(failedMs)} s after it was created (grace ${GRACE_SECONDS} s); ` +
            `first Job failed after ${first!.stuckSeconds} s stuck, the restarts after ${restarts.map((l) => `${l.stuckSeconds} s`).join(', ')}\n`,
        );
      },
    );

    it(
      'the JobSet webhook refuses a failurePolicy rule on the reason ImagePullStuck (so docs/jobset.md matches the message)',
      TIMEOUT,
      async () => {
        const ns = await env.namespace('node-jobset-reason');
        const rule = { name: 'imagePullStuck', action: 'FailJobSet', onJobFailureReasons: ['ImagePullStuck'] };
        await assert.rejects(
          createJobSet(ns, jobSetManifest('train', node, `${node.registry}/team/missing-jobset:4`, { rules: [rule] })),
          (error: unknown) => {
            assert.ok(error instanceof ApiException, String(error));
            assert.ok(error.code >= 400 && error.code < 500, `${error.code}`);
            assert.match(String(error.body), /ImagePullStuck/);
            return true;
          },
        );
      },
    );

    it(
      'with the failurePolicy rule of docs/jobset.md (the message pattern): Failed after the first grace, never restarted',
      TIMEOUT,
      async () => {
        const ns = await env.namespace('node-jobset-rule');
        const t0 = Date.now();
        await createJobSet(
          ns,
          jobSetManifest('train', node, `${node.registry}/team/missing-jobset:2`, {
            rules: [{ name: 'imagePullStuck', action: 'FailJobSet', onJobFailureMessagePatterns: ['^imagepull-sweeper: '] }],
          }),
        );
        const { failedLines, jobSet } = await sweepUntilFailed(ns, 'train', 180_000);
        const failedMs = Date.now() - t0;
        assert.equal(jobSet.status?.restarts ?? 0, 0);
        const condition = failed(jobSet)!;
        assert.equal(condition.reason, 'FailJobSetFailurePolicyAction');
        assert.equal(failedLines.length, 1);
        assert.equal(failedLines[0]!.mechanism, 'condition');
        // JobSet v0.12 names the Job in its own words; the Job's condition carries the sweeper's message.
        assert.match(condition.message ?? '', /\(first failed job: train-worker-0\)/);
        const job = await env.kc.makeApiClient(BatchV1Api).readNamespacedJob({ namespace: ns, name: 'train-worker-0' });
        const jobFailed = job.status?.conditions?.find((c) => c.type === 'Failed' && c.status === 'True');
        assert.equal(jobFailed?.reason, 'ImagePullStuck');
        assert.match(jobFailed?.message ?? '', /^imagepull-sweeper: regular container main of pod train-worker-0-0-\S+ waited /);
        process.stderr.write(
          `[node] ${runtime} JobSet with the FailJobSet rule on the message: Failed ${seconds(failedMs)} s after it was created (grace ${GRACE_SECONDS} s), 0 restarts; ` +
            `its condition: ${condition.reason}: ${condition.message}\n`,
        );
      },
    );

    it('the guard lets the sweeper set imagepull-sweeper/spent on a JobSet, and nothing else', TIMEOUT, async () => {
      const ns = await env.namespace('node-jobset-guard');
      await createJobSet(ns, jobSetManifest('idle', node, `${node.registry}/team/missing-jobset:3`, { suspend: true }));
      const api = jobSets(saKc);
      const patch = async (body: object) => {
        const current = await readJobSet(ns, 'idle');
        const withVersion = {
          ...body,
          metadata: { resourceVersion: current.metadata?.resourceVersion, ...(body as { metadata?: object }).metadata },
        };
        return api.patchNamespacedCustomObject({ ...JOBSETS, namespace: ns, name: 'idle', body: withVersion }, mergePatch);
      };
      const GUARD = /imagepull-sweeper guard: jobsets: only the annotation imagepull-sweeper\/spent/;
      const refusal = (error: unknown): string | undefined =>
        error instanceof ApiException && error.code === 403 && GUARD.test(String(error.body)) ? String(error.body) : undefined;
      // The API server loads a changed policy asynchronously: wait until the guard refuses a probe.
      await waitFor(
        () => patch({ metadata: { annotations: { 'example.com/probe': String(Date.now()) } } }).then(() => false, refusal),
        30_000,
        'the guard enforced on JobSets',
      );
      // The JobSet controller may write the JobSet between the read and the patch: read again on 409.
      await waitFor(
        () =>
          patch({ metadata: { annotations: { [ANNOTATIONS.jobSetSpent]: '[]' } } }).then(
            () => true,
            (error: unknown) => {
              if (error instanceof ApiException && error.code === 409) return false;
              throw error;
            },
          ),
        10_000,
        'the spent annotation set',
      );
      const denied = async (what: string, body: object) =>
        assert.rejects(patch(body), (error: unknown) => {
          assert.ok(refusal(error), `${what}: ${error instanceof ApiException ? `${error.code} ${String(error.body)}` : String(error)}`);
          return true;
        });
      await denied('another annotation', { metadata: { annotations: { 'example.com/owner': 'me' } } });
      await denied('the annotation removed', { metadata: { annotations: { [ANNOTATIONS.jobSetSpent]: null } } });
      await denied('a label', { metadata: { labels: { team: 'x' } } });
      await denied('the spec', { spec: { suspend: false } });
      await waitFor(async () => (await readJobSet(ns, 'idle')).metadata?.annotations?.[ANNOTATIONS.jobSetSpent] === '[]', 5_000, 'spent');
    });
  });
