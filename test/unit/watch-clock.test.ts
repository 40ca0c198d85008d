import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { seededRandom } from '../support/fault-proxy.ts';
import { OFFSET_WINDOW_MS, ServerClock } from '../../src/watch/clock.ts';
import { Wakeup } from '../../src/watch/wakeup.ts';

/** An answer the server wrote at its time `serverMs` (Date truncated to the second), arriving `latencyMs` later. */
function answer(clock: ServerClock, offsetMs: number, sentMonoMs: number, latencyMs: number): number {
  const serverMs = sentMonoMs + offsetMs;
  const arrivedMono = sentMonoMs + latencyMs;
  clock.note({ date: new Date(Math.floor(serverMs / 1000) * 1000), ageMs: 0 }, arrivedMono);
  return arrivedMono;
}

describe('ServerClock: the timers run on the API server clock', () => {
  it('knows nothing before an answer', () => {
    const clock = new ServerClock();
    assert.equal(clock.serverNowMs(1000), undefined);
    assert.equal(clock.monotonicAt(5000, 1000), undefined);
  });

  it('is never ahead of the server, over 10,000 random offsets, latencies and phases', () => {
    const random = seededRandom(37);
    for (let run = 0; run < 10_000; run += 1) {
      const clock = new ServerClock();
      const offset = 1.7e12 + random() * 1e9;
      let mono = random() * 1e6;
      for (let i = 0; i < 1 + Math.floor(random() * 20); i += 1) {
        mono = answer(clock, offset, mono + random() * 300, random() * 50);
        const estimate = clock.serverNowMs(mono)!;
        assert.ok(estimate <= mono + offset, `estimate ${estimate} ahead of the server ${mono + offset}`);
      }
    }
  });

  it('is within the spacing of two answers plus their latency once they straddle a second boundary', () => {
    const random = seededRandom(7);
    for (let run = 0; run < 1000; run += 1) {
      const clock = new ServerClock();
      const offset = 1.7e12 + random() * 1e9;
      let mono = random() * 1e6;
      // The calibration: a request 40 ms after each answer (so 45 ms between requests) until the Date changes.
      let previous: number | undefined;
      for (let i = 0; i < 30; i += 1) {
        mono = answer(clock, offset, mono + 40, 5);
        const second = Math.floor((mono - 5 + offset) / 1000);
        if (previous !== undefined && second !== previous) break;
        previous = second;
      }
      const error = mono + offset - clock.serverNowMs(mono)!;
      assert.ok(error >= 0 && error <= 45 + 5, `error ${error} ms`);
    }
  });

  it('converts a server time to the local monotonic time of the timer', () => {
    const clock = new ServerClock();
    clock.note({ date: new Date(1_000_000), ageMs: 200 }, 5_000);
    assert.equal(clock.serverNowMs(5_000), 1_000_200);
    assert.equal(clock.monotonicAt(1_010_000, 5_000), 14_800);
  });

  it('forgets bounds older than its window, so slow drift cannot keep an old best', () => {
    const clock = new ServerClock();
    clock.note({ date: new Date(1_000_000), ageMs: 0 }, 0);
    clock.note({ date: new Date(1_000_000), ageMs: 0 }, 900);
    assert.equal(clock.serverNowMs(1000), 1_001_000);
    assert.equal(clock.serverNowMs(OFFSET_WINDOW_MS + 500), 1_000_000 - 900 + OFFSET_WINDOW_MS + 500);
  });
});

describe('Wakeup', () => {
  it('ends a wait early on notify or abort, and a notify before the wait is not lost (else this test would wait a minute each)', async () => {
    const wakeup = new Wakeup();
    const stop = new AbortController();
    setTimeout(() => wakeup.notify(), 10);
    await wakeup.wait(60_000, stop.signal);
    wakeup.notify();
    await wakeup.wait(60_000, stop.signal);
    const early = new AbortController();
    early.abort();
    await wakeup.wait(60_000, early.signal);
  });
});
