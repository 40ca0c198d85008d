// A dry run in words (report/wording.ts): every line, the summary and the metrics say "would".
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ActResult } from '../../src/act/act.ts';
import { act } from '../../src/act/act.ts';
import { dryRunGateway } from '../../src/kube/dry-run-gateway.ts';
import { wordResult } from '../../src/report/wording.ts';
import { scriptedGateway } from '../support/scripted-gateway.ts';
import { SweepMetrics } from '../../src/run/metrics.ts';
import { auditLine, summarize } from '../../src/report/audit.ts';
import { logDecision, logSummary } from '../../src/report/logger.ts';
import { NOW } from './judge-fixtures.ts';
import { capture, decisionFor } from './report-fixtures.ts';

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
    assert.deepEqual(summary!.outcomes, {
      'would-fail': 1,
      'would-report': 1,
      'would-retry': 0,
      'would-heal': 0,
      skipped: 1,
      deferred: 0,
      error: 0,
    });
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
