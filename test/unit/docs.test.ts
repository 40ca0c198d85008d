// The documentation stands alone: every relative link resolves to a file in the repository, and
// the contract names what the code emits.
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { DRY_RUN_OUTCOMES, OUTCOMES } from '../../src/model.ts';
import { GRACE_SOURCES } from '../../src/policy/types.ts';

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const SKIP = new Set(['node_modules', 'dist', '.git']);

function markdownFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    if (SKIP.has(e.name)) return [];
    const path = join(dir, e.name);
    return e.isDirectory() ? markdownFiles(path) : e.name.endsWith('.md') ? [path] : [];
  });
}

/** Targets of inline Markdown links and images: [text](target). */
function links(text: string): string[] {
  return [...text.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)].map((m) => m[1]!);
}

describe('documentation', () => {
  const files = markdownFiles(REPO);

  it('has the README and the contract', () => {
    assert.ok(files.includes(join(REPO, 'README.md')));
    assert.ok(files.includes(join(REPO, 'docs/contract.md')));
  });

  for (const file of files) {
    it(`${relative(REPO, file)}: every relative link points at a file inside the repository`, () => {
      for (const target of links(readFileSync(file, 'utf8'))) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('#')) continue;
        const path = resolve(dirname(file), decodeURI(target.split('#')[0]!));
        assert.ok(!relative(REPO, path).startsWith('..'), `${target} leaves the repository`);
        assert.ok(existsSync(path), `${target} does not exist`);
      }
    });
  }

  it('the README links the contract', () => {
    assert.ok(links(readFileSync(join(REPO, 'README.md'), 'utf8')).includes('docs/contract.md'));
  });

  it('the contract names every outcome and grace source the audit lines carry', () => {
    const contract = readFileSync(join(REPO, 'docs/contract.md'), 'utf8');
    for (const word of [...OUTCOMES, ...DRY_RUN_OUTCOMES, ...GRACE_SOURCES]) assert.match(contract, new RegExp(`\\b${word}\\b`), word);
  });
});
