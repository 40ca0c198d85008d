// The container image, without a container engine: repeats the Dockerfile's runtime stage in a
// clean temporary directory (package.json and the bundle in dist/src, its ENV; no node_modules)
// and runs the ENTRYPOINT from there. A dependency left out of the bundle fails here as it would in
// the image. The steps are read from the Dockerfile itself (test/support/dockerfile.ts), so the
// test and the image cannot drift apart.
// Where a real node can run, the OCI image it runs (test/support/sweeper-image.ts) is compared too.
import assert from 'node:assert/strict';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, posix } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { ensureBuilt, exec, REPO, type Exec } from '../support/cli.ts';
import { nodeSkipReason } from '../support/node.ts';
import { imageContents, sweeperImage } from '../support/sweeper-image.ts';
import { copyParts, execForm, npmCommand, parseDockerfile, replayRuntimeStage, type Instruction } from '../support/dockerfile.ts';
import { renderNotice } from '../../scripts/notice.ts';

const TIMEOUT = { timeout: 300_000 };

const dockerfile = readFileSync(join(REPO, 'Dockerfile'), 'utf8');
const stages = parseDockerfile(dockerfile);
const runtime = stages.at(-1)!;
const instructions = (op: string): Instruction[] => runtime.instructions.filter((i) => i.op === op);

interface BundledPackage {
  path: string;
  name: string;
  version: string;
  license: string;
}

/** The packages the bundle carries, as the build recorded them from esbuild's metafile (scripts/build.ts). */
function bundledPackages(): BundledPackage[] {
  return JSON.parse(readFileSync(join(REPO, 'dist', 'bundled-packages.json'), 'utf8')) as BundledPackage[];
}

/** Permissive licences only: no copyleft in what the image ships. */
const ALLOWED_LICENSES = new Set([
  'MIT',
  'ISC',
  'Apache-2.0',
  'BSD-2-Clause',
  'BSD-3-Clause',
  '0BSD',
  'Unlicense',
  'Python-2.0',
  'BlueOak-1.0.0',
]);

let appDir: string;
let workdir: string;
let env: NodeJS.ProcessEnv;
let entrypoint: string[];
let scratch: string;

/** The image's ENTRYPOINT, run in the temp copy with the image's ENV. */
function runImage(args: string[]): Promise<Exec> {
  const [command, ...rest] = entrypoint;
  assert.equal(command, 'node');
  return exec(process.execPath, [...rest.map((a) => (a.startsWith('-') ? a : toLocal(a))), ...args], {
    cwd: appDir,
    env,
    timeoutMs: 60_000,
  });
}

/** A path inside the image (absolute, or relative to WORKDIR) → the same path in the temp copy. */
function toLocal(imagePath: string): string {
  const absolute = posix.resolve(workdir, imagePath);
  if (absolute === workdir) return appDir;
  if (!absolute.startsWith(`${workdir}/`)) return imagePath;
  return join(appDir, posix.relative(workdir, absolute));
}

before(async () => {
  await ensureBuilt();
  scratch = mkdtempSync(join(tmpdir(), 'ips-image-'));
  // Node would resolve packages from any node_modules above the copy; there must be none.
  for (let dir = scratch; dir !== dirname(dir); dir = dirname(dir)) {
    assert.ok(!existsSync(join(dirname(dir), 'node_modules')), `${dirname(dir)}/node_modules would hide missing dependencies`);
  }
});

after(() => {
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

describe('Dockerfile', () => {
  it('builds with `npm ci` + `npm run build` and runs as a non-root user on Node', () => {
    assert.ok(stages.length >= 2, 'multi-stage');
    const build = stages.find((s) => s.instructions.some((i) => i.op === 'RUN' && npmCommand(i.args, 'run')?.join(' ') === 'run build'));
    assert.ok(build?.name, 'a named stage runs `npm run build`');
    assert.ok(
      build.instructions.some((i) => i.op === 'RUN' && npmCommand(i.args, 'ci')),
      'the build stage runs npm ci',
    );
    const major = /^node:(\d+)(?:-[a-z]+)?-(?:slim|alpine)@sha256:[0-9a-f]{64}$/.exec(runtime.from)?.[1];
    assert.ok(major, `runtime base ${runtime.from} is a slim or alpine official Node image, pinned by digest`);
    assert.ok(Number(major) >= 20 && Number(major) % 2 === 0, `Node ${major} is an LTS line`);
    assert.notEqual(runtime, build, 'the runtime stage is not the build stage');
    assert.deepEqual(
      instructions('USER').map((i) => i.args),
      ['65532:65532'],
    );
    assert.deepEqual(execForm(runtime, 'CMD'), ['sweep']);
    assert.deepEqual(execForm(runtime, 'ENTRYPOINT'), ['node', '--no-concurrent-recompilation', '/app/dist/src/cli/main.js']);
    assert.ok(instructions('ENV').some((i) => /^NODE_ENV=production$/.test(i.args)));
  });

  it('every stage is on one base pinned by digest; the runtime stage carries the OCI annotations', () => {
    assert.deepEqual(new Set(stages.map((st) => st.from)).size, 1, `one base: ${stages.map((st) => st.from).join(', ')}`);
    const [name = '', digest = ''] = runtime.from.split('@');
    const args = new Map(
      instructions('ARG').map((i) => {
        const [key = '', value = ''] = i.args.split('=');
        return [key, value];
      }),
    );
    const labels = new Map<string, string>();
    for (const i of instructions('LABEL'))
      for (const [, key = '', quoted, bare] of i.args.matchAll(/([\w.-]+)=(?:"((?:[^"\\]|\\.)*)"|(\S+))/g))
        labels.set(
          key,
          (quoted ?? bare ?? '').replace(/\$\{(\w+)\}/g, (_, arg: string) => args.get(arg) ?? `<${arg} unset>`),
        );
    const pkg = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as {
      name: string;
      description: string;
      license: string;
      version: string;
    };
    const oci = (key: string) => labels.get(`org.opencontainers.image.${key}`);
    assert.equal(oci('title'), pkg.name);
    assert.equal(oci('description'), pkg.description);
    assert.equal(oci('licenses'), pkg.license);
    assert.equal(oci('version'), pkg.version, 'ARG VERSION defaults to the package version');
    for (const key of ['revision', 'created']) assert.ok(oci(key), `${key} comes from a build argument`);
    for (const key of ['source', 'url', 'documentation']) assert.match(oci(key) ?? '', /^https:\/\//, key);
    assert.equal(oci('base.name'), `docker.io/library/${name}`);
    assert.equal(oci('base.digest'), digest);
    assert.match(dockerfile, /docker buildx build --platform linux\/amd64,linux\/arm64 /, 'says how to build for arm64');
  });

  it('.dockerignore keeps the build context to what the Dockerfile copies', () => {
    const ignore = readFileSync(join(REPO, '.dockerignore'), 'utf8')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith('#'));
    assert.equal(ignore[0], '*', 'an allow-list: everything is ignored first');
    const allowed = new Set(ignore.slice(1).map((l) => l.replace(/^!/, '').replace(/\/$/, '')));
    const copied = stages.flatMap((s) =>
      s.instructions
        .filter((i) => i.op === 'COPY')
        .map((i) => copyParts(i.args))
        .filter((c) => !c.from)
        .flatMap((c) => c.sources),
    );
    for (const source of copied)
      assert.ok(allowed.has(source.replace(/^\.\//, '').replace(/\/$/, '')), `${source} is in the build context`);
    for (const excluded of ['node_modules', 'dist', '.git', 'test', '.ci']) assert.ok(!allowed.has(excluded), `${excluded} stays out`);
  });
});

describe('the runtime stage, repeated in a clean directory', () => {
  before(async () => {
    appDir = join(scratch, 'app');
    const wd = instructions('WORKDIR');
    assert.equal(wd.length, 1, 'one WORKDIR in the runtime stage');
    workdir = wd[0]!.args;
    env = { PATH: process.env.PATH, HOME: scratch };
    for (const i of instructions('ENV')) {
      const [, name = '', value = ''] = /^(\w+)=(.*)$/.exec(i.args) ?? [];
      assert.ok(name, `ENV ${i.args}: use the NAME=value form`);
      env[name] = value;
    }
    entrypoint = execForm(runtime, 'ENTRYPOINT');
    mkdirSync(appDir);

    replayRuntimeStage(appDir);
    writeFileSync(join(scratch, 'bad-policy.yaml'), 'defaults:\n  grace:\n    permanent: forever\n  colour: red\n');
  });

  it('installs nothing: package.json, LICENSE, NOTICE and the bundle, no node_modules', () => {
    assert.ok(!existsSync(join(appDir, 'node_modules')), 'no node_modules in the image');
    const files = listTree(appDir);
    for (const file of ['package.json', 'LICENSE', 'NOTICE']) assert.ok(files.includes(file), `${file} is in the image`);
    assert.deepEqual(
      files.filter((f) => !['package.json', 'LICENSE', 'NOTICE'].includes(f) && !f.startsWith('dist/')),
      [],
      'only package.json, LICENSE, NOTICE and dist/',
    );
    const script = entrypoint.at(-1)!;
    assert.ok(existsSync(toLocal(script)), `${script} is in the image`);
  });

  it('the bundle carries production dependencies only, at the versions the lockfile pins', () => {
    const lock = JSON.parse(readFileSync(join(REPO, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { version?: string; dev?: boolean }>;
    };
    const manifest = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { dependencies: Record<string, string> };
    const bundled = bundledPackages();
    for (const p of bundled) {
      const locked = lock.packages[p.path];
      assert.ok(locked, `${p.path} is in package-lock.json`);
      assert.ok(!locked.dev, `${p.path} is dev-only, yet bundled`);
      assert.equal(p.version, locked.version, `${p.path}: bundled ${p.version}, locked ${locked.version}`);
    }
    const names = new Set(bundled.map((p) => p.name));
    for (const dependency of Object.keys(manifest.dependencies))
      assert.ok(names.has(dependency), `dependency ${dependency} is used, so bundled`);
    assert.ok(!names.has('typescript') && !names.has('esbuild') && !names.has('tsx'), 'no build tool in the bundle');
  });

  it('ships permissive licences only, each with its licence text in NOTICE', () => {
    const packages = bundledPackages();
    const copyleft = packages.filter((p) => !ALLOWED_LICENSES.has(p.license)).map((p) => `${p.name}@${p.version} (${p.license})`);
    assert.deepEqual(copyleft, [], 'licences outside the permissive allow-list');
    // Equal to what scripts/notice.ts writes from this build: run `npm run notice` when this fails.
    assert.equal(readFileSync(join(REPO, 'NOTICE'), 'utf8'), renderNotice(packages), 'NOTICE is stale: run `npm run notice`');
    assert.match(readFileSync(join(REPO, 'LICENSE'), 'utf8'), /^ +Apache License\n +Version 2\.0, January 2004\n/);
  });

  it('--help', TIMEOUT, async () => {
    const r = await runImage(['--help']);
    assert.equal(r.code, 0, r.stderr);
    assert.match(r.stdout, /Usage: imagepull-sweeper/);
    for (const command of ['sweep', 'run', 'policy']) assert.match(r.stdout, new RegExp(`\\b${command}\\b`));
  });

  it('policy schema prints a JSON Schema', TIMEOUT, async () => {
    const r = await runImage(['policy', 'schema']);
    assert.equal(r.code, 0, r.stderr);
    const schema = JSON.parse(r.stdout) as { $schema?: string; properties?: Record<string, unknown> };
    assert.match(schema.$schema ?? '', /json-schema\.org/);
    assert.ok(schema.properties?.defaults && schema.properties.rules && schema.properties.limits);
  });

  it('sweep loads the API client from the bundle: a server that is not there exits 3, nothing changed', TIMEOUT, async () => {
    const kubeconfig = join(scratch, 'unreachable.kubeconfig');
    writeFileSync(
      kubeconfig,
      'apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]\n' +
        'users: [{name: u, user: {token: not-a-token}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n',
    );
    const r = await runImage([
      'sweep',
      '--dry-run',
      '--policy-file',
      join(REPO, 'manifests', 'policy-configmap.yaml'),
      '--kubeconfig',
      kubeconfig,
      '--output',
      'json',
    ]);
    assert.equal(r.code, 3, r.stdout + r.stderr);
    assert.match(r.stdout + r.stderr, /the cluster could not be reached \(ECONNREFUSED/);
    assert.doesNotMatch(r.stderr, /DeprecationWarning/, 'the bundle prints no Node deprecation warning');
  });

  it('policy validate: the shipped ConfigMap is valid (exit 0), a bad policy is not (exit 2)', TIMEOUT, async () => {
    const good = await runImage(['policy', 'validate', join(REPO, 'manifests', 'policy-configmap.yaml')]);
    assert.equal(good.code, 0, good.stdout + good.stderr);
    const bad = await runImage(['policy', 'validate', join(scratch, 'bad-policy.yaml')]);
    assert.equal(bad.code, 2, bad.stdout + bad.stderr);
    assert.match(bad.stdout, /bad-policy\.yaml:3:\d+ defaults\.grace\.permanent: /);
    assert.match(bad.stdout, /colour/);
  });
});

/** Every path under `dir`, relative, directories ending in `/`. */
function listTree(dir: string, prefix = ''): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) =>
    e.isDirectory() ? [`${prefix}${e.name}/`, ...listTree(join(dir, e.name), `${prefix}${e.name}/`)] : [`${prefix}${e.name}`],
  );
}

describe('the OCI image the real node runs (test/support/sweeper-image.ts)', () => {
  it(
    "holds the runtime stage's files, on the image's Node, with the Dockerfile's user, env and entrypoint",
    { timeout: 600_000, skip: nodeSkipReason() },
    async () => {
      assert.ok(appDir, 'the runtime stage was repeated above');
      const image = await sweeperImage();
      const { config, layers } = imageContents(image.layout);
      assert.equal(layers.length, 2, 'a runtime layer and an app layer');
      const [runtimeLayer, appLayer] = layers as [string[], string[]];
      const appPrefix = `${workdir.replace(/^\//, '')}/`;
      const inImage = appLayer
        .filter((e) => e !== appPrefix)
        .map((e) => e.slice(appPrefix.length))
        .sort();
      assert.ok(
        appLayer.every((e) => e.startsWith(appPrefix)),
        'the app layer holds WORKDIR only',
      );
      assert.deepEqual(inImage, listTree(appDir).sort(), "the same files as the Dockerfile's runtime stage");
      assert.ok(runtimeLayer.includes('usr/local/bin/node'));
      assert.ok(!runtimeLayer.some((e) => e.startsWith(appPrefix)), 'no app files in the runtime layer');
      const c = config.config as { User?: string; WorkingDir?: string; Entrypoint?: string[]; Cmd?: string[]; Env?: string[] };
      assert.equal(c.User, instructions('USER')[0]!.args);
      assert.equal(c.WorkingDir, workdir);
      assert.deepEqual(c.Entrypoint, entrypoint);
      assert.deepEqual(c.Cmd, execForm(runtime, 'CMD'));
      for (const i of instructions('ENV')) assert.ok(c.Env?.includes(i.args), `ENV ${i.args}`);
    },
  );
});
