// The CronJob mode's alerts (group imagepull-sweeper-cronjob of charts/imagepull-sweeper/files/
// alerts.yaml) on real series: kube-state-metrics built from its module
// (test/support/kube-state-metrics.ts) exports the test's CronJobs and Jobs, Debian's Prometheus
// scrapes it every second and evaluates that group, and the sweeper's Jobs really run on the real
// node from the shipped CronJob (manifests/ through the node overlay, as node-cronjob.test.ts).
//
// Two namespaces each hold the CronJob imagepull-sweeper. In `fail` its policy ConfigMap is
// invalid, so each sweep exits 2 and its Job fails; in `ok` the shipped policy is valid, the sweep
// exits 0 and its Job completes. Both CronJobs are given a last success 40 minutes ago (written to
// their status as the cronjob controller writes it): a CronJob created seconds ago cannot be older
// than the rule's 30 minutes. The Jobs are created from the CronJobs (as `kubectl create job
// --from=cronjob/...`; the CronJobs stay suspended, node-cronjob.test.ts proves the schedule);
// the real cronjob controller then moves `ok`'s last success to its Job's completion, and nothing
// moves `fail`'s. Expected: CronJobNotSucceeding and CronJobSweepsFailing fire for `fail`, no
// alert for `ok`, and CronJobAbsent fires once both CronJobs are deleted.
//
// SHORTENED FOR THE TEST: the rules loaded are the chart's with every `for:` divided by 60 (5m
// -> 5s, 10m -> 10s); the expressions are the chart's, byte for byte (asserted below).
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import {
  BatchV1Api,
  CoreV1Api,
  KubernetesObjectApi,
  PatchStrategy,
  RbacAuthorizationV1Api,
  setHeaderOptions,
  type KubernetesObject,
  type V1ClusterRole,
  type V1ConfigMap,
  type V1CronJob,
  type V1Job,
} from '@kubernetes/client-node';
import { parse as parseYaml, stringify as stringifyYaml } from 'yaml';
import { REPO } from '../support/cli.ts';
import { useTestCluster } from '../support/hooks.ts';
import { startKubeStateMetrics } from '../support/kube-state-metrics.ts';
import { waitFor, waitForJobPods } from '../support/kubelet.ts';
import { renderKustomization } from '../support/kustomize.ts';
import { nodeSkipReason, testNode } from '../support/node.ts';
import { PROMETHEUS, startPrometheus, type Alert, type Prometheus } from '../support/prometheus.ts';
import { readJob, trueCondition } from '../support/sweeper.ts';
import { pushSweeperImage, sweeperImage } from '../support/sweeper-image.ts';

const skip = nodeSkipReason() ?? (existsSync(PROMETHEUS) ? undefined : `${PROMETHEUS} is missing: run test/node/setup.sh`);
const env = useTestCluster();
const TIMEOUT = { timeout: 300_000, skip };
const ALERTS = join(REPO, 'charts/imagepull-sweeper/files/alerts.yaml');
const OVERLAY = join(REPO, 'test', 'fixtures', 'kustomize-node');
const GROUP = 'imagepull-sweeper-cronjob';
const CRONJOB = 'imagepull-sweeper';
const POLICY = 'imagepull-sweeper-policy';
const FIELD_MANAGER = 'imagepull-sweeper-alerts-e2e';
const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const log = (line: string): void => {
  process.stderr.write(`[alerts-cronjob] ${line}\n`);
};

interface Rule {
  alert: string;
  expr: string;
  for?: string;
}
interface RuleFile {
  groups: { name: string; rules: Rule[] }[];
}

/** "5m" -> "5s": a Prometheus duration divided by 60 (the chart's are whole minutes or hours). */
function shortened(duration: string): string {
  const m = /^(\d+)([mh])$/.exec(duration);
  assert.ok(m, `for: ${duration} is not in whole minutes or hours`);
  return m[2] === 'm' ? `${m[1]}s` : `${m[1]}m`;
}

/** The chart's CronJob-mode group, its `for:` shortened; written to a file Prometheus loads. */
function shortenedRules(dir: string): { file: string; chart: Rule[]; loaded: Rule[] } {
  const chart = (parseYaml(readFileSync(ALERTS, 'utf8')) as RuleFile).groups.find((g) => g.name === GROUP);
  assert.ok(chart, `${ALERTS} has the group ${GROUP}`);
  const loaded = structuredClone(chart);
  for (const rule of loaded.rules) if (rule.for) rule.for = shortened(rule.for);
  const file = join(dir, 'alerts-cronjob.yaml');
  writeFileSync(file, stringifyYaml({ groups: [loaded] }));
  return { file, chart: chart.rules, loaded: (parseYaml(readFileSync(file, 'utf8')) as RuleFile).groups[0]!.rules };
}

/** Seconds since the epoch, as Prometheus and kube-state-metrics write times. */
const epoch = (d: Date | string | undefined): number => Math.round(new Date(d ?? NaN).getTime() / 1000);

describe('the CronJob-mode alerts, on kube-state-metrics and Prometheus', () => {
  it(
    "fire when the sweeper's Jobs fail on the real node, stay silent when they succeed, and CronJobAbsent fires once the CronJob is gone",
    TIMEOUT,
    async () => {
      const dir = mkdtempSync(join(tmpdir(), 'ips-alerts-cronjob-'));
      const rules = shortenedRules(dir);
      assert.deepEqual(
        rules.loaded.map((r) => [r.alert, r.expr]),
        rules.chart.map((r) => [r.alert, r.expr]),
        'the loaded expressions are the chart’s',
      );
      assert.deepEqual(
        rules.loaded.map((r) => r.for),
        ['5s', '0s', '10s'],
      );

      // hostNetwork (the node overlay's) needs the privileged Pod Security level.
      const privileged = { 'pod-security.kubernetes.io/enforce': 'privileged' };
      const [fail, ok] = [await env.namespace('alerts-fail', privileged), await env.namespace('alerts-ok', privileged)];
      const ksmStarting = startKubeStateMetrics(env.cluster.kubeconfigPath, { resources: ['cronjobs', 'jobs'], namespaces: [fail, ok] });
      void ksmStarting.catch(() => undefined); // awaited below; a failure before then is not unhandled
      const running: { prometheus?: Prometheus } = {};
      env.onCleanup(async () => {
        await running.prometheus?.stop();
        await (await ksmStarting.catch(() => undefined))?.stop();
      });

      const node = await testNode(env.cluster.kubeconfigPath);
      const image = await sweeperImage(log);
      const imageRef = await pushSweeperImage(image, node.registry);
      const api = new URL(env.cluster.server);
      const shipped = renderKustomization(OVERLAY, {
        REGISTRY: node.registry,
        TAG: imageRef.split(':').pop()!,
        NODE: node.name,
        API_HOST: api.hostname,
        API_PORT: api.port,
      });
      const of = <T>(kind: string): T => shipped.find((o) => o.kind === kind) as T;
      const clusterRole = of<V1ClusterRole>('ClusterRole');
      const shippedPolicy = of<V1ConfigMap>('ConfigMap');
      const shippedCron = of<V1CronJob>('CronJob');

      const core = env.kc.makeApiClient(CoreV1Api);
      const batch = env.kc.makeApiClient(BatchV1Api);
      const rbac = env.kc.makeApiClient(RbacAuthorizationV1Api);
      const objects = KubernetesObjectApi.makeApiClient(env.kc);
      const fortyMinutesAgo = new Date(Math.floor(Date.now() / 1000 - 40 * 60) * 1000);
      const cronUid: Record<string, string> = {};

      // The sweeper installed in each namespace: its ServiceAccount, the shipped ClusterRole's rules
      // and the policy reader as a Role there, the policy, and the shipped CronJob sweeping only
      // its own namespace with the policy of that namespace (suspended: the test starts its Jobs).
      for (const ns of [fail, ok]) {
        await core.createNamespacedServiceAccount({ namespace: ns, body: { metadata: { name: CRONJOB } } });
        const rules = [...clusterRole.rules!, { apiGroups: [''], resources: ['configmaps'], resourceNames: [POLICY], verbs: ['get'] }];
        await rbac.createNamespacedRole({ namespace: ns, body: { metadata: { name: CRONJOB }, rules } });
        await rbac.createNamespacedRoleBinding({
          namespace: ns,
          body: {
            metadata: { name: CRONJOB },
            roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: CRONJOB },
            subjects: [{ kind: 'ServiceAccount', name: CRONJOB, namespace: ns }],
          },
        });
        const policy = ns === fail ? 'limits: { maxJobsPerSweep: lots }\n' : shippedPolicy.data!['policy.yaml']!;
        await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: POLICY }, data: { 'policy.yaml': policy } } });

        const cron = structuredClone(shippedCron);
        cron.metadata!.namespace = ns;
        cron.spec!.suspend = true;
        const container = cron.spec!.jobTemplate.spec!.template.spec!.containers[0]!;
        const at = container.args!.indexOf(`imagepull-sweeper/${POLICY}`);
        assert.ok(at > 0, `the shipped CronJob names its policy ConfigMap: ${container.args!.join(' ')}`);
        container.args![at] = `${ns}/${POLICY}`;
        container.args!.push('--namespace', ns);
        const applied = await objects.patch(
          cron as KubernetesObject,
          undefined,
          undefined,
          FIELD_MANAGER,
          true,
          PatchStrategy.ServerSideApply,
        );
        cronUid[ns] = applied.metadata!.uid!;
        await batch.patchNamespacedCronJobStatus(
          { namespace: ns, name: CRONJOB, body: { status: { lastSuccessfulTime: fortyMinutesAgo.toISOString().replace('.000Z', 'Z') } } },
          mergePatch,
        );
      }

      // Two sweeps in `fail`, one in `ok`, all at once, from the CronJob's template.
      const runs = [
        { ns: fail, name: 'sweep-1' },
        { ns: fail, name: 'sweep-2' },
        { ns: ok, name: 'sweep-1' },
      ];
      const tRuns = Date.now();
      for (const { ns, name } of runs) {
        const cron = await batch.readNamespacedCronJob({ namespace: ns, name: CRONJOB });
        await batch.createNamespacedJob({
          namespace: ns,
          body: {
            metadata: {
              name,
              annotations: { 'cronjob.kubernetes.io/instantiate': 'manual' },
              labels: cron.spec!.jobTemplate.metadata?.labels,
              ownerReferences: [{ apiVersion: 'batch/v1', kind: 'CronJob', name: CRONJOB, uid: cronUid[ns]!, controller: true }],
            },
            spec: cron.spec!.jobTemplate.spec,
          },
        });
      }
      const finished: Record<string, V1Job> = {};
      for (const { ns, name } of runs) {
        const job = await waitFor(
          async () => {
            const j = await readJob(env.kc, ns, name);
            return (trueCondition(j, 'Complete') || trueCondition(j, 'Failed')) && j;
          },
          120_000,
          `Job ${ns}/${name} finished`,
        );
        const [pod] = await waitForJobPods(core, ns, name);
        const exitCode = pod!.status?.containerStatuses?.[0]?.state?.terminated?.exitCode;
        assert.equal(exitCode, ns === fail ? 2 : 0, `${ns}/${name}: the sweeper's exit status (2: invalid policy)`);
        assert.ok(trueCondition(job, ns === fail ? 'Failed' : 'Complete'), `${ns}/${name}: ${JSON.stringify(job.status?.conditions)}`);
        finished[`${ns}/${name}`] = job;
      }
      log(`the three sweeps finished on the node ${Date.now() - tRuns} ms after their Jobs were created`);

      // The real cronjob controller records `ok`'s success; `fail`'s last success stays 40 minutes old.
      const completed = finished[`${ok}/sweep-1`]!.status!.completionTime!;
      await waitFor(
        async () =>
          epoch((await batch.readNamespacedCronJob({ namespace: ok, name: CRONJOB })).status?.lastSuccessfulTime) === epoch(completed),
        30_000,
        `the cronjob controller set ${ok}'s lastSuccessfulTime to its Job's completion`,
      );
      const failCron = await batch.readNamespacedCronJob({ namespace: fail, name: CRONJOB });
      assert.equal(epoch(failCron.status?.lastSuccessfulTime), epoch(fortyMinutesAgo));

      const ksm = await ksmStarting;
      const tProm = Date.now();
      const prom = await startPrometheus({ jobs: { 'kube-state-metrics': ksm.target }, ruleFiles: [rules.file] });
      running.prometheus = prom;
      const loaded = (await (await fetch(`${prom.url}/api/v1/rules`)).json()) as {
        data: { groups: { name: string; rules: { name: string; query: string; duration: number }[] }[] };
      };
      assert.deepEqual(
        loaded.data.groups.map((g) => [g.name, g.rules.map((r) => [r.name, r.duration])]),
        [
          [
            GROUP,
            [
              ['ImagePullSweeperCronJobNotSucceeding', 5],
              ['ImagePullSweeperCronJobSweepsFailing', 0],
              ['ImagePullSweeperCronJobAbsent', 10],
            ],
          ],
        ],
      );

      const firing = (alerts: Alert[], name: string, ns?: string): Alert | undefined =>
        alerts.find((a) => a.labels.alertname === name && a.state === 'firing' && (ns === undefined || a.labels.namespace === ns));
      const fired: Record<string, number> = {};
      const alerts = await waitFor(
        async () => {
          const now = await prom.alerts();
          for (const name of ['ImagePullSweeperCronJobSweepsFailing', 'ImagePullSweeperCronJobNotSucceeding']) {
            if (firing(now, name, fail)) fired[name] ??= Date.now() - tProm;
          }
          return Object.keys(fired).length === 2 && now;
        },
        90_000,
        `both alerts firing for ${fail}`,
      );
      log(`firing for ${fail}, ms after Prometheus was started: ${JSON.stringify(fired)}`);

      const failing = firing(alerts, 'ImagePullSweeperCronJobSweepsFailing', fail)!;
      assert.equal(Number(failing.value), 2);
      assert.equal(failing.annotations.summary, `2 sweeps of the CronJob ${fail}/imagepull-sweeper failed in the last 30 minutes.`);
      const notSucceeding = firing(alerts, 'ImagePullSweeperCronJobNotSucceeding', fail)!;
      assert.equal(notSucceeding.labels.cronjob, CRONJOB);
      assert.ok(Number(notSucceeding.value) >= 40 * 60, `seconds since the last success: ${notSucceeding.value}`);

      // Silent for `ok`, on the same series: they are there, and say it succeeded just now.
      assert.deepEqual(
        alerts.filter((a) => a.labels.namespace === ok),
        [],
        'no alert, pending or firing, for the namespace whose sweep succeeded',
      );
      assert.equal(firing(alerts, 'ImagePullSweeperCronJobAbsent'), undefined);
      const lastSuccess = await prom.query(`kube_cronjob_status_last_successful_time{namespace="${ok}",cronjob="${CRONJOB}"}`);
      assert.equal(Number(lastSuccess[0]?.value[1]), epoch(completed));
      const okFailed = await prom.query(`max(kube_job_status_failed{namespace="${ok}",job_name="sweep-1"})`);
      assert.equal(Number(okFailed[0]?.value[1]), 0);
      const owned = await prom.query(`count by (namespace) (kube_job_owner{owner_kind="CronJob",owner_name="${CRONJOB}"})`);
      assert.deepEqual(Object.fromEntries(owned.map((s) => [s.metric.namespace, Number(s.value[1])])), { [fail]: 2, [ok]: 1 });

      // Both CronJobs deleted: kube_cronjob_info is gone, and CronJobAbsent fires after its `for:`.
      const tDelete = Date.now();
      for (const ns of [fail, ok]) await batch.deleteNamespacedCronJob({ namespace: ns, name: CRONJOB, propagationPolicy: 'Background' });
      const absent = await waitFor(
        async () => firing(await prom.alerts(), 'ImagePullSweeperCronJobAbsent'),
        60_000,
        'CronJobAbsent firing',
      );
      log(`ImagePullSweeperCronJobAbsent firing ${Date.now() - tDelete} ms after the CronJobs were deleted`);
      assert.deepEqual(absent.labels, { alertname: 'ImagePullSweeperCronJobAbsent', cronjob: CRONJOB, severity: 'warning' });
    },
  );
});
