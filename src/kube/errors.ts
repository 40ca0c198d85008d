import { ApiException } from '@kubernetes/client-node';

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
  /** The server's reason (e.g. "Conflict", "NotFound") or the network error code. */
  reason: string;
  message: string;
  retryAfterSeconds: number | undefined;
}

/** Normalises whatever client-node throws into something the sweep can decide on. */
export function describeApiError(error: unknown): ApiFailure {
  if (error instanceof ApiException) {
    const body = parseBody(error.body);
    const retryAfter = Number(headerValue(error.headers, 'retry-after'));
    return {
      status: error.code,
      unreachable: false,
      reason: body?.reason ?? `HTTP ${error.code}`,
      message: body?.message ?? firstLine(String(error.message)),
      retryAfterSeconds: Number.isFinite(retryAfter) && retryAfter >= 0 ? retryAfter : undefined,
    };
  }
  const code = networkCode(error);
  const aborted = ['AbortError', 'TimeoutError'].includes(String((error as { name?: unknown } | undefined)?.name));
  const message = aborted ? 'no answer within the request timeout' : error instanceof Error ? error.message : String(error);
  return {
    status: undefined,
    unreachable: code !== undefined || /certificate|self[- ]signed|socket hang up|fetch failed/i.test(message),
    reason: code ?? 'Error',
    message: firstLine(message),
    retryAfterSeconds: undefined,
  };
}

/** Worth another try: throttled, server-side trouble, or the connection dropped. */
export function isRetryable(f: ApiFailure): boolean {
  if (f.status === undefined) return f.unreachable;
  return f.status === 429 || (f.status >= 500 && f.status !== 501);
}

/** The cluster refused who we are (as opposed to one object being missing or busy). */
export function isCredentialFailure(f: ApiFailure): boolean {
  return f.status === 401 || f.status === 403;
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

function headerValue(headers: Record<string, string> | undefined, name: string): string | undefined {
  if (!headers) return undefined;
  for (const [k, v] of Object.entries(headers)) if (k.toLowerCase() === name) return v;
  return undefined;
}

function firstLine(text: string): string {
  return text.split('\n')[0]!.slice(0, 500);
}
