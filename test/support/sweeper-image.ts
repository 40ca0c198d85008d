// The sweeper's container image for the real node, assembled without a container engine: the
// Dockerfile's runtime stage repeated (test/support/dockerfile.ts: package.json and the bundle in
// dist/src) on the Node binary the `node` dev dependency ships (the
// image's Node major) plus the shared libraries `ldd` names, an /etc/passwd with the Dockerfile's
// non-root user, and the Dockerfile's WORKDIR, ENV, USER, ENTRYPOINT and CMD; packed with umoci
// as two layers (runtime, app). Cached per content hash under ~/.cache/imagepull-sweeper/node.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { gunzipSync } from 'node:zlib';
import { ensureBuilt, REPO } from './cli.ts';
import { DOCKERFILE, readDockerfile, replayRuntimeStage, runtimeConfig } from './dockerfile.ts';

const run = promisify(execFile);
const SELF = fileURLToPath(import.meta.url);
const TAG = 'latest';
/** Where Node lives in the official node images, and so here. */
const NODE_PATH = '/usr/local/bin/node';
const PATH_ENV = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

export interface SweeperImage {
  /** OCI image layout (tag `latest`). */
  layout: string;
  /** Content hash: Dockerfile, package.json, dist/src, the Node binary and its libraries, this builder. */
  hash: string;
  /** False when it came from the cache. */
  built: boolean;
  ms: number;
}

function cacheRoot(): string {
  const xdg = process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache');
  return path.join(xdg, 'imagepull-sweeper', 'node');
}

/** The real Node binary of the `node` dev dependency (node_modules/.bin/node is a link to it). */
export function nodeBinary(): string {
  const link = path.join(REPO, 'node_modules', '.bin', 'node');
  if (!fs.existsSync(link)) throw new Error(`${link} is missing: run npm ci (the node dev dependency ships the image's Node)`);
  return fs.realpathSync(link);
}

/** Shared libraries of `bin` (ldd): [path in the image, real file on this machine]. */
async function sharedLibraries(bin: string): Promise<[string, string][]> {
  const { stdout } = await run('ldd', [bin]);
  const libs: [string, string][] = [];
  for (const line of stdout.split('\n')) {
    const m = /=>\s*(\/\S+)/.exec(line) ?? /^\s*(\/\S+)\s+\(/.exec(line);
    if (m) libs.push([m[1]!, fs.realpathSync(m[1]!)]);
    else if (/=>\s*not found/.test(line)) throw new Error(`ldd ${bin}: ${line.trim()}`);
  }
  if (!libs.some(([p]) => /ld-linux/.test(p))) throw new Error(`ldd ${bin}: no dynamic loader in\n${stdout}`);
  return libs;
}

function hashTree(h: ReturnType<typeof createHash>, dir: string): void {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
    const p = path.join(dir, entry.name);
    h.update(`${path.relative(REPO, p)}\0`);
    if (entry.isDirectory()) hashTree(h, p);
    else h.update(fs.readFileSync(p));
  }
}

async function fileHash(h: ReturnType<typeof createHash>, file: string): Promise<void> {
  await new Promise<void>((resolve, reject) => {
    fs.createReadStream(file)
      .on('data', (d) => h.update(d))
      .on('end', resolve)
      .on('error', reject);
  });
}

/** Builds `dir` (with a .complete marker) through `make(tmp)` unless it is already there. */
async function cached(dir: string, make: (tmp: string) => Promise<void>): Promise<boolean> {
  if (fs.existsSync(path.join(dir, '.complete'))) {
    const now = new Date();
    fs.utimesSync(dir, now, now); // in use: not pruned
    return false;
  }
  fs.mkdirSync(path.dirname(dir), { recursive: true });
  const tmp = fs.mkdtempSync(`${dir}.tmp.`);
  try {
    await make(tmp);
    fs.writeFileSync(path.join(tmp, '.complete'), '');
    try {
      fs.renameSync(tmp, dir);
    } catch {
      fs.rmSync(tmp, { recursive: true, force: true }); // another run built it meanwhile
    }
  } catch (e) {
    fs.rmSync(tmp, { recursive: true, force: true });
    throw e;
  }
  return true;
}

/**
 * Builds (or takes from the cache) the image's OCI layout. Like Docker's layer cache, the
 * runtime layer is reused while Node and its libraries stay the same; the app layer is packed
 * again when anything else changed.
 */
export async function sweeperImage(log: (line: string) => void = () => undefined): Promise<SweeperImage> {
  const t0 = Date.now();
  ensureBuilt();
  const bin = nodeBinary();
  const { runtime } = readDockerfile();
  const config = runtimeConfig(runtime);
  const major = /^node:(\d+)/.exec(runtime.from)?.[1];
  const { stdout: version } = await run(bin, ['--version']);
  if (!major || !version.startsWith(`v${major}.`)) {
    throw new Error(
      `${bin} is Node ${version.trim()}, the Dockerfile's runtime is ${runtime.from}: keep the node dev dependency on that major`,
    );
  }
  const [uid = '', gid = uid] = config.user.split(':');
  if (!/^\d+$/.test(uid) || !/^\d+$/.test(gid)) throw new Error(`Dockerfile USER ${config.user}: expected numeric uid:gid`);
  const libs = await sharedLibraries(bin);

  const rh = createHash('sha256').update(fs.readFileSync(SELF)).update(config.user);
  await fileHash(rh, bin);
  for (const [imagePath, real] of libs) rh.update(`${imagePath}\0`).update(fs.readFileSync(real));
  const runtimeHash = rh.digest('hex').slice(0, 16);
  const runtimeDir = path.join(cacheRoot(), `sweeper-runtime-${runtimeHash}`);

  const ah = createHash('sha256').update(runtimeHash);
  for (const f of [DOCKERFILE, path.join(REPO, 'package.json')]) ah.update(fs.readFileSync(f));
  hashTree(ah, path.join(REPO, 'dist', 'src'));
  const hash = ah.digest('hex').slice(0, 16);
  const dir = path.join(cacheRoot(), `sweeper-image-${hash}`);
  const layout = path.join(dir, 'oci');

  const built = await cached(dir, async (tmp) => {
    // Layer 1, the runtime: Node, its libraries, the users, a /tmp.
    const runtimeBuilt = await cached(runtimeDir, async (rtmp) => {
      const base = path.join(rtmp, 'rootfs');
      const put = (imagePath: string, from: string): void => {
        const to = path.join(base, imagePath);
        fs.mkdirSync(path.dirname(to), { recursive: true });
        fs.copyFileSync(from, to);
        fs.chmodSync(to, fs.statSync(from).mode & 0o777);
      };
      put(NODE_PATH, bin);
      for (const [imagePath, real] of libs) put(imagePath, real);
      fs.mkdirSync(path.join(base, 'etc'), { recursive: true });
      fs.writeFileSync(
        path.join(base, 'etc', 'passwd'),
        `root:x:0:0:root:/root:/usr/sbin/nologin\nsweeper:x:${uid}:${gid}::/nonexistent:/usr/sbin/nologin\n`,
      );
      fs.writeFileSync(path.join(base, 'etc', 'group'), `root:x:0:\nsweeper:x:${gid}:\n`);
      fs.mkdirSync(path.join(base, 'tmp'));
      fs.chmodSync(path.join(base, 'tmp'), 0o1777);
      const img = `${path.join(rtmp, 'oci')}:${TAG}`;
      await run('umoci', ['init', '--layout', path.join(rtmp, 'oci')]);
      await run('umoci', ['new', '--image', img]);
      await run('umoci', ['insert', '--no-history', '--image', img, base, '/']);
      fs.rmSync(base, { recursive: true });
    });
    if (runtimeBuilt) log(`sweeper image runtime layer ${runtimeHash} packed in ${Date.now() - t0} ms`);

    // Layer 2, the app: the Dockerfile's runtime stage, repeated.
    fs.cpSync(path.join(runtimeDir, 'oci'), path.join(tmp, 'oci'), { recursive: true });
    const app = path.join(tmp, 'app');
    replayRuntimeStage(app);
    const img = `${path.join(tmp, 'oci')}:${TAG}`;
    await run('umoci', ['insert', '--no-history', '--image', img, app, config.workdir]);
    fs.rmSync(app, { recursive: true });
    const env = { PATH: PATH_ENV, ...config.env };
    await run('umoci', [
      'config',
      '--no-history',
      '--image',
      img,
      '--architecture',
      'amd64',
      '--os',
      'linux',
      '--config.user',
      config.user,
      '--config.workingdir',
      config.workdir,
      ...Object.entries(env).flatMap(([k, v]) => ['--config.env', `${k}=${v}`]),
      ...config.entrypoint.flatMap((e) => ['--config.entrypoint', e]),
      ...config.cmd.flatMap((c) => ['--config.cmd', c]),
    ]);
    await run('umoci', ['gc', '--layout', path.join(tmp, 'oci')]);
  });
  if (built) pruneOld([dir, runtimeDir]);
  const ms = Date.now() - t0;
  log(`sweeper image ${hash} ${built ? 'assembled' : 'from the cache'} in ${ms} ms (${layout})`);
  return { layout, hash, built, ms };
}

/** Removes cached images and layers of other content (and `npm ci` caches of earlier versions) that nothing touched for two days. */
function pruneOld(keep: string[]): void {
  const cutoff = Date.now() - 2 * 24 * 3600_000;
  for (const e of fs.readdirSync(cacheRoot())) {
    const p = path.join(cacheRoot(), e);
    if (!/^(sweeper-|npm-ci-)/.test(e) || keep.includes(p)) continue;
    if (fs.statSync(p).mtimeMs < cutoff) fs.rmSync(p, { recursive: true, force: true });
  }
}

/** Pushes the image to `registry` (plain HTTP) as `imagepull-sweeper:<hash>`; returns the reference. */
export async function pushSweeperImage(image: SweeperImage, registry: string): Promise<string> {
  const ref = `${registry}/imagepull-sweeper:${image.hash}`;
  await run('skopeo', ['copy', '--quiet', '--dest-tls-verify=false', `oci:${image.layout}:${TAG}`, `docker://${ref}`], {
    timeout: 120_000,
  });
  return ref;
}

interface Descriptor {
  digest: string;
  mediaType?: string;
}

function blob(layout: string, d: Descriptor): string {
  const [alg, hex] = d.digest.split(':');
  return path.join(layout, 'blobs', alg!, hex!);
}

/**
 * Entries of a gzipped tar layer (paths without a leading `/` or `./`; directories end in `/`).
 * Read here rather than by GNU tar, which rejects the unpadded last entry umoci 0.4 writes
 * (containerd reads it); every entry's data must be there in full.
 */
export function layerEntries(file: string): string[] {
  const tar = gunzipSync(fs.readFileSync(file));
  const entries: string[] = [];
  const field = (b: Buffer, from: number, len: number): string =>
    b
      .subarray(from, from + len)
      .toString('utf8')
      .replace(/\0.*$/s, '');
  let pax: string | undefined;
  for (let off = 0; off + 512 <= tar.length;) {
    const h = tar.subarray(off, off + 512);
    if (h.every((b) => b === 0)) break;
    const size = parseInt(field(h, 124, 12).trim() || '0', 8);
    const type = field(h, 156, 1);
    const data = off + 512;
    if (data + size > tar.length) throw new Error(`${file}: entry ${field(h, 0, 100)} is cut short`);
    if (type === 'x') {
      pax = /\d+ path=([^\n]*)\n/.exec(tar.subarray(data, data + size).toString('utf8'))?.[1];
    } else if (type !== 'g') {
      const prefix = field(h, 345, 155);
      let name = pax ?? (prefix ? `${prefix}/${field(h, 0, 100)}` : field(h, 0, 100));
      pax = undefined;
      name = name.replace(/^\.?\//, '');
      if (type === '5' && !name.endsWith('/')) name += '/';
      if (name) entries.push(name);
    }
    off = data + Math.ceil(size / 512) * 512;
  }
  return entries;
}

/** The image's config and each layer's entries. */
export function imageContents(layout: string): { config: Record<string, unknown>; layers: string[][] } {
  const index = JSON.parse(fs.readFileSync(path.join(layout, 'index.json'), 'utf8')) as { manifests: Descriptor[] };
  const manifest = JSON.parse(fs.readFileSync(blob(layout, index.manifests[0]!), 'utf8')) as { config: Descriptor; layers: Descriptor[] };
  const config = JSON.parse(fs.readFileSync(blob(layout, manifest.config), 'utf8')) as Record<string, unknown>;
  return { config, layers: manifest.layers.map((l) => layerEntries(blob(layout, l))) };
}
