// What tests do to the content of the node's open registry (Debian's docker-registry, deletion
// enabled in its config by node.ts), through the registry's own HTTP API:
//   deleteManifest()   removes a tag's manifest (by digest): a pull of that tag answers 404
//   pushArtifact()     an OCI artifact that is not a container image (a Helm chart, a model)
// and a loopback stand-in for what no current registry stores any more:
//   startSchema1Registry()  answers every manifest request with a Docker schema 1 (prettyjws) one
import { createHash } from 'node:crypto';
import * as http from 'node:http';
import { listen } from './registry-faults.ts';

const MANIFEST_TYPES = [
  'application/vnd.oci.image.manifest.v1+json',
  'application/vnd.docker.distribution.manifest.v2+json',
  'application/vnd.oci.image.index.v1+json',
  'application/vnd.docker.distribution.manifest.list.v2+json',
].join(', ');

const sha256 = (data: Buffer): string => `sha256:${createHash('sha256').update(data).digest('hex')}`;

/** Deletes the manifest `repo:tag` points to; the tag then answers 404 (MANIFEST_UNKNOWN). */
export async function deleteManifest(registry: string, repo: string, tag: string): Promise<string> {
  const url = `http://${registry}/v2/${repo}/manifests`;
  const head = await fetch(`${url}/${tag}`, { method: 'HEAD', headers: { Accept: MANIFEST_TYPES } });
  const digest = head.headers.get('docker-content-digest');
  if (!head.ok || !digest) throw new Error(`HEAD ${url}/${tag}: ${head.status}, digest ${digest}`);
  const del = await fetch(`${url}/${digest}`, { method: 'DELETE' });
  if (del.status !== 202) throw new Error(`DELETE ${url}/${digest}: ${del.status} ${await del.text()}`);
  const gone = await fetch(`${url}/${tag}`, { method: 'HEAD', headers: { Accept: MANIFEST_TYPES } });
  if (gone.status !== 404) throw new Error(`${repo}:${tag} still answers ${gone.status} after its manifest was deleted`);
  return digest;
}

async function pushBlob(registry: string, repo: string, data: Buffer): Promise<string> {
  const digest = sha256(data);
  const start = await fetch(`http://${registry}/v2/${repo}/blobs/uploads/`, { method: 'POST' });
  const location = start.headers.get('location');
  if (start.status !== 202 || !location) throw new Error(`POST blob upload to ${registry}/${repo}: ${start.status}`);
  const target = new URL(location, `http://${registry}`);
  target.searchParams.set('digest', digest);
  const put = await fetch(target, { method: 'PUT', headers: { 'Content-Type': 'application/octet-stream' }, body: data });
  if (put.status !== 201) throw new Error(`PUT blob ${digest} to ${registry}/${repo}: ${put.status} ${await put.text()}`);
  return digest;
}

export interface ArtifactOptions {
  /** The config's media type: Helm's, or OCI's empty one for an artifact typed by `artifactType`. */
  configMediaType: string;
  config: Buffer;
  layerMediaType: string;
  artifactType?: string;
}

/** A Helm chart as `helm push` stores it: its own config and content media types. */
export const HELM_CHART: ArtifactOptions = {
  configMediaType: 'application/vnd.cncf.helm.config.v1+json',
  config: Buffer.from(JSON.stringify({ name: 'chart', version: '1.0.0', apiVersion: 'v2' })),
  layerMediaType: 'application/vnd.cncf.helm.chart.content.v1.tar+gzip',
};

/** Pushes an OCI image manifest whose config (and artifactType, when given) say it is not a container image. */
export async function pushArtifact(registry: string, repo: string, tag: string, o: ArtifactOptions): Promise<string> {
  const layer = Buffer.from('not a filesystem layer\n');
  const [configDigest, layerDigest] = [await pushBlob(registry, repo, o.config), await pushBlob(registry, repo, layer)];
  const manifest = Buffer.from(
    JSON.stringify({
      schemaVersion: 2,
      mediaType: 'application/vnd.oci.image.manifest.v1+json',
      ...(o.artifactType ? { artifactType: o.artifactType } : {}),
      config: { mediaType: o.configMediaType, digest: configDigest, size: o.config.length },
      layers: [{ mediaType: o.layerMediaType, digest: layerDigest, size: layer.length }],
    }),
  );
  const url = `http://${registry}/v2/${repo}/manifests/${tag}`;
  const put = await fetch(url, {
    method: 'PUT',
    headers: { 'Content-Type': 'application/vnd.oci.image.manifest.v1+json' },
    body: manifest,
  });
  if (put.status !== 201) throw new Error(`PUT ${url}: ${put.status} ${await put.text()}`);
  return `${registry}/${repo}:${tag}`;
}

/**
 * A registry on 127.0.0.1 whose every manifest is Docker schema 1 (`…manifest.v1+prettyjws`, as
 * old images on Docker Hub and quay.io still are), unsigned: enough for a runtime to see the
 * media type on resolve, which is where containerd 2's transfer service refuses it.
 */
export async function startSchema1Registry(): Promise<{ host: string; requests: () => string[]; close(): Promise<void> }> {
  const seen: string[] = [];
  const server = http.createServer((req, res) => {
    seen.push(`${req.method} ${req.url}`);
    const m = /^\/v2\/(.+)\/manifests\/([^/]+)$/.exec(req.url ?? '');
    if (!m) {
      res.writeHead(req.url === '/v2/' ? 200 : 404, { 'Docker-Distribution-Api-Version': 'registry/2.0' });
      return res.end(req.url === '/v2/' ? '{}' : '');
    }
    const body = Buffer.from(
      JSON.stringify({ schemaVersion: 1, name: m[1], tag: m[2], architecture: 'amd64', fsLayers: [], history: [], signatures: [] }),
    );
    res.writeHead(200, {
      'Content-Type': 'application/vnd.docker.distribution.manifest.v1+prettyjws',
      'Content-Length': String(body.length),
      'Docker-Content-Digest': sha256(body),
      'Docker-Distribution-Api-Version': 'registry/2.0',
    });
    res.end(req.method === 'HEAD' ? undefined : body);
  });
  return {
    host: await listen(server),
    requests: () => [...seen],
    close: () => new Promise((r) => server.close(() => r())),
  };
}
