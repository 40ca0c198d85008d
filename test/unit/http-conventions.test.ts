// What every request of the HTTP layer carries and obeys (kube/http.ts, kube/rate-limit.ts), seen by
// a loopback server: the User-Agent, the fieldManager of writes, the Warning headers, the rate
// limit and the fence. That the real API server records the field manager: test/e2e/watch.test.ts.
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { clientSettings } from '../../src/cli/connect.ts';
import { FIELD_MANAGER, createKubeHttp, warningTexts } from '../../src/kube/http.ts';
import { tokenBucket } from '../../src/kube/rate-limit.ts';
import { packageVersion } from '../../src/version.ts';

async function serve(handle: (req: IncomingMessage) => { status?: number; headers?: Record<string, string | string[]>; delayMs?: number }) {
  const seen: IncomingMessage[] = [];
  const server: Server = createServer((req, res) => {
    seen.push(req);
    const answer = handle(req);
    setTimeout(
      () => res.writeHead(answer.status ?? 200, { 'Content-Type': 'application/json', ...answer.headers }).end('{}'),
      answer.delayMs ?? 0,
    );
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const kc = new KubeConfig();
  kc.loadFromOptions({
    clusters: [{ name: 'c', server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, skipTLSVerify: true }],
    users: [{ name: 'u' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return { server, kc, seen };
}

describe('the HTTP layer', () => {
  it('names itself imagepull-sweeper/VERSION and sends fieldManager=imagepull-sweeper on every POST, PUT and PATCH', async () => {
    const { server, kc, seen } = await serve(() => ({}));
    try {
      const http = createKubeHttp(kc, 5_000);
      await http.getJson('/api/v1/pods', {});
      for (const method of ['POST', 'PUT', 'PATCH', 'DELETE'] as const) await http.send(method, '/x', { body: {} });
      await http.send('PATCH', '/y', { body: {}, query: { dryRun: 'All' } });
      const managers = seen.map((r) => [r.method, new URL(r.url!, 'http://h').searchParams.get('fieldManager')]);
      assert.deepEqual(managers, [
        ['GET', null],
        ['POST', FIELD_MANAGER],
        ['PUT', FIELD_MANAGER],
        ['PATCH', FIELD_MANAGER],
        ['DELETE', null],
        ['PATCH', FIELD_MANAGER],
      ]);
      assert.equal(FIELD_MANAGER, 'imagepull-sweeper');
      for (const r of seen) assert.equal(r.headers['user-agent'], `imagepull-sweeper/${packageVersion()}`);
    } finally {
      server.close();
    }
  });

  it('hands on each Warning header, and the CLI logs each distinct one once', async () => {
    const { server, kc } = await serve((req) =>
      req.url?.startsWith('/deprecated') ? { headers: { Warning: '299 - "batch/v1beta1 CronJob is deprecated"' } } : {},
    );
    try {
      const warned: string[] = [];
      const settings = clientSettings({});
      settings.warn = (text) => warned.push(text);
      const http = createKubeHttp(kc, 5_000, undefined, undefined, settings);
      for (let i = 0; i < 3; i += 1) await http.getJson('/deprecated', {});
      await http.getJson('/fine', {});
      assert.deepEqual(warned, ['batch/v1beta1 CronJob is deprecated']);
    } finally {
      server.close();
    }
  });

  it('reads several warnings of one header, with escaped quotes', () => {
    assert.deepEqual(warningTexts('299 - "a \\"quoted\\" word", 299 - "second"'), ['a "quoted" word', 'second']);
    assert.deepEqual(warningTexts(['299 - "x"', 'no code at all']), ['x', 'no code at all']);
  });

  it('abandons the requests in flight, and starts none, once the fence is down (a lost Lease)', async () => {
    const { server, kc, seen } = await serve(() => ({ delayMs: 5_000 }));
    try {
      const fence = new AbortController();
      const http = createKubeHttp(kc, 30_000, undefined, undefined, { fence: fence.signal });
      const inFlight = http.send('PATCH', '/jobs/a', { body: {} });
      while (seen.length === 0) await new Promise((r) => setTimeout(r, 5));
      fence.abort(new Error('the Lease was lost'));
      await assert.rejects(inFlight, /the Lease was lost/);
      await assert.rejects(http.send('PATCH', '/jobs/b', { body: {} }), /the Lease was lost/);
      assert.equal(seen.length, 1, 'the second write never left');
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });
});

describe('the client-side rate limit', () => {
  it('lets a burst through, then one request per 1/qps, in order', async () => {
    let now = 0;
    const timers: { at: number; fn: () => void }[] = [];
    const bucket = tokenBucket(
      10,
      3,
      () => now,
      (fn, ms) => {
        const t = { at: now + ms, fn };
        timers.push(t);
        return { cancel: () => timers.splice(timers.indexOf(t), 1) };
      },
    );
    const done: number[] = [];
    const all = Array.from({ length: 6 }, (_, i) => bucket.take().then(() => done.push(i)));
    await Promise.resolve();
    await Promise.resolve();
    assert.deepEqual(done, [0, 1, 2], 'the burst');
    for (let step = 0; step < 3; step += 1) {
      const t = timers.shift()!;
      now = t.at;
      t.fn();
      await Promise.resolve();
      await Promise.resolve();
    }
    await Promise.all(all);
    assert.deepEqual(done, [0, 1, 2, 3, 4, 5]);
    assert.equal(now, 300, 'three more at 10 a second');
  });

  it('is off at qps 0, and a waiter whose signal aborts leaves the queue', async () => {
    await tokenBucket(0, 0).take();
    const bucket = tokenBucket(1, 1);
    await bucket.take();
    const stop = new AbortController();
    const waiting = bucket.take(stop.signal);
    stop.abort(new Error('stopped'));
    await assert.rejects(waiting, /stopped/);
  });
});
