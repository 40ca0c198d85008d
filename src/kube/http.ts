// The lean HTTP path: one keep-alive agent per TLS identity, shared by every call the gateway
// makes; bodies are JSON.stringify-ed and answers parsed with plain JSON.parse (no typed models).
import * as http from 'node:http';
import * as https from 'node:https';
import * as tls from 'node:tls';
import { HttpMethod, RequestContext, type KubeConfig } from '@kubernetes/client-node';
import { packageVersion } from '../version.ts';
import { ApiStatusError } from './errors.ts';
import type { RateLimiter } from './rate-limit.ts';
import { decodeStatus, FrameSplitter, PROTOBUF, unwrap } from './protobuf.ts';
import { parseHttpDate, type ServerDate } from './server-clock.ts';

/** Sockets kept open per agent; the sweep's reads and writes stay well below this. */
const MAX_SOCKETS = 32;
/**
 * How long one authentication (headers and agent) serves the requests that follow, for credentials
 * client-node does not renew on a deadline of its own: a kubeconfig's token or certificates, or the
 * in-cluster token file (client-node re-reads it once a minute). Exec plugins and other auth
 * providers are asked every request (what that costs: docs/performance.md).
 */
export const AUTH_REUSE_MS = 1000;

/** The `fieldManager` of every write (docs/contract.md "Names"). */
export const FIELD_MANAGER = 'imagepull-sweeper';
/** Methods that write and take a `fieldManager` (a DELETE's options have none). */
const WRITES_WITH_MANAGER = new Set<string>(['POST', 'PUT', 'PATCH']);

/** TLS options that identify a connection; requests that agree on them can share sockets. */
const TLS_KEYS = ['ca', 'cert', 'key', 'pfx', 'passphrase', 'rejectUnauthorized', 'servername'] as const;

export interface KubeHttp {
  /** GET `path` (with query) and JSON.parse the body; non-2xx throws an ApiStatusError. */
  getJson(
    path: string,
    query: Record<string, string | number | undefined>,
    options?: { accept?: string; signal?: AbortSignal; timeoutMs?: number },
  ): Promise<unknown>;
  /** Any verb with an optional JSON body, the answer JSON-parsed (undefined when empty); non-2xx throws an ApiStatusError. */
  send(method: Method, path: string, options?: SendOptions): Promise<unknown>;
  /** The Date header of the newest answer of the API server (2xx, or its own Status) that carried one (docs/clock.md). */
  lastServerDate(): ServerDate | undefined;
  /** GET with `watch=true` in `query`: each event handed to `onEvent`; non-2xx throws an ApiStatusError. */
  watch(path: string, query: Record<string, string | number | undefined>, options: WatchOptions): Promise<void>;
}

/** What every request of a process shares, whichever HTTP instance sends it. */
export interface ClientSettings {
  /** Default `imagepull-sweeper/VERSION`. */
  userAgent?: string;
  /** The client-side rate limit (`--kube-api-qps`, `--kube-api-burst`). */
  rateLimiter?: RateLimiter;
  /** Once aborted, every request in flight is abandoned and none starts (a leader that lost its Lease). */
  fence?: AbortSignal;
  /** Each `Warning` header's text (the caller logs each distinct one once). */
  onWarning?: (text: string) => void;
  /** Every `Date` the API server sent (watches included), with the local monotonic time it arrived. */
  onServerDate?: (date: Date, receivedAtMs: number) => void;
}

export interface WatchOptions {
  accept?: string;
  onEvent: (event: unknown) => void;
  /** Reads one frame of a protobuf watch (asked for in `accept`) as the JSON watch's event. */
  decodeFrame?: (frame: Buffer) => unknown;
  /** Gives up on a connection that sends nothing for this long. */
  idleTimeoutMs: number;
  /** Ends the watch (resolves). */
  signal?: AbortSignal;
  /** The API server accepted the watch (a 2xx answer's headers came). */
  onAccepted?: () => void;
}

/**
 * Told of every request once it ends: its verb (`WATCH` for a watch), the HTTP status (0 when no
 * answer came: a timeout or a broken connection) and the seconds it took (a watch: until its headers).
 */
export type ResponseObserver = (verb: string, status: number, seconds: number) => void;

/**
 * `monotonicMs`: the local monotonic clock (how long since an answer, how old an authentication),
 * passed in so a test can move it. `onResponse`: for `run`'s metrics; without it nothing is timed.
 */
export function createKubeHttp(
  kubeConfig: KubeConfig,
  timeoutMs: number,
  monotonicMs: () => number = () => performance.now(),
  onResponse?: ResponseObserver,
  settings: ClientSettings = {},
): KubeHttp {
  const userAgent = settings.userAgent ?? `imagepull-sweeper/${packageVersion()}`;
  const { fence } = settings;
  const agents: { isHttps: boolean; identity: unknown[]; agent: http.Agent }[] = [];

  /**
   * The shared agent for the TLS identity of `fresh` (client-node's per-request agent). Its
   * certificates are compared, not turned into a key, and the shared agent holds them as one
   * SecureContext: an agent given `ca`/`cert`/`key` parses them for every new connection and
   * copies them into a string for every request (https.Agent#getName).
   */
  const shared = (fresh: http.Agent | undefined): http.Agent | undefined => {
    // Proxy agents (socks, hpagent) and anything unknown are left as client-node made them.
    if (!fresh || (fresh.constructor !== https.Agent && fresh.constructor !== http.Agent)) return fresh;
    const options = (fresh as http.Agent & { options: Record<string, unknown> }).options;
    const isHttps = fresh.constructor === https.Agent;
    const identity = TLS_KEYS.map((k) => options[k]);
    const known = agents.find((a) => a.isHttps === isHttps && a.identity.every((v, i) => sameValue(v, identity[i])));
    if (known) return known.agent;
    const keepAlive = { keepAlive: true, maxSockets: MAX_SOCKETS, scheduling: 'lifo' as const };
    const agent = isHttps ? new https.Agent({ ...tlsOptions(options), ...keepAlive }) : new http.Agent(keepAlive);
    agents.push({ isHttps, identity, agent });
    return agent;
  };

  const reuseAuth = authIsReusable(kubeConfig);
  let auth: { headers: Record<string, string>; agent: http.Agent | undefined; atMs: number } | undefined;
  const authenticate = async (url: URL, method: Method) => {
    if (reuseAuth && auth && monotonicMs() - auth.atMs < AUTH_REUSE_MS) return auth;
    // client-node's own auth (tokens, exec plugins, client certificates) fills in headers and TLS.
    const context = new RequestContext(url.toString(), HttpMethod[method]);
    await kubeConfig.applySecurityAuthentication(context);
    const fresh = { headers: context.getHeaders(), agent: shared(context.getAgent() as http.Agent | undefined), atMs: monotonicMs() };
    if (reuseAuth) auth = fresh;
    return fresh;
  };

  const server = kubeConfig.getCurrentCluster()?.server ?? '';
  let newest: { date: Date; receivedAtMs: number } | undefined;
  // Every answer of one second carries the same Date header: parsed once.
  let lastHeader: { text: string; date: Date | undefined } | undefined;
  const noteDate = (header: string | undefined, receivedAtMs: number) => {
    if (header === undefined) return;
    if (lastHeader?.text !== header) lastHeader = { text: header, date: parseHttpDate(header) };
    const date = lastHeader.date;
    if (date && (!newest || receivedAtMs >= newest.receivedAtMs)) newest = { date, receivedAtMs };
    if (date) settings.onServerDate?.(date, receivedAtMs);
  };
  const noteWarnings = (header: string | string[] | undefined) => {
    if (header === undefined || !settings.onWarning) return;
    for (const text of warningTexts(header)) settings.onWarning(text);
  };
  /** Waits for the rate limit; throws when `signal` or the fence aborted first. */
  const admit = async (signal: AbortSignal | undefined) => {
    if (fence?.aborted) throw abandoned(fence);
    if (signal?.aborted) throw abandoned(signal);
    await settings.rateLimiter?.take(signal ?? fence);
    if (fence?.aborted) throw abandoned(fence);
  };

  const target = async (method: Method, path: string, query: Query, accept: string | undefined) => {
    const url = new URL(server.replace(/\/+$/, '') + path);
    for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== '') url.searchParams.set(k, String(v));
    const { headers: authHeaders, agent } = await authenticate(url, method);
    const headers: Record<string, string | number> = { ...authHeaders, Accept: accept ?? 'application/json', 'User-Agent': userAgent };
    return { url, headers, agent, transport: url.protocol === 'http:' ? http : https };
  };

  async function send(method: Method, path: string, query: Query, options: SendOptions): Promise<unknown> {
    await admit(options.signal);
    const managed = WRITES_WITH_MANAGER.has(method) && query.fieldManager === undefined ? { ...query, fieldManager: FIELD_MANAGER } : query;
    const { url, headers, agent, transport } = await target(method, path, managed, options.accept);
    const payload = options.body === undefined ? undefined : JSON.stringify(options.body);
    if (payload !== undefined) {
      headers['Content-Type'] = options.contentType ?? 'application/json';
      headers['Content-Length'] = Buffer.byteLength(payload);
    }
    const startedMs = onResponse ? monotonicMs() : 0;
    const observe = (status: number) => onResponse?.(method, status, (monotonicMs() - startedMs) / 1000);
    const { status, body, responseHeaders, bytes } = await new Promise<RawAnswer>((resolve, reject) => {
      const failed = (error: unknown) => {
        clearTimeout(deadline);
        unwatch();
        reject(error);
      };
      const abort = (signal: AbortSignal) => () => {
        const why = abandoned(signal);
        failed(why);
        req.destroy(why);
      };
      const onFence = fence ? abort(fence) : undefined;
      const onSignal = options.signal ? abort(options.signal) : undefined;
      const unwatch = () => {
        if (onFence) fence?.removeEventListener('abort', onFence);
        if (onSignal) options.signal?.removeEventListener('abort', onSignal);
      };
      const req = transport.request(url, { method, headers, agent }, (res) => {
        const receivedAtMs = monotonicMs();
        noteWarnings(res.headers.warning);
        const status = res.statusCode ?? 0;
        const ok = status >= 200 && status <= 299;
        // An answer nobody reads (a write's echo of the object) is drained, not kept.
        const chunks: Buffer[] | undefined = ok && options.ignoreAnswer ? undefined : [];
        res.on('data', (c: Buffer) => chunks?.push(c));
        res.on('error', failed);
        res.on('end', () => {
          clearTimeout(deadline);
          unwatch();
          const responseHeaders: Record<string, string> = {};
          if (!ok) for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) responseHeaders[k] = String(v);
          const bytes = chunks ? Buffer.concat(chunks) : undefined;
          const protobuf = bytes !== undefined && (res.headers['content-type'] ?? '').startsWith(PROTOBUF);
          // A protobuf answer is handed on as bytes; an error's Status is read as its JSON.
          const body = !bytes ? '' : protobuf && !ok ? statusText(bytes) : protobuf && options.bytes ? '' : bytes.toString('utf8');
          if (ok || fromApiServer(status, body)) noteDate(res.headers.date, receivedAtMs);
          resolve({ status, body, responseHeaders, bytes: protobuf && ok ? bytes : undefined });
        });
      });
      // One timer cleared on the answer: AbortSignal.timeout costs a signal, a timer and a
      // finalizer per request (its share of a large dry run's CPU: docs/performance.md).
      const deadline = setTimeout(() => {
        const timedOut = new DOMException(
          `no answer to ${method} ${url.pathname} within ${options.timeoutMs ?? timeoutMs} ms`,
          'TimeoutError',
        );
        unwatch();
        reject(timedOut);
        req.destroy(timedOut);
      }, options.timeoutMs ?? timeoutMs);
      if (onFence) fence?.addEventListener('abort', onFence, { once: true });
      if (onSignal) options.signal?.addEventListener('abort', onSignal, { once: true });
      req.on('error', failed);
      req.end(payload);
    }).catch((error: unknown) => {
      observe(0);
      throw error;
    });
    observe(status);
    if (status < 200 || status > 299) {
      throw new ApiStatusError(status, `HTTP ${status} for ${method} ${url.pathname}: ${body.slice(0, 500)}`, body, responseHeaders);
    }
    if (options.bytes) return bytes ? { protobuf: bytes } : { json: body === '' ? undefined : (JSON.parse(body) as unknown) };
    return body === '' || options.ignoreAnswer ? undefined : (JSON.parse(body) as unknown);
  }

  /** A watch: each line of a 2xx answer parsed and handed on as it arrives; resolves when the server ends it or `signal` aborts. */
  async function watch(path: string, query: Query, options: WatchOptions): Promise<void> {
    if (options.signal?.aborted) return;
    await admit(options.signal).catch((error: unknown) => {
      if (!options.signal?.aborted || fence?.aborted) throw error;
    });
    if (options.signal?.aborted) return;
    const { url, headers, agent, transport } = await target('GET', path, query, options.accept);
    const startedMs = onResponse ? monotonicMs() : 0;
    let answered = false;
    const observe = (status: number) => {
      if (!answered) onResponse?.('WATCH', status, (monotonicMs() - startedMs) / 1000);
      answered = true;
    };
    await new Promise<void>((resolve, reject) => {
      let idle: NodeJS.Timeout | undefined;
      const finish = (error?: unknown) => {
        clearTimeout(idle);
        options.signal?.removeEventListener('abort', stop);
        fence?.removeEventListener('abort', fenced);
        if (error === undefined) resolve();
        else reject(error);
      };
      const req = transport.request(url, { method: 'GET', headers, agent }, (res) => {
        const status = res.statusCode ?? 0;
        observe(status);
        noteWarnings(res.headers.warning);
        if (status < 200 || status > 299) {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const bytes = Buffer.concat(chunks);
            const body = (res.headers['content-type'] ?? '').startsWith(PROTOBUF) ? statusText(bytes) : bytes.toString('utf8');
            if (fromApiServer(status, body)) noteDate(res.headers.date, monotonicMs());
            const responseHeaders: Record<string, string> = {};
            for (const [k, v] of Object.entries(res.headers)) if (v !== undefined) responseHeaders[k] = String(v);
            finish(new ApiStatusError(status, `HTTP ${status} for watch ${url.pathname}: ${body.slice(0, 500)}`, body, responseHeaders));
          });
          return;
        }
        noteDate(res.headers.date, monotonicMs());
        options.onAccepted?.();
        const frames = options.decodeFrame && (res.headers['content-type'] ?? '').startsWith(PROTOBUF) ? new FrameSplitter() : undefined;
        const decodeFrame = options.decodeFrame;
        const eachEvent = (handle: () => void) => {
          try {
            handle();
          } catch (error) {
            req.destroy();
            finish(error);
          }
        };
        if (frames && decodeFrame) {
          res.on('data', (chunk: Buffer) => {
            armIdle();
            eachEvent(() => frames.push(chunk, (frame) => options.onEvent(decodeFrame(frame))));
          });
        } else {
          res.setEncoding('utf8');
          let partial = '';
          res.on('data', (chunk: string) => {
            armIdle();
            const lines = (partial + chunk).split('\n');
            partial = lines.pop() ?? '';
            eachEvent(() => {
              for (const line of lines) if (line.trim() !== '') options.onEvent(JSON.parse(line) as unknown);
            });
          });
        }
        res.on('error', finish);
        res.on('end', () => finish());
      });
      // No byte for this long (not even a bookmark) means a connection that died silently.
      const armIdle = () => {
        clearTimeout(idle);
        idle = setTimeout(() => {
          const timedOut = new DOMException(`watch ${url.pathname}: nothing received for ${options.idleTimeoutMs} ms`, 'TimeoutError');
          req.destroy(timedOut);
          finish(timedOut);
        }, options.idleTimeoutMs);
      };
      const stop = () => {
        answered = true; // stopped by us: not an API failure
        req.destroy();
        finish();
      };
      const fenced = () => {
        const why = abandoned(fence!);
        req.destroy(why);
        finish(why);
      };
      if (fence?.aborted) return fenced();
      if (options.signal?.aborted) return stop();
      options.signal?.addEventListener('abort', stop, { once: true });
      fence?.addEventListener('abort', fenced, { once: true });
      armIdle();
      req.on('error', (error) => {
        observe(0);
        finish(error);
      });
      req.end();
    });
  }

  return {
    watch,
    getJson: (path, query, options = {}) => send('GET', path, query, options),
    send: (method, path, options = {}) => send(method, path, options.query ?? {}, options),
    lastServerDate: () => (newest ? { date: newest.date, ageMs: monotonicMs() - newest.receivedAtMs } : undefined),
  };
}

type Method = 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
type Query = Record<string, string | number | undefined>;
interface SendOptions {
  query?: Query;
  /** Sent as JSON. */
  body?: unknown;
  /** Of the body (default application/json), e.g. application/merge-patch+json. */
  contentType?: string;
  accept?: string;
  /** The caller does not use the answer (a write's echo of the object): a 2xx one is drained unread. */
  ignoreAnswer?: boolean;
  /** Abandons the request (rejects with the signal's reason). */
  signal?: AbortSignal;
  /** This request's own timeout instead of the instance's (a short probe). */
  timeoutMs?: number;
  /** A 2xx protobuf answer is returned as `{ protobuf: bytes }`, any other as `{ json }` (see `accept`). */
  bytes?: boolean;
}

/** One answer as it came: its text (a protobuf error's Status as JSON), and a 2xx protobuf answer's bytes. */
interface RawAnswer {
  status: number;
  body: string;
  responseHeaders: Record<string, string>;
  bytes: Buffer | undefined;
}

/** What a request with `bytes` answers. */
export type Answer = { protobuf: Buffer } | { json: unknown };

/** A protobuf error answer as the JSON Status the rest reads (or the bytes as text when they are not one). */
function statusText(bytes: Buffer): string {
  try {
    const status = unwrap(bytes);
    return JSON.stringify(decodeStatus(bytes, status.start, status.end));
  } catch {
    return bytes.toString('utf8');
  }
}

/** The error of a request abandoned because `signal` aborted. */
function abandoned(signal: AbortSignal): Error {
  const reason = signal.reason as unknown;
  return reason instanceof Error ? reason : new DOMException('the request was abandoned', 'AbortError');
}

/** The texts of a `Warning` header (RFC 7234 5.5: `299 - "text"`, several joined by commas). */
export function warningTexts(header: string | string[]): string[] {
  const out: string[] = [];
  for (const value of Array.isArray(header) ? header : [header]) {
    const pattern = /\d{3}\s+\S+\s+"((?:[^"\\]|\\.)*)"/g;
    let found = false;
    for (let m = pattern.exec(value); m; m = pattern.exec(value)) {
      out.push(m[1]!.replace(/\\(.)/g, '$1'));
      found = true;
    }
    if (!found && value.trim() !== '') out.push(value.trim());
  }
  return out;
}

/** Credentials whose renewal client-node does not time itself (see AUTH_REUSE_MS). */
function authIsReusable(kubeConfig: KubeConfig): boolean {
  const user = kubeConfig.getCurrentUser();
  if (!user) return true;
  if (user.exec) return false;
  return user.authProvider === undefined || user.authProvider.name === 'tokenFile';
}

/**
 * A 2xx answer, or an error the API server wrote itself (a Kubernetes Status, e.g. 404 NotFound).
 * Other errors may come from a proxy or load balancer in between, on its own clock.
 */
function fromApiServer(status: number, body: string): boolean {
  if (status >= 200 && status <= 299) return true;
  if (!body.startsWith('{')) return false;
  try {
    return (JSON.parse(body) as { kind?: unknown }).kind === 'Status';
  } catch {
    return false;
  }
}

function sameValue(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Buffer.isBuffer(a) && Buffer.isBuffer(b)) return a.equals(b);
  if (Array.isArray(a) && Array.isArray(b)) return a.length === b.length && a.every((v, i) => sameValue(v, b[i]));
  return false;
}

/** The certificates and keys in one SecureContext, made once; the checks stay options. */
function tlsOptions(options: Record<string, unknown>): https.AgentOptions {
  const { ca, cert, key, pfx, passphrase, rejectUnauthorized, servername } = options as https.AgentOptions;
  const out: https.AgentOptions = { secureContext: tls.createSecureContext({ ca, cert, key, pfx, passphrase }) };
  if (rejectUnauthorized !== undefined) out.rejectUnauthorized = rejectUnauthorized;
  if (servername !== undefined) out.servername = servername;
  return out;
}
