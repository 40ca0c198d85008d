import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ActResult } from '../../src/act/act.ts';
import { judge } from '../../src/judge/judge.ts';
import type { Decision, OutageAssessment } from '../../src/judge/types.ts';
import type { Outcome } from '../../src/model.ts';
import { parsePolicyYaml } from '../../src/policy/parse.ts';
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { PassThrough } from 'node:stream';
import { KubeConfig } from '@kubernetes/client-node';
import { createKubeHttp } from '../../src/kube/http.ts';
import { stuckJobEvent } from '../../src/act/events.ts';
import { formatClaimMessage as describeStuck } from '../../src/judge/claim-message.ts';
import { auditLine, CountedResults } from '../../src/report/audit.ts';
import { createLogger, logDecision, logSummary } from '../../src/report/logger.ts';
import type { StuckCapacity } from '../../src/judge/capacity.ts';
import { countWithinGrace } from '../../src/judge/grace.ts';
import { SweepMetrics, isWithinGrace, resourceLabels } from '../../src/run/metrics.ts';
import type { SweepResult } from '../../src/sweep.ts';
import { NOW, job, ownersFor, secondsAgo, stuckIn } from './judge-fixtures.ts';
import { NO_OUTAGE, summaryOf } from './report-fixtures.ts';

function decision(name: string, stuckSeconds: number, over: Partial<Parameters<typeof stuckIn>[1]> = {}): Decision {
  const j = job(name, { namespace: over?.namespace ?? 'ci-a' });
  const stuck = [stuckIn(j, { stuckSince: secondsAgo(stuckSeconds), ...over })];
  const parsed = parsePolicyYaml('{}');
  assert.ok(parsed.ok);
  return judge({ stuck, ownerOf: ownersFor(stuck, [j]), namespaceLabels: new Map(), policy: parsed.policy, now: NOW }).decisions[0]!;
}

const GPU_POD: StuckCapacity = {
  pods: 2,
  requests: { cpu: 2, memory: 2 ** 30, 'nvidia.com/gpu': 4 },
  resourceSeconds: { cpu: 1200, memory: 600 * 2 ** 30, 'nvidia.com/gpu': 2400 },
  heldSeconds: 600,
};

function sweepResult(results: ActResult[], outage: OutageAssessment = NO_OUTAGE, status: SweepResult['status'] = 'done'): SweepResult {
  const summary = summaryOf({ outage, results });
  return { status, summary, results };
}

const result = (d: Decision, outcome: Outcome): ActResult => ({ decision: d, outcome, error: undefined });

async function sample(metrics: SweepMetrics, name: string, labels: Record<string, string> = {}): Promise<number | undefined> {
  const metric = (await metrics.registry.getMetricsAsJSON()).find((m) => m.name === name.replace(/_(bucket|sum|count)$/, ''));
  const value = metric?.values.find(
    (v) =>
      ((v as { metricName?: string }).metricName ?? metric.name) === name &&
      Object.entries(labels).every(([k, x]) => String(v.labels[k]) === x),
  );
  return value?.value;
}

describe('SweepMetrics: what an operator alerts on', () => {
  it('counts decisions by outcome, class, namespace and registry host', async () => {
    const m = new SweepMetrics();
    const failed = { ...decision('a', 900), capacity: GPU_POD };
    m.record(
      sweepResult([
        result(failed, 'failed'),
        result(decision('b', 900, { namespace: 'ci-b', image: 'ghcr.example:5000/x/y:1' }), 'reported'),
      ]),
      1,
      NOW,
    );
    assert.equal(await sample(m, 'imagepull_sweeper_decisions_total', { outcome: 'failed' }), 1);
    assert.equal(await sample(m, 'imagepull_sweeper_decisions_total', { outcome: 'skipped' }), 0);
    assert.equal(
      await sample(m, 'imagepull_sweeper_decision_details_total', {
        outcome: 'failed',
        class: 'permanent',
        namespace: 'ci-a',
        registry: 'registry.example',
      }),
      1,
    );
    assert.equal(
      await sample(m, 'imagepull_sweeper_decision_details_total', {
        outcome: 'reported',
        namespace: 'ci-b',
        registry: 'ghcr.example:5000',
      }),
      1,
    );
  });

  it('counts the results a sweep in parts let go as it counts those it kept', async () => {
    const results = [
      result(decision('a', 900), 'deferred'),
      result(decision('b', 900), 'deferred'),
      result(decision('c', 900, { namespace: 'ci-b', image: 'ghcr.example:5000/x/y:1' }), 'skipped'),
      result(decision('d', 900, { namespace: 'ci-b', image: 'ghcr.example:5000/x/z:2' }), 'skipped'),
    ];
    const kept = new SweepMetrics();
    kept.record(sweepResult(results), 1, NOW);
    const counted = new CountedResults();
    for (const r of results) counted.add(r);
    const let_go = new SweepMetrics();
    let_go.record({ ...sweepResult([]), counted }, 1, NOW);
    for (const [name, labels, value] of [
      ['imagepull_sweeper_decisions_total', { outcome: 'deferred' }, 2],
      ['imagepull_sweeper_decisions_total', { outcome: 'skipped' }, 2],
      ['imagepull_sweeper_decision_details_total', { outcome: 'skipped', namespace: 'ci-b', registry: 'ghcr.example:5000' }, 2],
      ['imagepull_sweeper_decision_details_total', { outcome: 'deferred', namespace: 'ci-a', registry: 'registry.example' }, 2],
    ] as const) {
      assert.equal(await sample(kept, name, labels), value, `${name} ${JSON.stringify(labels)} kept`);
      assert.equal(await sample(let_go, name, labels), value, `${name} ${JSON.stringify(labels)} counted`);
    }
  });

  it('counts heals as decisions (healed; would-heal in a dry run), and a heal frees nothing', async () => {
    const m = new SweepMetrics();
    m.record(sweepResult([result({ ...decision('h', 60, { pullClass: 'auth' }), plan: 'heal', capacity: GPU_POD }, 'healed')]), 1, NOW);
    assert.equal(await sample(m, 'imagepull_sweeper_decisions_total', { outcome: 'healed' }), 1);
    assert.equal(await sample(m, 'imagepull_sweeper_decision_details_total', { outcome: 'healed', class: 'auth', namespace: 'ci-a' }), 1);
    assert.equal(await sample(m, 'imagepull_sweeper_freed_resource_seconds_total', { resource: 'cpu' }), undefined);
    const dry = new SweepMetrics({ dryRun: true });
    assert.equal(await sample(dry, 'imagepull_sweeper_decisions_total', { outcome: 'would-heal' }), 0);
  });

  it('counts the capacity freed by failed Jobs only, and how long their containers had been stuck', async () => {
    const m = new SweepMetrics();
    const failed = { ...decision('a', 900), capacity: GPU_POD };
    const reported = { ...decision('b', 900), capacity: GPU_POD };
    m.record(sweepResult([result(failed, 'failed'), result(reported, 'reported')]), 1, NOW);
    assert.equal(
      await sample(m, 'imagepull_sweeper_freed_requests_total', { namespace: 'ci-a', resource: 'nvidia_com_gpu', unit: 'integer' }),
      4,
    );
    assert.equal(
      await sample(m, 'imagepull_sweeper_freed_requests_total', { namespace: 'ci-a', resource: 'memory', unit: 'byte' }),
      2 ** 30,
    );
    assert.equal(
      await sample(m, 'imagepull_sweeper_freed_resource_seconds_total', { namespace: 'ci-a', resource: 'nvidia_com_gpu', unit: 'integer' }),
      2400,
    );
    assert.equal(await sample(m, 'imagepull_sweeper_freed_pods_total', { namespace: 'ci-a' }), 2);
    assert.equal(await sample(m, 'imagepull_sweeper_failed_stuck_seconds_count', { class: 'permanent' }), 1);
    assert.equal(await sample(m, 'imagepull_sweeper_failed_stuck_seconds_sum', { class: 'permanent' }), 900);
    assert.equal(await sample(m, 'imagepull_sweeper_failed_stuck_seconds_bucket', { class: 'permanent', le: '600' }), 0);
    assert.equal(await sample(m, 'imagepull_sweeper_failed_stuck_seconds_bucket', { class: 'permanent', le: '900' }), 1);
  });

  it('a dry run frees nothing', async () => {
    const m = new SweepMetrics({ dryRun: true });
    m.record(sweepResult([result({ ...decision('a', 900), capacity: GPU_POD }, 'would-fail')]), 1, NOW);
    assert.equal(await sample(m, 'imagepull_sweeper_freed_requests_total', { resource: 'nvidia_com_gpu' }), undefined);
    assert.equal(await sample(m, 'imagepull_sweeper_decisions_total', { outcome: 'would-fail' }), 1);
  });

  it('gauges the stuck pods within grace, and their requests, as of the last sweep that judged', async () => {
    const m = new SweepMetrics();
    const waiting = { ...decision('a', 30), capacity: GPU_POD };
    assert.ok(isWithinGrace(waiting));
    assert.ok(!isWithinGrace(decision('b', 900)));
    m.record(sweepResult([result(waiting, 'skipped')]), 1, NOW);
    assert.equal(await sample(m, 'imagepull_sweeper_stuck_pods_within_grace', { namespace: 'ci-a', class: 'permanent' }), 1);
    assert.equal(
      await sample(m, 'imagepull_sweeper_stuck_requests_within_grace', { namespace: 'ci-a', resource: 'nvidia_com_gpu', unit: 'integer' }),
      4,
    );
    // An unreachable API server judges nothing: the last known state stays.
    m.record({ status: 'unreachable', summary: undefined, results: [] }, 1, NOW);
    assert.equal(await sample(m, 'imagepull_sweeper_stuck_pods_within_grace', { namespace: 'ci-a', class: 'permanent' }), 1);
    m.record(sweepResult([]), 1, NOW);
    assert.equal(await sample(m, 'imagepull_sweeper_stuck_pods_within_grace', { namespace: 'ci-a', class: 'permanent' }), undefined);
  });

  it("gauges the Jobs within grace from the sweep's count when a sweep in parts let their decisions go", async () => {
    const m = new SweepMetrics();
    const waiting = { ...decision('a', 30), capacity: GPU_POD };
    const other = { ...decision('b', 20, { namespace: 'ci-b' }), capacity: GPU_POD };
    const withinGrace = countWithinGrace([waiting, other, decision('c', 900)]);
    const counted = new CountedResults();
    for (const d of [waiting, other]) counted.add(result(d, 'skipped'));
    m.record({ ...sweepResult([]), counted, withinGrace }, 1, NOW);
    assert.equal(await sample(m, 'imagepull_sweeper_stuck_pods_within_grace', { namespace: 'ci-a', class: 'permanent' }), 1);
    assert.equal(await sample(m, 'imagepull_sweeper_stuck_pods_within_grace', { namespace: 'ci-b', class: 'permanent' }), 1);
    assert.equal(
      await sample(m, 'imagepull_sweeper_stuck_requests_within_grace', { namespace: 'ci-b', resource: 'nvidia_com_gpu', unit: 'integer' }),
      4,
    );
  });

  it('counts breaker trips by scope, host and class, and gauges the last sweep’s', async () => {
    const m = new SweepMetrics();
    assert.equal(await sample(m, 'imagepull_sweeper_breaker_trips_total', { scope: 'sweep', class: 'transient' }), 0);
    const outage: OutageAssessment = {
      ...NO_OUTAGE,
      tripped: true,
      trips: [
        { scope: 'the whole sweep', host: undefined, pullClass: 'transient', stuckPods: 9, images: 3, fraction: 0.9 },
        { scope: 'registry r.example', host: 'r.example', pullClass: 'permanent', stuckPods: 5, images: 5, fraction: 1, repositories: 5 },
      ],
    };
    m.record(sweepResult([], outage), 1, NOW);
    assert.equal(await sample(m, 'imagepull_sweeper_breaker_trips_total', { scope: 'sweep', host: '', class: 'transient' }), 1);
    assert.equal(await sample(m, 'imagepull_sweeper_breaker_trips_total', { scope: 'registry', host: 'r.example', class: 'permanent' }), 1);
    assert.equal(await sample(m, 'imagepull_sweeper_breaker_tripped', { scope: 'registry', host: 'r.example', class: 'permanent' }), 1);
    m.record(sweepResult([]), 1, NOW);
    assert.equal(await sample(m, 'imagepull_sweeper_breaker_tripped', { scope: 'registry', host: 'r.example' }), undefined);
    assert.equal(await sample(m, 'imagepull_sweeper_breaker_trips_total', { scope: 'registry', host: 'r.example', class: 'permanent' }), 1);
  });

  it('marks an invalid policy, and stamps only the sweeps that judged the cluster as successful', async () => {
    const m = new SweepMetrics();
    const t1 = new Date('2026-11-30T12:00:00Z');
    const t2 = new Date('2026-11-30T12:05:00Z');
    const t3 = new Date('2026-11-30T12:10:00Z');
    assert.equal(await sample(m, 'imagepull_sweeper_policy_invalid'), 0);
    assert.equal(await sample(m, 'imagepull_sweeper_last_successful_sweep_timestamp_seconds'), 0); // none yet
    m.record(sweepResult([], NO_OUTAGE, 'actions-failed'), 1, t1);
    m.record({ status: 'invalid-policy', summary: undefined, results: [] }, 1, t2);
    assert.equal(await sample(m, 'imagepull_sweeper_policy_invalid'), 1);
    assert.equal(await sample(m, 'imagepull_sweeper_last_successful_sweep_timestamp_seconds'), t1.getTime() / 1000);
    assert.equal(await sample(m, 'imagepull_sweeper_last_sweep_timestamp_seconds'), t2.getTime() / 1000);
    m.record(undefined, 1, t3);
    assert.equal(await sample(m, 'imagepull_sweeper_sweeps_total', { result: 'crashed' }), 1);
    assert.equal(await sample(m, 'imagepull_sweeper_policy_invalid'), 0);
    assert.equal(await sample(m, 'imagepull_sweeper_last_successful_sweep_timestamp_seconds'), t1.getTime() / 1000);
  });
});

describe('the capacity freed, in the Event, the audit line and the summary', () => {
  const failing = { ...decision('gpu', 900), capacity: GPU_POD };

  it('the Event and message name what failing the Job frees, before the registry message', () => {
    assert.equal(failing.plan, 'fail');
    const text = describeStuck(failing);
    assert.match(
      text,
      /; frees 4 nvidia\.com\/gpu, 2 cpu, 1Gi memory held 10m in total by 2 pods\): the image or tag does not exist .* ImagePullBackOff: /,
    );
    const huge = { ...failing, message: 'x'.repeat(5000) };
    const note = stuckJobEvent(huge, 'FailJob', { instance: 'i', now: NOW }).note ?? '';
    assert.ok(Buffer.byteLength(note) <= 1024, `${Buffer.byteLength(note)} bytes`);
    assert.match(note, /frees 4 nvidia\.com\/gpu/);
    assert.match(describeStuck({ ...failing, plan: 'report' }), /; holds 4 nvidia\.com\/gpu/);
    assert.doesNotMatch(describeStuck(decision('plain', 900)), /frees|holds/);
  });

  it('the audit line carries it for a failed (or would-fail) Job only', () => {
    assert.deepEqual(auditLine('s', result(failing, 'failed'), false).freed, GPU_POD);
    assert.deepEqual(auditLine('s', result(failing, 'would-fail'), true).freed, GPU_POD);
    assert.equal(auditLine('s', result(failing, 'reported'), false).freed, null);
    assert.equal(auditLine('s', result(decision('plain', 900), 'failed'), false).freed, null);
  });

  it('the summary adds up the failed Jobs, in JSON and in text', async () => {
    const other = {
      ...decision('cpu', 900),
      capacity: { pods: 1, requests: { cpu: 0.5 }, resourceSeconds: { cpu: 300 }, heldSeconds: 600 },
    };
    const results = [result(failing, 'failed'), result(other, 'failed'), result({ ...decision('r', 900), capacity: GPU_POD }, 'reported')];
    const summary = sweepResult(results).summary!;
    assert.deepEqual(summary.freed, {
      pods: 3,
      requests: { cpu: 2.5, memory: 2 ** 30, 'nvidia.com/gpu': 4 },
      resourceSeconds: { cpu: 1500, memory: 600 * 2 ** 30, 'nvidia.com/gpu': 2400 },
      heldSeconds: 1200,
    });
    const stream = new PassThrough();
    const chunks: string[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c.toString()));
    const logger = createLogger({ format: 'text', stream });
    logDecision(logger, auditLine('s', results[0]!, false));
    logSummary(logger, summary);
    await new Promise((resolve) => {
      logger.once('finish', resolve);
      logger.end();
    });
    await new Promise((resolve) => setImmediate(resolve));
    const text = chunks.join('');
    assert.match(text, /\n\s+freed 4 nvidia\.com\/gpu, 2 cpu, 1Gi memory held 10m in total by 2 pods\n/);
    assert.match(text, /^Freed 4 nvidia\.com\/gpu, 2\.5 cpu, 1Gi memory held 20m in total by 3 pods\.$/m);
  });
});

describe('SweepMetrics: what any run serves', () => {
  it('build_info is 1 with the version of package.json and the Node.js version', async () => {
    const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
    const text = await new SweepMetrics({ version }).registry.metrics();
    const line = `imagepull_sweeper_build_info{version="${version}",node_version="${process.version}"} 1`;
    assert.ok(text.split('\n').includes(line), text);
  });

  it('the leader gauge: 1 without --leader-elect; with it 0 until the Lease is held, and back to 0 when lost', async () => {
    assert.equal(await sample(new SweepMetrics(), 'imagepull_sweeper_leader'), 1);
    const m = new SweepMetrics({ leaderElect: true });
    assert.equal(await sample(m, 'imagepull_sweeper_leader'), 0);
    m.leaseObservers.onLeading(true);
    assert.equal(await sample(m, 'imagepull_sweeper_leader'), 1);
    m.leaseObservers.onLeading(false);
    assert.equal(await sample(m, 'imagepull_sweeper_leader'), 0);
  });

  it('counts and times API requests through the HTTP path: verb and status, "<error>" when no answer came', async () => {
    const server = createServer((req, res) => {
      if (req.url?.startsWith('/missing')) res.writeHead(404, { 'content-type': 'application/json' }).end('{"kind":"Status","code":404}');
      else if (req.url?.startsWith('/hang')) return;
      else res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    try {
      const kc = new KubeConfig();
      const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
      kc.loadFromOptions({
        clusters: [{ name: 'c', server: url, skipTLSVerify: true }],
        users: [{ name: 'u', token: 't' }],
        contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
        currentContext: 'x',
      });
      const m = new SweepMetrics();
      const api = createKubeHttp(kc, 200, undefined, m.observeResponse);
      await api.getJson('/api/v1/pods', {});
      await api.getJson('/api/v1/pods', {});
      await api.send('PATCH', '/apis/batch/v1/namespaces/a/jobs/j', { body: {}, contentType: 'application/merge-patch+json' });
      await assert.rejects(api.getJson('/missing', {}));
      await assert.rejects(api.getJson('/hang', {}), { name: 'TimeoutError' });
      assert.equal(await sample(m, 'imagepull_sweeper_api_requests_total', { verb: 'GET', code: '200' }), 2);
      assert.equal(await sample(m, 'imagepull_sweeper_api_requests_total', { verb: 'PATCH', code: '200' }), 1);
      assert.equal(await sample(m, 'imagepull_sweeper_api_requests_total', { verb: 'GET', code: '404' }), 1);
      assert.equal(await sample(m, 'imagepull_sweeper_api_requests_total', { verb: 'GET', code: '<error>' }), 1);
      assert.equal(await sample(m, 'imagepull_sweeper_api_request_duration_seconds_count', { verb: 'GET' }), 4);
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });

  it('resources are labelled as kube-state-metrics labels them: a sanitized name and its unit', async () => {
    assert.deepEqual(resourceLabels('nvidia.com/gpu'), { resource: 'nvidia_com_gpu', unit: 'integer' });
    assert.deepEqual(resourceLabels('cpu'), { resource: 'cpu', unit: 'core' });
    assert.deepEqual(resourceLabels('memory'), { resource: 'memory', unit: 'byte' });
    assert.deepEqual(resourceLabels('ephemeral-storage'), { resource: 'ephemeral_storage', unit: 'byte' });
    assert.deepEqual(resourceLabels('hugepages-2Mi'), { resource: 'hugepages_2Mi', unit: 'byte' });
    assert.deepEqual(resourceLabels('example.com/widget'), { resource: 'example_com_widget', unit: 'integer' });
    const m = new SweepMetrics();
    m.record(sweepResult([result({ ...decision('a', 900), capacity: GPU_POD }, 'failed')]), 1, NOW);
    const text = await m.registry.metrics();
    assert.match(text, /^imagepull_sweeper_freed_requests_total\{namespace="ci-a",resource="nvidia_com_gpu",unit="integer"\} 4$/m);
    assert.match(text, /^imagepull_sweeper_freed_resource_seconds_total\{namespace="ci-a",resource="cpu",unit="core"\} 1200$/m);
    assert.doesNotMatch(text, /nvidia\.com/);
  });
});
