import { test } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

// The test tools built after the newest control-plane pin reuse its compiled packages only when
// both are built with the same flags and every module they share is at the same version.
const TEST_DIR = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const PIN_GO_MOD = path.join(TEST_DIR, 'controlplane', 'v1.37', 'go.mod');
const SHARING_TOOLS: Record<string, Record<string, string>> = {
  jobset: {},
  // Newer than the pin's, required by the tool itself: the packages above them are compiled again.
  helm: { 'github.com/go-errors/errors': 'v1.5.1' },
};

/** Module path → the version the go.mod selects (a `replace` with a version wins). */
function moduleVersions(goMod: string): Map<string, string> {
  const versions = new Map<string, string>();
  const replaced = new Map<string, string>();
  let block = '';
  for (const raw of goMod.split('\n')) {
    const line = raw.replace(/\/\/.*$/, '').trim();
    if (line === ')') {
      block = '';
      continue;
    }
    const opening = /^(require|replace)\s*\($/.exec(line);
    if (opening) {
      block = opening[1]!;
      continue;
    }
    const single = /^(require|replace)\s+(.*)$/.exec(line);
    const kind = single ? single[1]! : block;
    const body = single ? single[2]! : line;
    if (kind === 'require') {
      const m = /^(\S+)\s+(v\S+)$/.exec(body);
      if (m) versions.set(m[1]!, m[2]!);
    } else if (kind === 'replace') {
      const m = /^(\S+)(?:\s+v\S+)?\s+=>\s+\S+\s+(v\S+)$/.exec(body);
      if (m) replaced.set(m[1]!, m[2]!);
    }
  }
  for (const [mod, version] of replaced) versions.set(mod, version);
  return versions;
}

test('tool builds: go.mod versions are read from require and replace, blocks and single lines', () => {
  const versions = moduleVersions(
    [
      'module x',
      'go 1.26.0',
      'require a.io/one v1.0.0',
      'require (',
      '\tb.io/two v0.2.0 // indirect',
      '\tk8s.io/api v0.0.0',
      ')',
      'replace k8s.io/api => k8s.io/api v0.37.2',
      'replace (',
      '\tc.io/three v1.0.0 => c.io/three v1.0.1',
      ')',
    ].join('\n'),
  );
  assert.deepEqual(Object.fromEntries(versions), {
    'a.io/one': 'v1.0.0',
    'b.io/two': 'v0.2.0',
    'k8s.io/api': 'v0.37.2',
    'c.io/three': 'v1.0.1',
  });
});

for (const [tool, allowed] of Object.entries(SHARING_TOOLS)) {
  test(`tool builds: ${tool} is built as the newest control-plane pin is, with its module versions`, () => {
    const dir = path.join(TEST_DIR, 'tools', tool);
    const env = fs.readFileSync(path.join(dir, 'build.env'), 'utf8');
    assert.doesNotMatch(env, /^\s*(GCFLAGS|TAGS)=/m, `${tool}/build.env sets compiler flags or tags the pin is not built with`);
    assert.match(env, /^GO_ENV=\(CGO_ENABLED=0\)$/m, `${tool} must be built with cgo off, as the pin is`);
    const pin = moduleVersions(fs.readFileSync(PIN_GO_MOD, 'utf8'));
    const own = moduleVersions(fs.readFileSync(path.join(dir, 'go.mod'), 'utf8'));
    const differing = [...own]
      .filter(([mod, version]) => pin.has(mod) && pin.get(mod) !== version && allowed[mod] !== version)
      .map(([mod, version]) => `${mod} ${version} (pin: ${pin.get(mod)})`);
    assert.deepEqual(differing, [], `${tool}/go.mod: raise these to the pin's version (go get mod@version)`);
  });
}
