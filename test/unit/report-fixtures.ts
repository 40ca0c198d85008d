// Shared by the report tests: a decision judged under the default policy, a summary's input with
// every field but the one a test is about, and a logger whose lines a test reads back.
import { PassThrough } from 'node:stream';
import type { OutageAssessment } from '../../src/judge/types.ts';
import { summarize, type SummaryInput, type SweepSummary } from '../../src/report/audit.ts';
import { createLogger, type OutputFormat } from '../../src/report/logger.ts';
import assert from 'node:assert/strict';
import { judge } from '../../src/judge/judge.ts';
import { parsePolicyYaml } from '../../src/policy/parse.ts';
import { NOW, job, ownersFor, secondsAgo, stuckIn } from './judge-fixtures.ts';

export const NO_OUTAGE: OutageAssessment = {
  stuckPods: 0,
  images: 0,
  transientPods: 0,
  transientFraction: 0,
  authPods: 0,
  authFraction: 0,
  tripped: false,
  trips: [],
};

export function summaryOf(over: Partial<SummaryInput>): SweepSummary {
  return summarize({
    sweepId: 's',
    dryRun: false,
    policy: 'p',
    namespaces: [],
    startedAt: NOW,
    finishedAt: NOW,
    podsScanned: 1,
    stuckContainers: 1,
    outage: NO_OUTAGE,
    results: [],
    ...over,
  });
}

/** A logger writing to memory: `text()` is everything written so far. */
export function capture(format: OutputFormat) {
  const stream = new PassThrough();
  const chunks: string[] = [];
  stream.on('data', (c: Buffer) => chunks.push(c.toString()));
  return { logger: createLogger({ format, stream }), text: () => chunks.join('') };
}

/** The default policy's decision about Job `name` (options as for `job`), stuck 312 s. */
export function decisionFor(name: string, over = {}) {
  const j = job(name, over);
  const stuck = [stuckIn(j, { stuckSince: secondsAgo(312) })];
  const parsed = parsePolicyYaml('{}');
  assert.ok(parsed.ok);
  return judge({ stuck, ownerOf: ownersFor(stuck, [j]), namespaceLabels: new Map(), policy: parsed.policy, now: NOW }).decisions[0]!;
}
