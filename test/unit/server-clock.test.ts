// "Now" on the API server's clock (kube/server-clock.ts, docs/clock.md). That a sweeper whose own
// clock is 15 minutes off fails nothing early, and late nothing, is proven on the real control
// plane in test/e2e/node-clock.test.ts.
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { createKubeHttp } from '../../src/kube/http.ts';
import { parseHttpDate, serverNow } from '../../src/kube/server-clock.ts';
import { seededRandom } from '../support/fault-proxy.ts';

describe('parseHttpDate', () => {
  it('reads the IMF-fixdate an HTTP server writes (RFC 9110 5.6.7)', () => {
    assert.equal(parseHttpDate('Sun, 06 Nov 1994 08:49:37 GMT')?.toISOString(), '1994-11-06T08:49:37.000Z');
    assert.equal(parseHttpDate('Mon, 30 Nov 2026 18:40:28 GMT')?.toISOString(), '2026-11-30T18:40:28.000Z');
    assert.equal(parseHttpDate('Tue, 29 Feb 2028 00:00:00 GMT')?.toISOString(), '2028-02-29T00:00:00.000Z');
  });

  it('refuses anything else: the obsolete forms, ISO dates, other zones, impossible days', () => {
    for (const text of [
      undefined,
      '',
      'Sunday, 06-Nov-94 08:49:37 GMT',
      'Sun Nov  6 08:49:37 1994',
      '2026-11-30T18:40:28Z',
      'Mon, 30 Nov 2026 18:40:28 +0000',
      'Mon, 30 Nov 2026 18:40:28 CET',
      'Mon, 31 Feb 2026 18:40:28 GMT',
      'Mon, 30 Foo 2026 18:40:28 GMT',
      'Mon, 30 Nov 2026 24:00:00 GMT',
    ]) {
      assert.equal(parseHttpDate(text), undefined, String(text));
    }
  });
});

describe('serverNow', () => {
  const date = new Date('2026-11-30T12:00:00Z');

  it('is the Date plus the local monotonic time since that answer arrived', () => {
    assert.equal(serverNow({ date, ageMs: 0 }, 5_000)?.toISOString(), '2026-11-30T12:00:00.000Z');
    assert.equal(serverNow({ date, ageMs: 2_500 }, 5_000)?.toISOString(), '2026-11-30T12:00:02.500Z');
  });

  it('is unknown without an answer of this sweep: none at all, or only one from before it began', () => {
    assert.equal(serverNow(undefined, 5_000), undefined);
    assert.equal(serverNow({ date, ageMs: 5_001 }, 5_000), undefined);
  });

  it("is never later than the server's real time, whatever the latency and the position in the second", () => {
    const random = seededRandom(17);
    for (let i = 0; i < 10_000; i += 1) {
      // The server writes its headers at `sent` (its clock); the answer arrives `latency` later;
      // the sweep asks `elapsed` after that.
      const sent = Date.UTC(2026, 10, 30, 12) + Math.floor(random() * 3_600_000);
      const latency = random() * 2_000;
      const elapsed = random() * 60_000;
      const header = new Date(sent).toUTCString();
      const measured = serverNow({ date: parseHttpDate(header)!, ageMs: elapsed }, elapsed + 1)!;
      const real = sent + latency + elapsed;
      assert.ok(measured.getTime() <= real, `${measured.toISOString()} after ${new Date(real).toISOString()}`);
      assert.ok(real - measured.getTime() < 1_000 + latency + 1, 'short by at most the truncated second and the latency');
    }
  });
});

describe("the HTTP layer keeps the Date of the API server's newest answer", () => {
  /** A loopback server answering each path with a status, a Date header (or none) and a body. */
  async function serve(
    answers: Record<string, { status: number; date: string | undefined; body?: string }>,
  ): Promise<{ server: Server; kc: KubeConfig }> {
    const server = createServer((req, res) => {
      const answer = answers[(req.url ?? '').split('?')[0]!] ?? { status: 404, date: undefined };
      res.sendDate = false;
      if (answer.date) res.setHeader('Date', answer.date);
      res.writeHead(answer.status, { 'Content-Type': 'application/json' }).end(answer.body ?? '{}');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    const kc = new KubeConfig();
    const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    kc.loadFromOptions({
      clusters: [{ name: 'c', server: url, skipTLSVerify: true }],
      users: [{ name: 'u' }],
      contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
      currentContext: 'x',
    });
    return { server, kc };
  }

  it("takes 2xx answers and the API server's own errors, the newest one, aged on the monotonic clock", async () => {
    const { server, kc } = await serve({
      '/ok': { status: 200, date: 'Mon, 30 Nov 2026 12:00:00 GMT' },
      '/later': { status: 200, date: 'Mon, 30 Nov 2026 12:00:05 GMT' },
      '/proxy-error': { status: 503, date: 'Mon, 30 Nov 2026 13:00:00 GMT', body: 'upstream connect error' },
      '/not-found': {
        status: 404,
        date: 'Mon, 30 Nov 2026 12:00:07 GMT',
        body: '{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404}',
      },
      '/no-date': { status: 200, date: undefined },
    });
    try {
      const clock = { ms: 0 };
      const http = createKubeHttp(kc, 5_000, () => clock.ms);
      assert.equal(http.lastServerDate(), undefined);
      await http.getJson('/no-date', {});
      assert.equal(http.lastServerDate(), undefined, 'an answer without a Date tells no time');
      await http.getJson('/ok', {});
      assert.equal(http.lastServerDate()?.date.toISOString(), '2026-11-30T12:00:00.000Z');
      await assert.rejects(http.getJson('/proxy-error', {}));
      assert.equal(
        http.lastServerDate()?.date.toISOString(),
        '2026-11-30T12:00:00.000Z',
        "an error answer may be a proxy's, on its own clock",
      );
      await http.send('POST', '/later', { body: {} });
      assert.equal(http.lastServerDate()?.date.toISOString(), '2026-11-30T12:00:05.000Z');
      await http.getJson('/no-date', {});
      assert.equal(http.lastServerDate()?.date.toISOString(), '2026-11-30T12:00:05.000Z', 'the newest answer that carried one');
      await assert.rejects(http.getJson('/not-found', {}));
      assert.equal(
        http.lastServerDate()?.date.toISOString(),
        '2026-11-30T12:00:07.000Z',
        'a Status the API server wrote (a missing ConfigMap)',
      );
      const first = http.lastServerDate()!.ageMs;
      clock.ms += 50;
      assert.equal(http.lastServerDate()!.ageMs, first + 50);
    } finally {
      server.closeAllConnections();
      server.close();
    }
  });
});
