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
  RbacAuthorizationV1Api,
  type KubeConfig,
  type KubernetesObject,
  type V1CronJob,
  type V1Deployment,
} from '@kubernetes/client-node';
import { parse as parseYaml } from 'yaml';
import { CLI, ensureBuilt, exec, jsonLines, startCli } from '../support/cli.ts';
import { CHART, helm, helmTemplate } from '../support/helm.ts';
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

describe('the Helm chart', () => {
  it('helm lint passes in both modes and with every optional object on', TIMEOUT, async () => {
    for (const set of [[], ['mode=deployment', 'serviceMonitor.enabled=true', 'prometheusRule.enabled=true', 'dashboard.enabled=true']]) {
      const r = await helm(['lint', '--strict', CHART, ...set.flatMap((s) => ['--set', s])]);
      assert.equal(r.code, 0, `helm lint ${set.join(' ')}:\n${r.stdout}${r.stderr}`);
    }
  });

  it('one source of truth: the default render is manifests/ object by object (the Namespace with createNamespace)', TIMEOUT, async () => {
    const manifests = renderKustomization(MANIFESTS);
    const chart = await helmTemplate(INSTALL_NS);
    assertSameObjects(
      chart,
      manifests.filter((o) => o.kind !== 'Namespace'),
      'default',
    );
    assertSameObjects(await helmTemplate(INSTALL_NS, ['createNamespace=true']), manifests, 'createNamespace=true');
  });

  it('mode=deployment renders manifests/ with the Component manifests/deployment/, object by object', TIMEOUT, async () => {
    const overlay = renderKustomization(join(MANIFESTS, '..', 'test', 'fixtures', 'kustomize-deployment'));
    const chart = await helmTemplate(INSTALL_NS, ['mode=deployment', 'createNamespace=true']);
    assertSameObjects(chart, overlay, 'deployment');
  });

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
      const rule = find<{ spec: { groups: unknown[] } }>(all, 'PrometheusRule');
      assert.deepEqual(
        rule.spec.groups,
        (parseYaml(readFileSync(join(CHART, 'files', 'alerts.yaml'), 'utf8')) as { groups: unknown[] }).groups,
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
      // The chart's cluster-scoped objects have fixed names: one sweeper per cluster. Remove those
      // of manifests/ applied by other test files (each applies them again itself).
      const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
      const admission = kc.makeApiClient(AdmissionregistrationV1Api);
      await rbac.deleteClusterRole({ name: 'imagepull-sweeper' }).catch(() => undefined);
      await rbac.deleteClusterRoleBinding({ name: 'imagepull-sweeper' }).catch(() => undefined);
      await admission.deleteValidatingAdmissionPolicy({ name: 'imagepull-sweeper-guard' }).catch(() => undefined);
      await admission.deleteValidatingAdmissionPolicyBinding({ name: 'imagepull-sweeper-guard' }).catch(() => undefined);
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
