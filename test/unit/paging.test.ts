// Paging (kube/paging.ts) on scripted pages: a page that fails after the gateway's retries is asked
// again from its continue token, the pages already read kept; an expired token starts over.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ApiStatusError } from '../../src/kube/errors.ts';
import type { Page } from '../../src/kube/gateway.ts';
import { PAGE_RESUMES, forEachPage } from '../../src/kube/paging.ts';

const unavailable = () => new ApiStatusError(503, 'HTTP 503', '{"kind":"Status","code":503}', {});

describe('forEachPage', () => {
  it('asks a failed page again from its continue token, keeping the pages already read', async () => {
    const asked: (string | undefined)[] = [];
    const answers: (Page<string> | Error)[] = [
      { items: ['a'], continueToken: 't2' },
      unavailable(),
      unavailable(),
      { items: ['b'], continueToken: undefined },
    ];
    const got: string[] = [];
    const waits: number[] = [];
    await forEachPage(
      async (token) => {
        asked.push(token);
        const next = answers.shift()!;
        if (next instanceof Error) throw next;
        return next;
      },
      (items) => got.push(...items),
      async (ms) => waits.push(ms),
    );
    assert.deepEqual(asked, [undefined, 't2', 't2', 't2']);
    assert.deepEqual(got, ['a', 'b']);
    assert.deepEqual(waits, [1_000, 2_000]);
  });

  it('gives up after its resumes, and never resumes a refusal', async () => {
    let calls = 0;
    await assert.rejects(
      forEachPage(
        async () => {
          calls += 1;
          throw unavailable();
        },
        () => undefined,
        async () => undefined,
      ),
    );
    assert.equal(calls, 1 + PAGE_RESUMES);
    calls = 0;
    const forbidden = new ApiStatusError(403, 'HTTP 403', '{"kind":"Status","code":403}', {});
    await assert.rejects(
      forEachPage(
        async () => {
          calls += 1;
          throw forbidden;
        },
        () => undefined,
        async () => undefined,
      ),
    );
    assert.equal(calls, 1);
  });
});
