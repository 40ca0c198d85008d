/** A non-2xx answer from the API server (as the gateway throws it). */
export class ApiStatusError extends Error {
  constructor(
    readonly code: number,
    message: string,
    readonly body: string,
    readonly headers: Record<string, string>,
  ) {
    super(message);
    this.name = 'ApiStatusError';
  }
}

/** Ours, or client-node's ApiException (same fields): an HTTP status with the server's body. */
function statusError(error: unknown): { code: number; body: unknown; headers: unknown } | undefined {
  const e = error as { code?: unknown; body?: unknown; headers?: unknown } | null | undefined;
  return typeof e?.code === 'number' && e.code >= 100 && e.code <= 599 && 'body' in e
    ? (e as { code: number; body: unknown; headers: unknown })
    : undefined;
}

const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EPIPE',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_SOCKET',
]);

export interface ApiFailure {
  /** HTTP status, or undefined when no response came back. */
  status: number | undefined;
  /** No response at all: connection refused, DNS, TLS, timeout. */
  unreachable: boolean;
  /** The server's TLS certificate is not trusted (self-signed, unknown CA, wrong host name): retrying cannot help. */
  untrusted: boolean;
  /** The server's reason (e.g. "Conflict", "NotFound") or the network error code. */
  reason: string;
  message: string;
  retryAfterSeconds: number | undefined;
  /**
   * A write that failed so may still land: its request may have reached the API server (a timeout,
   * a dropped connection, a 5xx other than 503) and be applied after this answer, in this attempt or
   * an earlier one of the retry layer. Not knowing, the caller must not act as if it never landed.
   */
  mayHaveLanded: boolean;
}

/** Errors the retry layer gave up on after an attempt whose request may have reached the server. */
const landedUnknown = new WeakSet<object>();

/** Marks `error` (thrown by a write) as one whose request, in some attempt, may still land. */
export function markMayHaveLanded(error: unknown): void {
  if (error && typeof error === 'object') landedUnknown.add(error);
}

/** Codes of a connection that was never made: the request cannot have been sent. */
const NEVER_SENT_CODES = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);

/** Normalises whatever client-node throws into something the sweep can decide on. */
export function describeApiError(error: unknown): ApiFailure {
  const answered = statusError(error);
  if (answered) {
    const body = parseBody(answered.body);
    const retryAfter = Number(headerValue(answered.headers, 'retry-after'));
    const reason = body?.reason ?? STATUS_REASONS[answered.code] ?? `HTTP ${answered.code}`;
    return {
      status: answered.code,
      unreachable: false,
      untrusted: false,
      reason,
      // A 401 body says only "Unauthorized"; the client's own text starts "HTTP-Code: 401".
      message: answered.code === 401 ? REFUSED_CREDENTIALS : (body?.message ?? `HTTP ${answered.code}`),
      retryAfterSeconds: Number.isFinite(retryAfter) && retryAfter >= 0 ? retryAfter : undefined,
      // 429 and 503 are answered before the request is carried out (API Priority and Fairness, not ready).
      mayHaveLanded: landedUnknown.has(answered) || (answered.code >= 500 && answered.code !== 503),
    };
  }
  const code = networkCode(error);
  const aborted = ['AbortError', 'TimeoutError'].includes(String((error as { name?: unknown } | undefined)?.name));
  const message = aborted ? 'no answer within the request timeout' : error instanceof Error ? error.message : String(error);
  const untrusted =
    (code !== undefined && TLS_TRUST_CODE.test(code)) ||
    /self[- ]signed|unable to (verify|get (local )?issuer)|altnames|certificate/i.test(message);
  return {
    status: undefined,
    unreachable: untrusted || code !== undefined || /socket hang up|fetch failed/i.test(message),
    untrusted,
    reason: code ?? 'Error',
    message: untrusted ? `the cluster's TLS certificate is not trusted: ${firstLine(message)}` : firstLine(message),
    retryAfterSeconds: undefined,
    mayHaveLanded: landedUnknown.has(error as object) || (!untrusted && !(code !== undefined && NEVER_SENT_CODES.has(code))),
  };
}

const REFUSED_CREDENTIALS = 'the cluster refused the credentials (401 Unauthorized)';
const STATUS_REASONS: Record<number, string> = {
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  409: 'Conflict',
  410: 'Expired',
  429: 'TooManyRequests',
  500: 'InternalError',
  503: 'ServiceUnavailable',
  504: 'Timeout',
};
const TLS_TRUST_CODE = /^(ERR_TLS_CERT|CERT_|DEPTH_ZERO|UNABLE_TO_(VERIFY|GET_ISSUER)|SELF_SIGNED)/;

/** Worth another try: throttled, server-side trouble, or the connection dropped (never an untrusted certificate). */
export function isRetryable(f: ApiFailure): boolean {
  if (f.status === undefined) return f.unreachable && !f.untrusted;
  return f.status === 429 || (f.status >= 500 && f.status !== 501);
}

/**
 * The API server refused the request for good, and it did not land: RBAC or an admission policy
 * (403, or 400/422 from a webhook or validation), with no earlier attempt of it that may still
 * land (`mayHaveLanded`). Never an answer that may have been lost.
 */
export function isRefusal(f: ApiFailure): boolean {
  return (f.status === 400 || f.status === 403 || f.status === 422) && !f.mayHaveLanded;
}

/** One phrase for an operator: why the cluster could not be used. */
export function explainFailure(f: ApiFailure): string {
  if (f.status === 401) return REFUSED_CREDENTIALS;
  if (f.status === 403) return `the cluster refused the credentials (403 Forbidden: ${f.message})`;
  if (f.untrusted) return f.message;
  if (f.unreachable) return `the cluster could not be reached (${f.reason}: ${f.message})`;
  return `the cluster answered ${f.status ?? ''} ${f.reason}: ${f.message}`;
}

function networkCode(error: unknown): string | undefined {
  for (let e: unknown = error, depth = 0; e && depth < 4; depth += 1) {
    const name = (e as { name?: unknown }).name;
    if (name === 'AbortError' || name === 'TimeoutError') return 'ETIMEDOUT';
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && UNREACHABLE_CODES.has(code)) return code;
    if (typeof code === 'string' && /^(ERR_TLS|CERT_|DEPTH_ZERO|UNABLE_TO_VERIFY|SELF_SIGNED)/.test(code)) return code;
    e = (e as { cause?: unknown }).cause;
  }
  return undefined;
}

function parseBody(body: unknown): { reason?: string; message?: string } | undefined {
  if (body && typeof body === 'object') return body as { reason?: string; message?: string };
  if (typeof body === 'string') {
    try {
      const parsed: unknown = JSON.parse(body);
      if (parsed && typeof parsed === 'object') return parsed as { reason?: string; message?: string };
    } catch {
      return { message: firstLine(body) };
    }
  }
  return undefined;
}

function headerValue(headers: unknown, name: string): string | undefined {
  if (!headers || typeof headers !== 'object') return undefined;
  for (const [k, v] of Object.entries(headers)) if (k.toLowerCase() === name) return String(v);
  return undefined;
}

function firstLine(text: string): string {
  return text.split('\n')[0]!.slice(0, 500);
}
