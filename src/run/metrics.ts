import { createServer, type Server } from 'node:http';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { ActResult } from '../act/act.ts';
import { registryHost } from '../classify/reference.ts';
import { countWithinGrace } from '../judge/grace.ts';
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

/** client-go's rest_client_request_duration_seconds buckets, in seconds. */
const API_BUCKETS = [0.005, 0.025, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 60];

/**
 * A resource's labels as kube-state-metrics spells them (internal/store/utils.go,
 * toResourceUnitValue; docs/metrics/workload/pod-metrics.md): the name with every character
 * outside [a-zA-Z0-9_] made `_` (`nvidia.com/gpu` -> `nvidia_com_gpu`), and its unit: `core` for
 * cpu, `byte` for memory, storage, hugepages and attachable volumes, `integer` for the rest.
 */
export function resourceLabels(resource: string): { resource: string; unit: string } {
  const unit =
    resource === 'cpu'
      ? 'core'
      : /^(memory|storage|ephemeral-storage|hugepages-.+|attachable-volumes-.+)$/.test(resource)
        ? 'byte'
        : 'integer';
  return { resource: resource.replace(/[^a-zA-Z0-9_]/g, '_'), unit };
}

/** Bounds of the stuck-time histogram, in seconds: one minute to one day. */
const STUCK_BUCKETS = [60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 43200, 86400];

export class SweepMetrics {
  readonly registry = new Registry();
  private readonly buildInfo = new Gauge({
    name: 'imagepull_sweeper_build_info',
    help: 'Always 1; the labels say which version of the sweeper runs on which Node.js.',
    labelNames: ['version', 'node_version'],
    registers: [this.registry],
  });
  private readonly leader = new Gauge({
    name: 'imagepull_sweeper_leader',
    help: '1 while this replica may sweep: it holds the Lease (--leader-elect), or always without --leader-elect; else 0.',
    registers: [this.registry],
  });
  private readonly apiRequests = new Counter({
    name: 'imagepull_sweeper_api_requests_total',
    help: 'Kubernetes API requests, by verb (GET, POST, PUT, PATCH, DELETE, WATCH) and HTTP status code ("<error>": no answer).',
    labelNames: ['verb', 'code'],
    registers: [this.registry],
  });
  private readonly apiDuration = new Histogram({
    name: 'imagepull_sweeper_api_request_duration_seconds',
    help: 'How long Kubernetes API requests took, by verb (a watch: until its answer began).',
    labelNames: ['verb'],
    buckets: API_BUCKETS,
    registers: [this.registry],
  });
  private readonly sweeps = new Counter({
    name: 'imagepull_sweeper_sweeps_total',
    help: 'Sweeps run, by result (ok, actions_failed, invalid_policy, unreachable, no_server_clock, crashed).',
    labelNames: ['result'],
    registers: [this.registry],
  });
  private readonly jobs = new Counter({
    name: 'imagepull_sweeper_decisions_total',
    help: 'Decisions taken, by outcome (failed, reported, retried, healed, skipped, deferred, error; in a dry run would-fail, would-report, would-retry, would-heal instead).',
    labelNames: ['outcome'],
    registers: [this.registry],
  });
  private readonly details = new Counter({
    name: 'imagepull_sweeper_decision_details_total',
    help: 'Decisions taken, by outcome, pull class, namespace and registry host of the image (decisions_total split further).',
    labelNames: ['outcome', 'class', 'namespace', 'registry'],
    registers: [this.registry],
  });
  private readonly policyMissing = new Counter({
    name: 'imagepull_sweeper_policy_missing_total',
    help: 'Sweeps that found no policy ConfigMap: configmap="default" ran on the built-in defaults, configmap="named" (--policy-configmap) did nothing.',
    labelNames: ['configmap'],
    registers: [this.registry],
  });
  private readonly policyInvalid = new Gauge({
    name: 'imagepull_sweeper_policy_invalid',
    help: '1 when the last sweep found the policy invalid (and changed nothing), else 0.',
    registers: [this.registry],
  });
  private readonly lastSweep = new Gauge({
    name: 'imagepull_sweeper_last_sweep_timestamp_seconds',
    help: 'Unix time the last sweep finished.',
    registers: [this.registry],
  });
  private readonly lastSuccess = new Gauge({
    name: 'imagepull_sweeper_last_successful_sweep_timestamp_seconds',
    help: 'Unix time the last sweep that judged the cluster finished (result ok or actions_failed); 0 before the first.',
    registers: [this.registry],
  });
  private readonly duration = new Histogram({
    name: 'imagepull_sweeper_sweep_duration_seconds',
    help: 'How long sweeps took.',
    buckets: [0.1, 0.5, 1, 2, 5, 10, 30, 60, 120, 300],
    registers: [this.registry],
  });
  private readonly trips = new Counter({
    name: 'imagepull_sweeper_breaker_trips_total',
    help: 'Outage breaker trips, by scope (sweep or registry), registry host ("" for the sweep) and class (transient, auth, permanent).',
    labelNames: ['scope', 'host', 'class'],
    registers: [this.registry],
  });
  private readonly tripped = new Gauge({
    name: 'imagepull_sweeper_breaker_tripped',
    help: '1 for each scope, host and class the outage breaker tripped in the last sweep that judged the cluster.',
    labelNames: ['scope', 'host', 'class'],
    registers: [this.registry],
  });
  private readonly stuckFailed = new Histogram({
    name: 'imagepull_sweeper_failed_stuck_seconds',
    help: 'How long the container that got its Job failed had been stuck, by pull class.',
    labelNames: ['class'],
    buckets: STUCK_BUCKETS,
    registers: [this.registry],
  });
  private readonly withinGrace = new Gauge({
    name: 'imagepull_sweeper_stuck_pods_within_grace',
    help: 'Stuck pods of Jobs still within their grace in the last sweep that judged the cluster, by namespace and pull class.',
    labelNames: ['namespace', 'class'],
    registers: [this.registry],
  });
  private readonly graceRequests = new Gauge({
    name: 'imagepull_sweeper_stuck_requests_within_grace',
    help: 'Resources requested by those pods, by namespace, resource and unit (core, byte, integer; as kube-state-metrics).',
    labelNames: ['namespace', 'resource', 'unit'],
    registers: [this.registry],
  });
  private readonly freedPods = new Counter({
    name: 'imagepull_sweeper_freed_pods_total',
    help: 'Stuck pods of the Jobs the sweeper failed, by namespace.',
    labelNames: ['namespace'],
    registers: [this.registry],
  });
  private readonly freedRequests = new Counter({
    name: 'imagepull_sweeper_freed_requests_total',
    help: 'Resources requested by the stuck pods of the Jobs the sweeper failed, by namespace, resource and unit (core, byte, integer).',
    labelNames: ['namespace', 'resource', 'unit'],
    registers: [this.registry],
  });
  private readonly freedSeconds = new Counter({
    name: 'imagepull_sweeper_freed_resource_seconds_total',
    help: 'Request × seconds held (since scheduled) by the stuck pods of the Jobs the sweeper failed, by namespace, resource and unit.',
    labelNames: ['namespace', 'resource', 'unit'],
    registers: [this.registry],
  });

  /** For the gateways `run` builds (kube/http.ts): counts and times each API request. */
  readonly observeResponse = (verb: string, status: number, seconds: number): void => {
    this.apiRequests.inc({ verb, code: status === 0 ? '<error>' : String(status) });
    this.apiDuration.observe({ verb }, seconds);
  };

  /** For `run --leader-elect` (cli/leader-elect.ts): the leader gauge and the Lease requests. */
  readonly leaseObservers = {
    onLeading: (leading: boolean): void => this.leader.set(leading ? 1 : 0),
    onResponse: this.observeResponse,
  };

  /**
   * `dryRun`: the outcome labels start at zero as `would-*` (what `run --dry-run` produces).
   * `version`: the sweeper's (package.json). `leaderElect`: the leader gauge starts at 0, not 1.
   */
  constructor(options: { dryRun?: boolean; version?: string; leaderElect?: boolean } = {}) {
    this.buildInfo.set({ version: options.version ?? 'unknown', node_version: process.version }, 1);
    this.leader.set(options.leaderElect === true ? 0 : 1);
    for (const result of [...Object.values(RESULT_LABEL), 'crashed']) this.sweeps.inc({ result }, 0);
    for (const outcome of outcomesFor(options.dryRun === true)) this.jobs.inc({ outcome }, 0);
    for (const configmap of ['default', 'named']) this.policyMissing.inc({ configmap }, 0);
    for (const c of ['transient', 'auth']) this.trips.inc({ scope: 'sweep', host: '', class: c }, 0);
    this.policyInvalid.set(0);
    collectDefaultMetrics({ register: this.registry, prefix: 'imagepull_sweeper_' });
  }

  record(result: SweepResult | undefined, seconds: number, finishedAt: Date): void {
    this.sweeps.inc({ result: result ? RESULT_LABEL[result.status] : 'crashed' });
    for (const r of result?.results ?? []) this.recordDecision(r);
    for (const e of result?.counted?.entries() ?? []) {
      this.jobs.inc({ outcome: e.outcome }, e.results);
      this.details.inc({ outcome: e.outcome, class: e.pullClass, namespace: e.namespace, registry: e.registry }, e.results);
    }
    if (result?.policyMissing) this.policyMissing.inc({ configmap: result.policyMissing });
    this.policyInvalid.set(result?.status === 'invalid-policy' ? 1 : 0);
    this.duration.observe(seconds);
    this.lastSweep.set(finishedAt.getTime() / 1000);
    if (result?.status === 'done' || result?.status === 'actions-failed') {
      this.lastSuccess.set(finishedAt.getTime() / 1000);
      this.recordState(result);
    }
  }

  private recordDecision(r: ActResult): void {
    const d = r.decision;
    const namespace = d.namespace;
    this.jobs.inc({ outcome: r.outcome });
    this.details.inc({ outcome: r.outcome, class: d.pullClass, namespace, registry: registryHost(d.image) });
    if (r.outcome !== 'failed') return;
    this.stuckFailed.observe({ class: d.pullClass }, d.stuckSeconds);
    const freed = d.capacity;
    if (!freed) return;
    this.freedPods.inc({ namespace }, freed.pods);
    for (const [r, v] of Object.entries(freed.requests)) this.freedRequests.inc({ namespace, ...resourceLabels(r) }, v);
    for (const [r, v] of Object.entries(freed.resourceSeconds)) this.freedSeconds.inc({ namespace, ...resourceLabels(r) }, v);
  }

  /** The gauges describe the last sweep that judged the cluster. */
  private recordState(result: SweepResult): void {
    this.tripped.reset();
    for (const t of result.summary?.outage.trips ?? []) {
      const labels = { scope: t.host === undefined ? 'sweep' : 'registry', host: t.host ?? '', class: t.pullClass };
      this.tripped.set(labels, 1);
      this.trips.inc(labels);
    }
    this.withinGrace.reset();
    this.graceRequests.reset();
    const within = result.withinGrace ?? countWithinGrace(result.results.map((r) => r.decision));
    for (const [namespace, byClass] of within.pods) for (const [c, pods] of byClass) this.withinGrace.inc({ namespace, class: c }, pods);
    for (const [namespace, byResource] of within.requests)
      for (const [r, v] of byResource) this.graceRequests.inc({ namespace, ...resourceLabels(r) }, v);
  }
}

export { isWithinGrace } from '../judge/grace.ts';

export function parseListenAddress(text: string): { host: string; port: number } {
  const match = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(text);
  const port = match ? Number(match[3]) : NaN;
  if (!match || port > 65535) throw new RunOptionError(`--listen ${text}: expected HOST:PORT or :PORT`);
  return { host: match[1] ?? (match[2] || '0.0.0.0'), port };
}

/** /healthz and /metrics for Prometheus. */
export async function serveMetrics(
  metrics: SweepMetrics,
  address: { host: string; port: number },
  health: () => { ok: true } | { ok: false; why: string } = () => ({ ok: true }),
): Promise<Server> {
  const server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/healthz') {
      // Fails when the process stopped making progress (a leader not renewing, a wedged loop): the liveness probe restarts it.
      const h = health();
      if (h.ok) res.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
      else res.writeHead(503, { 'content-type': 'text/plain' }).end(`${h.why}\n`);
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
