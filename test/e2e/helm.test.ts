// The Helm chart (charts/imagepull-sweeper/) with helm built from its Go module: lint, template in
// both modes (the default render is manifests/ object by object, `mode: deployment` is
// manifests/deployment/), each value where it belongs, and install/upgrade/uninstall on the real
// control plane, where the installed ServiceAccount sweeps (and leader-elects) with the chart's
// RBAC and guard.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import {
  AdmissionregistrationV1Api,
  AppsV1Api,
  BatchV1Api,
  CoordinationV1Api,
  CoreV1Api,
  KubernetesObjectApi,
  RbacAuthorizationV1Api,
  type KubeConfig,
  type KubernetesObject,
  type V1CronJob,
  type V1Deployment,
} from '@kubernetes/client-node';
import { parse as parseYaml } from 'yaml';
import { CLI, ensureBuilt, exec, jsonLines, startCli } from '../support/cli.ts';
import { CHART, helm, helmTemplate } from '../support/helm.ts';
import { nodeSkipReason, testNode } from '../support/node.ts';
import { pushSweeperImage, sweeperImage } from '../support/sweeper-image.ts';
import { useTestCluster } from '../support/hooks.ts';
import { waitFor } from '../support/kubelet.ts';
import { renderKustomization } from '../support/kustomize.ts';
import { INSTALL_NS, MANIFESTS, objectKey, serviceAccountKubeconfig } from '../support/manifests.ts';
import { createStuckJob, waitForJobFailed } from '../support/sweeper.ts';

const TIMEOUT = { timeout: 600_000 };
let kc: KubeConfig;
const env = useTestCluster(async (hooks) => {
  kc = hooks.kc;
  await ensureBuilt();
});

function byKey(objects: KubernetesObject[]): Map<string, KubernetesObject> {
  const map = new Map(objects.map((o) => [objectKey(o), o]));
  assert.equal(map.size, objects.length, 'no two objects with the same kind, namespace and name');
  return map;
}

/** Same objects, each deep-equal (comments and key order aside). */
function assertSameObjects(actual: KubernetesObject[], expected: KubernetesObject[], what: string): void {
  const a = byKey(actual);
  const e = byKey(expected);
  assert.deepEqual([...a.keys()].sort(), [...e.keys()].sort(), `${what}: the same objects`);
  for (const [key, obj] of e) assert.deepEqual(a.get(key), obj, `${what}: ${key}`);
}

const find = <T>(objects: KubernetesObject[], kind: string): T => objects.find((o) => o.kind === kind) as T;

const CHART_META = parseYaml(readFileSync(join(CHART, 'Chart.yaml'), 'utf8')) as { name: string; version: string; appVersion: string };

/**
 * The labels the chart adds to manifests/' (Helm's recommended labels), each with its value for a
 * release named imagepull-sweeper. Only these may differ between the two; selectors never carry them.
 */
const CHART_ONLY_LABELS: Record<string, string> = {
  'app.kubernetes.io/instance': 'imagepull-sweeper',
  'app.kubernetes.io/version': CHART_META.appVersion,
  'app.kubernetes.io/managed-by': 'Helm',
  'app.kubernetes.io/part-of': 'imagepull-sweeper',
  'helm.sh/chart': `${CHART_META.name}-${CHART_META.version}`,
};

/** The objects with the chart-only labels checked and removed, from objects and pod templates. */
function withoutChartLabels(objects: KubernetesObject[]): KubernetesObject[] {
  return objects.map((o) => {
    const copy = structuredClone(o) as KubernetesObject & { spec?: Record<string, unknown> };
    const spec = copy.spec as
      | {
          template?: { metadata?: { labels?: Record<string, string> } };
          jobTemplate?: {
            metadata?: { labels?: Record<string, string> };
            spec?: { template?: { metadata?: { labels?: Record<string, string> } } };
          };
        }
      | undefined;
    const labelSets = [
      copy.metadata?.labels,
      spec?.template?.metadata?.labels,
      spec?.jobTemplate?.metadata?.labels,
      spec?.jobTemplate?.spec?.template?.metadata?.labels,
    ];
    for (const labels of labelSets.filter((l) => l !== undefined)) {
      for (const [key, value] of Object.entries(CHART_ONLY_LABELS)) {
        assert.equal(labels[key], value, `${objectKey(o)}: label ${key}`);
        delete labels[key];
      }
    }
    return copy;
  });
}

/**
 * The chart's cluster-scoped objects have fixed names: one sweeper per cluster. Removes those of
 * manifests/ applied by other test files (each applies them again itself).
 */
async function removeClusterScopedObjects(): Promise<void> {
  const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
  const admission = kc.makeApiClient(AdmissionregistrationV1Api);
  await rbac.deleteClusterRole({ name: 'imagepull-sweeper' }).catch(() => undefined);
  await rbac.deleteClusterRoleBinding({ name: 'imagepull-sweeper' }).catch(() => undefined);
  await admission.deleteValidatingAdmissionPolicy({ name: 'imagepull-sweeper-guard' }).catch(() => undefined);
  await admission.deleteValidatingAdmissionPolicyBinding({ name: 'imagepull-sweeper-guard' }).catch(() => undefined);
}

describe('the Helm chart', () => {
  it('helm lint passes in both modes and with every optional object on', TIMEOUT, async () => {
    const everything = [
      'serviceAccount.create=false,serviceAccount.name=sweeper,rbac.create=false,guard.enabled=false',
      'image.digest=sha256:' + 'a'.repeat(64) + ',imagePullSecrets[0].name=regcred,priorityClassName=infra',
      'extraArgs[0]=--request-timeout,extraArgs[1]=10s,extraEnv[0].name=TZ,extraEnv[0].value=UTC,tests.enabled=false',
    ];
    for (const set of [
      [],
      ['mode=deployment', 'serviceMonitor.enabled=true', 'prometheusRule.enabled=true', 'dashboard.enabled=true', 'heal.enabled=true'],
      everything,
      ['mode=deployment', 'podDisruptionBudget.maxUnavailable=50%', ...everything],
    ]) {
      const r = await helm(['lint', '--strict', CHART, ...set.flatMap((s) => ['--set', s])]);
      assert.equal(r.code, 0, `helm lint ${set.join(' ')}:\n${r.stdout}${r.stderr}`);
    }
  });

  it('values.schema.json: helm lint and template refuse a typo, an unknown key and a wrong type, naming the value', TIMEOUT, async () => {
    for (const [set, named] of [
      ['mode=Deployment', /mode/],
      ['replicas=3', /replicas/],
      ['deployment.replicas=two', /deployment\/replicas|deployment\.replicas/],
      ['image.digest=latest', /digest/],
      ['serviceAccount.create=maybe', /serviceAccount/],
      ['prometheusRule.runbookBaseUrl=docs/metrics.md', /runbookBaseUrl/],
    ] as const) {
      const lint = await helm(['lint', CHART, '--set', set]);
      assert.notEqual(lint.code, 0, `helm lint --set ${set} passed`);
      assert.match(lint.stdout + lint.stderr, /schema/, `helm lint --set ${set}`);
      assert.match(lint.stdout + lint.stderr, named, `helm lint --set ${set}`);
      const template = await helm(['template', 'x', CHART, '--set', set]);
      assert.notEqual(template.code, 0, `helm template --set ${set} rendered`);
      assert.match(template.stderr, named, `helm template --set ${set}`);
    }
  });

  it('one source of truth: the default render is manifests/ object by object (the Namespace with createNamespace)', TIMEOUT, async () => {
    const manifests = renderKustomization(MANIFESTS);
    const chart = withoutChartLabels(await helmTemplate(INSTALL_NS));
    assertSameObjects(
      chart,
      manifests.filter((o) => o.kind !== 'Namespace'),
      'default',
    );
    assertSameObjects(withoutChartLabels(await helmTemplate(INSTALL_NS, ['createNamespace=true'])), manifests, 'createNamespace=true');
  });

  it('mode=deployment renders manifests/ with the Component manifests/deployment/, object by object', TIMEOUT, async () => {
    const overlay = renderKustomization(join(MANIFESTS, '..', 'test', 'fixtures', 'kustomize-deployment'));
    const chart = withoutChartLabels(await helmTemplate(INSTALL_NS, ['mode=deployment', 'createNamespace=true']));
    assertSameObjects(chart, overlay, 'deployment');
  });

  it(
    'heal.enabled renders manifests/ with the Component manifests/heal/; heal.readSecrets=false drops only the Secrets rule',
    TIMEOUT,
    async () => {
      const overlay = renderKustomization(join(MANIFESTS, '..', 'test', 'fixtures', 'kustomize-heal'));
      const chart = withoutChartLabels(await helmTemplate(INSTALL_NS, ['heal.enabled=true', 'createNamespace=true']));
      assertSameObjects(chart, overlay, 'heal');
      const noSecrets = await helmTemplate(INSTALL_NS, ['heal.enabled=true', 'heal.readSecrets=false']);
      const role = noSecrets.find((o) => o.kind === 'ClusterRole' && o.metadata?.name === 'imagepull-sweeper-heal') as unknown as {
        rules: { resources: string[] }[];
      };
      assert.deepEqual(
        role.rules.flatMap((r) => r.resources),
        ['pods/eviction', 'serviceaccounts'],
      );
      assert.equal(
        (await helmTemplate(INSTALL_NS, ['heal.enabled=true', 'rbac.create=false'])).filter((o) => /heal/.test(o.metadata?.name ?? ''))
          .length,
        0,
      );
    },
  );

  it('values land where they belong: image, schedule, resources, policy, placement, labels, annotations', TIMEOUT, async () => {
    const policy = 'defaults:\n  action: report\n';
    const policyFile = join(mkdtempSync(join(tmpdir(), 'ips-helm-values-')), 'policy.yaml');
    writeFileSync(policyFile, policy);
    const r = await helm([
      'template',
      'x',
      CHART,
      '-n',
      'sweepers',
      '--set-file',
      `policy=${policyFile}`,
      '--set',
      'image.repository=registry.example/team/sweeper,image.tag=1.2.3,schedule=*/5 * * * *',
      '--set',
      'resources.limits.memory=300Mi,nodeSelector.pool=infra,tolerations[0].key=infra,tolerations[0].operator=Exists',
      '--set',
      'labels.team=platform,annotations.owner=ops,podAnnotations.scrape=no',
    ]);
    assert.equal(r.code, 0, r.stderr);
    const objects = r.stdout
      .split(/^---$/m)
      .map((d) => parseYaml(d) as KubernetesObject | null)
      .filter((o): o is KubernetesObject => o !== null);
    for (const o of objects) {
      assert.equal(o.metadata?.labels?.team, 'platform', `${objectKey(o)} label`);
      assert.equal(o.metadata?.annotations?.owner, 'ops', `${objectKey(o)} annotation`);
    }
    const cron = find<V1CronJob>(objects, 'CronJob');
    const pod = cron.spec!.jobTemplate.spec!.template;
    assert.equal(cron.spec!.schedule, '*/5 * * * *');
    assert.equal(pod.spec!.containers[0]!.image, 'registry.example/team/sweeper:1.2.3');
    assert.equal(pod.spec!.containers[0]!.resources!.limits!.memory, '300Mi');
    assert.deepEqual(pod.spec!.nodeSelector, { pool: 'infra' });
    assert.deepEqual(pod.spec!.tolerations, [{ key: 'infra', operator: 'Exists' }]);
    assert.equal(pod.metadata!.annotations!.scrape, 'no');
    assert.ok(pod.spec!.containers[0]!.args!.includes('sweepers/imagepull-sweeper-policy'));
    assert.equal(find<{ data: Record<string, string> }>(objects, 'ConfigMap').data['policy.yaml'], policy);
    const guard = objects.find((o) => o.kind === 'ValidatingAdmissionPolicy') as unknown as {
      spec: { matchConditions: { expression: string }[] };
    };
    assert.match(guard.spec.matchConditions[0]!.expression, /system:serviceaccount:sweepers:imagepull-sweeper/);
  });

  it("the operators' values: identity, RBAC, image, args, env, scheduling, security contexts, PDB and spread", TIMEOUT, async () => {
    const cronjobPod = (objects: KubernetesObject[]) => find<V1CronJob>(objects, 'CronJob').spec!.jobTemplate.spec!.template.spec!;
    const defaults = await helmTemplate('x');
    assert.equal(cronjobPod(defaults).containers[0]!.image, `imagepull-sweeper:${CHART_META.appVersion}`, 'the tag defaults to appVersion');
    assert.ok(!defaults.some((o) => o.kind === 'PodDisruptionBudget'), 'no PDB for a CronJob');

    const custom = await helmTemplate('x', [
      'serviceAccount.name=sweeper,serviceAccount.annotations.iam=role-1,image.repository=r.example/s',
      `image.digest=sha256:${'b'.repeat(64)},imagePullSecrets[0].name=regcred,priorityClassName=infra`,
      'extraArgs[0]=--request-timeout,extraArgs[1]=10s,extraEnv[0].name=TZ,extraEnv[0].value=Europe/Berlin',
      'topologySpreadConstraints[0].maxSkew=2,topologySpreadConstraints[0].topologyKey=zone,topologySpreadConstraints[0].whenUnsatisfiable=DoNotSchedule',
      // OpenShift's restricted SCC assigns the uid: the fixed ones go.
      'podSecurityContext.runAsUser=null,podSecurityContext.runAsGroup=null,podSecurityContext.fsGroup=null',
      'securityContext.runAsUser=null,securityContext.runAsGroup=null',
    ]);
    const pod = cronjobPod(custom);
    const container = pod.containers[0]!;
    assert.equal(pod.serviceAccountName, 'sweeper');
    const sa = custom.find((o) => o.kind === 'ServiceAccount')!;
    assert.deepEqual([sa.metadata?.name, sa.metadata?.annotations], ['sweeper', { iam: 'role-1' }]);
    for (const binding of custom.filter((o) => o.kind === 'ClusterRoleBinding' || o.kind === 'RoleBinding'))
      assert.deepEqual(
        (binding as unknown as { subjects: { name: string }[] }).subjects.map((x) => x.name),
        ['sweeper'],
        objectKey(binding),
      );
    const guard = custom.find((o) => o.kind === 'ValidatingAdmissionPolicy') as unknown as {
      spec: { matchConditions: { expression: string }[] };
    };
    assert.match(guard.spec.matchConditions[0]!.expression, /system:serviceaccount:x:sweeper'/);
    assert.equal(container.image, `r.example/s@sha256:${'b'.repeat(64)}`);
    assert.deepEqual(pod.imagePullSecrets, [{ name: 'regcred' }]);
    assert.equal(pod.priorityClassName, 'infra');
    assert.deepEqual(container.args!.slice(-2), ['--request-timeout', '10s']);
    assert.deepEqual(container.env!.at(-1), { name: 'TZ', value: 'Europe/Berlin' });
    assert.deepEqual(pod.topologySpreadConstraints, [{ maxSkew: 2, topologyKey: 'zone', whenUnsatisfiable: 'DoNotSchedule' }]);
    assert.deepEqual(pod.securityContext, { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } });
    assert.equal(container.securityContext!.runAsUser, undefined);
    assert.equal(container.securityContext!.readOnlyRootFilesystem, true);

    const external = await helmTemplate('x', ['serviceAccount.create=false,serviceAccount.name=theirs,rbac.create=false']);
    assert.deepEqual(
      external.filter((o) => ['ServiceAccount', 'ClusterRole', 'ClusterRoleBinding', 'Role', 'RoleBinding'].includes(o.kind!)),
      [],
      'neither the ServiceAccount nor the RBAC',
    );
    assert.equal(cronjobPod(external).serviceAccountName, 'theirs');

    const deployment = await helmTemplate('x', ['mode=deployment,extraArgs[0]=--request-timeout,extraArgs[1]=10s']);
    const spec = find<V1Deployment>(deployment, 'Deployment').spec!;
    assert.deepEqual(spec.template.spec!.containers[0]!.args!.slice(-2), ['--request-timeout', '10s']);
    assert.equal(spec.template.spec!.topologySpreadConstraints?.[0]?.topologyKey, 'kubernetes.io/hostname');
    const pdb = find<{ spec: { maxUnavailable: number; selector: { matchLabels: Record<string, string> } } }>(
      deployment,
      'PodDisruptionBudget',
    );
    assert.equal(pdb.spec.maxUnavailable, 1);
    assert.deepEqual(pdb.spec.selector.matchLabels, spec.selector.matchLabels);
    const noPdb = await helmTemplate('x', ['mode=deployment,podDisruptionBudget.enabled=false']);
    assert.ok(!noPdb.some((o) => o.kind === 'PodDisruptionBudget'));
  });

  it('the helm test hook: a dry-run sweep of the release namespace as the ServiceAccount', TIMEOUT, async () => {
    const r = await helm(['template', 'x', CHART, '-n', 'sweepers', '--show-only', 'templates/tests/sweep-dry-run.yaml']);
    assert.equal(r.code, 0, r.stderr);
    const pod = parseYaml(r.stdout) as {
      metadata: { annotations: Record<string, string>; labels: Record<string, string> };
      spec: { serviceAccountName: string; restartPolicy: string; containers: { args: string[] }[] };
    };
    assert.equal(pod.metadata.annotations['helm.sh/hook'], 'test');
    assert.equal(pod.metadata.labels['app.kubernetes.io/component'], 'test', 'no Deployment selector adopts it');
    assert.equal(pod.spec.serviceAccountName, 'imagepull-sweeper');
    assert.equal(pod.spec.restartPolicy, 'Never');
    assert.deepEqual(pod.spec.containers[0]!.args, [
      'sweep',
      '--dry-run',
      '--namespace',
      'sweepers',
      '--output',
      'json',
      '--policy-configmap',
      'sweepers/imagepull-sweeper-policy',
    ]);
    const off = await helm(['template', 'x', CHART, '--set', 'tests.enabled=false']);
    assert.doesNotMatch(off.stdout, /helm\.sh\/hook/);
  });

  it('PrometheusRule: every runbook_url is absolute, under prometheusRule.runbookBaseUrl', TIMEOUT, async () => {
    const objects = await helmTemplate('x', ['prometheusRule.enabled=true,prometheusRule.runbookBaseUrl=https://wiki.example/sweeper']);
    const rule = find<{ spec: { groups: { rules: { alert?: string; annotations?: Record<string, string> }[] }[] } }>(
      objects,
      'PrometheusRule',
    );
    const alerts = rule.spec.groups.flatMap((g) => g.rules).filter((x) => x.alert);
    assert.ok(alerts.length > 0);
    for (const a of alerts) assert.equal(a.annotations?.runbook_url, `https://wiki.example/sweeper#${a.alert!.toLowerCase()}`);
  });

  it(
    'optional objects: guard off, ServiceMonitor, PrometheusRule (files/alerts.yaml), dashboard (files/dashboard.json)',
    TIMEOUT,
    async () => {
      const noGuard = await helmTemplate('x', ['guard.enabled=false']);
      assert.ok(!noGuard.some((o) => o.kind?.startsWith('ValidatingAdmissionPolicy')));
      const all = await helmTemplate('x', [
        'mode=deployment',
        'serviceMonitor.enabled=true',
        'prometheusRule.enabled=true',
        'dashboard.enabled=true',
      ]);
      const monitor = find<{ spec: { endpoints: { port: string }[]; selector: { matchLabels: Record<string, string> } } }>(
        all,
        'ServiceMonitor',
      );
      const service = find<{ metadata: { labels: Record<string, string> }; spec: { ports: { name: string }[] } }>(all, 'Service');
      assert.equal(monitor.spec.endpoints[0]!.port, service.spec.ports[0]!.name);
      for (const [k, v] of Object.entries(monitor.spec.selector.matchLabels)) assert.equal(service.metadata.labels[k], v);
      // Each mode gets its group of files/alerts.yaml: the served metrics, or kube-state-metrics'.
      const groups = (parseYaml(readFileSync(join(CHART, 'files', 'alerts.yaml'), 'utf8')) as { groups: { name: string }[] }).groups;
      const rule = find<{ spec: { groups: unknown[] } }>(all, 'PrometheusRule');
      assert.deepEqual(
        rule.spec.groups,
        groups.filter((g) => g.name === 'imagepull-sweeper'),
      );
      const cronjobRule = find<{ spec: { groups: unknown[] } }>(await helmTemplate('x', ['prometheusRule.enabled=true']), 'PrometheusRule');
      assert.deepEqual(
        cronjobRule.spec.groups,
        groups.filter((g) => g.name === 'imagepull-sweeper-cronjob'),
      );
      const dashboard = all.find((o) => o.kind === 'ConfigMap' && o.metadata?.name === 'imagepull-sweeper-dashboard') as unknown as {
        metadata: { labels: Record<string, string> };
        data: Record<string, string>;
      };
      assert.equal(dashboard.metadata.labels.grafana_dashboard, '1');
      assert.deepEqual(
        JSON.parse(dashboard.data['imagepull-sweeper.json']!),
        JSON.parse(readFileSync(join(CHART, 'files', 'dashboard.json'), 'utf8')),
      );
      const refused = await helm(['template', 'x', CHART, '--set', 'serviceMonitor.enabled=true']);
      assert.notEqual(refused.code, 0);
      assert.match(refused.stderr, /serviceMonitor.enabled needs mode: deployment/);
    },
  );

  it(
    'helm install, upgrade to mode=deployment, uninstall on the real control plane; the installed identity sweeps and leader-elects',
    TIMEOUT,
    async () => {
      const release = await env.namespace('helm');
      const target = await env.namespace('helm-target');
      const kubeconfig = { KUBECONFIG: env.cluster.kubeconfigPath };
      const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
      await removeClusterScopedObjects();
      env.onCleanup(() => helm(['uninstall', 'imagepull-sweeper', '-n', release], kubeconfig));

      const install = await helm(['install', 'imagepull-sweeper', CHART, '-n', release, '--wait', '--timeout', '2m'], kubeconfig);
      assert.equal(install.code, 0, install.stdout + install.stderr);
      const list = await helm(['list', '-n', release, '-o', 'json'], kubeconfig);
      assert.equal((JSON.parse(list.stdout) as { status: string }[])[0]?.status, 'deployed');
      const cron = await kc.makeApiClient(BatchV1Api).readNamespacedCronJob({ namespace: release, name: 'imagepull-sweeper' });
      assert.equal(cron.metadata?.labels?.['app.kubernetes.io/name'], 'imagepull-sweeper');

      // The installed ServiceAccount, with exactly the chart's RBAC: a sweep fails a stuck Job.
      const sa = await serviceAccountKubeconfig(kc, release);
      env.onCleanup(async () => sa.remove());
      await createStuckJob(kc, target, 'stuck', { stuckFor: 9999 });
      const saEnv = { ...process.env, POD_NAMESPACE: release, POD_NAME: 'helm-e2e', KUBECONFIG: '/nonexistent' };
      const sweep = await exec(process.execPath, [CLI, 'sweep', '--kubeconfig', sa.path, '--namespace', target, '--output', 'json'], {
        env: saEnv,
        timeoutMs: 90_000,
      });
      assert.equal(sweep.code, 0, sweep.stdout + sweep.stderr);
      await waitForJobFailed(kc, target, 'stuck', 30_000);
      // ...and holds the release namespace's Lease (the chart's leader-election Role).
      const run = startCli(
        [
          'run',
          '--leader-elect',
          '--leader-elect-namespace',
          release,
          '--schedule',
          '* * * * * *',
          '--namespace',
          target,
          '--kubeconfig',
          sa.path,
          '--output',
          'json',
        ],
        { POD_NAMESPACE: release, POD_NAME: 'helm-e2e' },
      );
      try {
        await waitFor(() => jsonLines(run.output()).some((l) => l.message === 'summary'), 60_000, 'a leader-elected sweep');
      } catch (error) {
        throw new Error(`${(error as Error).message}\n${run.output()}`);
      } finally {
        run.child.kill('SIGTERM');
      }
      assert.equal(await run.exited, 0, run.output());
      const lease = await kc.makeApiClient(CoordinationV1Api).readNamespacedLease({ namespace: release, name: 'imagepull-sweeper' });
      assert.equal(lease.spec?.holderIdentity ?? undefined, undefined, 'released');

      const upgrade = await helm(
        [
          'upgrade',
          'imagepull-sweeper',
          CHART,
          '-n',
          release,
          '--set',
          'mode=deployment,deployment.replicas=0',
          '--wait',
          '--timeout',
          '2m',
        ],
        kubeconfig,
      );
      assert.equal(upgrade.code, 0, upgrade.stdout + upgrade.stderr);
      const deployment: V1Deployment = await kc
        .makeApiClient(AppsV1Api)
        .readNamespacedDeployment({ namespace: release, name: 'imagepull-sweeper' });
      assert.ok(deployment.spec?.template.spec?.containers[0]?.args?.includes('--leader-elect'));
      await kc.makeApiClient(CoreV1Api).readNamespacedService({ namespace: release, name: 'imagepull-sweeper' });
      await assert.rejects(kc.makeApiClient(BatchV1Api).readNamespacedCronJob({ namespace: release, name: 'imagepull-sweeper' }));

      const uninstall = await helm(['uninstall', 'imagepull-sweeper', '-n', release, '--wait'], kubeconfig);
      assert.equal(uninstall.code, 0, uninstall.stdout + uninstall.stderr);
      await assert.rejects(rbac.readClusterRole({ name: 'imagepull-sweeper' }));
      await assert.rejects(kc.makeApiClient(CoreV1Api).readNamespacedConfigMap({ namespace: release, name: 'imagepull-sweeper-policy' }));
    },
  );
});

describe('helm test on the real node', { skip: nodeSkipReason() }, () => {
  it('the hook pod sweeps the release namespace (dry run) as the installed ServiceAccount and succeeds', TIMEOUT, async () => {
    const node = await testNode(env.cluster.kubeconfigPath);
    const imageRef = await pushSweeperImage(await sweeperImage(), node.registry);
    const release = await env.namespace('helm-test');
    const kubeconfig = { KUBECONFIG: env.cluster.kubeconfigPath };
    const api = new URL(env.cluster.server);
    // What this machine forces, as test/fixtures/kustomize-node/ does for the CronJob: no scheduler
    // (the pod names its node) and no route from the node's pods to the API server (host network,
    // told where it listens). A MutatingAdmissionPolicy of the test sets them on the hook pod only.
    const objects = KubernetesObjectApi.makeApiClient(kc);
    const name = `ips-e2e-${release}`;
    const env0 = (n: string, v: string) => `Object.spec.containers.env{name: ${JSON.stringify(n)}, value: ${JSON.stringify(v)}}`;
    const policy = {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'MutatingAdmissionPolicy',
      metadata: { name },
      spec: {
        failurePolicy: 'Fail',
        reinvocationPolicy: 'Never',
        matchConstraints: {
          namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': release } },
          objectSelector: { matchLabels: { 'app.kubernetes.io/component': 'test' } },
          resourceRules: [{ apiGroups: [''], apiVersions: ['v1'], operations: ['CREATE'], resources: ['pods'] }],
        },
        mutations: [
          {
            patchType: 'ApplyConfiguration',
            applyConfiguration: {
              expression: `Object{spec: Object.spec{nodeName: ${JSON.stringify(node.name)}, hostNetwork: true, containers: [Object.spec.containers{name: "imagepull-sweeper", env: [${env0('KUBERNETES_SERVICE_HOST', api.hostname)}, ${env0('KUBERNETES_SERVICE_PORT', api.port)}]}]}}`,
            },
          },
        ],
      },
    };
    const binding = {
      apiVersion: 'admissionregistration.k8s.io/v1',
      kind: 'MutatingAdmissionPolicyBinding',
      metadata: { name },
      spec: { policyName: name },
    };
    for (const o of [policy, binding]) await objects.create(o);
    env.onCleanup(async () => {
      for (const o of [binding, policy]) await objects.delete(o).catch(() => undefined);
    });
    await removeClusterScopedObjects();
    env.onCleanup(() => helm(['uninstall', 'imagepull-sweeper', '-n', release], kubeconfig));
    const [repository, tag] = [imageRef.slice(0, imageRef.lastIndexOf(':')), imageRef.slice(imageRef.lastIndexOf(':') + 1)];
    const install = await helm(
      [
        'install',
        'imagepull-sweeper',
        CHART,
        '-n',
        release,
        '--set',
        `image.repository=${repository},image.tag=${tag}`,
        '--wait',
        '--timeout',
        '2m',
      ],
      kubeconfig,
    );
    assert.equal(install.code, 0, install.stdout + install.stderr);
    // The policy reaches the admission chain a moment after its creation: wait until a dry-run
    // create of a pod it matches comes back placed.
    const core = kc.makeApiClient(CoreV1Api);
    const probe = {
      metadata: { generateName: 'probe-', labels: { 'app.kubernetes.io/component': 'test' } },
      spec: { containers: [{ name: 'imagepull-sweeper', image: imageRef }] },
    };
    await waitFor(
      async () => (await core.createNamespacedPod({ namespace: release, body: probe, dryRun: 'All' })).spec?.nodeName === node.name,
      30_000,
      'the placement policy in effect',
    );
    const test = await helm(['test', 'imagepull-sweeper', '-n', release, '--timeout', '3m'], kubeconfig);
    assert.equal(test.code, 0, test.stdout + test.stderr);
    assert.match(test.stdout, /TEST SUITE:\s+imagepull-sweeper-test[\s\S]*Phase:\s+Succeeded/);
  });
});
