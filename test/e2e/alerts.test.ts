// The alert rules (charts/imagepull-sweeper/files/alerts.yaml) checked and unit-tested by the real
// promtool (Debian's prometheus package, installed by test/node/setup.sh with the node's packages):
// `promtool check rules`, then `promtool test rules test/prometheus/alerts.test.yaml`, whose cases
// make every alert fire on the series it is meant for and stay silent on a healthy sweeper's.
// The dashboard's queries are parsed by promtool too (as recording rules, Grafana's variables
// replaced).
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { promisify } from 'node:util';
import { nodeSkipReason } from '../support/node.ts';

const run = promisify(execFile);
const ALERTS = 'charts/imagepull-sweeper/files/alerts.yaml';
const RULE_TESTS = 'test/prometheus/alerts.test.yaml';
const DASHBOARD = 'charts/imagepull-sweeper/files/dashboard.json';
// Without a node, setup.sh did not run: a missing promtool is then skipped with the reason.
const skip = existsSync('/usr/bin/promtool') ? undefined : nodeSkipReason();

async function promtool(...args: string[]): Promise<string> {
  try {
    const { stdout, stderr } = await run('promtool', args, { timeout: 60_000 });
    return stdout + stderr;
  } catch (error) {
    const e = error as { code?: string | number; stdout?: string; stderr?: string };
    if (e.code === 'ENOENT') assert.fail('promtool is missing: run test/node/setup.sh');
    assert.fail(`promtool ${args.join(' ')} failed (${e.code}):\n${e.stdout ?? ''}${e.stderr ?? ''}`);
  }
}

describe('alert rules, by promtool', { skip }, () => {
  it('are valid rule groups', async () => {
    assert.match(await promtool('check', 'rules', ALERTS), /SUCCESS: 10 rules found/);
  });

  it('fire on the series each is meant for, and not on a healthy sweeper', async () => {
    assert.match(await promtool('test', 'rules', RULE_TESTS), /SUCCESS/);
  });

  it('parse every query of the dashboard', async () => {
    const dashboard = JSON.parse(readFileSync(DASHBOARD, 'utf8')) as { panels: { targets?: { expr: string }[] }[] };
    const exprs = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr));
    const grafana = (e: string) =>
      e
        .replaceAll('$__rate_interval', '5m')
        .replaceAll('$__range', '1h')
        .replace(/\$(job|cluster|namespace)\b/g, '.*');
    const rules = exprs.map((e, i) => `      - record: dashboard_query_${i}\n        expr: ${JSON.stringify(grafana(e))}`);
    const file = join(mkdtempSync(join(tmpdir(), 'dashboard-rules-')), 'rules.yaml');
    writeFileSync(file, `groups:\n  - name: dashboard\n    rules:\n${rules.join('\n')}\n`);
    assert.match(await promtool('check', 'rules', file), new RegExp(`SUCCESS: ${exprs.length} rules found`));
  });
});
