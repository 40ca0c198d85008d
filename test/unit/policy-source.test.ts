// Where a policy problem is: one string per location, the same in sweep, policy validate and
// policy explain (policy/load.ts problemSource).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { problemSource } from '../../src/policy/load.ts';
import { formatProblem } from '../../src/policy/problems.ts';

describe('the location of a policy problem', () => {
  const p = { line: 3, column: 16, path: 'rules[0].action', message: 'bad' };

  it('a ConfigMap: namespace/name and its key', () => {
    const source = problemSource({ kind: 'configmap', namespace: 'ns', name: 'name' });
    assert.equal(formatProblem(source, p), 'ns/name:policy.yaml:3:16 rules[0].action: bad');
  });

  it('a file: its path; stdin (-) is <stdin>', () => {
    assert.equal(problemSource({ kind: 'file', path: 'policy.yaml' }), 'policy.yaml');
    assert.equal(problemSource({ kind: 'file', path: '-', stdin: () => Promise.resolve('') }), '<stdin>');
  });
});
