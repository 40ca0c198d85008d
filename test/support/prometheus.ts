// Debian's Prometheus (installed by test/node/setup.sh) on a free loopback port, scraping the
// given targets every second and evaluating the given rule files every second; its query and
// alerts APIs for the tests.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort } from './cluster.ts';
import { waitFor } from './kubelet.ts';

export const PROMETHEUS = '/usr/bin/prometheus';

export interface Sample {
  metric: Record<string, string>;
  value: [number, string];
}

export interface Alert {
  labels: Record<string, string>;
  annotations: Record<string, string>;
  state: 'pending' | 'firing';
  activeAt: string;
  value: string;
}

export interface Prometheus {
  url: string;
  output(): string;
  query(promql: string): Promise<Sample[]>;
  /** The alerts pending or firing now. */
  alerts(): Promise<Alert[]>;
  stop(): Promise<void>;
}

export async function startPrometheus(opts: { jobs: Record<string, string>; ruleFiles: string[] }): Promise<Prometheus> {
  assert.ok(existsSync(PROMETHEUS), `${PROMETHEUS} is missing: run test/node/setup.sh`);
  const dir = mkdtempSync(join(tmpdir(), 'ips-prometheus-'));
  const port = await freePort();
  const config = join(dir, 'prometheus.yml');
  writeFileSync(
    config,
    [
      'global: { scrape_interval: 1s, evaluation_interval: 1s }',
      `rule_files: ${JSON.stringify(opts.ruleFiles)}`,
      'scrape_configs:',
      ...Object.entries(opts.jobs).map(
        ([job, target]) => `  - { job_name: ${job}, static_configs: [{ targets: [${JSON.stringify(target)}] }] }`,
      ),
      '',
    ].join('\n'),
  );
  const child = spawn(
    PROMETHEUS,
    [`--config.file=${config}`, `--storage.tsdb.path=${join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  child.stdout.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr.on('data', (c: Buffer) => (out += c.toString()));
  const url = `http://127.0.0.1:${port}`;
  const stop = async (): Promise<void> => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const closed = new Promise((resolve) => child.once('close', resolve));
    child.kill('SIGTERM');
    await closed;
  };
  try {
    await waitFor(async () => (await fetch(`${url}/-/ready`).catch(() => undefined))?.ok, 60_000, `Prometheus ready:\n${out}`, 200);
  } catch (error) {
    await stop();
    throw error;
  }
  return {
    url,
    output: () => out,
    async query(promql) {
      const res = await fetch(`${url}/api/v1/query?query=${encodeURIComponent(promql)}`);
      const body = (await res.json()) as { status: string; data: { result: Sample[] }; error?: string };
      assert.equal(body.status, 'success', `${promql}: ${body.error}`);
      return body.data.result;
    },
    async alerts() {
      const body = (await (await fetch(`${url}/api/v1/alerts`)).json()) as { data: { alerts: Alert[] } };
      return body.data.alerts;
    },
    stop,
  };
}
