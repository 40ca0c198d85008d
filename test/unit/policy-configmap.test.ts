import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { parsePolicyDocument, type PolicyDocumentResult } from '../../src/policy/configmap.ts';
import { parsePolicyYaml } from '../../src/policy/parse.ts';
import type { PolicyProblem } from '../../src/policy/types.ts';

function manifest(policyBlock: string, header = 'policy.yaml: |'): string {
  return `# the sweeper's policy
apiVersion: v1
kind: ConfigMap
metadata:
  name: imagepull-sweeper-policy
  namespace: ops
data:
  ${header}
${policyBlock}`;
}

function failed(result: PolicyDocumentResult): PolicyProblem[] {
  if (result.ok) assert.fail('expected problems');
  return result.problems;
}

/** Text found in `text` at a problem's line and column. */
function textAt(text: string, p: PolicyProblem, length: number): string {
  const line = text.split('\n')[p.line - 1] ?? '';
  return line.slice(p.column - 1, p.column - 1 + length);
}

describe('parsePolicyDocument', () => {
  it('accepts the raw policy YAML and says so', () => {
    const result = parsePolicyDocument('defaults:\n  action: report\n');
    assert.ok(result.ok);
    assert.equal(result.form, 'policy');
    assert.equal(result.configMap, undefined);
    assert.equal(result.policy.defaults.action, 'report');
  });

  it('accepts a ConfigMap manifest and reads its policy.yaml', () => {
    const policy = '    defaults:\n      action: report\n    rules:\n      - name: ci\n        namespaces: ["ci-*"]\n';
    const result = parsePolicyDocument(manifest(policy));
    assert.ok(result.ok);
    assert.equal(result.form, 'configmap');
    assert.deepEqual(result.configMap, { name: 'imagepull-sweeper-policy', namespace: 'ops' });
    const direct = parsePolicyYaml(policy.replace(/^ {4}/gm, ''));
    assert.ok(direct.ok);
    assert.deepEqual(result.policy, direct.policy);
  });

  it('maps problems inside a block scalar to manifest lines and columns', () => {
    const text = manifest(`    defaults:
      action: nope
      grace:
        auth: 10d

    rules:
      - name: ci
        grase: {}
`);
    const list = failed(parsePolicyDocument(text));
    assert.deepEqual(
      list.map((p) => `${p.line}:${p.column} ${p.path}`),
      ['10:15 defaults.action', '12:15 defaults.grace.auth', '16:9 rules[0].grase'],
    );
    assert.equal(textAt(text, list[0]!, 4), 'nope');
    assert.equal(textAt(text, list[1]!, 3), '10d');
    assert.equal(textAt(text, list[2]!, 5), 'grase');
  });

  it('maps positions with an explicit indentation indicator', () => {
    const text = manifest('      defaults:\n        action: nope\n', 'policy.yaml: |2');
    const [problem] = failed(parsePolicyDocument(text));
    assert.deepEqual([problem!.line, problem!.column, problem!.path], [10, 17, 'defaults.action']);
    assert.equal(textAt(text, problem!, 4), 'nope');
  });

  it('maps positions with keep/strip chomping indicators', () => {
    for (const header of ['policy.yaml: |-', 'policy.yaml: |+', 'policy.yaml: |  # comment']) {
      const text = manifest('    limits:\n      maxJobsPerSweep: 0\n', header);
      const [problem] = failed(parsePolicyDocument(text));
      assert.equal(textAt(text, problem!, 1), '0', header);
    }
  });

  it('maps YAML syntax errors inside policy.yaml', () => {
    const text = manifest('    defaults:\n      action: [fail\n');
    const [problem] = failed(parsePolicyDocument(text));
    assert.match(problem!.message, /^YAML syntax error/);
    assert.ok(problem!.line >= 10, `line ${problem!.line}`);
  });

  it('maps warnings too', () => {
    const result = parsePolicyDocument(manifest('    rules:\n      - name: all\n      - name: ci\n'));
    assert.ok(result.ok);
    assert.deepEqual(
      result.warnings.map((w) => [w.line, w.column, w.path]),
      [[11, 9, 'rules[1]']],
    );
  });

  it('a quoted policy.yaml points at the string and names the inner position', () => {
    const text = 'apiVersion: v1\nkind: ConfigMap\ndata:\n  policy.yaml: "defaults:\\n  action: nope\\n"\n';
    const [problem] = failed(parsePolicyDocument(text));
    assert.deepEqual(problem, {
      line: 4,
      column: 16,
      path: 'defaults.action',
      message: 'expected one of "fail", "report", "ignore", got "nope" (at line 2, column 11 of policy.yaml)',
    });
  });

  it('a folded block scalar is reported on a best-effort basis', () => {
    const text = manifest('    defaults:\n      action: nope\n', 'policy.yaml: >');
    const list = failed(parsePolicyDocument(text));
    assert.ok(list.length >= 1);
    assert.ok(list.every((p) => p.line >= 1 && p.column >= 1));
  });

  it('a ConfigMap without policy.yaml names the missing key', () => {
    const text = 'apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: p\ndata:\n  other.yaml: x\n';
    const result = parsePolicyDocument(text);
    assert.equal(result.form, 'configmap');
    assert.deepEqual(failed(result), [
      { line: 6, column: 3, path: 'data["policy.yaml"]', message: 'ConfigMap has no data key "policy.yaml" (it has "other.yaml")' },
    ]);
  });

  it('a ConfigMap without data names the missing key', () => {
    const [problem] = failed(parsePolicyDocument('apiVersion: v1\nkind: ConfigMap\nmetadata: { name: p }\n'));
    assert.deepEqual(problem, { line: 1, column: 1, path: 'data["policy.yaml"]', message: 'ConfigMap has no data key "policy.yaml"' });
  });

  it('policy.yaml written as a mapping instead of a string', () => {
    const [problem] = failed(parsePolicyDocument('apiVersion: v1\nkind: ConfigMap\ndata:\n  policy.yaml:\n    defaults: {}\n'));
    assert.equal(problem!.line, 5);
    assert.equal(problem!.column, 5);
    assert.match(problem!.message, /must be a string holding the policy YAML.*got a mapping/);
  });

  it('an empty policy.yaml is invalid, pointing at the string; "{}" gives the defaults', () => {
    const [problem, ...rest] = failed(parsePolicyDocument('apiVersion: v1\nkind: ConfigMap\ndata:\n  policy.yaml: ""\n'));
    assert.equal(rest.length, 0);
    assert.deepEqual([problem!.line, problem!.column, problem!.path], [4, 16, '']);
    assert.match(problem!.message, /the policy is empty .*write \{\}/);
    const result = parsePolicyDocument('apiVersion: v1\nkind: ConfigMap\ndata:\n  policy.yaml: "{}"\n');
    assert.ok(result.ok);
    assert.deepEqual(result.policy.rules, []);
  });

  it('a manifest larger than 1 MiB is refused before parsing', () => {
    const huge = `apiVersion: v1\nkind: ConfigMap\ndata:\n  policy.yaml: |\n${'    # padding\n'.repeat(90_000)}`;
    const [problem] = failed(parsePolicyDocument(huge));
    assert.match(problem!.message, /larger than 1 MiB/);
  });

  it('another kind of manifest is a problem at its kind', () => {
    const result = parsePolicyDocument('apiVersion: v1\nkind: Secret\ndata:\n  policy.yaml: eA==\n');
    assert.deepEqual(failed(result), [
      { line: 2, column: 7, path: 'kind', message: 'expected the policy YAML or a ConfigMap manifest, got kind "Secret"' },
    ]);
  });

  it('a syntax error in the manifest itself', () => {
    const result = parsePolicyDocument('apiVersion: v1\nkind: ConfigMap\ndata:\n  policy.yaml: [\n');
    assert.equal(result.form, 'configmap');
    const [problem] = failed(result);
    assert.match(problem!.message, /^YAML syntax error/);
  });

  it('a leading document marker and comments are fine', () => {
    const result = parsePolicyDocument(`---\n${manifest('    defaults: { action: ignore }\n')}`);
    assert.ok(result.ok);
    assert.equal(result.policy.defaults.action, 'ignore');
  });
});
