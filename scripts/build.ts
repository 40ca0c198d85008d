// Builds the CLI as one tree-shaken ESM bundle: dist/src/cli/main.js, plus a chunk for each lazy
// import (the API client, the sweep, the scheduler), so a command loads only what it uses. Start-up
// then parses the code the sweeper uses instead of the ~1,000 modules of its dependencies
// (docs/performance.md). dist/bundled-packages.json lists the packages the bundle carries, with versions and
// licences: what the image ships (test/e2e/image.test.ts checks it).
import { readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build, type Metafile, type Plugin } from 'esbuild';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
/** Where packages really are: esbuild names importers by real path, also when node_modules is a symlink. */
const MODULES = realpathSync(join(ROOT, 'node_modules'));
const CLIENT_NODE_DIST = join(MODULES, '@kubernetes', 'client-node', 'dist');
const CLIENT_NODE_CONFIG = join(CLIENT_NODE_DIST, 'config.js');
const DIST = join(ROOT, 'dist');

interface BundledPackage {
  /** Where it is installed, e.g. `node_modules/yaml`. */
  path: string;
  name: string;
  version: string;
  license: string;
}

/** `node_modules/<name>` (or `@scope/name`, or nested) holding `path`, relative to the repository. */
function installedPackageDir(path: string): string | undefined {
  return /^(.*node_modules\/(?:@[^/]+\/)?[^/]+)\//.exec(path)?.[1];
}

/** The installed packages that contribute code to the output, from esbuild's metafile. */
function bundledPackages(metafile: Metafile): BundledPackage[] {
  const dirs = new Set<string>();
  for (const output of Object.values(metafile.outputs)) {
    for (const [input, { bytesInOutput }] of Object.entries(output.inputs)) {
      const dir = installedPackageDir(input);
      if (dir && bytesInOutput > 0) dirs.add(dir);
    }
  }
  // esbuild names inputs by real path: `../main/node_modules/x` where node_modules is a symlink.
  return [...new Set([...dirs].map((dir) => dir.slice(dir.indexOf('node_modules/'))))].sort().map((dir) => {
    const manifest = JSON.parse(readFileSync(join(ROOT, dir, 'package.json'), 'utf8')) as {
      name: string;
      version: string;
      license?: unknown;
    };
    const license = typeof manifest.license === 'string' ? manifest.license : JSON.stringify(manifest.license);
    return { path: dir, name: manifest.name, version: manifest.version, license };
  });
}

/**
 * Leaves out what a production install would not have: an optional `require()` of a dev-only
 * package (e.g. `debug` trying `supports-color`) stays a runtime require that fails, as it would
 * after `npm ci --omit=dev`, instead of pulling the dev tree into the bundle.
 */
function productionOnly(): Plugin {
  const lock = JSON.parse(readFileSync(join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { dev?: boolean }> };
  return {
    name: 'production-only',
    setup(b) {
      b.onResolve({ filter: /^[^./]/ }, async (args) => {
        if (args.pluginData === 'production-only' || args.path.startsWith('node:')) return undefined;
        const resolved = await b.resolve(args.path, {
          kind: args.kind,
          resolveDir: args.resolveDir,
          importer: args.importer,
          pluginData: 'production-only',
        });
        if (resolved.errors.length > 0) return undefined; // esbuild's own answer (optional requires stay runtime requires)
        const dir = installedPackageDir(relative(dirname(MODULES), resolved.path));
        return dir && lock.packages[dir]?.dev ? { path: args.path, external: true } : resolved;
      });
    },
  };
}

/**
 * client-node's root and its `gen/index.js` re-export every generated API and model (~730 modules,
 * ~1.7 MB): evaluating them was a third of a sweep's start-up. The sweeper needs KubeConfig (with
 * its auth providers), the request context and one model, so both indexes are replaced by modules
 * that export only those; a name client-node stops exporting fails the build, not a sweep.
 */
function clientNodeEssentials(): Plugin {
  const ROOT_INDEX = [
    `export { KubeConfig } from ${JSON.stringify(CLIENT_NODE_CONFIG)};`,
    `export { HttpMethod, RequestContext } from ${JSON.stringify(join(CLIENT_NODE_DIST, 'gen', 'http', 'http.js'))};`,
    `export { V1MicroTime } from ${JSON.stringify(join(CLIENT_NODE_DIST, 'types.js'))};`,
  ].join('\n');
  const GEN_INDEX = [
    `export { createConfiguration } from ${JSON.stringify(join(CLIENT_NODE_DIST, 'gen', 'configuration.js'))};`,
    `export { ServerConfiguration } from ${JSON.stringify(join(CLIENT_NODE_DIST, 'gen', 'servers.js'))};`,
  ].join('\n');
  const NO_FETCH = [
    "const unused = () => { throw new Error('node-fetch is not bundled: the sweeper sends its requests itself (src/kube/http.ts)'); };",
    'export class Headers { constructor() { unused(); } }',
    'export default function fetch() { return unused(); }',
  ].join('\n');
  return {
    name: 'client-node-essentials',
    setup(b) {
      b.onResolve({ filter: /^node-fetch$/ }, (args) =>
        args.importer.startsWith(CLIENT_NODE_DIST) ? { path: 'no-fetch', namespace: 'client-node-essentials' } : undefined,
      );
      b.onResolve({ filter: /^@kubernetes\/client-node$/ }, () => ({ path: 'root', namespace: 'client-node-essentials' }));
      b.onResolve({ filter: /^\.\/gen\/index\.js$/ }, (args) =>
        args.importer === CLIENT_NODE_CONFIG ? { path: 'gen', namespace: 'client-node-essentials' } : undefined,
      );
      b.onLoad({ filter: /.*/, namespace: 'client-node-essentials' }, (args) => ({
        contents: args.path === 'root' ? ROOT_INDEX : args.path === 'gen' ? GEN_INDEX : NO_FETCH,
        resolveDir: CLIENT_NODE_DIST,
        loader: 'js',
      }));
    },
  };
}

/**
 * `import ... from 'node:http'` makes Node build an ES module facade, which reads every export of
 * node:http, and its WebSocket getters load Node's bundled undici: ~30 ms of start-up. The bundle
 * takes node:http from process.getBuiltinModule instead, exporting its plain (non-getter)
 * properties by name; importing a getter (e.g. `globalAgent`) by name fails the build.
 */
function httpWithoutFacade(): Plugin {
  const http = process.getBuiltinModule('node:http') as Record<string, unknown>;
  const names = Object.entries(Object.getOwnPropertyDescriptors(http))
    .filter(([name, d]) => !d.get && /^[A-Za-z_$][\w$]*$/.test(name) && name !== 'default')
    .map(([name]) => name);
  const contents = [
    "const http = process.getBuiltinModule('node:http');",
    'export default http;',
    `export const { ${names.join(', ')} } = http;`,
  ].join('\n');
  return {
    name: 'http-without-facade',
    setup(b) {
      // require('http') in bundled CommonJS stays Node's own require: it builds no facade.
      b.onResolve({ filter: /^(node:)?http$/ }, (args) =>
        args.kind === 'import-statement' ? { path: 'node:http', namespace: 'http-without-facade' } : undefined,
      );
      b.onLoad({ filter: /.*/, namespace: 'http-without-facade' }, () => ({ contents, loader: 'js' }));
    },
  };
}

/**
 * client-node imports its proxy agents (socks-proxy-agent, hpagent, with ip-address, socks and
 * smart-buffer: ~200 KB) at load, for a kubeconfig `proxy-url` few clusters set; evaluating them was
 * 7 ms of every start-up. Its imports get classes that load the real agent on first construction
 * (the bundle's require of a CommonJS package runs when first called).
 */
function proxyAgentsOnUse(): Plugin {
  const onUse = (pkg: string, classes: string[]) =>
    classes
      .map((c) => `export class ${c} { constructor(...args) { return new (require(${JSON.stringify(pkg)}).${c})(...args); } }`)
      .join('\n');
  const SHIMS: Record<string, string> = {
    'socks-proxy-agent': onUse('socks-proxy-agent', ['SocksProxyAgent']),
    hpagent: onUse('hpagent', ['HttpProxyAgent', 'HttpsProxyAgent']),
  };
  return {
    name: 'proxy-agents-on-use',
    setup(b) {
      b.onResolve({ filter: /^(socks-proxy-agent|hpagent)$/ }, (args) =>
        args.importer === CLIENT_NODE_CONFIG && args.kind === 'import-statement'
          ? { path: args.path, namespace: 'proxy-agents-on-use' }
          : undefined,
      );
      b.onLoad({ filter: /.*/, namespace: 'proxy-agents-on-use' }, (args) => ({
        contents: SHIMS[args.path],
        resolveDir: CLIENT_NODE_DIST,
        loader: 'js',
      }));
    },
  };
}

/**
 * winston and its transports require `readable-stream`, a copy of Node 10's streams (~85 KB
 * evaluated at start-up); Node's own `stream`, already loaded for HTTP, is the same API.
 */
function nodeStreams(): Plugin {
  const WRITABLE = "module.exports = require('node:stream').Writable;";
  return {
    name: 'node-streams',
    setup(b) {
      b.onResolve({ filter: /^readable-stream$/ }, () => ({ path: 'node:stream', external: true }));
      b.onResolve({ filter: /^readable-stream\/lib\/_stream_writable\.js$/ }, () => ({ path: 'writable', namespace: 'node-streams' }));
      b.onLoad({ filter: /.*/, namespace: 'node-streams' }, () => ({ contents: WRITABLE, loader: 'js' }));
    },
  };
}

rmSync(DIST, { recursive: true, force: true });
const result = await build({
  absWorkingDir: ROOT,
  entryPoints: ['src/cli/main.ts'],
  outdir: 'dist/src/cli',
  chunkNames: 'chunks/[name]-[hash]',
  bundle: true,
  splitting: true,
  format: 'esm',
  platform: 'node',
  target: 'node26',
  metafile: true,
  logLevel: 'warning',
  plugins: [clientNodeEssentials(), proxyAgentsOnUse(), nodeStreams(), httpWithoutFacade(), productionOnly()],
  // Bundled CommonJS dependencies call require() for Node's built-ins.
  banner: { js: "import { createRequire as __sweeperRequire } from 'node:module'; const require = __sweeperRequire(import.meta.url);" },
});
if (result.errors.length > 0) process.exit(1);
writeFileSync(join(DIST, 'bundled-packages.json'), `${JSON.stringify(bundledPackages(result.metafile), null, 2)}\n`);
