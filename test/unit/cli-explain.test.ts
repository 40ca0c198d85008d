import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { explainJob } from '../../src/cli/explain.ts';
import { judge } from '../../src/judge/judge.ts';
import { parsePolicyYaml } from '../../src/policy/parse.ts';
import { resolveForNamespace } from '../../src/policy/resolve.ts';
import { NOW, job, ownersFor, secondsAgo, stuckIn } from './judge-fixtures.ts';

const parsed = parsePolicyYaml('{}');
if (!parsed.ok) throw new Error(JSON.stringify(parsed.problems));
const policy = parsed.policy;

describe('policy explain --job: the ignore annotation', () => {
  for (const value of ['true', 'True', ' TRUE ', 'yes', '', 'false', 'False']) {
    it(`agrees with the sweep for ignore=${JSON.stringify(value)}`, () => {
      const j = job('x', { annotations: { 'imagepull-sweeper/ignore': value } });
      const stuck = [stuckIn(j, { stuckSince: secondsAgo(99_999) })];
      const [decision] = judge({ stuck, ownerOf: ownersFor(stuck, [j]), namespaceLabels: new Map(), policy, now: NOW }).decisions;
      const explained = explainJob(resolveForNamespace(policy, { name: j.namespace, labels: {} }), j.name, j.annotations);
      assert.equal(explained.ignored, decision!.action === 'ignore');
      assert.equal(explained.ignored, value.trim().toLowerCase() !== 'false');
    });
  }

  it('says "True" ignores the Job, with the value as written', () => {
    const explained = explainJob(resolveForNamespace(policy, { name: 'ci-a', labels: {} }), 'x', { 'imagepull-sweeper/ignore': 'True' });
    assert.deepEqual([explained.ignored, explained.ignoreValue, explained.ignoreWarning], [true, 'True', undefined]);
  });

  it('passes on the fail-safe warning for a value that is neither "true" nor "false"', () => {
    const explained = explainJob(resolveForNamespace(policy, { name: 'ci-a', labels: {} }), 'x', { 'imagepull-sweeper/ignore': 'yes' });
    assert.equal(explained.ignored, true);
    assert.match(explained.ignoreWarning ?? '', /not "true" or "false"/);
  });
});
