// How API failures read and whether they are retried. The same shapes from a real TLS handshake
// and a real 401 are proven in test/e2e/faults.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ApiException } from '@kubernetes/client-node';
import { describeApiError, explainFailure, isRetryable } from '../../src/kube/errors.ts';

/** What node-fetch throws when the TLS handshake fails verification. */
function fetchError(code: string, reason: string): Error {
  return Object.assign(new Error(`request to https://127.0.0.1:6443/api/v1/pods failed, reason: ${reason}`), {
    name: 'FetchError',
    type: 'system',
    code,
    errno: code,
  });
}

describe('TLS trust failures', () => {
  const cases: [string, string, string][] = [
    ['a self-signed certificate', 'DEPTH_ZERO_SELF_SIGNED_CERT', 'self-signed certificate'],
    ['a certificate from an unknown CA', 'UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'unable to verify the first certificate'],
    ['a self-signed CA in the chain', 'SELF_SIGNED_CERT_IN_CHAIN', 'self-signed certificate in certificate chain'],
    ['an unknown issuer', 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY', 'unable to get local issuer certificate'],
    [
      'a host name mismatch',
      'ERR_TLS_CERT_ALTNAME_INVALID',
      "Hostname/IP does not match certificate's altnames: IP: 127.0.0.2 is not in the cert's list: 127.0.0.1",
    ],
    ['an expired certificate', 'CERT_HAS_EXPIRED', 'certificate has expired'],
  ];
  for (const [what, code, reason] of cases) {
    it(`${what} is not retried and says the certificate is not trusted`, () => {
      const f = describeApiError(fetchError(code, reason));
      assert.equal(f.untrusted, true);
      assert.equal(f.unreachable, true);
      assert.equal(isRetryable(f), false);
      assert.match(explainFailure(f), /TLS certificate is not trusted/);
      assert.ok(explainFailure(f).includes(reason), explainFailure(f));
    });
  }

  it('a dropped connection is still retried', () => {
    const f = describeApiError(Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' }));
    assert.equal(f.untrusted, false);
    assert.equal(isRetryable(f), true);
  });
});

describe('refused credentials', () => {
  it('a 401 reads as refused credentials, never as the client\'s "HTTP-Code: 401"', () => {
    const raw = new ApiException(401, 'HTTP-Code: 401\nMessage: Unknown API Status Code!\nBody: "{}"', undefined, {});
    for (const body of [undefined, '', JSON.stringify({ kind: 'Status', reason: 'Unauthorized', message: 'Unauthorized', code: 401 })]) {
      const f = describeApiError(Object.assign(raw, { body }));
      assert.equal(f.status, 401);
      assert.equal(f.message, 'the cluster refused the credentials (401 Unauthorized)');
      assert.equal(explainFailure(f), 'the cluster refused the credentials (401 Unauthorized)');
      assert.doesNotMatch(explainFailure(f), /HTTP-Code/);
      assert.equal(isRetryable(f), false);
    }
  });

  it('a 403 names what was forbidden', () => {
    const body = JSON.stringify({ reason: 'Forbidden', message: 'pods is forbidden: User "x" cannot list resource "pods"' });
    const f = describeApiError(new ApiException(403, 'HTTP-Code: 403', body, {}));
    assert.equal(
      explainFailure(f),
      'the cluster refused the credentials (403 Forbidden: pods is forbidden: User "x" cannot list resource "pods")',
    );
  });

  it("a status without a body never shows the client's text", () => {
    const f = describeApiError(new ApiException(503, 'HTTP-Code: 503\nMessage: x', undefined, {}));
    assert.equal(f.message, 'HTTP 503');
    assert.equal(f.reason, 'ServiceUnavailable');
    assert.equal(isRetryable(f), true);
  });
});

describe('API errors and retries', () => {
  it('reads status, reason and Retry-After from an ApiException', () => {
    const f = describeApiError(
      new ApiException(429, 'too many', JSON.stringify({ reason: 'TooManyRequests', message: 'slow down' }), { 'Retry-After': '3' }),
    );
    assert.equal(f.status, 429);
    assert.equal(f.reason, 'TooManyRequests');
    assert.equal(f.retryAfterSeconds, 3);
    assert.equal(isRetryable(f), true);
  });

  it('retries 5xx and network errors, not 4xx', () => {
    assert.equal(isRetryable(describeApiError(new ApiException(503, 'x', '', {}))), true);
    assert.equal(isRetryable(describeApiError(new ApiException(409, 'x', '', {}))), false);
    assert.equal(isRetryable(describeApiError(new ApiException(404, 'x', '', {}))), false);
    assert.equal(isRetryable(describeApiError(Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }))), true);
  });
});
