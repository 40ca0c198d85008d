// Audit lines stay one readable line whatever the kubelet (i.e. the registry) wrote.
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { describe, it } from 'node:test';
import { judge } from '../../src/judge/judge.ts';
import { parsePolicyYaml } from '../../src/policy/parse.ts';
import { WAITING_MESSAGE_LIMIT, auditLine } from '../../src/report/audit.ts';
import { createLogger, logDecision } from '../../src/report/logger.ts';
import { NOW, job, ownersFor, secondsAgo, stuckIn } from './judge-fixtures.ts';

function lineFor(message: string) {
  const j = job('build');
  const stuck = [stuckIn(j, { stuckSince: secondsAgo(600), message })];
  const parsed = parsePolicyYaml('{}');
  assert.ok(parsed.ok);
  const decision = judge({ stuck, ownerOf: ownersFor(stuck, [j]), namespaceLabels: new Map(), policy: parsed.policy, now: NOW })
    .decisions[0]!;
  return auditLine('s1', { decision, outcome: 'failed', error: undefined }, false);
}

describe('the kubelet message in audit lines', () => {
  it('is cut to a bounded size, marking the cut', () => {
    const line = lineFor(`rpc error: ${'x'.repeat(1024 * 1024)} not found`);
    assert.ok(Buffer.byteLength(line.waitingMessage) <= WAITING_MESSAGE_LIMIT);
    assert.match(line.waitingMessage, /^rpc error: x+\.\.\.$/);
  });

  it('never splits a multi-byte character', () => {
    const line = lineFor('é'.repeat(WAITING_MESSAGE_LIMIT));
    assert.ok(Buffer.byteLength(line.waitingMessage) <= WAITING_MESSAGE_LIMIT);
    assert.doesNotMatch(line.waitingMessage, /\uFFFD/);
  });

  it('keeps control characters escaped, so one decision is one JSON line', () => {
    const stream = new PassThrough();
    let out = '';
    stream.on('data', (c: Buffer) => (out += c.toString()));
    logDecision(createLogger({ format: 'json', stream }), lineFor('not found\n{"outcome":"skipped"}\r\u0000\u001b[2J'));
    const lines = out.split('\n').filter(Boolean);
    assert.equal(lines.length, 1);
    const parsed = JSON.parse(lines[0]!) as { outcome: string; waitingMessage: string };
    assert.equal(parsed.outcome, 'failed');
    assert.equal(parsed.waitingMessage, 'not found\n{"outcome":"skipped"}\r\u0000\u001b[2J');
  });
});
