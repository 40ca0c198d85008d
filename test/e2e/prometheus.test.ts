// A real Prometheus (Debian's package, installed by test/node/setup.sh) scrapes `run --listen` on
// loopback every second while it sweeps on the real control plane, with the chart's alert rules
// loaded: its queries return the counts the sweeps audited (sweeps, decisions by outcome and by
// namespace/registry, the requests freed and their resource-seconds, the pods within grace), and
// once the policy turns invalid the ImagePullSweeperInvalidPolicy alert fires.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { KubeConfig } from '@kubernetes/client-node';
import type { AuditLine } from '../../src/report/audit.ts';
import { REPO, ensureBuilt, jsonLines, startCli } from '../support/cli.ts';
import { freePort } from '../support/cluster.ts';
import { PROMETHEUS, startPrometheus, type Sample } from '../support/prometheus.ts';
import { useTestCluster } from '../support/hooks.ts';
import { waitFor } from '../support/kubelet.ts';
import { nodeSkipReason } from '../support/node.ts';
import { createStuckJob } from '../support/sweeper.ts';

// Without a node, setup.sh did not run: a missing Prometheus is then skipped with the reason.
const skip = existsSync(PROMETHEUS) ? undefined : nodeSkipReason();
const TIMEOUT = { timeout: 240_000, skip };
const dir = mkdtempSync(join(tmpdir(), 'ips-prometheus-'));
let kc: KubeConfig;
let kubeconfig: string;
const env = useTestCluster((hooks) => {
  ensureBuilt();
  kc = hooks.kc;
  kubeconfig = hooks.cluster.kubeconfigPath;
});

/** label value -> sample value */
const byLabel = (samples: Sample[], label: string): Record<string, number> =>
  Object.fromEntries(samples.map((s) => [s.metric[label] ?? '', Number(s.value[1])]));

function counted<T>(items: T[], key: (t: T) => string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const i of items) out[key(i)] = (out[key(i)] ?? 0) + 1;
  return out;
}

describe('Prometheus scrapes run', () => {
  it('and its queries return the counts the sweeps audited; the invalid-policy alert fires', TIMEOUT, async () => {
    const ns = await env.namespace('prom');
    const resources = { requests: { cpu: '250m', memory: '64Mi' }, limits: { 'example.com/widget': '1' } };
    const withRequests = {
      template: {
        spec: {
          restartPolicy: 'Never',
          containers: [{ name: 'main', image: 'registry.invalid/team/app:does-not-exist', command: ['true'], resources }],
        },
      },
    };
    for (const name of ['old-a', 'old-b']) await createStuckJob(kc, ns, name, { stuckFor: 7200, spec: withRequests });
    await createStuckJob(kc, ns, 'fresh', { stuckFor: 60, spec: withRequests });
    const policy = join(dir, 'policy.yaml');
    writeFileSync(policy, 'defaults: { grace: { permanent: 30m } }\n');

    const port = await freePort();
    const run = startCli([
      'run',
      '--schedule',
      '*/2 * * * * *',
      '--namespace',
      ns,
      '--policy-file',
      policy,
      '--kubeconfig',
      kubeconfig,
      '--listen',
      `127.0.0.1:${port}`,
      '--output',
      'json',
    ]);
    const prometheus = await startPrometheus({
      jobs: { sweeper: `127.0.0.1:${port}` },
      ruleFiles: [join(REPO, 'charts/imagepull-sweeper/files/alerts.yaml')],
    });
    try {
      const audited = () => {
        const records = jsonLines(run.output());
        const decisions = records.filter((r) => r.message === 'decision') as unknown as AuditLine[];
        return { sweeps: records.filter((r) => r.message === 'summary').length, decisions };
      };
      await waitFor(() => audited().decisions.filter((d) => d.outcome === 'failed').length === 2, 60_000, 'both old Jobs failed');

      // Compared between two reads of the audit that agree, so no sweep finished in between.
      const { before, prom } = await waitFor(
        async () => {
          const before = audited();
          const prom = {
            sweeps: byLabel(await prometheus.query('sum(imagepull_sweeper_sweeps_total{job="sweeper"})'), ''),
            outcomes: byLabel(await prometheus.query('sum by (outcome) (imagepull_sweeper_decisions_total{job="sweeper"}) > 0'), 'outcome'),
          };
          const after = audited();
          const agree =
            after.sweeps === before.sweeps && after.decisions.length === before.decisions.length && prom.sweeps[''] === before.sweeps;
          return agree && { before, prom };
        },
        60_000,
        'Prometheus caught up with the audit between two sweeps',
        250,
      );
      assert.deepEqual(
        prom.outcomes,
        counted(before.decisions, (d) => d.outcome),
      );
      assert.equal(prom.outcomes.failed, 2);
      assert.ok(prom.outcomes.skipped! >= 1, 'the fresh Job is skipped, within grace');

      const failedHere = await prometheus.query(
        `sum by (registry, class) (imagepull_sweeper_decision_details_total{namespace="${ns}",outcome="failed"})`,
      );
      assert.deepEqual(
        failedHere.map((s) => [s.metric.registry, s.metric.class, Number(s.value[1])]),
        [['registry.invalid', 'permanent', 2]],
      );

      const freedLines = before.decisions.filter((d) => d.outcome === 'failed').map((d) => d.freed!);
      const freed = byLabel(
        await prometheus.query(`sum by (resource) (imagepull_sweeper_freed_requests_total{namespace="${ns}"})`),
        'resource',
      );
      // Resource names as kube-state-metrics spells them (src/run/metrics.ts, resourceLabels).
      assert.deepEqual(freed, { cpu: 0.5, memory: 128 * 2 ** 20, example_com_widget: 2 });
      const seconds = byLabel(
        await prometheus.query(`sum by (resource) (imagepull_sweeper_freed_resource_seconds_total{namespace="${ns}"})`),
        'resource',
      );
      const auditedSeconds = freedLines.reduce((sum, f) => sum + f.resourceSeconds['example.com/widget']!, 0);
      assert.ok(Math.abs(seconds.example_com_widget! - auditedSeconds) < 1e-6, `${seconds.example_com_widget} vs ${auditedSeconds}`);
      assert.ok(auditedSeconds >= 2 * 7200);
      assert.deepEqual(byLabel(await prometheus.query(`imagepull_sweeper_stuck_pods_within_grace{namespace="${ns}"}`), 'class'), {
        permanent: 1,
      });
      const widgetsWaiting = await prometheus.query(
        `imagepull_sweeper_stuck_requests_within_grace{namespace="${ns}",resource="example_com_widget",unit="integer"}`,
      );
      assert.equal(Number(widgetsWaiting[0]?.value[1]), 1);

      // Any run: its build, its leader gauge (1 without --leader-elect), the API requests it made.
      const build = await prometheus.query('imagepull_sweeper_build_info');
      assert.match(build[0]?.metric.version ?? '', /^\d+\.\d+\.\d+/);
      assert.match(build[0]?.metric.node_version ?? '', /^v\d+\./);
      assert.equal(Number((await prometheus.query('imagepull_sweeper_leader'))[0]?.value[1]), 1);
      const reads = await prometheus.query('sum(imagepull_sweeper_api_requests_total{verb="GET",code="200"})');
      assert.ok(Number(reads[0]?.value[1]) > 0, JSON.stringify(reads));

      // The chart's rules run on these series: an invalid policy fires its alert.
      writeFileSync(policy, 'limits: { maxJobsPerSweep: lots }\n');
      const firing = await waitFor(
        async () => (await prometheus.alerts()).find((a) => a.labels.alertname === 'ImagePullSweeperInvalidPolicy' && a.state === 'firing'),
        60_000,
        'ImagePullSweeperInvalidPolicy firing',
        250,
      );
      assert.equal(firing.labels.job, 'sweeper');
      assert.equal(firing.labels.severity, 'critical');
      const rules = (await (await fetch(`${prometheus.url}/api/v1/rules`)).json()) as {
        data: { groups: { name: string; rules: unknown[] }[] };
      };
      // Both modes' groups load; this is the Deployment mode's (the CronJob mode's reads kube-state-metrics).
      assert.deepEqual(
        rules.data.groups.map((g) => [g.name, g.rules.length]),
        [
          ['imagepull-sweeper', 7],
          ['imagepull-sweeper-cronjob', 3],
        ],
      );
    } finally {
      run.child.kill('SIGTERM');
      await prometheus.stop();
    }
    assert.equal(await run.exited, 0, run.output());
  });
});
