// The runtime we ship is the runtime we test: the Dockerfile's Node major, `engines`,
// `@types/node`, the `node` dev dependency that `npm test` runs on, and the Node running this test.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

const REPO = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const pkg = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as {
  engines?: { node?: string };
  devDependencies?: Record<string, string>;
  allowScripts?: Record<string, boolean>;
};
const bases = [...readFileSync(join(REPO, 'Dockerfile'), 'utf8').matchAll(/^FROM\s+(\S+)/gim)].map((m) => m[1]!);
const majors = bases.map((b) => /^node:(\d+)-/.exec(b)?.[1]);
const major = majors[0];
const majorOf = (range: string | undefined): string | undefined => /^(?:\^|~|>=)?(\d+)/.exec(range ?? '')?.[1];

describe(`runtime (this test runs on Node ${process.version})`, () => {
  it('every Dockerfile stage is on one official Node major', () => {
    assert.ok(major, `Dockerfile FROM ${bases[0]}: not a node:<major>-<variant> image`);
    assert.deepEqual(
      majors,
      bases.map(() => major),
      `Dockerfile stages: ${bases.join(', ')}`,
    );
  });

  it('the tests run on the Dockerfile major', () => {
    assert.equal(process.versions.node.split('.')[0], major, `tests on ${process.version}, image on node:${major}`);
  });

  it('`node` on the PATH of an npm script (the one child processes get) is the same Node', () => {
    const seen = execFileSync('node', ['-p', 'process.version'], { encoding: 'utf8' }).trim();
    assert.equal(seen, process.version);
  });

  it('package.json agrees: engines, @types/node, and the `node` dev dependency with its install script allowed', () => {
    assert.equal(pkg.engines?.node, `>=${major}`);
    assert.equal(majorOf(pkg.devDependencies?.['@types/node']), major, '@types/node major');
    assert.equal(majorOf(pkg.devDependencies?.node), major, '`node` devDependency major');
    // Without it `npm ci` skips the binary's download and the tests fall back to the system Node.
    assert.equal(pkg.allowScripts?.node, true, 'allowScripts.node');
  });

  it('the README states the same major', () => {
    const readme = readFileSync(join(REPO, 'README.md'), 'utf8');
    assert.match(readme, new RegExp(`Node\\.js ${major}\\b`));
  });
});
