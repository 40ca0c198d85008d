import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { limited } from '../../src/concurrency.ts';

describe('limited', () => {
  it('runs at most the limit at once, from callers that never coordinate, and every call completes', async () => {
    const gate = limited(2);
    let inFlight = 0;
    let peak = 0;
    const job = (n: number) =>
      gate(async () => {
        inFlight += 1;
        peak = Math.max(peak, inFlight);
        await new Promise((r) => setTimeout(r, 3));
        inFlight -= 1;
        return n;
      });
    const out = await Promise.all([Promise.all([job(1), job(2), job(3)]), Promise.all([job(4), job(5)])]);
    assert.deepEqual(out, [
      [1, 2, 3],
      [4, 5],
    ]);
    assert.equal(peak, 2);
  });

  it('a call that throws frees its place for the next one', async () => {
    const gate = limited(1);
    const failed = gate(() => Promise.reject(new Error('refused')));
    const next = gate(() => Promise.resolve('ran'));
    await assert.rejects(failed, /refused/);
    assert.equal(await next, 'ran');
  });
});
