// The admission guard (manifests/guard.yaml) on the real API server, with a token of the shipped
// ServiceAccount: a sweep still does everything it does (a Job's own condition, and the fallbacks
// where a policy engine refuses that, Events, annotations), and every other write that RBAC lets
// through is refused with the guard's message: the one status write allowed is exactly one
// FailureTarget with reason ImagePullStuck.
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import {
  ApiException,
  AppsV1Api,
  CoordinationV1Api,
  BatchV1Api,
  CoreV1Api,
  EventsV1Api,
  PatchStrategy,
  RbacAuthorizationV1Api,
  setHeaderOptions,
  type KubeConfig,
  V1MicroTime,
  type V1OwnerReference,
  type V1Pod,
} from '@kubernetes/client-node';
import { assertGuardDenies, guardEnforced, installGuardedSweeper } from '../support/guard.ts';
import { useTestCluster } from '../support/hooks.ts';
import { addPodCondition, waitFor, waitForJobPods } from '../support/kubelet.ts';
import { INSTALL_NS, SERVICE_ACCOUNT } from '../support/manifests.ts';
import { refuseStatusWrites } from '../support/policy-engine.ts';
import {
  assertFailedBySweeper,
  createStuckJob,
  policyFile,
  readJob,
  runSweep,
  sweeperEvents,
  trueCondition,
  waitForJobFailed,
} from '../support/sweeper.ts';
import { jobManifest } from '../support/fixtures.ts';
import { createGateway } from '../../src/kube/gateway.ts';

const TIMEOUT = { timeout: 180_000 };
const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const jsonPatch = setHeaderOptions('Content-Type', PatchStrategy.JsonPatch);
const PFP_SPEC = {
  podFailurePolicy: { rules: [{ action: 'FailJob' as const, onPodConditions: [{ type: 'ImagePullStuck', status: 'True' }] }] },
};

let kc: KubeConfig;
let saKc: KubeConfig;
const env = useTestCluster(async (hooks) => {
  kc = hooks.kc;
  saKc = await installGuardedSweeper(hooks);
});

/** A pod with no controller owner, or owned by a ReplicaSet of a Deployment. */
async function createPod(ns: string, name: string, ownerReferences?: V1OwnerReference[]): Promise<V1Pod> {
  return kc.makeApiClient(CoreV1Api).createNamespacedPod({
    namespace: ns,
    body: { metadata: { name, ownerReferences }, spec: { containers: [{ name: 'main', image: 'registry.invalid/app:1' }] } },
  });
}

describe('the admission guard', () => {
  let ns: string;
  before(async () => {
    ns = await env.namespace('guard');
    await guardEnforced(kc, saKc, ns);
  });

  it('lets a sweep do all it does: its own condition, the fallbacks, report-only, Events and annotations', TIMEOUT, async () => {
    const failNs = await env.namespace('guard-fail');
    // A policy engine refuses the status write here: the deadline and the pod failure policy.
    const fallbackNs = await env.namespace('guard-fallback');
    await refuseStatusWrites(env, fallbackNs);
    const reportNs = await env.namespace('guard-report');
    await createStuckJob(kc, failNs, 'plain', { stuckFor: 9999 });
    await createStuckJob(kc, failNs, 'pfp', { stuckFor: 9999, spec: PFP_SPEC });
    await createStuckJob(kc, fallbackNs, 'deadline', { stuckFor: 9999 });
    await createStuckJob(kc, fallbackNs, 'pfp', { stuckFor: 9999, spec: PFP_SPEC });
    await createStuckJob(kc, reportNs, 'watched', { stuckFor: 9999 });
    const policy = policyFile(`rules:\n  - name: report-only\n    namespaces: ["${reportNs}"]\n    action: report\n`);

    const namespaces = [failNs, fallbackNs, reportNs];
    const run = await runSweep(saKc, { namespaces, policy });
    const detail = JSON.stringify(run.records, null, 1);
    assert.equal(run.exitCode, 0, detail);
    assert.deepEqual(
      run.lines
        .map((l) => [
          l.namespace === failNs ? 'own' : l.namespace === fallbackNs ? 'fallback' : 'report',
          l.job,
          l.outcome,
          l.mechanism?.split(' ')[0] ?? null,
        ])
        .sort(),
      [
        ['fallback', 'deadline', 'failed', 'activeDeadlineSeconds'],
        ['fallback', 'pfp', 'failed', 'podFailurePolicy'],
        ['own', 'pfp', 'failed', 'condition'],
        ['own', 'plain', 'failed', 'condition'],
        ['report', 'watched', 'reported', null],
      ],
      detail,
    );
    assert.equal(run.summary?.actionErrors, 0, detail);

    const failed = {
      plain: await waitForJobFailed(kc, failNs, 'plain'),
      pfp: await waitForJobFailed(kc, failNs, 'pfp'),
      deadline: await waitForJobFailed(kc, fallbackNs, 'deadline'),
      fallbackPfp: await waitForJobFailed(kc, fallbackNs, 'pfp'),
    };
    assertFailedBySweeper(failed.plain);
    assertFailedBySweeper(failed.pfp);
    assert.equal(trueCondition(failed.deadline, 'Failed')?.reason, 'DeadlineExceeded');
    assert.equal(trueCondition(failed.fallbackPfp, 'Failed')?.reason, 'PodFailurePolicy');
    for (const job of Object.values(failed)) {
      const annotations = job.metadata?.annotations ?? {};
      for (const key of ['failed-at', 'reason', 'message'])
        assert.ok(annotations[`imagepull-sweeper/${key}`], `${job.metadata?.name}: ${key}`);
    }
    assert.ok((await readJob(kc, reportNs, 'watched')).metadata?.annotations?.['imagepull-sweeper/reported-at']);
    for (const ns of [failNs, fallbackNs]) {
      const failEvents = await sweeperEvents(kc, ns);
      assert.equal(failEvents.filter((e) => e.action === 'FailJob').length, 2, ns);
    }
    assert.deepEqual(
      (await sweeperEvents(kc, reportNs)).map((e) => `${e.regarding?.name} ${e.action}`),
      ['watched Report'],
    );

    // A second sweep takes the pending labels off the finished Jobs, and is not refused.
    const again = await runSweep(saKc, { namespaces, policy });
    assert.equal(again.exitCode, 0, JSON.stringify(again.records, null, 1));
    for (const job of Object.values(failed)) {
      const { namespace, name } = job.metadata!;
      assert.equal((await readJob(kc, namespace!, name!)).metadata?.labels?.['imagepull-sweeper/pending'], undefined, name ?? '');
    }
  });

  it("refuses Job status writes other than the sweeper's one FailureTarget (reason ImagePullStuck) and its claim", TIMEOUT, async () => {
    const batch = kc.makeApiClient(BatchV1Api);
    const saBatch = saKc.makeApiClient(BatchV1Api);
    const smp = setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch);
    const rule = 'jobs/status: only one FailureTarget condition';
    // Suspended: no pod, and the Job controller does not finish it whatever its conditions.
    const held = async (name: string, extra: { annotations?: Record<string, string>; managedBy?: string } = {}) => {
      const body = jobManifest(name, 'registry.invalid/app:1', {
        suspend: true,
        ...(extra.managedBy ? { managedBy: extra.managedBy } : {}),
      });
      body.metadata = { ...body.metadata, labels: { team: 'a' }, annotations: extra.annotations };
      await batch.createNamespacedJob({ namespace: ns, body });
      return name;
    };
    const target = (reason = 'ImagePullStuck', status = 'True') => ({
      type: 'FailureTarget',
      status,
      reason,
      message: 'imagepull-sweeper: x',
    });
    const status = (name: string, body: object) => () => saBatch.patchNamespacedJobStatus({ namespace: ns, name, body }, smp);
    const job = await held('status-target');

    // A Complete or Failed condition: the API server's own validation refuses these first (422).
    for (const type of ['Complete', 'Failed'])
      await assert.rejects(
        status(job, { status: { conditions: [{ type, status: 'True', reason: 'ImagePullStuck' }] } }),
        (e: unknown) => e instanceof ApiException && [403, 422].includes(e.code),
        type,
      );
    await assertGuardDenies('another condition type', rule, status(job, { status: { conditions: [{ type: 'Other', status: 'True' }] } }));
    await assertGuardDenies(
      'a FailureTarget of another reason',
      rule,
      status(job, { status: { conditions: [target('BackoffLimitExceeded')] } }),
    );
    await assertGuardDenies('a FailureTarget False', rule, status(job, { status: { conditions: [target('ImagePullStuck', 'False')] } }));
    await assertGuardDenies('two conditions', rule, status(job, { status: { conditions: [target(), { type: 'Other', status: 'True' }] } }));
    await assertGuardDenies('a counter', rule, status(job, { status: { failed: 3, conditions: [target()] } }));
    await assertGuardDenies(
      'another label',
      rule,
      status(job, { metadata: { labels: { team: 'b' } }, status: { conditions: [target()] } }),
    );
    await assertGuardDenies(
      'another annotation',
      rule,
      status(job, { metadata: { annotations: { 'owner/x': 'y' } }, status: { conditions: [target()] } }),
    );
    await assertGuardDenies(
      'no condition added (a label only)',
      rule,
      status(job, { metadata: { labels: { 'imagepull-sweeper/pending': 'true' } } }),
    );
    // The Job controller's Suspended condition comes a moment after the Job: a JSON patch removing
    // a condition that is not there yet is refused by the API server (422), not by the guard.
    await waitFor(
      async () => ((await readJob(kc, ns, job)).status?.conditions ?? []).some((c) => c.type === 'Suspended'),
      30_000,
      `the Job controller's Suspended condition on ${job}`,
      100,
    );
    await assertGuardDenies("removing the Job controller's condition", rule, () =>
      saBatch.patchNamespacedJobStatus({ namespace: ns, name: job, body: [{ op: 'remove', path: '/status/conditions/0' }] }, jsonPatch),
    );
    // A Job already given up on: the admin's FailureTarget first (nobody else is fenced).
    const failing = await held('status-failing');
    await batch.patchNamespacedJobStatus(
      { namespace: ns, name: failing, body: { status: { conditions: [target('DeadlineExceeded')] } } },
      smp,
    );
    await assertGuardDenies('a Job already failing', rule, status(failing, { status: { conditions: [target()] } }));
    const other = await held('status-managed', { managedBy: 'example.com/other-controller' });
    await assertGuardDenies('a Job another controller runs', rule, status(other, { status: { conditions: [target()] } }));
    const ignored = await held('status-ignored', { annotations: { 'imagepull-sweeper/ignore': 'true' } });
    await assertGuardDenies(
      'an ignored Job',
      'jobs, cronjobs: never one annotated imagepull-sweeper/ignore',
      status(ignored, { status: { conditions: [target()] } }),
    );

    // What the sweeper sends, as its gateway sends it: the claim and the FailureTarget, conditional.
    const current = await batch.readNamespacedJob({ namespace: ns, name: job });
    await createGateway(saKc).patchJobStatus(ns, job, {
      metadata: {
        resourceVersion: current.metadata!.resourceVersion,
        annotations: { 'imagepull-sweeper/failed-at': '2026-12-05T00:00:00Z', 'imagepull-sweeper/claim': 'guard-e2e' },
        labels: { 'imagepull-sweeper/pending': 'true' },
      },
      status: { conditions: [target()] },
    });
    const written = await batch.readNamespacedJob({ namespace: ns, name: job });
    assert.equal(trueCondition(written, 'FailureTarget')?.reason, 'ImagePullStuck');
    assert.equal(written.metadata?.labels?.['imagepull-sweeper/pending'], 'true');
    assert.equal(written.metadata?.labels?.team, 'a');
    assert.equal(written.metadata?.annotations?.['imagepull-sweeper/claim'], 'guard-e2e');
    assert.equal(written.spec?.suspend, true, 'nothing of the spec');
  });

  it("refuses pod status writes other than one added condition on a Job's pod", TIMEOUT, async () => {
    const saCore = saKc.makeApiClient(CoreV1Api);
    const { pod } = await createStuckJob(kc, ns, 'stuck', { stuckFor: 10 });
    const condition = (type: string, status: 'True' | 'False' = 'True') => ({ type, status, reason: 'ImagePullBackOff' });
    const rule = 'pods/status: only one condition may be added';

    await assertGuardDenies("a Ready condition on a Job's pod", rule, () => addPodCondition(saCore, ns, pod, condition('Ready')));
    await assertGuardDenies('a ContainersReady condition', rule, () => addPodCondition(saCore, ns, pod, condition('ContainersReady')));
    await assertGuardDenies('a False condition', rule, () => addPodCondition(saCore, ns, pod, condition('ImagePullStuck', 'False')));
    await assertGuardDenies('the phase', rule, () =>
      saCore.patchNamespacedPodStatus({ namespace: ns, name: pod, body: { status: { phase: 'Failed' } } }, mergePatch),
    );
    await assertGuardDenies('two conditions at once', rule, () =>
      saCore.patchNamespacedPodStatus(
        { namespace: ns, name: pod, body: { status: { conditions: [condition('A'), condition('B')] } } },
        setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch),
      ),
    );
    await assertGuardDenies("removing the kubelet's conditions", rule, () =>
      saCore.patchNamespacedPodStatus({ namespace: ns, name: pod, body: [{ op: 'remove', path: '/status/conditions/0' }] }, jsonPatch),
    );
    // What the sweeper does is allowed, also when repeated (a retried request).
    await addPodCondition(saCore, ns, pod, condition('ImagePullStuck'));
    const marked = await kc.makeApiClient(CoreV1Api).readNamespacedPod({ namespace: ns, name: pod });
    const mark = marked.status!.conditions!.find((c) => c.type === 'ImagePullStuck')!;
    await saCore.patchNamespacedPodStatus(
      { namespace: ns, name: pod, body: { status: { conditions: [mark] } } },
      setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch),
    );

    // Pods that are not a Job's.
    const apps = kc.makeApiClient(AppsV1Api);
    const deployment = await apps.createNamespacedDeployment({
      namespace: ns,
      body: {
        metadata: { name: 'web' },
        spec: {
          selector: { matchLabels: { app: 'web' } },
          template: { metadata: { labels: { app: 'web' } }, spec: { containers: [{ name: 'c', image: 'x' }] } },
        },
      },
    });
    const replicaSet = await apps.createNamespacedReplicaSet({
      namespace: ns,
      body: {
        metadata: {
          name: 'web-1',
          ownerReferences: [{ apiVersion: 'apps/v1', kind: 'Deployment', name: 'web', uid: deployment.metadata!.uid!, controller: true }],
        },
        spec: {
          replicas: 0,
          selector: { matchLabels: { app: 'web' } },
          template: { metadata: { labels: { app: 'web' } }, spec: { containers: [{ name: 'c', image: 'x' }] } },
        },
      },
    });
    await createPod(ns, 'web-1-abcde', [
      { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-1', uid: replicaSet.metadata!.uid!, controller: true },
    ]);
    await createPod(ns, 'bare');
    for (const name of ['web-1-abcde', 'bare']) {
      await assertGuardDenies(`a custom condition on pod ${name}`, 'pods/status: only a pod whose controller is a Job', () =>
        addPodCondition(saCore, ns, name, condition('ImagePullStuck')),
      );
      await assertGuardDenies(`deleting pod ${name}`, 'pods: only a pod whose controller is a Job may be deleted', () =>
        saCore.deleteNamespacedPod({ namespace: ns, name }),
      );
    }

    // Nobody else is affected: the admin may still write a Ready condition.
    await addPodCondition(kc.makeApiClient(CoreV1Api), ns, 'bare', condition('Ready'));
  });

  it("admits the sweeper's grace-0 delete of a Job's pod none of whose containers ran, as its gateway sends it", TIMEOUT, async () => {
    // Bound to a node with no kubelet: the pod keeps its 30 s grace (an unbound pod gets 0 from
    // the API server anyway) and no container status, as while its first pull hangs. A pod one of
    // whose containers ran is refused: test/e2e/node-force-delete.test.ts (a real kubelet's status).
    const core = kc.makeApiClient(CoreV1Api);
    const bound = jobManifest('bound', 'registry.invalid/app:1');
    bound.spec!.template.spec!.nodeName = 'no-kubelet-here';
    await kc.makeApiClient(BatchV1Api).createNamespacedJob({ namespace: ns, body: bound });
    const [pod] = await waitForJobPods(core, ns, 'bound');
    const { name, uid } = pod!.metadata!;
    const sa = createGateway(saKc);
    await sa.deletePod(ns, name!, uid!);
    const graceful = await core.readNamespacedPod({ namespace: ns, name: name! });
    assert.equal(graceful.metadata?.deletionGracePeriodSeconds, 30, "a plain delete keeps the pod's own grace");
    await sa.deletePod(ns, name!, uid!, undefined, { gracePeriodSeconds: 0 });
    await waitFor(
      async () =>
        core.readNamespacedPod({ namespace: ns, name: name! }).then(
          () => false,
          (e: unknown) => e instanceof ApiException && e.code === 404,
        ),
      30_000,
      `pod ${name} gone after the grace-0 delete`,
    );
  });

  it('refuses Job changes other than its own annotations and activeDeadlineSeconds', TIMEOUT, async () => {
    const batch = kc.makeApiClient(BatchV1Api);
    const saBatch = saKc.makeApiClient(BatchV1Api);
    const rule = 'jobs: only imagepull-sweeper/ annotations';
    await batch.createNamespacedJob({
      namespace: ns,
      body: {
        ...jobManifest('held', 'registry.invalid/app:1', { suspend: true }),
        metadata: { name: 'held', labels: { team: 'a' }, annotations: { 'owner/note': 'keep', 'imagepull-sweeper/grace': '1m' } },
      },
    });
    const patch = (body: object) => () => saBatch.patchNamespacedJob({ namespace: ns, name: 'held', body }, mergePatch);

    await assertGuardDenies('labels', rule, patch({ metadata: { labels: { team: 'b' } } }));
    await assertGuardDenies('parallelism', rule, patch({ spec: { parallelism: 5 } }));
    await assertGuardDenies('removing another annotation', rule, patch({ metadata: { annotations: { 'owner/note': null } } }));
    await assertGuardDenies('adding another annotation', rule, patch({ metadata: { annotations: { 'owner/other': 'x' } } }));
    await assertGuardDenies(
      "the owner's grace annotation",
      rule,
      patch({ metadata: { annotations: { 'imagepull-sweeper/grace': '1h' } } }),
    );
    await assertGuardDenies('resuming the Job', rule, patch({ spec: { suspend: false } }));
    // A suspended Job's pod template may change (scheduling fields): not by the sweeper.
    await assertGuardDenies('the pod template', rule, patch({ spec: { template: { spec: { nodeSelector: { evil: 'yes' } } } } }));
    // The image is immutable for everyone; the API server's own validation refuses it first.
    await assert.rejects(
      saBatch.patchNamespacedJob(
        { namespace: ns, name: 'held', body: [{ op: 'replace', path: '/spec/template/spec/containers/0/image', value: 'evil:1' }] },
        jsonPatch,
      ),
      (error: unknown) => error instanceof ApiException && error.code >= 400,
    );

    await assertGuardDenies('removing another label', rule, patch({ metadata: { labels: { team: null } } }));
    // What the sweeper does is allowed: its annotations and pending label, the deadline, and
    // releasing its claim.
    await patch({
      metadata: { annotations: { 'imagepull-sweeper/failed-at': '2026-11-30T00:00:00Z' }, labels: { 'imagepull-sweeper/pending': 'true' } },
      spec: { activeDeadlineSeconds: 1 },
    })();
    await patch({ metadata: { annotations: { 'imagepull-sweeper/failed-at': null }, labels: { 'imagepull-sweeper/pending': null } } })();
    const job = await batch.readNamespacedJob({ namespace: ns, name: 'held' });
    assert.equal(job.spec?.template.spec?.containers[0]?.image, 'registry.invalid/app:1');
    assert.deepEqual(job.metadata?.labels, { team: 'a' });
    assert.deepEqual(job.metadata?.annotations, { 'owner/note': 'keep', 'imagepull-sweeper/grace': '1m' });
    assert.equal(job.spec?.parallelism, 1);

    // A Job its owner told the sweeper to ignore is not touched at all.
    await batch.createNamespacedJob({
      namespace: ns,
      body: {
        ...jobManifest('ignored', 'registry.invalid/app:1'),
        metadata: { name: 'ignored', annotations: { 'imagepull-sweeper/ignore': 'true' } },
      },
    });
    await assertGuardDenies('failing an ignored Job', 'jobs, cronjobs: never one annotated imagepull-sweeper/ignore', () =>
      saBatch.patchNamespacedJob({ namespace: ns, name: 'ignored', body: { spec: { activeDeadlineSeconds: 1 } } }, mergePatch),
    );
  });

  describe('with more RBAC than the shipped ClusterRole grants', () => {
    // The guard does not rely on the RBAC staying narrow: grant extra verbs for this test only.
    before(async () => {
      const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
      await rbac.createNamespacedRole({
        namespace: ns,
        body: {
          metadata: { name: 'guard-extra' },
          rules: [
            { apiGroups: ['batch'], resources: ['cronjobs'], verbs: ['get', 'patch'] },
            { apiGroups: [''], resources: ['configmaps', 'pods/eviction'], verbs: ['create'] },
            { apiGroups: [''], resources: ['events'], verbs: ['create'] },
          ],
        },
      });
      await rbac.createNamespacedRoleBinding({
        namespace: ns,
        body: {
          metadata: { name: 'guard-extra' },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'guard-extra' },
          subjects: [{ kind: 'ServiceAccount', name: SERVICE_ACCOUNT, namespace: INSTALL_NS }],
        },
      });
    });

    it('CronJobs: only suspending (and its own annotations)', TIMEOUT, async () => {
      const batch = kc.makeApiClient(BatchV1Api);
      const saBatch = saKc.makeApiClient(BatchV1Api);
      const template = jobManifest('nightly', 'registry.invalid/app:1').spec!;
      await batch.createNamespacedCronJob({
        namespace: ns,
        body: { metadata: { name: 'nightly' }, spec: { schedule: '0 3 * * *', jobTemplate: { spec: template } } },
      });
      const patch = (body: object) => () => saBatch.patchNamespacedCronJob({ namespace: ns, name: 'nightly', body }, mergePatch);
      const rule = 'cronjobs: only imagepull-sweeper/ annotations';

      await assertGuardDenies('the schedule', rule, patch({ spec: { schedule: '* * * * *' } }));
      await assertGuardDenies('the job template', rule, patch({ spec: { jobTemplate: { spec: { parallelism: 3 } } } }));
      await assertGuardDenies('labels', rule, patch({ metadata: { labels: { a: 'b' } } }));
      await patch({ spec: { suspend: true }, metadata: { annotations: { 'imagepull-sweeper/suspended-at': '2026-11-30T00:00:00Z' } } })();
      await assertGuardDenies("resuming (the owner's act)", rule, patch({ spec: { suspend: false } }));
      const cronJob = await batch.readNamespacedCronJob({ namespace: ns, name: 'nightly' });
      assert.equal(cronJob.spec?.suspend, true);
      assert.equal(cronJob.spec?.schedule, '0 3 * * *');
    });

    it('anything else: denied, whatever the RBAC says', TIMEOUT, async () => {
      const saCore = saKc.makeApiClient(CoreV1Api);
      await kc.makeApiClient(BatchV1Api).createNamespacedJob({ namespace: ns, body: jobManifest('other', 'registry.invalid/app:1') });
      const [pod] = await waitForJobPods(kc.makeApiClient(CoreV1Api), ns, 'other');
      const name = pod!.metadata!.name!;
      await assertGuardDenies('creating a ConfigMap', 'configmaps CREATE is not a write the sweeper makes', () =>
        saCore.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'x' } } }),
      );
      // Evictions (healing): only the pod as judged, with its own grace period. The guard sees the
      // Eviction only, never the pod (docs/security.md "Healing").
      const rule = 'pods/eviction: only with uid and resourceVersion preconditions';
      const { uid, resourceVersion } = pod!.metadata!;
      const evict = (deleteOptions?: object) => () =>
        saCore.createNamespacedPodEviction({
          namespace: ns,
          name,
          body: { metadata: { name, namespace: ns }, ...(deleteOptions ? { deleteOptions } : {}) },
        });
      await assertGuardDenies('evicting a pod without preconditions', rule, evict());
      await assertGuardDenies('evicting with the uid only', rule, evict({ preconditions: { uid } }));
      await assertGuardDenies(
        'evicting with a shorter grace',
        rule,
        evict({ preconditions: { uid, resourceVersion }, gracePeriodSeconds: 0 }),
      );
      await assertGuardDenies(
        'evicting and orphaning',
        rule,
        evict({ preconditions: { uid, resourceVersion }, propagationPolicy: 'Orphan' }),
      );
      // The sweeper's own eviction, as its gateway sends it (a server dry run: judged, not kept).
      const now = await kc.makeApiClient(CoreV1Api).readNamespacedPod({ namespace: ns, name });
      await createGateway(saKc).serverDryRun().evictPod(ns, name, uid!, now.metadata!.resourceVersion!);
      await kc.makeApiClient(CoreV1Api).readNamespacedPod({ namespace: ns, name });
      await assertGuardDenies('a core/v1 Event', 'events CREATE is not a write the sweeper makes', () =>
        saCore.createNamespacedEvent({
          namespace: ns,
          body: { metadata: { name: 'x' }, involvedObject: { kind: 'Pod', name, namespace: ns }, reason: 'X' },
        }),
      );
      // Leases: RBAC lets it create any (create cannot be limited by name); the guard only its own.
      const saLeases = saKc.makeApiClient(CoordinationV1Api);
      await assertGuardDenies('another Lease', 'leases: only the Lease imagepull-sweeper', () =>
        saLeases.createNamespacedLease({
          namespace: INSTALL_NS,
          body: { metadata: { name: 'someone-elses-lock' }, spec: { holderIdentity: 'x' } },
        }),
      );
      const leases = kc.makeApiClient(CoordinationV1Api);
      await leases.deleteNamespacedLease({ namespace: INSTALL_NS, name: 'imagepull-sweeper' }).catch(() => undefined);
      const own = await saLeases.createNamespacedLease({
        namespace: INSTALL_NS,
        body: { metadata: { name: 'imagepull-sweeper' }, spec: { holderIdentity: 'guard-e2e' } },
      });
      env.onCleanup(() => leases.deleteNamespacedLease({ namespace: INSTALL_NS, name: 'imagepull-sweeper' }));
      await saLeases.replaceNamespacedLease({
        namespace: INSTALL_NS,
        name: 'imagepull-sweeper',
        body: { ...own, spec: { holderIdentity: 'guard-e2e-2' } },
      });
      await assert.rejects(
        saLeases.readNamespacedLease({ namespace: INSTALL_NS, name: 'kube-scheduler' }),
        (e: unknown) => e instanceof ApiException && e.code === 403,
      );
      const saEvents = saKc.makeApiClient(EventsV1Api);
      await assertGuardDenies('an Event of another controller', 'events: only Events with reportingController imagepull-sweeper', () =>
        saEvents.createNamespacedEvent({
          namespace: ns,
          body: {
            metadata: { name: 'x' },
            eventTime: new V1MicroTime(),
            reportingController: 'someone-else',
            reportingInstance: 'x',
            action: 'A',
            reason: 'R',
            type: 'Normal',
            regarding: { kind: 'Pod', name, namespace: ns },
          },
        }),
      );
    });
  });
});
