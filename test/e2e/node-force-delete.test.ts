// SPEC "How a Job is failed", step 4, on a real node: a registry that accepts connections and
// never answers (no runtime's progress timeout fires without bytes) keeps the pods of failed Jobs
// Terminating for ever (test/e2e/node-stalled.test.ts). Once forceDeleteAfter has passed, the
// sweep after that deletes the never-started ones with grace period 0, and the Jobs (failed by
// their own condition, or, where a policy engine refuses that, by their podFailurePolicy) are
// Failed within forceDeleteAfter + 30 s of the sweep that failed them. A pod whose
// init container ran is never force-deleted, and the admission guard refuses the sweeper's
// ServiceAccount to. The sweeps run as that ServiceAccount, under the shipped RBAC and guard, on
// every runtime of the run: on the first with the default forceDeleteAfter (60s), on the others
// with 15s (the default needs proving once; the runtimes differ in how pods end, not in time).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { ApiException, BatchV1Api, CoreV1Api, type KubeConfig, type V1Container, type V1Job, type V1Pod } from '@kubernetes/client-node';
import { ApiStatusError } from '../../src/kube/errors.ts';
import { createGateway } from '../../src/kube/gateway.ts';
import type { AuditLine } from '../../src/report/audit.ts';
import { jobManifest } from '../support/fixtures.ts';
import { useTestCluster } from '../support/hooks.ts';
import { waitFor, waitForJobPods } from '../support/kubelet.ts';
import { installShipped } from '../support/manifests.ts';
import { addRegistryHost, hungServer, nodeSkipReason, runtimeLabel, startNode, testRuntimes, type RunningNode } from '../support/node.ts';
import { nodePodSpec } from '../support/node-cases.ts';
import { REFUSED_LABEL, refuseStatusWrites } from '../support/policy-engine.ts';
import {
  assertFailedBySweeper,
  policyFile,
  readJob,
  runSweep,
  sweeperEvents,
  trueCondition,
  waitForJobFailed,
} from '../support/sweeper.ts';

const skip = nodeSkipReason();
let saKc: KubeConfig;
const env = useTestCluster(async (hooks) => {
  if (skip) return;
  saKc = (await installShipped(hooks)).kc;
});
const TIMEOUT = { timeout: 420_000, skip };
/** Stalled pulls are failed after 5 s; confirmWithin keeps its default (5m), forceDeleteAfter too unless given. */
const policy = (forceDeleteAfterS?: number) =>
  policyFile(`defaults: { grace: { stalled: 5s } }\n${forceDeleteAfterS ? `limits: { forceDeleteAfter: ${forceDeleteAfterS}s }\n` : ''}`);
const DEFAULT_FORCE_DELETE_AFTER_S = 60;
const SHORT_FORCE_DELETE_AFTER_S = 15;
const PFP = {
  podFailurePolicy: { rules: [{ action: 'FailJob' as const, onPodConditions: [{ type: 'ImagePullStuck', status: 'True' }] }] },
};
const GUARD_RAN =
  "imagepull-sweeper guard: pods: a grace period shorter than the pod's own only for a pod none of whose containers has ever run";
const FORCED = /force-deleted pod (\S+) \(terminating (?=\d)(?:\d+h)?(?:\d+m)?(?:\d+s)?, no container ever started\)/;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
const refused = (job: V1Job): V1Job => ({ ...job, metadata: { ...job.metadata, labels: { [REFUSED_LABEL]: 'true' } } });

type Hung = Awaited<ReturnType<typeof hungServer>>;

function isTrue(pod: V1Pod, type: string): boolean {
  return pod.status?.conditions?.some((c) => c.type === type && c.status === 'True') ?? false;
}

function byJob(lines: AuditLine[]): Record<string, AuditLine> {
  return Object.fromEntries(lines.filter((l) => l.job).map((l) => [l.job!, l]));
}

/** Creates the Job and waits until its pod is in the state `ready` describes; returns the pod. */
async function createJob(kc: KubeConfig, ns: string, job: V1Job, ready: (pod: V1Pod) => boolean, what: string): Promise<V1Pod> {
  await kc.makeApiClient(BatchV1Api).createNamespacedJob({ namespace: ns, body: job });
  const core = kc.makeApiClient(CoreV1Api);
  const [created] = await waitForJobPods(core, ns, job.metadata!.name!);
  return waitFor(
    async () => {
      const pod = await core.readNamespacedPod({ namespace: ns, name: created!.metadata!.name! });
      return isTrue(pod, 'PodReadyToStartContainers') && ready(pod) ? pod : undefined;
    },
    90_000,
    `Job ${ns}/${job.metadata!.name}: ${what}`,
    200,
  );
}

const waiting = (list: 'init' | 'regular', name: string, reason: string) => (pod: V1Pod) =>
  (list === 'init' ? pod.status?.initContainerStatuses : pod.status?.containerStatuses)?.find((s) => s.name === name)?.state?.waiting
    ?.reason === reason;

/**
 * The scenario on one node (started by `start`, with pulls in parallel so the pod whose init
 * container runs is not queued behind the hung pulls); callable once per runtime. Without
 * `forceDeleteAfterS`, the policy leaves forceDeleteAfter at its default.
 */
function forceDeleteOn(
  label: string,
  start: (kubeconfigPath: string) => Promise<RunningNode>,
  kubeletMayEndThem: boolean,
  forceDeleteAfterS?: number,
): void {
  const POLICY = policy(forceDeleteAfterS);
  const afterS = forceDeleteAfterS ?? DEFAULT_FORCE_DELETE_AFTER_S;
  const failedWithinMs = (afterS + 30) * 1000;
  const title = `force-deleting never-started pods of failed Jobs (${label}, a registry that never answers, forceDeleteAfter ${forceDeleteAfterS ? `${afterS}s` : 'default'})`;
  describe(title, { timeout: 900_000 }, () => {
    let node: RunningNode | undefined;
    let hung: Hung | undefined;
    before(async () => {
      if (skip) return;
      hung = await hungServer();
      node = await start(env.cluster.kubeconfigPath);
      await addRegistryHost(node, hung.host);
    });
    after(async () => {
      // Closing the registry first ends the hung pulls, so the kubelet can tear the pods down.
      await hung?.close();
      await node?.stop();
    });

    it(
      `its own condition and the podFailurePolicy fallback: Failed within ${afterS + 30} s of the sweep that failed them; a pod whose init container ran is never forced`,
      TIMEOUT,
      async () => {
        const ns = await env.namespace('node-force');
        // A policy engine refuses the pfp Job's status write: it takes its pod failure policy.
        await refuseStatusWrites(env, ns, { onlyLabelled: true });
        const n = node!;
        const image = (repo: string): string => `${hung!.host}/team/${repo}:1`;
        const job = (
          name: string,
          containers: V1Container[],
          initContainers?: V1Container[],
          spec: Partial<NonNullable<V1Job['spec']>> = {},
        ): V1Job => {
          const j = jobManifest(name, containers[0]!.image!, spec);
          j.spec!.template.spec = nodePodSpec(n, containers, initContainers ? { initContainers } : {});
          return j;
        };
        const setupDone = (pod: V1Pod) =>
          pod.status?.initContainerStatuses?.find((s) => s.name === 'setup')?.state?.terminated?.exitCode === 0;
        const pods = await Promise.all([
          createJob(
            env.kc,
            ns,
            job('plain', [{ name: 'main', image: image('plain') }]),
            waiting('regular', 'main', 'ContainerCreating'),
            'main pulling',
          ),
          createJob(
            env.kc,
            ns,
            refused(job('pfp', [{ name: 'main', image: image('pfp') }], undefined, PFP)),
            waiting('regular', 'main', 'ContainerCreating'),
            'main pulling',
          ),
          createJob(
            env.kc,
            ns,
            job('init-hung', [{ name: 'main', image: n.pauseImage }], [{ name: 'fetch', image: image('init') }]),
            waiting('init', 'fetch', 'PodInitializing'),
            'init container fetch pulling',
          ),
          createJob(
            env.kc,
            ns,
            job(
              'ran',
              [{ name: 'main', image: image('after-setup') }],
              [{ name: 'setup', image: n.pauseImage, command: ['/pause', '1s'] }],
            ),
            // After init containers the kubelet leaves a regular container it has not created yet in PodInitializing.
            (pod) => setupDone(pod) && waiting('regular', 'main', 'PodInitializing')(pod),
            'init container setup completed, main pulling',
          ),
        ]);
        const podOf = Object.fromEntries(['plain', 'pfp', 'init-hung', 'ran'].map((j, i) => [j, pods[i]!.metadata!]));
        await sleep(6_000); // past the 5 s grace

        const t0 = Date.now();
        const first = await runSweep(saKc, { namespaces: [ns], policy: POLICY });
        assert.equal(first.exitCode, 0, JSON.stringify(first.records, null, 1));
        const failed = byJob(first.lines);
        // The pfp Job's status write is refused (a policy engine): its pod failure policy instead.
        assert.deepEqual(
          Object.keys(failed)
            .sort()
            .map((j) => [j, failed[j]!.outcome, failed[j]!.mechanism?.split(' ')[0]]),
          [
            ['init-hung', 'failed', 'condition'],
            ['pfp', 'failed', 'podFailurePolicy'],
            ['plain', 'failed', 'condition'],
            ['ran', 'failed', 'condition'],
          ],
        );

        // The pods stay Terminating while their pulls hang; the pod failure policy Job is not even
        // given up on (the Job controller waits for a Failed pod).
        const core = env.kc.makeApiClient(CoreV1Api);
        const batch = env.kc.makeApiClient(BatchV1Api);
        for (const name of ['plain', 'init-hung', 'ran']) {
          await waitFor(
            async () => trueCondition(await readJob(env.kc, ns, name), 'FailureTarget'),
            30_000,
            `Job ${name} FailureTarget`,
            200,
          );
        }
        for (const name of Object.keys(podOf)) {
          const pod = await waitFor(
            async () => {
              const p = await core.readNamespacedPod({ namespace: ns, name: podOf[name]!.name! });
              return p.metadata?.deletionTimestamp ? p : undefined;
            },
            30_000,
            `pod of ${name} Terminating`,
            200,
          );
          assert.equal(pod.status?.phase, 'Pending', `${name}: the kubelet cannot end the pod`);
        }
        assert.equal(trueCondition(await readJob(env.kc, ns, 'pfp'), 'FailureTarget'), undefined);
        const failedAt = new Date((await readJob(env.kc, ns, 'plain')).metadata!.annotations!['imagepull-sweeper/failed-at']!);

        // Before forceDeleteAfter: nothing is forced.
        assert.ok(Date.now() < failedAt.getTime() + afterS * 1000, `the sweep before forceDeleteAfter (${afterS}s) came too late`);
        const early = await runSweep(saKc, { namespaces: [ns], policy: POLICY });
        assert.deepEqual(
          Object.values(byJob(early.lines))
            .map((l) => [l.job, l.outcome])
            .sort(),
          [
            ['init-hung', 'skipped'],
            ['pfp', 'skipped'],
            ['plain', 'skipped'],
            ['ran', 'skipped'],
          ],
        );

        // The CronJob's next run, once forceDeleteAfter has passed since failed-at (RFC 3339,
        // whole seconds): first as a dry run, which says would and changes nothing.
        await sleep(Math.max(0, failedAt.getTime() + (afterS + 1) * 1000 - Date.now()));
        // Never-started pods still Terminating now; containerd 2 ends such pods itself (the kubelet
        // gets past the hung pull), and their Jobs are then Failed without the sweeper.
        const podGone = (name: string) =>
          core.readNamespacedPod({ namespace: ns, name: podOf[name]!.name! }).then(
            () => false,
            (e: unknown) => e instanceof ApiException && e.code === 404,
          );
        const stuck: string[] = [];
        for (const name of ['plain', 'pfp', 'init-hung']) if (!(await podGone(name))) stuck.push(name);
        if (!kubeletMayEndThem) assert.deepEqual(stuck, ['plain', 'pfp', 'init-hung'], 'the kubelet cannot end a pod whose pull hangs');
        const dry = await runSweep(saKc, { namespaces: [ns], policy: POLICY, dryRun: true });
        const planned = byJob(dry.lines);
        for (const name of ['plain', 'pfp', 'init-hung']) if (!stuck.includes(name)) assert.equal(planned[name], undefined, name);
        for (const name of stuck) {
          assert.equal(
            planned[name]?.outcome,
            'would-retry',
            `${name}: ${JSON.stringify(dry.lines.map((l) => [l.job, l.outcome, l.detail]))}`,
          );
          assert.match(
            planned[name]!.detail,
            new RegExp(`would force-delete pod ${podOf[name]!.name} \\(terminating \\d+m?\\d*s?, no container ever started\\)`),
            name,
          );
        }
        // The pod whose init container ran is never forced; a kubelet may still end it by its own
        // grace (seen on containerd 2 and CRI-O), and then its Job is no longer pending.
        const ranPod = async (): Promise<V1Pod | undefined> =>
          core.readNamespacedPod({ namespace: ns, name: podOf.ran!.name! }).catch((e: unknown) => {
            if (e instanceof ApiException && e.code === 404) return undefined;
            throw e;
          });
        if (planned.ran) assert.equal(planned.ran.outcome, 'skipped');
        for (const name of [...stuck, 'ran']) {
          if (name === 'ran' && !(await ranPod())) continue;
          const p = await core.readNamespacedPod({ namespace: ns, name: podOf[name]!.name! });
          assert.equal(p.metadata?.uid, podOf[name]!.uid, `${name}: the dry run deleted nothing`);
          assert.notEqual(p.metadata?.deletionGracePeriodSeconds, 0, name);
        }

        const tForce = Date.now();
        const second = await runSweep(saKc, { namespaces: [ns], policy: POLICY });
        assert.equal(second.exitCode, 0, JSON.stringify(second.records, null, 1));
        assert.equal(second.summary?.actionErrors, 0);
        const forced = byJob(second.lines);
        for (const name of stuck) {
          assert.equal(forced[name]!.outcome, 'retried', name);
          assert.equal(FORCED.exec(forced[name]!.detail)?.[1], podOf[name]!.name, `${name}: ${forced[name]!.detail}`);
        }
        // Not given up on: its FailureTarget too, and where that is refused again, its deadline.
        if (stuck.includes('pfp')) assert.match(forced.pfp!.mechanism ?? '', /^activeDeadlineSeconds \(the status write was refused /);
        if (stuck.includes('plain')) assert.equal(forced.plain!.mechanism, null, 'already given up on: only the pod');
        if (forced.ran) assert.equal(forced.ran.outcome, 'skipped');
        if (forced.ran)
          assert.match(
            forced.ran.detail,
            new RegExp(`pod ${podOf.ran!.name} terminating \\S+, not force-deleted: its init container setup has run`),
          );

        const failedMs: Record<string, number> = {};
        for (const name of ['plain', 'pfp', 'init-hung']) {
          const j = await waitForJobFailed(env.kc, ns, name, failedWithinMs - (Date.now() - t0));
          failedMs[name] = Date.now() - t0;
          if (name === 'pfp')
            assert.equal(trueCondition(j, 'Failed')?.reason, stuck.includes(name) ? 'DeadlineExceeded' : 'PodFailurePolicy');
          else assertFailedBySweeper(j);
          assert.ok(failedMs[name]! <= failedWithinMs, `${name} Failed ${failedMs[name]} ms after the sweep that failed it`);
          await assert.rejects(
            core.readNamespacedPod({ namespace: ns, name: podOf[name]!.name! }),
            (e: unknown) => e instanceof ApiException && e.code === 404,
          );
        }
        const events = await sweeperEvents(env.kc, ns);
        const forceEvents = events.filter((e) => e.note?.startsWith('Failing Job: force-deleted pod'));
        assert.deepEqual(
          forceEvents.map((e) => [e.regarding?.name, e.related?.name, e.action, e.type]).sort(),
          [...stuck].sort().map((name) => [name, podOf[name]!.name, 'FailJob', 'Warning']),
        );

        // The pod whose init container ran: still there, still Terminating; the guard refuses the
        // sweeper's ServiceAccount a grace-0 delete of it.
        const ran = await ranPod();
        if (ran) {
          assert.ok(ran.metadata?.deletionTimestamp);
          assert.equal(ran.metadata?.deletionGracePeriodSeconds, ran.spec?.terminationGracePeriodSeconds, 'its own grace, not 0');
          assert.ok(ran.metadata!.deletionGracePeriodSeconds! > 0);
          assert.equal(trueCondition(await batch.readNamespacedJob({ namespace: ns, name: 'ran' }), 'Failed'), undefined);
          await assert.rejects(
            createGateway(saKc).deletePod(ns, podOf.ran!.name!, podOf.ran!.uid!, undefined, { gracePeriodSeconds: 0 }),
            (e: unknown) => {
              assert.ok(e instanceof ApiStatusError && e.code === 403 && e.body.includes(GUARD_RAN), String(e));
              return true;
            },
          );
        }

        // Once more: nothing is done twice; the finished Jobs are settled, the pod that ran is left.
        const ranBefore = await ranPod();
        const third = await runSweep(saKc, { namespaces: [ns], policy: POLICY });
        assert.equal(third.exitCode, 0);
        assert.deepEqual(
          third.lines.map((l) => [l.job, l.outcome]),
          ranBefore ? [['ran', 'skipped']] : [],
        );
        assert.equal((await sweeperEvents(env.kc, ns)).length, events.length);
        const ranAfter = await ranPod();
        if (ranAfter) assert.ok(ranAfter.metadata?.deletionTimestamp);
        process.stderr.write(
          `[force-delete] ${label}: force-deleted ${JSON.stringify(stuck)}; sweep at 0 ms, force-delete sweep at ${tForce - t0} ms; Failed at ${JSON.stringify(failedMs)} ms; ` +
            `the pod whose init container ran ${ranAfter ? 'still Terminating' : 'ended by the kubelet on its own grace'} at ${Date.now() - t0} ms\n`,
        );
      },
    );
  });
}

testRuntimes().forEach((runtime, i) => {
  const start = (kubeconfigPath: string) => startNode({ kubeconfigPath, serializeImagePulls: false, runtime });
  forceDeleteOn(
    `${runtimeLabel(runtime)}, private node`,
    start,
    runtime === 'containerd2',
    i === 0 ? undefined : SHORT_FORCE_DELETE_AFTER_S,
  );
});
