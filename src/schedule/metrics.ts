import { createServer, type Server } from 'node:http';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { outcomesFor } from '../model.ts';
import type { SweepResult, SweepStatus } from '../sweep.ts';
import { RunOptionError } from './errors.ts';

const RESULT_LABEL: Record<SweepStatus, string> = {
  done: 'ok',
  'actions-failed': 'actions_failed',
  'invalid-policy': 'invalid_policy',
  unreachable: 'unreachable',
  'no-server-clock': 'no_server_clock',
};

export class SweepMetrics {
  readonly registry = new Registry();
  private readonly sweeps = new Counter({
    name: 'imagepull_sweeper_sweeps_total',
    help: 'Sweeps run, by result (ok, actions_failed, invalid_policy, unreachable, no_server_clock, crashed).',
    labelNames: ['result'],
    registers: [this.registry],
  });
  private readonly jobs = new Counter({
    name: 'imagepull_sweeper_decisions_total',
    help: 'Decisions taken, by outcome (failed, reported, skipped, deferred, error; in a dry run would-fail, would-report, would-retry instead).',
    labelNames: ['outcome'],
    registers: [this.registry],
  });
  private readonly policyMissing = new Counter({
    name: 'imagepull_sweeper_policy_missing_total',
    help: 'Sweeps that found no policy ConfigMap: configmap="default" ran on the built-in defaults, configmap="named" (--policy-configmap) did nothing.',
    labelNames: ['configmap'],
    registers: [this.registry],
  });
  private readonly lastSweep = new Gauge({
    name: 'imagepull_sweeper_last_sweep_timestamp_seconds',
    help: 'Unix time the last sweep finished.',
    registers: [this.registry],
  });
  private readonly duration = new Histogram({
    name: 'imagepull_sweeper_sweep_duration_seconds',
    help: 'How long sweeps took.',
    buckets: [0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300],
    registers: [this.registry],
  });

  /** `dryRun`: the outcome labels start at zero as `would-*` (what `run --dry-run` produces). */
  constructor(options: { dryRun?: boolean } = {}) {
    for (const result of [...Object.values(RESULT_LABEL), 'crashed']) this.sweeps.inc({ result }, 0);
    for (const outcome of outcomesFor(options.dryRun === true)) this.jobs.inc({ outcome }, 0);
    for (const configmap of ['default', 'named']) this.policyMissing.inc({ configmap }, 0);
    collectDefaultMetrics({ register: this.registry, prefix: 'imagepull_sweeper_' });
  }

  record(result: SweepResult | undefined, seconds: number, finishedAt: Date): void {
    this.sweeps.inc({ result: result ? RESULT_LABEL[result.status] : 'crashed' });
    for (const r of result?.results ?? []) this.jobs.inc({ outcome: r.outcome });
    if (result?.policyMissing) this.policyMissing.inc({ configmap: result.policyMissing });
    this.duration.observe(seconds);
    this.lastSweep.set(finishedAt.getTime() / 1000);
  }
}

export function parseListenAddress(text: string): { host: string; port: number } {
  const match = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(text);
  const port = match ? Number(match[3]) : NaN;
  if (!match || port > 65535) throw new RunOptionError(`--listen ${text}: expected HOST:PORT or :PORT`);
  return { host: match[1] ?? (match[2] || '0.0.0.0'), port };
}

/** /healthz and /metrics for Prometheus. */
export async function serveMetrics(metrics: SweepMetrics, address: { host: string; port: number }): Promise<Server> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/healthz') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
    } else if (path === '/metrics') {
      metrics.registry.metrics().then(
        (body) => res.writeHead(200, { 'content-type': metrics.registry.contentType }).end(body),
        (error: unknown) => res.writeHead(500).end(String(error)),
      );
    } else {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
    }
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(address.port, address.host, () => resolve());
  });
  return server;
}
