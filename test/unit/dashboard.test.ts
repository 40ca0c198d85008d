// The dashboard and the alert rules shipped in the chart only name metrics the sweeper really
// exports (read from its registry), and every alert links a runbook section of docs/metrics.md.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { parse } from 'yaml';
import { SweepMetrics } from '../../src/run/metrics.ts';

const DASHBOARD = 'charts/imagepull-sweeper/files/dashboard.json';
const ALERTS = 'charts/imagepull-sweeper/files/alerts.yaml';
const DOC = 'docs/metrics.md';
const RUNBOOK_BASE = (parse(readFileSync('charts/imagepull-sweeper/values.yaml', 'utf8')) as { prometheusRule: { runbookBaseUrl: string } })
  .prometheusRule.runbookBaseUrl;

async function exportedSeries(): Promise<Set<string>> {
  const names = new Set<string>();
  for (const m of await new SweepMetrics().registry.getMetricsAsJSON()) {
    names.add(m.name);
    if (String(m.type) === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(`${m.name}${suffix}`);
  }
  return names;
}

/** The sweeper's own metrics, without the process ones collectDefaultMetrics adds under the prefix. */
async function ownMetrics(): Promise<string[]> {
  const bare = new (await import('prom-client')).Registry();
  const { collectDefaultMetrics } = await import('prom-client');
  collectDefaultMetrics({ register: bare, prefix: 'imagepull_sweeper_' });
  const defaults = new Set((await bare.getMetricsAsJSON()).map((m) => m.name));
  return (await new SweepMetrics().registry.getMetricsAsJSON()).map((m) => m.name).filter((n) => !defaults.has(n));
}

const named = (expr: string): string[] => expr.match(/\bimagepull_sweeper_[a-z0-9_]+/g) ?? [];

function dashboardQueries(): string[] {
  const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as {
    panels: { targets?: { expr: string }[] }[];
    templating: { list: { query?: unknown }[] };
  };
  const queries = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr));
  for (const v of dashboard.templating.list) {
    const q = v.query as { query?: string } | string | undefined;
    const text = typeof q === 'string' ? q : q?.query;
    if (text && text.includes('imagepull_sweeper_')) queries.push(text);
  }
  return queries;
}

interface Rule {
  alert: string;
  expr: string;
  annotations: Record<string, string>;
}
/** The alerts of one group (the chart renders the group of its mode), or of all. */
const alertRules = (group?: string): Rule[] =>
  (parse(readFileSync(ALERTS, 'utf8')) as { groups: { name: string; rules: Rule[] }[] }).groups
    .filter((g) => group === undefined || g.name === group)
    .flatMap((g) => g.rules);

/**
 * The kube-state-metrics series the CronJob mode's alerts read, as v2.18.0 exports them
 * (docs/metrics/workload/cronjob-metrics.md and job-metrics.md of kubernetes/kube-state-metrics).
 */
const KUBE_STATE_METRICS = new Set([
  'kube_cronjob_info',
  'kube_cronjob_created',
  'kube_cronjob_status_last_successful_time',
  'kube_job_owner',
  'kube_job_created',
  'kube_job_status_failed',
]);

/** GitHub's anchor of a Markdown heading. */
const anchor = (heading: string): string =>
  heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');

describe('the dashboard and the alerts name only exported metrics', () => {
  it('every dashboard query names a metric, and each one the sweeper exports', async () => {
    const exported = await exportedSeries();
    const queries = dashboardQueries();
    assert.ok(queries.length >= 15, `only ${queries.length} queries`);
    for (const q of queries) {
      assert.ok(named(q).length > 0, `names no metric: ${q}`);
      for (const name of named(q)) assert.ok(exported.has(name), `${name} is not exported (query: ${q})`);
    }
  });

  it('every alert expression names a metric, and each one the sweeper exports', async () => {
    const exported = await exportedSeries();
    const rules = alertRules('imagepull-sweeper').filter((r) => r.alert !== 'ImagePullSweeperAbsent');
    assert.equal(rules.length, 6);
    for (const r of rules) {
      assert.ok(named(r.expr).length > 0, `${r.alert} names no metric`);
      for (const name of named(r.expr)) assert.ok(exported.has(name), `${r.alert}: ${name} is not exported`);
    }
  });

  it('the CronJob mode alerts on kube-state-metrics series only; each mode has an absent rule', () => {
    const rules = alertRules('imagepull-sweeper-cronjob');
    assert.equal(rules.length, 3);
    for (const r of rules) {
      assert.deepEqual(named(r.expr), [], `${r.alert} reads no metric of the sweeper`);
      const series = r.expr.match(/\bkube_[a-z_]+/g) ?? [];
      assert.ok(series.length > 0, `${r.alert} names no series`);
      for (const name of series) assert.ok(KUBE_STATE_METRICS.has(name), `${r.alert}: ${name}`);
    }
    assert.match(
      alertRules('imagepull-sweeper').find((r) => r.alert === 'ImagePullSweeperAbsent')?.expr ?? '',
      /^absent\(up\{job="imagepull-sweeper"\}/,
    );
    assert.match(
      rules.find((r) => r.alert === 'ImagePullSweeperCronJobAbsent')?.expr ?? '',
      /^absent\(kube_cronjob_info\{cronjob="imagepull-sweeper"\}\)/,
    );
  });

  it('the check catches a name the sweeper does not export', async () => {
    const exported = await exportedSeries();
    assert.ok(!exported.has('imagepull_sweeper_jobs_failed_total'));
    assert.ok(exported.has('imagepull_sweeper_failed_stuck_seconds_bucket'));
    assert.ok(exported.has('imagepull_sweeper_process_start_time_seconds'));
  });
});

describe('docs/metrics.md', () => {
  const doc = readFileSync(DOC, 'utf8');
  const anchors = new Set([...doc.matchAll(/^#{1,6} (.+)$/gm)].map((m) => anchor(m[1]!)));

  it('has the runbook section each alert links to', () => {
    for (const r of alertRules()) {
      const url = r.annotations.runbook_url ?? '';
      // Absolute (Alertmanager, Grafana and pagers cannot follow a relative link): the chart's default base.
      assert.ok(url.startsWith(`${RUNBOOK_BASE}#`), `${r.alert}: runbook_url ${url}`);
      const target = url.split('#')[1]!;
      assert.equal(target, r.alert.toLowerCase(), `${r.alert}: anchor ${target}`);
      assert.ok(anchors.has(target), `${r.alert}: no heading for #${target} in ${DOC}`);
    }
  });

  it('describes every metric the sweeper exports', async () => {
    for (const name of await ownMetrics()) assert.ok(doc.includes(`\`${name}`), `${name} is not in ${DOC}`);
  });
});
