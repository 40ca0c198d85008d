// A slow log reader: the sweep waits for the output instead of queueing every audit line in memory.
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import { describe, it } from 'node:test';
import { act } from '../../src/act/act.ts';
import type { Decision } from '../../src/judge/types.ts';
import { createLogger, outputRoom } from '../../src/report/logger.ts';
import { scriptedGateway } from '../support/scripted-gateway.ts';
import { NOW, defaultDecision } from './judge-fixtures.ts';

/** An output that takes a line only when the test lets it (`release`), 100 bytes of buffer. */
function slowOutput() {
  const held: (() => void)[] = [];
  const lines: string[] = [];
  const stream = new Writable({
    highWaterMark: 100,
    write(chunk: Buffer, _encoding, done) {
      lines.push(chunk.toString());
      held.push(done);
    },
  });
  const release = () => {
    for (let done = held.shift(); done; done = held.shift()) done();
  };
  return { stream, lines, release };
}

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('the log output under a slow reader', () => {
  it('has room while it takes lines; once full, one promise for every waiter, settled when it drains', async () => {
    const { stream, release } = slowOutput();
    const logger = createLogger({ format: 'json', stream });
    assert.equal(outputRoom(logger), undefined);
    logger.info('first line, longer than the hundred bytes of buffer the output keeps before it asks to wait: '.repeat(2));
    const room = outputRoom(logger);
    assert.ok(room);
    assert.equal(outputRoom(logger), room);
    let settled = false;
    void room.then(() => (settled = true));
    await tick();
    assert.equal(settled, false);
    release();
    await tick();
    assert.equal(settled, true);
    assert.equal(outputRoom(logger), undefined);
  });

  it('settles a wait when the output closes instead of draining', async () => {
    const { stream } = slowOutput();
    const logger = createLogger({ format: 'json', stream });
    logger.info('x'.repeat(200));
    const room = outputRoom(logger);
    assert.ok(room);
    stream.destroy();
    await room;
    assert.equal(outputRoom(logger), undefined);
  });
});

describe('act under back-pressure from its result callback', () => {
  function skipped(name: string): Decision {
    const d = defaultDecision(name, 60);
    assert.equal(d.plan, 'skip');
    return d;
  }

  it('takes no more decisions than its concurrency while their callbacks wait, and finishes them all once they settle', async () => {
    const decisions = Array.from({ length: 20 }, (_, i) => skipped(`job-${i}`));
    let open: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (open = resolve));
    const reported: string[] = [];
    const { gateway, calls } = scriptedGateway();
    const acting = act(gateway, decisions, {
      concurrency: 4,
      now: NOW,
      instance: 'unit',
      claim: 'claim-1',
      rejudge: () => assert.fail('no rejudge expected'),
      onResult: (r) => {
        reported.push(r.decision.job ?? '');
        return gate;
      },
    });
    for (let i = 0; i < 5; i += 1) await tick();
    assert.equal(reported.length, 4);
    open();
    const results = await acting;
    assert.equal(results.length, 20);
    assert.deepEqual(new Set(reported), new Set(decisions.map((d) => d.job)));
    assert.equal(calls.length, 0);
  });
});
