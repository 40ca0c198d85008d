import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { describe, it } from 'node:test';
import { ApiException } from '@kubernetes/client-node';
import type { ActResult } from '../../src/act/act.ts';
import { act } from '../../src/act/act.ts';
import { passedDeadlineSeconds } from '../../src/act/claim.ts';
import { dryRunGateway } from '../../src/kube/dry-run-gateway.ts';
import { wordResult } from '../../src/report/wording.ts';
import { scriptedGateway } from '../support/scripted-gateway.ts';
import { SweepMetrics } from '../../src/schedule/metrics.ts';
import { stuckJobEvent } from '../../src/act/events.ts';
import { truncate } from '../../src/text.ts';
import { formatClaimMessage as describeStuck } from '../../src/judge/claim-message.ts';
import { judge } from '../../src/judge/judge.ts';
import { describeApiError, isRetryable } from '../../src/kube/errors.ts';
import { parsePolicyYaml } from '../../src/policy/parse.ts';
import { auditLine, summarize } from '../../src/report/audit.ts';
import { createLogger, logDecision, logSummary } from '../../src/report/logger.ts';
import { NOW, job, ownersFor, secondsAgo, stuckIn } from './judge-fixtures.ts';
import { summaryOf } from './report-fixtures.ts';

function decisionFor(name: string, over = {}) {
  const j = job(name, over);
  const stuck = [stuckIn(j, { stuckSince: secondsAgo(312) })];
  const parsed = parsePolicyYaml('{}');
  assert.ok(parsed.ok);
  return judge({ stuck, ownerOf: ownersFor(stuck, [j]), namespaceLabels: new Map(), policy: parsed.policy, now: NOW }).decisions[0]!;
}

describe('audit lines', () => {
  it('carry every field the SPEC names', () => {
    const line = auditLine('abc', { decision: decisionFor('build'), outcome: 'failed', error: undefined }, false);
    for (const field of [
      'sweepId',
      'namespace',
      'job',
      'pod',
      'container',
      'image',
      'reason',
      'class',
      'stuckSeconds',
      'rule',
      'action',
      'outcome',
      'dryRun',
    ]) {
      assert.ok(field in line, `missing ${field}`);
    }
    assert.equal(line.class, 'permanent');
    assert.equal(line.stuckSeconds, 312);
    assert.equal(line.outcome, 'failed');
    assert.equal(line.action, 'fail');
    assert.equal(line.graceSeconds, 120);
    assert.equal(line.graceSource, 'defaults');
    assert.equal(line.graceClamped, false);
  });

  it('are written as one JSON object per line', () => {
    const stream = new PassThrough();
    const chunks: string[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c.toString()));
    const logger = createLogger({ format: 'json', stream });
    logDecision(logger, auditLine('abc', { decision: decisionFor('build'), outcome: 'failed', error: undefined }, true));
    const lines = chunks.join('').trim().split('\n');
    assert.equal(lines.length, 1);
    const parsed = JSON.parse(lines[0]!) as Record<string, unknown>;
    assert.equal(parsed.message, 'decision');
    assert.equal(parsed.job, 'build');
    assert.equal(parsed.dryRun, true);
  });

  it('render as readable text with the same facts', () => {
    const stream = new PassThrough();
    const chunks: string[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c.toString()));
    const logger = createLogger({ format: 'text', stream });
    logDecision(logger, auditLine('abc', { decision: decisionFor('build'), outcome: 'would-fail', error: undefined }, true));
    const text = chunks.join('');
    assert.match(text, /WOULD FAIL/);
    assert.match(text, /ci-a\/job\/build/);
    assert.match(text, /ImagePullBackOff permanent stuck 5m12s\/2m /);
  });
});

describe('summary', () => {
  it('counts outcomes, classes and namespaces, and sets exit 1 on any action error', () => {
    const ok: ActResult = { decision: decisionFor('a'), outcome: 'failed', error: undefined };
    const deferred: ActResult = { decision: { ...decisionFor('b'), namespace: 'other' }, outcome: 'deferred', error: undefined };
    const broken: ActResult = { decision: decisionFor('c'), outcome: 'error', error: 'InternalError: boom' };
    const base = {
      sweepId: 's',
      dryRun: false,
      policy: 'p',
      namespaces: [],
      startedAt: NOW,
      finishedAt: new Date(NOW.getTime() + 1500),
      podsScanned: 10,
      stuckContainers: 3,
      outage: { tripped: false, stuckPods: 3, images: 1, transientPods: 0, transientFraction: 0, authPods: 0, authFraction: 0, trips: [] },
    };
    const s = summarize({ ...base, results: [ok, deferred, broken] });
    assert.equal(s.outcomes.failed, 1);
    assert.equal(s.outcomes.deferred, 1);
    assert.equal(s.outcomes.error, 1);
    assert.equal(s.deferred, 1);
    assert.equal(s.byClass.permanent, 3);
    assert.deepEqual(s.byNamespace, { 'ci-a': { failed: 1, error: 1 }, other: { deferred: 1 } });
    assert.equal(s.durationMs, 1500);
    assert.equal(s.exitCode, 1);
    assert.equal(summarize({ ...base, results: [ok, deferred] }).exitCode, 0);
    // A failure outside the decisions (a missing Event of an earlier sweep not written) is one too.
    const unsettled = summarize({ ...base, results: [ok, deferred], otherErrors: 1 });
    assert.deepEqual([unsettled.actionErrors, unsettled.exitCode], [1, 1]);
    const stream = new PassThrough();
    const chunks: string[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c.toString()));
    logSummary(createLogger({ format: 'text', stream }), s);
    assert.match(chunks.join(''), /1 Job\(s\) deferred/);
  });
});

describe('a dry run says "would"', () => {
  const base = {
    sweepId: 's',
    dryRun: true,
    policy: 'p',
    namespaces: [],
    startedAt: NOW,
    finishedAt: NOW,
    podsScanned: 3,
    stuckContainers: 3,
    outage: { tripped: false, stuckPods: 3, images: 1, transientPods: 0, transientFraction: 0, authPods: 0, authFraction: 0, trips: [] },
  };
  const capture = (format: 'json' | 'text') => {
    const stream = new PassThrough();
    const chunks: string[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c.toString()));
    return { logger: createLogger({ format, stream }), text: () => chunks.join('') };
  };

  it('as outcomes would-fail and would-report, writing nothing', async () => {
    const fail = decisionFor('a');
    const report = { ...decisionFor('b'), plan: 'report' as const, action: 'report' as const };
    const skip = { ...decisionFor('c'), plan: 'skip' as const };
    const { gateway, calls } = scriptedGateway();
    const live = await act(dryRunGateway(gateway), [fail, report, skip], {
      concurrency: 2,
      now: NOW,
      instance: 'h',
      claim: 'c',
      rejudge: (d) => d,
    });
    const results = live.map((r) => wordResult(r, true));
    assert.deepEqual(calls, [], 'nothing sent');
    assert.deepEqual(
      results.map((r) => [r.outcome, r.error]),
      [
        ['would-fail', undefined],
        ['would-report', undefined],
        ['skipped', undefined],
      ],
    );
    // Shared, not copied: a dry run of thousands of Jobs keeps every result until it ends.
    assert.equal(results[0]!.decision, fail, 'the would-fail result carries the decision itself');
    assert.equal(results[1]!.decision, report, 'the would-report result carries the decision itself');
  });

  it('in JSON lines and the summary, which counts no live outcome', () => {
    const results: ActResult[] = [
      { decision: decisionFor('a'), outcome: 'would-fail', error: undefined },
      { decision: decisionFor('b'), outcome: 'would-report', error: undefined },
      { decision: decisionFor('c'), outcome: 'skipped', error: undefined },
    ];
    const out = capture('json');
    logDecision(out.logger, auditLine('s', results[0]!, true));
    const s = summarize({ ...base, results });
    logSummary(out.logger, s);
    const [line, summary] = out
      .text()
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as Record<string, unknown>);
    assert.equal(line!.outcome, 'would-fail');
    assert.equal(line!.dryRun, true);
    assert.deepEqual(summary!.outcomes, { 'would-fail': 1, 'would-report': 1, 'would-retry': 0, skipped: 1, deferred: 0, error: 0 });
    assert.equal(summarize({ ...base, dryRun: false, results: [] }).outcomes['would-fail'], undefined);
  });

  it('in every text line and the text summary', () => {
    const out = capture('text');
    const results: ActResult[] = [
      { decision: decisionFor('a'), outcome: 'would-fail', error: undefined },
      { decision: decisionFor('b'), outcome: 'would-report', error: undefined },
      { decision: decisionFor('c'), outcome: 'skipped', error: undefined },
      { decision: decisionFor('d'), outcome: 'deferred', error: undefined },
    ];
    for (const r of results) logDecision(out.logger, auditLine('s', r, true));
    logSummary(out.logger, summarize({ ...base, results }));
    const lines = out
      .text()
      .split('\n')
      .filter((l) => /^\S/.test(l));
    assert.deepEqual(
      lines.slice(0, 4).map((l) => /^(WOULD \w+|would skip)/i.exec(l)?.[0]),
      ['WOULD FAIL', 'WOULD REPORT', 'would skip', 'WOULD DEFER'],
    );
    assert.match(out.text(), /Dry run s: 4 decision\(s\) \(1 would fail, 1 would report, 1 would skip, 1 would defer\)/);
    assert.doesNotMatch(out.text(), /\d (failed|reported|skipped|deferred)\b/);
  });

  it('in the metrics labels of run --dry-run', async () => {
    const dry = new SweepMetrics({ dryRun: true });
    dry.record(
      { status: 'done', summary: undefined, results: [{ decision: decisionFor('a'), outcome: 'would-fail', error: undefined }] },
      1,
      NOW,
    );
    const text = await dry.registry.metrics();
    assert.match(text, /imagepull_sweeper_decisions_total\{outcome="would-fail"\} 1/);
    assert.match(text, /imagepull_sweeper_decisions_total\{outcome="would-report"\} 0/);
    assert.doesNotMatch(text, /outcome="failed"/);
    assert.doesNotMatch(await new SweepMetrics().registry.metrics(), /outcome="would-/);
  });
});

describe('events', () => {
  it('build an events.k8s.io/v1 Warning regarding the Job, related to the pod', () => {
    const d = decisionFor('build');
    const e = stuckJobEvent(d, 'FailJob', { instance: 'host-1', now: NOW });
    assert.equal(e.type, 'Warning');
    assert.equal(e.reason, 'ImagePullStuck');
    assert.equal(e.action, 'FailJob');
    assert.equal(e.reportingController, 'imagepull-sweeper');
    assert.equal(e.regarding?.kind, 'Job');
    assert.equal(e.regarding?.uid, 'uid-build');
    assert.equal(e.related?.kind, 'Pod');
    assert.equal(e.metadata?.namespace, 'ci-a');
    assert.equal(e.eventTime.toISOString(), '2026-11-29T12:00:00.000000Z');
    assert.ok(Buffer.byteLength(e.note ?? '') <= 1024);
  });

  it('keep the note within 1024 bytes even for long multibyte messages', () => {
    const d = { ...decisionFor('build'), message: 'é'.repeat(5000) };
    assert.ok(Buffer.byteLength(stuckJobEvent(d, 'Report', { instance: 'h', now: NOW }).note!) <= 1024);
    assert.equal(truncate('short', 10), 'short');
  });

  it('describe container, image, class, time stuck, rule and the kubelet message', () => {
    const text = describeStuck(decisionFor('build'));
    assert.match(text, /container main/);
    assert.match(text, /registry\.example\/app:missing/);
    assert.match(text, /class permanent/);
    assert.match(text, /5m12s/);
    assert.match(text, /rule defaults, grace 2m from defaults\)/);
    assert.match(text, /Back-off pulling image/);
    const annotated = decisionFor('pinned', { annotations: { 'imagepull-sweeper/grace': '1m' } });
    assert.match(describeStuck(annotated), /grace 1m from annotation\)/);
    const e = stuckJobEvent(annotated, 'FailJob', { instance: 'h', now: NOW });
    assert.match(e.note!, /grace 1m from annotation\)/);
  });
});

describe('activeDeadlineSeconds', () => {
  it('is already passed, counted from the Job start', () => {
    assert.equal(passedDeadlineSeconds(job('a', { startTime: secondsAgo(3600.7) }), NOW), 3600);
    assert.equal(passedDeadlineSeconds(job('a', { startTime: secondsAgo(0.2) }), NOW), 1);
    assert.equal(passedDeadlineSeconds(job('a', { startTime: undefined }), NOW), 1);
  });
});

describe('API errors and retries', () => {
  it('reads status, reason and Retry-After from an ApiException', () => {
    const f = describeApiError(
      new ApiException(429, 'too many', JSON.stringify({ reason: 'TooManyRequests', message: 'slow down' }), { 'Retry-After': '3' }),
    );
    assert.equal(f.status, 429);
    assert.equal(f.reason, 'TooManyRequests');
    assert.equal(f.retryAfterSeconds, 3);
    assert.equal(isRetryable(f), true);
  });

  it('retries 5xx and network errors, not 4xx', () => {
    assert.equal(isRetryable(describeApiError(new ApiException(503, 'x', '', {}))), true);
    assert.equal(isRetryable(describeApiError(new ApiException(409, 'x', '', {}))), false);
    assert.equal(isRetryable(describeApiError(new ApiException(404, 'x', '', {}))), false);
    assert.equal(isRetryable(describeApiError(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }))), true);
  });
});

describe('a not-found burst in the audit', () => {
  it('the summary names the host, the pods and the repositories, in text and in outage.trips', () => {
    // containerd 2.x core/remotes/docker/resolver.go: what a mirror's 404 for a down upstream gives (issue 16).
    const notFound = (image: string) =>
      `rpc error: code = NotFound desc = failed to pull and unpack image "${image}": failed to resolve reference "${image}": ${image}: not found`;
    const jobs = Array.from({ length: 4 }, (_, i) => job(`m${i}`));
    const stuck = jobs.map((j, i) => {
      const image = `docker.io/library/app-${i % 2}:1.27`;
      return stuckIn(j, { image, reason: 'ErrImagePull', message: notFound(image), pullClass: 'permanent', stuckSince: secondsAgo(9999) });
    });
    const parsed = parsePolicyYaml('limits: { outage: { minStuckPods: 4, minImages: 2 } }');
    assert.ok(parsed.ok);
    const judgement = judge({ stuck, ownerOf: ownersFor(stuck, jobs), namespaceLabels: new Map(), policy: parsed.policy, now: NOW });
    const results: ActResult[] = judgement.decisions.map((decision) => ({ decision, outcome: 'reported', error: undefined }));
    const s = summaryOf({ podsScanned: 4, stuckContainers: 4, outage: judgement.outage, results });
    assert.deepEqual(s.outage.trips, [
      { scope: 'registry docker.io', host: 'docker.io', pullClass: 'permanent', stuckPods: 4, images: 2, fraction: 1, repositories: 2 },
    ]);
    const stream = new PassThrough();
    const chunks: string[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c.toString()));
    logSummary(createLogger({ format: 'text', stream }), s);
    assert.match(
      chunks.join(''),
      /Outage breaker tripped for registry docker\.io: 4 of 4 stuck pods \(100%\) across 2 repositories are not found: those Jobs are reported, not failed\./,
    );
  });
});
