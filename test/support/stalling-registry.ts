// A registry stand-in on 127.0.0.1 whose pull starts and then stops making progress: it serves
// an image's manifest and config, answers the layer blob's GET with 200 and its headers, sends
// the first 1.5 MiB of the 4 MiB body and then nothing (the connection stays open). This is the
// hang containerd ≥ 1.7 cancels after `image_pull_progress_timeout`. containerd 2's transfer
// service counts progress only from bytes written to a layer's ingest
// (internal/cri/server/images/image_pull.go, transferProgressReporter; core/transfer/local/
// progress.go), and it writes in 1 MiB chunks (core/content/helpers.go, copyWithBuffer reads
// with io.ReadAtLeast into a 1 MiB buffer): a server that never answers (hungServer() in
// node.ts), or stalls before a layer's first MiB, is never cancelled.
import { createHash } from 'node:crypto';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface StallingRegistry {
  host: string;
  /** `METHOD path` of every request, in order. */
  requests(): string[];
  /** Layer GETs that got their first 1.5 MiB and are now held open. */
  stalledDownloads(): number;
  close(): Promise<void>;
}

const sha = (b: Buffer): string => `sha256:${createHash('sha256').update(b).digest('hex')}`;

export async function stallingRegistry(): Promise<StallingRegistry> {
  const layer = Buffer.alloc(4 << 20, 7);
  const config = Buffer.from(
    JSON.stringify({
      architecture: 'amd64',
      os: 'linux',
      config: { Entrypoint: ['/pause'] },
      rootfs: { type: 'layers', diff_ids: [sha(layer)] },
    }),
  );
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.manifest.v1+json',
      config: { mediaType: 'application/vnd.oci.image.config.v1+json', digest: sha(config), size: config.length },
      layers: [{ mediaType: 'application/vnd.oci.image.layer.v1.tar', digest: sha(layer), size: layer.length }],
    }),
  );
  const log: string[] = [];
  let stalled = 0;
  const server = http.createServer((req, res) => {
    log.push(`${req.method} ${req.url}`);
    const url = req.url ?? '';
    const send = (body: Buffer, type: string): void => {
      res.writeHead(200, {
        'Content-Type': type,
        'Content-Length': String(body.length),
        'Docker-Content-Digest': sha(body),
        'Docker-Distribution-Api-Version': 'registry/2.0',
      });
      res.end(req.method === 'HEAD' ? undefined : body);
    };
    if (url === '/v2/' || url === '/v2') return send(Buffer.from('{}'), 'application/json');
    if (/^\/v2\/.+\/manifests\//.test(url)) return send(manifest, 'application/vnd.oci.image.manifest.v1+json');
    if (url.endsWith(`/blobs/${sha(config)}`)) return send(config, 'application/octet-stream');
    if (url.endsWith(`/blobs/${sha(layer)}`)) {
      res.writeHead(200, {
        'Content-Type': 'application/octet-stream',
        'Content-Length': String(layer.length),
        'Docker-Content-Digest': sha(layer),
      });
      if (req.method === 'HEAD') return res.end();
      res.write(layer.subarray(0, 3 << 19));
      stalled++;
      return; // never ends
    }
    res.writeHead(404, { 'Content-Type': 'application/json' });
    res.end(JSON.stringify({ errors: [{ code: 'BLOB_UNKNOWN', message: 'blob unknown' }] }));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', resolve);
  });
  return {
    host: `127.0.0.1:${(server.address() as AddressInfo).port}`,
    requests: () => [...log],
    stalledDownloads: () => stalled,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
