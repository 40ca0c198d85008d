import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { describe, it } from 'node:test';
import { ApiException } from '@kubernetes/client-node';
import type { ActResult } from '../../src/act/act.ts';
import { passedDeadlineSeconds } from '../../src/act/act.ts';
import { describeStuck, stuckJobEvent, truncate } from '../../src/act/events.ts';
import { judge } from '../../src/judge/judge.ts';
import { describeApiError, isRetryable } from '../../src/kube/errors.ts';
import { parsePolicyYaml } from '../../src/policy/parse.ts';
import { auditLine, summarize } from '../../src/report/audit.ts';
import { createLogger, logDecision, logSummary } from '../../src/report/logger.ts';
import { NOW, job, ownersFor, secondsAgo, stuckIn } from './judge-fixtures.ts';

function decisionFor(name: string, over = {}) {
  const j = job(name, over);
  const stuck = [stuckIn(j, { stuckSince: secondsAgo(312) })];
  const parsed = parsePolicyYaml('');
  assert.ok(parsed.ok);
  return judge({ stuck, ownerOf: ownersFor(stuck, [j]), namespaceLabels: new Map(), policy: parsed.policy, now: NOW }).decisions[0]!;
}

describe('audit lines', () => {
  it('carry every field the SPEC names', () => {
    const line = auditLine('abc', { decision: decisionFor('build'), outcome: 'failed', error: undefined }, false);
    for (const field of ['sweepId', 'namespace', 'job', 'pod', 'container', 'image', 'reason', 'class', 'stuckSeconds', 'rule', 'action', 'outcome', 'dryRun']) {
      assert.ok(field in line, `missing ${field}`);
    }
    assert.equal(line.class, 'permanent');
    assert.equal(line.stuckSeconds, 312);
    assert.equal(line.outcome, 'failed');
    assert.equal(line.action, 'fail');
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
    logDecision(logger, auditLine('abc', { decision: decisionFor('build'), outcome: 'failed', error: undefined }, true));
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
      outage: { tripped: false, stuckPods: 3, images: 1, transientPods: 0, transientFraction: 0 },
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
    const stream = new PassThrough();
    const chunks: string[] = [];
    stream.on('data', (c: Buffer) => chunks.push(c.toString()));
    logSummary(createLogger({ format: 'text', stream }), s);
    assert.match(chunks.join(''), /1 Job\(s\) deferred/);
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
    assert.match(text, /rule defaults/);
    assert.match(text, /Back-off pulling image/);
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
