// Every malformed policy of the corpus (test/support/bad-policies.ts) through the pure parsers:
// the first problem is where expected.json says, and every problem is located and explained.
// The same corpus goes through the built CLI and a real ConfigMap in test/e2e/bad-policies.test.ts.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, it } from 'node:test';
import { parseConfigMapData, parsePolicyDocument, POLICY_KEY } from '../../src/policy/configmap.ts';
import { readPolicyFile } from '../../src/policy/load.ts';
import type { PolicyParseResult } from '../../src/policy/parse.ts';
import { badPolicyCorpus } from '../support/bad-policies.ts';

const dir = mkdtempSync(join(tmpdir(), 'ips-policy-corpus-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const cases = badPolicyCorpus(dir);

function firstProblem(result: PolicyParseResult, name: string): string {
  if (result.ok) assert.fail(`${name} was accepted as a valid policy`);
  for (const p of result.problems) {
    assert.ok(p.line >= 1 && p.column >= 1, `${name}: ${JSON.stringify(p)}`);
    assert.ok(p.message.trim().length > 10, `${name}: ${JSON.stringify(p)}`);
    assert.doesNotMatch(p.message, /call stack|undefined|\[object /, `${name}: ${JSON.stringify(p)}`);
  }
  const p = result.problems[0]!;
  return `${p.line}:${p.column} ${p.path || '(root)'}`;
}

describe('the malformed-policy corpus', () => {
  it(`has at least 40 cases (${cases.length})`, () => assert.ok(cases.length >= 40));

  for (const c of cases) {
    it(`${c.name}: invalid, first problem ${c.at ?? 'located'}`, async () => {
      const text = await readPolicyFile(c.path);
      const found = firstProblem(parsePolicyDocument(text), c.name);
      if (c.at) assert.equal(found, c.at);
      if (c.configMap) {
        // The same text as a live ConfigMap's policy.yaml: the same first problem (for the cases
        // without a fixed place, e.g. where the parser's stack ran out, the same field).
        const asConfigMap = firstProblem(parseConfigMapData({ [POLICY_KEY]: text }), `${c.name} (ConfigMap)`);
        if (c.at) assert.equal(asConfigMap, found);
        else assert.equal(asConfigMap.split(' ')[1], found.split(' ')[1]);
      }
    });
  }
});
