// Registry stand-ins on 127.0.0.1 that fail the way real registries do, for real pulls on the
// test node (scripts/record-node-statuses.ts records what the kubelet then writes):
//   tooManyRequests  every request: 429 Too Many Requests, Retry-After, a TOOMANYREQUESTS body
//   rateLimitedFetch the manifest HEAD succeeds, its GET gets 429 (Docker Hub counts GETs only)
//   unavailable      every request: 503 Service Unavailable
//   tokenUnavailable the registry asks for a bearer token (401); its token endpoint answers 503
//   untrusted        HTTPS with a self-signed certificate for 127.0.0.1 the node does not trust
// A registry that accepts connections and never answers is hungServer() in node.ts.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as https from 'node:https';
import type { AddressInfo } from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';

export interface FaultRegistries {
  /** host:port of each stand-in. */
  tooManyRequests: string;
  rateLimitedFetch: string;
  unavailable: string;
  tokenUnavailable: string;
  untrusted: string;
  /** `METHOD path` lines each stand-in was asked, in order (TLS: only requests that got past the handshake). */
  requests(): Record<'tooManyRequests' | 'rateLimitedFetch' | 'unavailable' | 'tokenUnavailable' | 'untrusted', string[]>;
  close(): Promise<void>;
}

function registryError(code: string, message: string): string {
  return JSON.stringify({ errors: [{ code, message, detail: null }] });
}

/** A self-signed certificate (no CA) for IPs 127.0.0.1 and 0.0.0.0 (how CRI-O reaches it), made with the openssl CLI. */
function selfSignedCertificate(): { cert: string; key: string } {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'imagepull-sweeper-untrusted-'));
  try {
    execFileSync(
      'openssl',
      [
        'req',
        '-x509',
        '-newkey',
        'ec',
        '-pkeyopt',
        'ec_paramgen_curve:prime256v1',
        '-nodes',
        '-subj',
        '/CN=127.0.0.1',
        '-addext',
        'subjectAltName=IP:127.0.0.1,IP:0.0.0.0',
        '-days',
        '2',
        '-keyout',
        path.join(dir, 'key.pem'),
        '-out',
        path.join(dir, 'cert.pem'),
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    return { cert: fs.readFileSync(path.join(dir, 'cert.pem'), 'utf8'), key: fs.readFileSync(path.join(dir, 'key.pem'), 'utf8') };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

/** Listens on a free loopback port; returns `127.0.0.1:PORT`. */
export async function listen(server: http.Server): Promise<string> {
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  return `127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/**
 * Starts the stand-ins; close() stops them. `retryAfterSeconds` (default 30) is the 429s'
 * Retry-After: CRI-O (containers/image docker_client.go) honours it, retrying a request up to 5
 * times, so a node's serialized pulls would queue minutes behind each 429 case.
 */
export async function startFaultRegistries(opts: { retryAfterSeconds?: number } = {}): Promise<FaultRegistries> {
  const retryAfter = String(opts.retryAfterSeconds ?? 30);
  const log: ReturnType<FaultRegistries['requests']> = {
    tooManyRequests: [],
    rateLimitedFetch: [],
    unavailable: [],
    tokenUnavailable: [],
    untrusted: [],
  };
  const servers: http.Server[] = [];
  const serve = async (name: keyof typeof log, handler: http.RequestListener, tls?: { cert: string; key: string }): Promise<string> => {
    const wrapped: http.RequestListener = (req, res) => {
      log[name].push(`${req.method} ${req.url}`);
      handler(req, res);
    };
    const server = tls ? https.createServer(tls, wrapped) : http.createServer(wrapped);
    server.on('tlsClientError', () => undefined);
    servers.push(server);
    return listen(server);
  };
  const json = (res: http.ServerResponse, status: number, body: string, headers: Record<string, string> = {}): void => {
    res.writeHead(status, { 'Content-Type': 'application/json', 'Docker-Distribution-Api-Version': 'registry/2.0', ...headers });
    res.end(body);
  };

  const tooManyRequests = await serve('tooManyRequests', (_req, res) =>
    json(res, 429, registryError('TOOMANYREQUESTS', 'too many requests, retry later'), { 'Retry-After': retryAfter }),
  );
  const manifest = Buffer.from(JSON.stringify({ schemaVersion: 2, mediaType: 'application/vnd.oci.image.manifest.v1+json' }));
  const digest = `sha256:${createHash('sha256').update(manifest).digest('hex')}`;
  const rateLimitedFetch = await serve('rateLimitedFetch', (req, res) => {
    if (req.method === 'HEAD' && /^\/v2\/.+\/manifests\//.test(req.url ?? '')) {
      res.writeHead(200, {
        'Content-Type': 'application/vnd.oci.image.manifest.v1+json',
        'Content-Length': String(manifest.length),
        'Docker-Content-Digest': digest,
        'Docker-Distribution-Api-Version': 'registry/2.0',
      });
      return res.end();
    }
    json(
      res,
      429,
      registryError(
        'TOOMANYREQUESTS',
        'You have reached your pull rate limit. You may increase the limit by authenticating and upgrading: https://www.docker.com/increase-rate-limit',
      ),
      { 'Retry-After': retryAfter },
    );
  });
  const unavailable = await serve('unavailable', (_req, res) => json(res, 503, registryError('UNAVAILABLE', 'service unavailable')));
  let tokenHost = '';
  const tokenUnavailable = await serve('tokenUnavailable', (req, res) => {
    if (req.url?.startsWith('/token')) return json(res, 503, registryError('UNAVAILABLE', 'token service unavailable'));
    const repo = /^\/v2\/(.+)\/(?:manifests|blobs)\//.exec(req.url ?? '')?.[1] ?? '';
    json(res, 401, registryError('UNAUTHORIZED', 'authentication required'), {
      'WWW-Authenticate': `Bearer realm="http://${tokenHost}/token",service="${tokenHost}",scope="repository:${repo}:pull"`,
    });
  });
  tokenHost = tokenUnavailable;
  const untrusted = await serve(
    'untrusted',
    (_req, res) => json(res, 404, registryError('MANIFEST_UNKNOWN', 'manifest unknown')),
    selfSignedCertificate(),
  );

  return {
    tooManyRequests,
    rateLimitedFetch,
    unavailable,
    tokenUnavailable,
    untrusted,
    requests: () => structuredClone(log),
    close: async () => {
      await Promise.all(
        servers.map(
          (s) =>
            new Promise<void>((resolve) => {
              s.closeAllConnections();
              s.close(() => resolve());
            }),
        ),
      );
    },
  };
}
