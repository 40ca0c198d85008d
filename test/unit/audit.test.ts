// Audit lines and the summary: the fields docs/contract.md names, in JSON lines and as text.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ActResult } from '../../src/act/act.ts';
import { judge } from '../../src/judge/judge.ts';
import { parsePolicyYaml } from '../../src/policy/parse.ts';
import { auditLine, CountedResults, summarize } from '../../src/report/audit.ts';
import { logDecision, logSummary } from '../../src/report/logger.ts';
import { NOW, job, ownersFor, secondsAgo, stuckIn } from './judge-fixtures.ts';
import { capture, decisionFor, summaryOf } from './report-fixtures.ts';

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
    const { logger, text: written } = capture('json');
    logDecision(logger, auditLine('abc', { decision: decisionFor('build'), outcome: 'failed', error: undefined }, true));
    const lines = written().trim().split('\n');
    assert.equal(lines.length, 1);
    const parsed = JSON.parse(lines[0]!) as Record<string, unknown>;
    assert.equal(parsed.message, 'decision');
    assert.equal(parsed.job, 'build');
    assert.equal(parsed.dryRun, true);
  });

  it('render as readable text with the same facts', () => {
    const { logger, text: written } = capture('text');
    logDecision(logger, auditLine('abc', { decision: decisionFor('build'), outcome: 'would-fail', error: undefined }, true));
    const text = written();
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
    const out = capture('text');
    logSummary(out.logger, s);
    assert.match(out.text(), /1 Job\(s\) deferred/);

    // A sweep in parts keeps the failed Jobs and the errors, and counts the rest: the same summary.
    const counted = new CountedResults();
    counted.add(deferred);
    const inParts = summarize({ ...base, results: [ok, broken], counted });
    assert.deepEqual(inParts, s);
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
    const out = capture('text');
    logSummary(out.logger, s);
    assert.match(
      out.text(),
      /Outage breaker tripped for registry docker\.io: 4 of 4 stuck pods \(100%\) across 2 repositories are not found: those Jobs are reported, not failed\./,
    );
  });
});
