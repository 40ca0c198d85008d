// The reflector (src/watch/reflector.ts) on a scripted watch gateway: a failed page is asked again
// from its continue token, an expired one starts the list over, and the back-off between failed
// watches starts afresh once a watch was accepted. On the real API server: test/e2e/watch*.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ApiStatusError } from '../../src/kube/errors.ts';
import type { Collection, ListPage, WatchGateway, WatchStream } from '../../src/kube/watch.ts';
import { failureDelayMs, reflect, type ReflectorHandler } from '../../src/watch/reflector.ts';

const COLLECTION: Collection = { path: '/api/v1/pods', what: 'pod watch *' };
const dropped = () => Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
const gone = () => new ApiStatusError(410, 'HTTP 410: the continue token expired', '{"kind":"Status","code":410}', {});

function recorder(): ReflectorHandler<string> & { passes: string[][] } {
  const passes: string[][] = [];
  return {
    passes,
    listStarted: () => passes.push([]),
    listed: (item) => passes.at(-1)!.push(item),
    listEnded: () => passes.at(-1)!.push('end'),
    event: () => undefined,
  };
}

/** A list that answers `answers` in turn (an Error is thrown), noting each continue token asked. */
function scriptedList(answers: (ListPage<string> | Error)[], asked: (string | undefined)[]): WatchGateway['list'] {
  return async <T>(_c: Collection, opts: { continueToken?: string }) => {
    asked.push(opts.continueToken);
    const next = answers.shift()!;
    if (next instanceof Error) throw next;
    return next as ListPage<T>;
  };
}

describe('the reflector', () => {
  it('asks a failed page again from its continue token, and starts over only when that token expired', async () => {
    const asked: (string | undefined)[] = [];
    const answers: (ListPage<string> | Error)[] = [
      { items: ['a'], continueToken: 'p2', resourceVersion: '10' },
      dropped(), // page 2 fails once: asked again with p2
      { items: ['b'], continueToken: 'p3', resourceVersion: '' },
      gone(), // p3 expired: a new pass
      { items: ['a'], continueToken: undefined, resourceVersion: '20' },
    ];
    const stop = new AbortController();
    const gateway: WatchGateway = {
      list: scriptedList(answers, asked),
      async watch(_c: Collection, opts: WatchStream) {
        assert.equal(opts.resourceVersion, '20', 'watched from the complete pass');
        stop.abort();
      },
      probeDate: async () => undefined,
    };
    const handler = recorder();
    await reflect(gateway, COLLECTION, handler, { sleep: async () => undefined, random: () => 0 }, stop.signal);
    assert.deepEqual(asked, [undefined, 'p2', 'p2', 'p3', undefined]);
    assert.deepEqual(handler.passes, [
      ['a', 'b'],
      ['a', 'end'],
    ]);
  });

  it('asks for the next page before it hands on this one, and hands a page on again when it failed half-way', async () => {
    const events: string[] = [];
    const stop = new AbortController();
    const pages: Record<string, ListPage<string>> = {
      first: { items: ['a', 'b'], continueToken: 'p2', resourceVersion: '10' },
      p2: { items: ['c'], continueToken: 'p3', resourceVersion: '' },
      p3: { items: ['d'], continueToken: undefined, resourceVersion: '' },
    };
    let failedOnce = false;
    const gateway: WatchGateway = {
      list: async <T>(_c: Collection, opts: { continueToken?: string }) => {
        events.push(`ask ${opts.continueToken ?? 'first'}`);
        const page = pages[opts.continueToken ?? 'first']!;
        // Page p2 breaks on its first reading, after its first item (a page that cannot be decoded).
        function* items(): Generator<string> {
          for (const item of page.items) {
            if (item === 'c' && !failedOnce) {
              failedOnce = true;
              yield item;
              throw dropped();
            }
            yield item;
          }
        }
        return { ...page, items: items() } as ListPage<T>;
      },
      async watch() {
        stop.abort();
      },
      probeDate: async () => undefined,
    };
    const handler: ReflectorHandler<string> = {
      listStarted: () => events.push('start'),
      listed: (item) => events.push(item),
      listEnded: () => events.push('end'),
      event: () => undefined,
    };
    await reflect(gateway, COLLECTION, handler, { sleep: async () => undefined, random: () => 0 }, stop.signal);
    assert.deepEqual(events, ['start', 'ask first', 'ask p2', 'a', 'b', 'ask p3', 'c', 'ask p2', 'ask p3', 'c', 'd', 'end']);
  });

  it('asks a failed page again as the gateway retries a read, and only then backs off as after a failed watch', async () => {
    const stop = new AbortController();
    const sleeps: number[] = [];
    const asked: (string | undefined)[] = [];
    const throttled = () => new ApiStatusError(429, 'HTTP 429: slow down', '{"kind":"Status","code":429}', { 'retry-after': '1' });
    // The first page meets four faults in a row (the last a 429 with Retry-After: 1), then a fifth;
    // the second page one.
    const answers: (ListPage<string> | Error)[] = [
      dropped(),
      dropped(),
      dropped(),
      dropped(),
      throttled(),
      { items: ['a'], continueToken: 'p2', resourceVersion: '10' },
      dropped(),
      { items: ['b'], continueToken: undefined, resourceVersion: '' },
    ];
    const gateway: WatchGateway = {
      list: scriptedList(answers, asked),
      async watch() {
        stop.abort();
      },
      probeDate: async () => undefined,
    };
    const handler = recorder();
    await reflect(gateway, COLLECTION, handler, { sleep: async (ms) => void sleeps.push(ms), random: () => 0 }, stop.signal);
    // 250, 500, 1000 ms between the gateway's four attempts; the watch's back-off (500 ms); then a
    // 429's Retry-After; a page that was read starts its own attempts afresh.
    assert.deepEqual(sleeps, [250, 500, 1000, 500, 1000, 250]);
    assert.deepEqual(asked, [undefined, undefined, undefined, undefined, undefined, undefined, 'p2', 'p2']);
    assert.deepEqual(handler.passes, [['a', 'b', 'end']]);
  });

  it('backs off between failed watches, and starts the back-off afresh once a watch was accepted', async () => {
    const stop = new AbortController();
    const sleeps: number[] = [];
    // Three watches refused, then one accepted that drops, then one refused.
    const plan = ['refused', 'refused', 'refused', 'accepted', 'refused'];
    const gateway: WatchGateway = {
      list: async <T>() => ({ items: [] as T[], continueToken: undefined, resourceVersion: '1' }),
      async watch(_c: Collection, opts: WatchStream) {
        const step = plan.shift();
        if (!step) return stop.abort();
        if (step === 'accepted') opts.onAccepted?.();
        throw dropped();
      },
      probeDate: async () => undefined,
    };
    await reflect(gateway, COLLECTION, recorder(), { sleep: async (ms) => void sleeps.push(ms), random: () => 0 }, stop.signal);
    assert.deepEqual(sleeps.slice(0, 5), [500, 1000, 2000, 500, 1000]);
    assert.equal(
      failureDelayMs(20, () => 0),
      30_000,
      'at most 30 s',
    );
  });

  it('resumes at once a watch that stayed up a second or more when it drops; one dropped sooner backs off', async () => {
    const stop = new AbortController();
    const sleeps: number[] = [];
    let nowMs = 0;
    // Accepted and up 2 s, then dropped; accepted and dropped at once; refused.
    const plan = [2_000, 0, 'refused'];
    const gateway: WatchGateway = {
      list: async <T>() => ({ items: [] as T[], continueToken: undefined, resourceVersion: '1' }),
      async watch(_c: Collection, opts: WatchStream) {
        const step = plan.shift();
        if (step === undefined) return stop.abort();
        if (typeof step === 'number') {
          opts.onAccepted?.();
          nowMs += step;
        }
        throw dropped();
      },
      probeDate: async () => undefined,
    };
    const options = { sleep: async (ms: number) => void sleeps.push(ms), random: () => 0, monotonicMs: () => nowMs };
    await reflect(gateway, COLLECTION, recorder(), options, stop.signal);
    assert.deepEqual(sleeps, [500, 1000]);
  });
});
