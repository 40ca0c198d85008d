// The level of each audit line: a decision (or CronJob) whose action failed is logged at `error`,
// whatever its outcome word (docs/contract.md "Audit log"), by the same rule that sets exit 1.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isActionError } from '../../src/outcomes.ts';
import type { Logger } from 'winston';
import { auditLine, cronJobAuditLine } from '../../src/report/audit.ts';
import { logCronJob, logDecision } from '../../src/report/logger.ts';
import { capture, decisionFor, summaryOf } from './report-fixtures.ts';

const decision = () => decisionFor('build');

function levels(log: (logger: Logger) => void): string[] {
  const out = capture('json');
  log(out.logger);
  return out
    .text()
    .trim()
    .split('\n')
    .map((l) => (JSON.parse(l) as { level: string }).level);
}

const EVENT_LOST = 'Job failed, but its Event was not written: etcd down';

describe('an action that failed', () => {
  it('a Job failed without its Event: logged at error, and the summary exits 1', () => {
    const result = { decision: decision(), outcome: 'failed' as const, error: EVENT_LOST };
    assert.deepEqual(
      levels((l) => logDecision(l, auditLine('s', result, false))),
      ['error'],
    );
    const s = summaryOf({ results: [result] });
    assert.deepEqual([s.actionErrors, s.exitCode], [1, 1]);
  });

  it('a CronJob suspended without its Event: logged at error too', () => {
    const c = {
      namespace: 'ci',
      cronJob: 'nightly',
      image: 'x',
      failedInARow: 3,
      jobs: ['a'],
      outcome: 'suspended' as const,
      detail: 'd',
      error: 'lost',
    };
    assert.deepEqual(
      levels((l) => logCronJob(l, cronJobAuditLine('s', c, 3, false))),
      ['error'],
    );
  });

  it('is one rule: an error outcome, or an error beside any outcome', () => {
    assert.equal(isActionError({ outcome: 'failed', error: undefined }), false);
    assert.equal(isActionError({ outcome: 'failed', error: null }), false);
    assert.equal(isActionError({ outcome: 'error', error: undefined }), true);
    assert.equal(isActionError({ outcome: 'retried', error: EVENT_LOST }), true);
    assert.equal(isActionError({ outcome: 'would-fail', error: 'x' }), true);
  });

  it('a plain success with a warning stays at warn; without one at info', () => {
    const d = decision();
    assert.deepEqual(
      levels((l) => {
        logDecision(l, auditLine('s', { decision: { ...d, warnings: ['w'] }, outcome: 'failed', error: undefined }, false));
        logDecision(l, auditLine('s', { decision: { ...d, warnings: [] }, outcome: 'failed', error: undefined }, false));
      }),
      ['warn', 'info'],
    );
  });
});
