// The shipped manifests (manifests/, `kubectl apply -k manifests/`) against the real control
// plane: the API server accepts every object (server-side apply, twice: no change the second
// time); the sweeper, run as the built CLI with a token of the shipped ServiceAccount, fails
// stuck Jobs by both mechanisms with the shipped policy; and that identity is refused everything
// it has no business doing.
import assert from 'node:assert/strict';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import { parse as parseYaml } from 'yaml';
import {
  ApiException,
  BatchV1Api,
  CoreV1Api,
  KubeConfig,
  KubernetesObjectApi,
  PatchStrategy,
  setHeaderOptions,
  type V1CronJob,
  type V1Pod,
} from '@kubernetes/client-node';
import { useTestCluster } from '../support/hooks.ts';
import { waitFor } from '../support/kubelet.ts';
import { refuseStatusWrites } from '../support/policy-engine.ts';
import {
  assertFailedBySweeper,
  createCronJob,
  createStuckJob,
  ownedBy,
  readCronJob,
  sweeperEvents,
  trueCondition,
  waitForJobFailed,
} from '../support/sweeper.ts';
import { CLI, ensureBuilt, exec } from '../support/cli.ts';
import {
  allObjects,
  applyManifests,
  INSTALL_NS,
  kustomizationResources,
  loadManifest,
  MANIFESTS,
  SERVICE_ACCOUNT,
  serviceAccountKubeconfig,
} from '../support/manifests.ts';

const TIMEOUT = { timeout: 180_000 };
const POLICY_CONFIGMAP = 'imagepull-sweeper-policy';
const POD_NAME = 'manifests-e2e';
const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const PFP_SPEC = {
  podFailurePolicy: { rules: [{ action: 'FailJob', onPodConditions: [{ type: 'ImagePullStuck', status: 'True' }] }] },
};

/**
 * Exactly what the ClusterRole must grant, one entry per API call in src/kube/gateway.ts (the
 * only code that talks to the API); the policy ConfigMap `get` is a namespaced Role.
 */
const CLUSTER_ROLE_GRANTS = [
  'pods list', //         listPodRows: Pending pods of each namespace, STATUS column only; listPods: a pending Job's pods (retry, force-delete)
  'pods get', //          readPod: the full pod, for each pod whose STATUS may mean stuck; a re-read after a failed precondition
  'pods delete', //       deletePod: podFailurePolicy mechanism, after the condition is set; grace 0 (forceDeleteAfter)
  'pods patch', //        mergePatchPod: an owners rule lowers a stuck pod's activeDeadlineSeconds (the guard allows nothing else)
  'pods/status patch', // patchPodStatus: the podFailurePolicy condition (e.g. ImagePullStuck)
  'jobset.x-k8s.io/jobsets get', // readJobSet: what owns the JobSet of a stuck Job (the audit's owner chain)
  'batch/jobs get', //    readJob: the owner of a stuck pod; `policy explain --job`
  'batch/jobs list', //   listJobs: many stuck pods in one namespace; pending Jobs by label
  'batch/jobs patch', //  mergePatchJob: where the status write is refused, claim + spec.activeDeadlineSeconds; the pending label; jsonPatchJob: release
  'batch/jobs/status patch', // patchJobStatus: the claim and the Job's FailureTarget, in one write
  'batch/cronjobs get', //   readCronJob: the owner of failed Jobs (cronJobs.suspendAfter)
  'batch/cronjobs patch', // mergePatchCronJob: the run count annotations, spec.suspend
  'jobset.x-k8s.io/jobsets get', //   readJobSet: the JobSet owning a stuck Job (docs/jobset.md)
  'jobset.x-k8s.io/jobsets patch', // mergePatchJobSet: the imagepull-sweeper/spent annotation
  'namespaces get', //    readNamespace: labels for namespaceSelector rules; `policy explain`
  'namespaces list', //   listNamespaceNames: where to look when no --namespace is given
  'events.k8s.io/events create', // createEvent: ImagePullStuck on Jobs, InvalidPolicy on the ConfigMap
].sort();

let kc: KubeConfig;
const env = useTestCluster(async (hooks) => {
  kc = hooks.kc;
  await ensureBuilt();
});
const namespace = env.namespace;

function manifestFiles(): string[] {
  return readdirSync(MANIFESTS)
    .filter((f) => /\.ya?ml$/.test(f) && f !== 'kustomization.yaml')
    .sort();
}

function cronJob(): V1CronJob {
  const found = allObjects().find(({ obj }) => obj.kind === 'CronJob');
  assert.ok(found, 'a CronJob manifest');
  return found.obj as V1CronJob;
}

let appliedOnce: Promise<Map<string, string>> | undefined;
const applied = (): Promise<Map<string, string>> => (appliedOnce ??= applyManifests(kc));

async function assertForbidden(what: string, call: () => Promise<unknown>): Promise<void> {
  await assert.rejects(call, (error: unknown) => {
    assert.ok(error instanceof ApiException, `${what}: expected an ApiException, got ${String(error)}`);
    assert.equal(error.code, 403, `${what}: expected 403 Forbidden, got ${error.code}`);
    return true;
  });
}

describe('manifests/', () => {
  it('kustomization.yaml lists exactly the manifest files', () => {
    const listed = kustomizationResources();
    assert.equal(new Set(listed).size, listed.length, 'no duplicates');
    assert.deepEqual([...listed].sort(), manifestFiles());
    assert.equal(listed[0], 'namespace.yaml', 'the Namespace comes first');
  });

  it('the ClusterRole grants exactly what the gateway calls need; the Role only the policy ConfigMap', () => {
    const rbac = loadManifest('rbac.yaml');
    const role = (kind: string): { rules: { apiGroups: string[]; resources: string[]; verbs: string[]; resourceNames?: string[] }[] } =>
      rbac.find((o) => o.kind === kind) as never;
    const grants = role('ClusterRole').rules.flatMap((r) => {
      assert.equal(r.resourceNames, undefined);
      return r.apiGroups.flatMap((g) => r.resources.flatMap((res) => r.verbs.map((v) => `${g ? `${g}/` : ''}${res} ${v}`)));
    });
    assert.deepEqual(grants.sort(), CLUSTER_ROLE_GRANTS);
    assert.deepEqual(role('Role').rules, [
      { apiGroups: [''], resources: ['configmaps'], resourceNames: [POLICY_CONFIGMAP], verbs: ['get'] },
    ]);
    const leaderElection = rbac.find((o) => o.kind === 'Role' && o.metadata?.name === 'imagepull-sweeper-leader-election') as unknown as {
      rules: unknown[];
    };
    assert.deepEqual(leaderElection.rules, [
      { apiGroups: ['coordination.k8s.io'], resources: ['leases'], verbs: ['create'] },
      {
        apiGroups: ['coordination.k8s.io'],
        resources: ['leases'],
        resourceNames: ['imagepull-sweeper'],
        verbs: ['get', 'update', 'list', 'watch'],
      },
    ]);
    for (const kind of ['ClusterRoleBinding', 'RoleBinding']) {
      const binding = rbac.find((o) => o.kind === kind) as unknown as { subjects: unknown[] };
      assert.deepEqual(binding.subjects, [{ kind: 'ServiceAccount', name: SERVICE_ACCOUNT, namespace: INSTALL_NS }], kind);
    }
  });

  it('the Component manifests/heal grants exactly what healing calls, to the ServiceAccount', () => {
    const component = parseYaml(readFileSync(join(MANIFESTS, 'heal', 'kustomization.yaml'), 'utf8')) as {
      kind: string;
      resources: string[];
    };
    assert.deepEqual([component.kind, component.resources], ['Component', ['heal-rbac.yaml']]);
    const objects = loadManifest('heal/heal-rbac.yaml');
    const role = objects.find((o) => o.kind === 'ClusterRole') as unknown as {
      rules: { apiGroups: string[]; resources: string[]; verbs: string[] }[];
    };
    const grants = role.rules.flatMap((r) => r.resources.flatMap((res) => r.verbs.map((v) => `${res} ${v}`)));
    assert.deepEqual(grants.sort(), [
      'pods/eviction create', // evictPod: a stuck pod whose cause is gone, its Job's podFailurePolicy ignoring DisruptionTarget
      'secrets get', //          readSecretMetadata: when a named pull Secret was created or last written (metadata only)
      'serviceaccounts get', //  readServiceAccount: the pull secrets a stuck pod's ServiceAccount lists
      'serviceaccounts list', // run --watch: the ServiceAccounts followed while the policy heals (watch/service-accounts.ts)
      'serviceaccounts watch',
    ]);
    const binding = objects.find((o) => o.kind === 'ClusterRoleBinding') as unknown as { subjects: unknown[]; roleRef: { name: string } };
    assert.equal(binding.roleRef.name, 'imagepull-sweeper-heal');
    assert.deepEqual(binding.subjects, [{ kind: 'ServiceAccount', name: SERVICE_ACCOUNT, namespace: INSTALL_NS }]);
  });

  it('the policy ConfigMap passes `policy validate`', async () => {
    const r = await exec(process.execPath, [CLI, 'policy', 'validate', join(MANIFESTS, 'policy-configmap.yaml')]);
    assert.equal(r.code, 0, r.stdout + r.stderr);
    assert.match(r.stdout, /valid/);
  });

  it('every object is accepted by server-side apply, and applying again changes nothing', TIMEOUT, async () => {
    const first = await applied();
    const objects = allObjects();
    assert.equal(first.size, objects.length);
    assert.ok(objects.length >= 8, `expected Namespace, ServiceAccount, RBAC x4, ConfigMap, CronJob; got ${[...first.keys()].join(', ')}`);
    const second = await applyManifests(kc);
    assert.deepEqual(second, first, 'a second apply must not change any object (resourceVersion)');
  });

  it("the CronJob's pod passes admission: restricted Pod Security, opted-in token", TIMEOUT, async () => {
    await applied();
    const core = kc.makeApiClient(CoreV1Api);
    const batch = kc.makeApiClient(BatchV1Api);
    const spec = cronJob().spec!;
    // `kubectl create job --from=cronjob/imagepull-sweeper`, without running it.
    await batch.createNamespacedJob({
      namespace: INSTALL_NS,
      body: { metadata: { generateName: 'imagepull-sweeper-manual-' }, spec: spec.jobTemplate.spec },
      dryRun: 'All',
    });
    const template = spec.jobTemplate.spec!.template;
    const pod = await core.createNamespacedPod({
      namespace: INSTALL_NS,
      body: { metadata: { generateName: 'imagepull-sweeper-', labels: template.metadata?.labels }, spec: template.spec },
      dryRun: 'All',
    });
    const tokenVolume = pod.spec!.volumes?.find((v) => v.projected?.sources?.some((s) => s.serviceAccountToken));
    assert.ok(tokenVolume, 'the pod opts in to a ServiceAccount token (the ServiceAccount mounts none)');
    assert.equal(pod.spec!.serviceAccountName, SERVICE_ACCOUNT);

    // Control: the namespace really enforces "restricted", so the pass above means something.
    const unhardened: V1Pod = structuredClone({ metadata: { generateName: 'unhardened-' }, spec: template.spec! });
    delete unhardened.spec!.securityContext;
    delete unhardened.spec!.containers[0]!.securityContext;
    await assertForbidden('a pod without the securityContext in the sweeper namespace', () =>
      core.createNamespacedPod({ namespace: INSTALL_NS, body: unhardened, dryRun: 'All' }),
    );
  });
});

describe('the imagepull-sweeper ServiceAccount', () => {
  let tokenDir: string;
  let tokenKubeconfig: string;
  let saKc: KubeConfig;

  before(async () => {
    await applied();
    const core = kc.makeApiClient(CoreV1Api);
    // The policy is only read by the built CLI below; removing it afterwards leaves the default
    // policy location empty again for the other test files on the shared cluster.
    env.onCleanup(async () => {
      await core.deleteNamespacedConfigMap({ namespace: INSTALL_NS, name: POLICY_CONFIGMAP });
    });
    const sa = await serviceAccountKubeconfig(kc);
    env.onCleanup(async () => sa.remove());
    ({ dir: tokenDir, path: tokenKubeconfig, kc: saKc } = sa);
  });

  /** The built CLI, as the CronJob runs it, with the ServiceAccount's token. */
  async function sweepAsServiceAccount(
    ns: string,
    extra: string[] = [],
  ): Promise<{ code: number | null; records: Record<string, unknown>[]; output: string }> {
    const env: NodeJS.ProcessEnv = { ...process.env, POD_NAMESPACE: INSTALL_NS, POD_NAME };
    delete env.KUBECONFIG;
    const r = await exec(
      process.execPath,
      [CLI, 'sweep', '--kubeconfig', tokenKubeconfig, '--output', 'json', '--namespace', ns, ...extra],
      {
        env,
        timeoutMs: 90_000,
      },
    );
    const records = r.stdout
      .split('\n')
      .filter((l) => l.trim())
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    return { code: r.code, records, output: `exit ${r.code ?? r.signal}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr}` };
  }

  it(
    'sweeps with the shipped policy ConfigMap and fails a stuck Job by its own condition (jobs/status patch): Failed/ImagePullStuck',
    TIMEOUT,
    async () => {
      const ns = await namespace('manifests-condition');
      const { pod } = await createStuckJob(kc, ns, 'build', { stuckFor: 9999 });
      const run = await sweepAsServiceAccount(ns);
      assert.equal(run.code, 0, run.output);
      const summary = run.records.find((r) => r.message === 'summary');
      assert.equal(summary?.policy, `ConfigMap ${INSTALL_NS}/${POLICY_CONFIGMAP}`, run.output);
      const lines = run.records.filter((r) => r.message === 'decision');
      assert.equal(lines.length, 1, run.output);
      assert.equal(lines[0]!.outcome, 'failed', run.output);
      assert.equal(lines[0]!.job, 'build');
      assert.equal(lines[0]!.pod, pod);
      assert.equal(lines[0]!.rule, 'defaults');
      assert.equal(lines[0]!.mechanism, 'condition');

      const job = await waitForJobFailed(kc, ns, 'build');
      assertFailedBySweeper(job);
      assert.equal(job.metadata!.annotations!['imagepull-sweeper/reason'], 'ImagePullBackOff');
      const [event] = await sweeperEvents(kc, ns);
      assert.equal(event?.action, 'FailJob');
      assert.equal(event?.reportingInstance, POD_NAME);
    },
  );

  it(
    'where a policy engine refuses the status write: the deadline (jobs patch), the podFailurePolicy (pods/status patch, pods delete)',
    TIMEOUT,
    async () => {
      const ns = await namespace('manifests-fallback');
      await refuseStatusWrites(env, ns);
      await createStuckJob(kc, ns, 'build', { stuckFor: 9999 });
      const { pod } = await createStuckJob(kc, ns, 'tenant-run', { stuckFor: 9999, spec: PFP_SPEC });
      const run = await sweepAsServiceAccount(ns);
      assert.equal(run.code, 0, run.output);
      const lines = new Map(run.records.filter((r) => r.message === 'decision').map((l) => [l.job, l]));
      assert.equal(lines.size, 2, run.output);
      for (const [name, mechanism] of [
        ['build', 'activeDeadlineSeconds'],
        ['tenant-run', 'podFailurePolicy'],
      ]) {
        const line = lines.get(name)!;
        assert.equal(line.outcome, 'failed', run.output);
        assert.match(String(line.mechanism), new RegExp(`^${mechanism} \\(the status write was refused \\(Forbidden: `), run.output);
        assert.equal(line.level, 'warn', 'its warning says so');
      }
      assert.equal(lines.get('tenant-run')!.pod, pod);
      assert.equal(trueCondition(await waitForJobFailed(kc, ns, 'build'), 'Failed')?.reason, 'DeadlineExceeded');
      assert.equal(trueCondition(await waitForJobFailed(kc, ns, 'tenant-run'), 'Failed')?.reason, 'PodFailurePolicy');
      const notes = (await sweeperEvents(kc, ns)).map((e) => e.note ?? '');
      assert.equal(
        notes.filter((n) =>
          /Failed by its (deadline|pod failure policy)[^.]*, not by its own condition: the status write was refused/.test(n),
        ).length,
        2,
        notes.join('\n'),
      );
    },
  );

  it("with the Component manifests/kueue: reads Kueue's configuration, and nothing else of Kueue's namespace", TIMEOUT, async () => {
    const component = parseYaml(readFileSync(join(MANIFESTS, 'kueue', 'kustomization.yaml'), 'utf8')) as {
      kind: string;
      resources: string[];
    };
    assert.deepEqual([component.kind, component.resources], ['Component', ['kueue-rbac.yaml']]);
    const objects = loadManifest('kueue/kueue-rbac.yaml');
    const role = objects.find((o) => o.kind === 'Role') as unknown as { metadata: { namespace: string }; rules: unknown[] };
    assert.deepEqual(role.rules, [{ apiGroups: [''], resources: ['configmaps'], resourceNames: ['kueue-manager-config'], verbs: ['get'] }]);
    const core = kc.makeApiClient(CoreV1Api);
    // Kueue's namespace (node-kueue.test.ts may have made it, and Kueue's ConfigMap, already).
    await core.createNamespace({ body: { metadata: { name: role.metadata.namespace } } }).catch((e: unknown) => {
      if (!(e instanceof ApiException && e.code === 409)) throw e;
    });
    const api = KubernetesObjectApi.makeApiClient(kc);
    for (const o of objects) {
      await api.create(o);
      env.onCleanup(() => api.delete(o));
    }
    const read = (name: string) => saKc.makeApiClient(CoreV1Api).readNamespacedConfigMap({ namespace: 'kueue-system', name });
    // Allowed: found, or not found (no Kueue here); never refused. RBAC is enforced at once, but its cache may lag a moment.
    await waitFor(
      () =>
        read('kueue-manager-config').then(
          () => true,
          (e: unknown) => e instanceof ApiException && e.code === 404,
        ),
      30_000,
      "the ServiceAccount may read Kueue's configuration",
    );
    await assertForbidden('another ConfigMap of kueue-system', () => read('kueue-other'));
    await assertForbidden('list ConfigMaps of kueue-system', () =>
      saKc.makeApiClient(CoreV1Api).listNamespacedConfigMap({ namespace: 'kueue-system' }),
    );
    await assertForbidden("Kueue's configuration, updated", () =>
      saKc
        .makeApiClient(CoreV1Api)
        .patchNamespacedConfigMap({ namespace: 'kueue-system', name: 'kueue-manager-config', body: { data: {} } }, mergePatch),
    );
  });

  it('reads Namespace labels for a namespaceSelector rule (namespaces get)', TIMEOUT, async () => {
    const ns = await namespace('manifests-selector', { 'imagepull-sweeper-e2e/mode': 'report' });
    await createStuckJob(kc, ns, 'watched', { stuckFor: 9999 });
    const policy = join(tokenDir, 'selector-policy.yaml');
    writeFileSync(
      policy,
      'rules:\n  - name: report-only\n    namespaceSelector: { matchLabels: { imagepull-sweeper-e2e/mode: report } }\n    action: report\n',
    );
    const run = await sweepAsServiceAccount(ns, ['--policy-file', policy]);
    assert.equal(run.code, 0, run.output);
    const lines = run.records.filter((r) => r.message === 'decision');
    assert.equal(lines.length, 1, run.output);
    assert.equal(lines[0]!.rule, 'report-only', run.output);
    assert.equal(lines[0]!.outcome, 'reported', run.output);
    const [event] = await sweeperEvents(kc, ns);
    assert.equal(event?.action, 'Report');
  });

  it('suspends a CronJob whose Jobs keep failing on one image (cronjobs get, patch), past the guard', TIMEOUT, async () => {
    const ns = await namespace('manifests-cronjob');
    const cronJob = await createCronJob(kc, ns, 'nightly', { schedule: '0 3 1 1 *' });
    await createStuckJob(kc, ns, 'nightly-1', { stuckFor: 9999, ownerReferences: ownedBy(cronJob) });
    const policy = join(tokenDir, 'suspend-policy.yaml');
    writeFileSync(policy, 'cronJobs: { suspendAfter: 1 }\n');
    const run = await sweepAsServiceAccount(ns, ['--policy-file', policy]);
    assert.equal(run.code, 0, run.output);
    const line = run.records.find((r) => r.message === 'cronjob');
    assert.equal(line?.outcome, 'suspended', run.output);
    const after = await readCronJob(kc, ns, 'nightly');
    assert.equal(after.spec?.suspend, true);
    assert.ok(after.metadata?.annotations?.['imagepull-sweeper/suspended-at']);
    const events = await sweeperEvents(kc, ns);
    assert.ok(
      events.some((e) => e.action === 'SuspendCronJob' && e.regarding?.kind === 'CronJob'),
      JSON.stringify(events),
    );
    // The same identity may not resume it, nor delete it.
    const saBatch = saKc.makeApiClient(BatchV1Api);
    await assert.rejects(() =>
      saBatch.patchNamespacedCronJob({ namespace: ns, name: 'nightly', body: { spec: { suspend: false } } }, mergePatch),
    );
    await assertForbidden('delete a CronJob', () => saBatch.deleteNamespacedCronJob({ namespace: ns, name: 'nightly' }));
  });

  it('is refused (403) everything else: Secrets, deleting Jobs, other ConfigMaps, creating pods', TIMEOUT, async () => {
    const ns = await namespace('manifests-refused');
    const adminCore = kc.makeApiClient(CoreV1Api);
    const core = saKc.makeApiClient(CoreV1Api);
    const batch = saKc.makeApiClient(BatchV1Api);
    const { pod: victimPod } = await createStuckJob(kc, ns, 'victim', { stuckFor: 10 });
    await adminCore.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'creds' }, stringData: { password: 'x' } } });
    await adminCore.createNamespacedConfigMap({
      namespace: ns,
      body: { metadata: { name: POLICY_CONFIGMAP }, data: { 'policy.yaml': '' } },
    });
    const other = 'imagepull-sweeper-e2e-other';
    await adminCore
      .createNamespacedConfigMap({ namespace: INSTALL_NS, body: { metadata: { name: other }, data: {} } })
      .catch((e: unknown) => {
        if (!(e instanceof ApiException && e.code === 409)) throw e;
      });
    env.onCleanup(async () => {
      await adminCore.deleteNamespacedConfigMap({ namespace: INSTALL_NS, name: other });
    });

    // The token works, and reads what it should.
    const policy = await core.readNamespacedConfigMap({ namespace: INSTALL_NS, name: POLICY_CONFIGMAP });
    assert.ok(policy.data?.['policy.yaml']);
    await core.listNamespacedPod({ namespace: ns });

    await assertForbidden('read a Secret', () => core.readNamespacedSecret({ namespace: ns, name: 'creds' }));
    // Healing's calls need the Component manifests/heal.
    await assertForbidden('read a ServiceAccount', () => core.readNamespacedServiceAccount({ namespace: ns, name: 'default' }));
    await assertForbidden('evict a pod', () =>
      core.createNamespacedPodEviction({ namespace: ns, name: victimPod, body: { metadata: { name: victimPod, namespace: ns } } }),
    );
    await assertForbidden('list Secrets in all namespaces', () => core.listSecretForAllNamespaces());
    await assertForbidden('list Secrets in its own namespace', () => core.listNamespacedSecret({ namespace: INSTALL_NS }));
    await assertForbidden('delete a Job', () => batch.deleteNamespacedJob({ namespace: ns, name: 'victim' }));
    await assertForbidden('create a Job', () =>
      batch.createNamespacedJob({
        namespace: ns,
        body: {
          metadata: { name: 'x' },
          spec: { template: { spec: { restartPolicy: 'Never', containers: [{ name: 'c', image: 'x' }] } } },
        },
      }),
    );
    await assertForbidden('get another ConfigMap in its own namespace', () =>
      core.readNamespacedConfigMap({ namespace: INSTALL_NS, name: other }),
    );
    await assertForbidden('list ConfigMaps in its own namespace', () => core.listNamespacedConfigMap({ namespace: INSTALL_NS }));
    await assertForbidden('get the policy ConfigMap name in another namespace', () =>
      core.readNamespacedConfigMap({ namespace: ns, name: POLICY_CONFIGMAP }),
    );
    await assertForbidden('update the policy ConfigMap', () =>
      core.patchNamespacedConfigMap({ namespace: INSTALL_NS, name: POLICY_CONFIGMAP, body: { data: { 'policy.yaml': '' } } }, mergePatch),
    );
    await assertForbidden('create a pod', () =>
      core.createNamespacedPod({ namespace: ns, body: { metadata: { name: 'x' }, spec: { containers: [{ name: 'c', image: 'x' }] } } }),
    );
    // RBAC lets it patch pods (an owners rule's deadline); the guard refuses this one, a Job's pod.
    await waitFor(
      () =>
        core.patchNamespacedPod({ namespace: ns, name: victimPod, body: { metadata: { labels: { a: 'b' } } } }, mergePatch).then(
          () => false,
          (e: unknown) => e instanceof ApiException && e.code === 403,
        ),
      30_000,
      "the guard to refuse patching a Job's pod",
    );
    await assertForbidden("read a pod's logs", () => core.readNamespacedPodLog({ namespace: ns, name: 'x' }));
  });
});
