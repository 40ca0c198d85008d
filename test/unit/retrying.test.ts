// The retry policy of the gateway (kube/retrying.ts) on scripted failures. That the real API
// server answers a lost write this way is proven in test/e2e/sweep.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ApiException, type EventsV1Event, type V1Job } from '@kubernetes/client-node';
import { mapBounded } from '../../src/concurrency.ts';
import { retryLine } from '../../src/cli/connect.ts';
import { describeApiError } from '../../src/kube/errors.ts';
import type { KubeGateway } from '../../src/kube/gateway.ts';
import type { LeaseGateway, LeaseSpec } from '../../src/kube/leases.ts';
import { cameFromHedge, hedgeAfterMs, hedged, withLeaseRetries, withRetries, type RetryNotice } from '../../src/kube/retrying.ts';
import { apiError, scriptedGateway, type Script } from '../support/scripted-gateway.ts';

const dropped = () => Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
const status = (code: number, headers: Record<string, string> = {}) => new ApiException(code, 'x', '', headers);

/** A plain gateway answering from `script`; a method whose answers ran out repeats its last. */
const scripted = (script: Script) => scriptedGateway(script, { repeatLast: true });

function retrying(plain: KubeGateway, notices: RetryNotice[] = [], sleeps: number[] = []): KubeGateway {
  return withRetries(plain, {
    attempts: 4,
    baseDelayMs: 100,
    maxDelayMs: 10_000,
    jitter: 0,
    sleep: async (ms) => void sleeps.push(ms),
    onRetry: (n) => notices.push(n),
  });
}

const job = (annotations: Record<string, string>): V1Job => ({ metadata: { name: 'j', annotations } });
const event: EventsV1Event = { metadata: { name: 'j.1', namespace: 'ns' }, eventTime: new Date() };

describe('the retrying gateway', () => {
  it('backs off, honours Retry-After and reports each retried request once', async () => {
    const { gateway } = scripted({ readJob: [status(429, { 'Retry-After': '2' }), status(500), job({})] });
    const notices: RetryNotice[] = [];
    const sleeps: number[] = [];
    await retrying(gateway, notices, sleeps).readJob('ns', 'j');
    assert.deepEqual(sleeps, [2000, 200]);
    assert.deepEqual(
      notices.map((n) => [n.request, n.failure.status, n.attempt, n.delayMs]),
      [
        ['readJob ns/j', 429, 1, 2000],
        ['readJob ns/j', 500, 2, 200],
      ],
    );
  });

  it('gives up after the attempts, saying so once, and never repeats a 4xx', async () => {
    const down = scripted({ readNamespace: [status(503)] });
    const notices: RetryNotice[] = [];
    await assert.rejects(retrying(down.gateway, notices).readNamespace('ns'));
    assert.equal(down.count('readNamespace'), 4);
    assert.deepEqual(
      notices.map((n) => [n.attempt, n.delayMs]),
      [
        [1, 100],
        [2, 200],
        [3, 400],
        [4, undefined],
      ],
    );
    const conflict = scripted({ mergePatchJob: [status(409)] });
    const refused: RetryNotice[] = [];
    await assert.rejects(retrying(conflict.gateway, refused).mergePatchJob('ns', 'j', { metadata: { annotations: { a: '1' } } }));
    assert.equal(conflict.count('mergePatchJob'), 1);
    assert.deepEqual(refused, [], 'a failure not retried is the caller to report, not the retries');
  });

  it('logs a retry with its wait, and the attempt that ran out as given up', () => {
    const failure = describeApiError(status(503));
    assert.equal(
      retryLine({ request: 'readJob ns/j', failure, attempt: 1, delayMs: 250 }),
      `retrying readJob ns/j after attempt 1 (503 ${failure.reason}: ${failure.message}) in 250 ms`,
    );
    assert.equal(
      retryLine({ request: 'readJob ns/j', failure, attempt: 4 }),
      `gave up on readJob ns/j after attempt 4 (503 ${failure.reason}: ${failure.message})`,
    );
  });

  it('counts a claim that conflicts after a retry as done when the Job carries its annotations', async () => {
    const claim = { metadata: { resourceVersion: '7', annotations: { 'imagepull-sweeper/failed-at': 'T' } } };
    const landed = scripted({ mergePatchJob: [dropped(), status(409)], readJob: [job({ 'imagepull-sweeper/failed-at': 'T' })] });
    await retrying(landed.gateway).mergePatchJob('ns', 'j', claim);
    const lost = scripted({ mergePatchJob: [dropped(), status(409)], readJob: [job({ 'imagepull-sweeper/failed-at': 'other' })] });
    await assert.rejects(
      retrying(lost.gateway).mergePatchJob('ns', 'j', claim),
      (e: unknown) => e instanceof ApiException && e.code === 409,
    );
    const firstTry = scripted({ mergePatchJob: [status(409)], readJob: [job({ 'imagepull-sweeper/failed-at': 'T' })] });
    await assert.rejects(retrying(firstTry.gateway).mergePatchJob('ns', 'j', claim));
    assert.equal(firstTry.count('readJob'), 0, 'a conflict on the first attempt is a race lost, not checked');
  });

  it('reads a conflicting claim back with retries: a dropped read does not turn a landed claim into a conflict', async () => {
    const claim = { metadata: { resourceVersion: '7', annotations: { 'imagepull-sweeper/claim': 'c1' } } };
    const flaky = scripted({
      mergePatchJob: [dropped(), status(409)],
      readJob: [dropped(), status(503), job({ 'imagepull-sweeper/claim': 'c1' })],
    });
    await retrying(flaky.gateway).mergePatchJob('ns', 'j', claim);
    assert.equal(flaky.count('readJob'), 3);
  });

  it('counts an Event create answered 409 after a retry as done, not on the first attempt', async () => {
    await retrying(scripted({ createEvent: [dropped(), status(409)] }).gateway).createEvent('ns', event);
    await assert.rejects(retrying(scripted({ createEvent: [status(409)] }).gateway).createEvent('ns', event));
  });

  it('counts a pod delete answered 404 after a retry as done, and leaves a first-attempt 404 (already gone) to the caller', async () => {
    await retrying(scripted({ deletePod: [dropped(), status(404)] }).gateway).deletePod('ns', 'p', 'uid');
    await assert.rejects(
      retrying(scripted({ deletePod: [status(404)] }).gateway).deletePod('ns', 'p', 'uid'),
      (e: unknown) => describeApiError(e).status === 404,
    );
  });

  it('marks a write given up on as possibly landed when any attempt may have reached the server', async () => {
    const mayHaveLanded = (e: unknown) => describeApiError(e).mayHaveLanded;
    // A timeout first, then answers sent before the request is carried out: the first may still land.
    const timedOut = Object.assign(new Error('no answer within the request timeout'), { name: 'TimeoutError' });
    const late = scripted({ deletePod: [timedOut, status(429), status(503), status(503)] });
    await assert.rejects(retrying(late.gateway).deletePod('ns', 'p', 'uid', '7'), mayHaveLanded);
    assert.equal(late.count('deletePod'), 4);
    // Nothing sent (connection refused) or answered before carrying it out (429, 503): it did not land.
    const refused = Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' });
    const never = scripted({ mergePatchJob: [refused, status(429), status(503), status(503)] });
    await assert.rejects(
      retrying(never.gateway).mergePatchJob('ns', 'j', { metadata: { annotations: { a: '1' } } }),
      (e: unknown) => !mayHaveLanded(e),
    );
    // A 500 or a dropped connection on the last attempt may have landed on its own.
    await assert.rejects(retrying(scripted({ createEvent: [status(500)] }).gateway).createEvent('ns', event), mayHaveLanded);
    await assert.rejects(retrying(scripted({ jsonPatchJob: [status(429), dropped()] }).gateway).jsonPatchJob('ns', 'j', []), mayHaveLanded);
    // A read is never marked: it changes nothing.
    const reads = scripted({ readJob: [timedOut, status(503)] });
    await assert.rejects(
      retrying(reads.gateway).readJob('ns', 'j'),
      (e: unknown) => describeApiError(e).status === 503 && !mayHaveLanded(e),
    );
  });
});

describe('mapBounded', () => {
  it('keeps order and never runs more than the limit at once', async () => {
    let inFlight = 0;
    let peak = 0;
    const out = await mapBounded([1, 2, 3, 4, 5, 6, 7], 3, async (n) => {
      inFlight += 1;
      peak = Math.max(peak, inFlight);
      await new Promise((r) => setTimeout(r, 5));
      inFlight -= 1;
      return n * 10;
    });
    assert.deepEqual(out, [10, 20, 30, 40, 50, 60, 70]);
    assert.equal(peak, 3);
  });
});

describe('a hedged read', () => {
  /** A call whose every copy waits for the test to answer it. */
  function calls<T>() {
    const sent: { resolve: (v: T) => void; reject: (e: unknown) => void }[] = [];
    const call = () => new Promise<T>((resolve, reject) => sent.push({ resolve, reject }));
    return { sent, call };
  }
  const flush = () => new Promise<void>((r) => setImmediate(r));

  it('is sent once when answered in time', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const c = calls<string>();
    const read = hedged(c.call, 500);
    c.sent[0]!.resolve('first');
    assert.equal(await read, 'first');
    t.mock.timers.tick(1_000);
    assert.equal(c.sent.length, 1);
  });

  it('is sent again when unanswered after the delay; the first answer wins', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const c = calls<string>();
    const read = hedged(c.call, 500);
    t.mock.timers.tick(499);
    assert.equal(c.sent.length, 1);
    t.mock.timers.tick(1);
    assert.equal(c.sent.length, 2);
    c.sent[1]!.resolve('second');
    c.sent[0]!.resolve('first, late');
    assert.equal(await read, 'second');
  });

  it('hands a quick failure to the retries at once, without a second copy', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const c = calls<string>();
    const read = hedged(c.call, 500);
    c.sent[0]!.reject(new Error('socket hang up'));
    await assert.rejects(read, /socket hang up/);
    t.mock.timers.tick(1_000);
    assert.equal(c.sent.length, 1);
  });

  it('waits for the other copy when one fails, and fails only when both have', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const c = calls<string>();
    let outcome: string | undefined;
    const read = hedged(c.call, 500).then(
      (v) => (outcome = `answer ${v}`),
      (e: Error) => (outcome = `error ${e.message}`),
    );
    t.mock.timers.tick(500);
    c.sent[0]!.reject(new Error('request timeout'));
    await flush();
    assert.equal(outcome, undefined, 'the second copy is still in flight');
    c.sent[1]!.reject(new Error('503'));
    await read;
    assert.equal(outcome, 'error 503');
  });

  it("fails with the second copy's error at once, not when the stalled first one times out", async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const c = calls<string>();
    const read = hedged(c.call, 500);
    t.mock.timers.tick(500);
    const unavailable = status(503);
    c.sent[1]!.reject(unavailable);
    await assert.rejects(read, (e: unknown) => e === unavailable);
    c.sent[0]!.resolve('first, late');
  });

  it('as a conditional write, says the stalled first copy may still land', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const c = calls<void>();
    const write = hedged(c.call, 500, true);
    t.mock.timers.tick(500);
    const throttled = status(429);
    c.sent[1]!.reject(throttled);
    await assert.rejects(write, (e: unknown) => e === throttled);
    assert.equal(describeApiError(throttled).mayHaveLanded, true);
  });

  it('is not hedged without a delay', async () => {
    const c = calls<string>();
    const read = hedged(c.call, undefined);
    await flush();
    c.sent[0]!.resolve('only');
    assert.equal(await read, 'only');
    assert.equal(c.sent.length, 1);
  });

  it('in the retried gateway: a slow read of one object or a slow conditional write is sent again, a slow list or plain write is not', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const never = () => new Promise<never>(() => undefined);
    const scripted = scriptedGateway({
      readJob: [never, { metadata: { name: 'build-7' } } as V1Job],
      listJobs: [never],
      patchJobStatus: [never, {}],
      mergePatchJob: [never],
    });
    const gateway = withRetries(scripted.gateway, { hedgeAfterMs: 500 });
    let answered: string | undefined;
    let patched = false;
    void gateway.readJob('ci', 'build-7').then((job) => (answered = job.metadata?.name));
    void gateway.listJobs({ namespace: 'ci', limit: 500 });
    void gateway.patchJobStatus('ci', 'build-7', { metadata: { resourceVersion: '5' } }).then(() => (patched = true));
    void gateway.mergePatchJob('ci', 'build-7', { metadata: { labels: { x: null } } });
    await flush();
    t.mock.timers.tick(500);
    await flush();
    await flush();
    assert.equal(answered, 'build-7');
    assert.equal(patched, true);
    assert.deepEqual(
      ['readJob', 'listJobs', 'patchJobStatus', 'mergePatchJob'].map((m) => scripted.count(m as 'readJob')),
      [2, 1, 2, 1],
    );
  });

  it('hedges a quarter of the request timeout, at most a second', () => {
    assert.equal(hedgeAfterMs(2_000), 500);
    assert.equal(hedgeAfterMs(30_000), 1_000);
  });
});

describe('a hedged conditional write', () => {
  const flush = () => new Promise<void>((r) => setImmediate(r));
  const claim = { metadata: { resourceVersion: '5', annotations: { 'imagepull-sweeper/claim': 'c1' } } };
  const conflict = () => apiError(409, 'Conflict', 'the object has been modified');
  /**
   * A claim whose first copy stays unanswered until `answerFirst`, whose second conflicts, and
   * whose Job read back carries the claim `claimedBy`.
   */
  function secondCopyConflicts(claimedBy: string) {
    let answerFirst: (value: unknown) => void = () => undefined;
    const scripted = scriptedGateway({
      patchJobStatus: [() => new Promise((resolve) => (answerFirst = resolve)), conflict()],
      readJob: [{ metadata: { name: 'j', annotations: { 'imagepull-sweeper/claim': claimedBy } } } as V1Job],
    });
    const gateway = withRetries(scripted.gateway, { hedgeAfterMs: 500, sleep: async () => undefined });
    return { scripted, gateway, answerFirst: (value: unknown) => answerFirst(value) };
  }

  it("ends at the other copy's conflict without waiting for the stalled one, and reads the Job back: landed", async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const { scripted, gateway, answerFirst } = secondCopyConflicts('c1');
    let outcome: string | undefined;
    void gateway.patchJobStatus('ci', 'j', claim).then(
      () => (outcome = 'landed'),
      (e: unknown) => (outcome = `error ${describeApiError(e).status}`),
    );
    await flush();
    t.mock.timers.tick(500);
    await flush();
    await flush();
    await flush();
    assert.equal(outcome, 'landed', 'the first copy is still unanswered');
    assert.deepEqual(scripted.methods(), ['patchJobStatus', 'patchJobStatus', 'readJob']);
    answerFirst(conflict());
  });

  it("is a conflict when the Job read back is another's", async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const { scripted, gateway, answerFirst } = secondCopyConflicts('other');
    const write = gateway.patchJobStatus('ci', 'j', claim);
    await flush();
    t.mock.timers.tick(500);
    await assert.rejects(write, (e: unknown) => describeApiError(e).status === 409);
    assert.equal(scripted.count('patchJobStatus'), 2, 'a conflict is not retried');
    answerFirst(conflict());
  });

  it("hands a conflict before any second copy to the caller unread, as a first attempt's", async () => {
    const scripted = scriptedGateway({ patchJobStatus: [conflict()] });
    const gateway = withRetries(scripted.gateway, { hedgeAfterMs: 500 });
    await assert.rejects(gateway.patchJobStatus('ci', 'j', claim), (e: unknown) => describeApiError(e).status === 409);
    assert.deepEqual(scripted.methods(), ['patchJobStatus']);
  });

  it('marks its error as one that may have landed when a copy may have', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    let rejectFirst: (e: unknown) => void = () => undefined;
    let rejectCopy: (e: unknown) => void = () => undefined;
    const copies = [() => new Promise((_, reject) => (rejectFirst = reject)), () => new Promise((_, reject) => (rejectCopy = reject))];
    let sent = 0;
    const write = hedged(() => copies[sent++]!(), 500, true);
    t.mock.timers.tick(500);
    rejectFirst(Object.assign(new Error('no answer within the request timeout'), { name: 'TimeoutError' }));
    await flush();
    const unavailable = status(503);
    rejectCopy(unavailable);
    await assert.rejects(write, (e: unknown) => e === unavailable);
    assert.equal(describeApiError(unavailable).mayHaveLanded, true, 'the first copy may still land');
    assert.equal(cameFromHedge(unavailable), true);
  });
});

describe('a hedged Lease replace', () => {
  const flush = () => new Promise<void>((r) => setImmediate(r));
  const ours: LeaseSpec = { holderIdentity: 'replica-1', leaseDurationSeconds: 15, renewTime: '2026-12-06T05:00:00.123000Z' };
  /** A Lease gateway whose first replace stays unanswered, the second conflicts, and reads give `current`. */
  function leases(current: LeaseSpec) {
    const calls: string[] = [];
    const plain: LeaseGateway = {
      readLease: async () => (calls.push('read'), { metadata: { resourceVersion: '8' }, spec: current }),
      createLease: async () => (calls.push('create'), '1'),
      replaceLease: () => {
        calls.push('replace');
        return calls.filter((c) => c === 'replace').length === 1
          ? new Promise<string>(() => undefined)
          : Promise.reject(apiError(409, 'Conflict', 'the object has been modified'));
      },
    };
    return { calls, gateway: withLeaseRetries(plain, { hedgeAfterMs: 1_000, sleep: async () => undefined }) };
  }

  it('a renewal whose stalled copy landed (the other conflicts) is read back as renewed, at once', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const { calls, gateway } = leases({ ...ours, renewTime: '2026-12-06T05:00:00.123Z' });
    const renewed = gateway.replaceLease('ns', 'imagepull-sweeper', '7', ours);
    t.mock.timers.tick(1_000);
    assert.equal(await renewed, '8', 'the record read back: its resourceVersion, for the next renewal');
    await flush();
    assert.deepEqual(calls, ['replace', 'replace', 'read']);
  });

  it("is a conflict when the record read back is another's write", async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    const { calls, gateway } = leases({ ...ours, holderIdentity: 'replica-2' });
    const renewed = gateway.replaceLease('ns', 'imagepull-sweeper', '7', ours);
    t.mock.timers.tick(1_000);
    await assert.rejects(renewed, (e: unknown) => describeApiError(e).status === 409);
    assert.deepEqual(calls, ['replace', 'replace', 'read']);
  });
});
