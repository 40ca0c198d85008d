import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { isEmptySelector, labelKeyError, labelValueError, matchesSelector, requirementValuesError } from '../../src/policy/selector.ts';
import type { LabelSelector } from '../../src/policy/types.ts';

describe('label key and value syntax', () => {
  for (const key of ['team', 'app.kubernetes.io/name', 'example.com/a_b', 'a', 'A1', 'x'.repeat(63), `${'a'.repeat(253)}/n`]) {
    it(`accepts key ${key.slice(0, 40)}`, () => assert.equal(labelKeyError(key), undefined));
  }
  const badKeys: Array<[string, RegExp]> = [
    ['', /name part must not be empty/],
    ['bad key', /name part must consist of/],
    ['-team', /name part must consist of/],
    ['team-', /name part must consist of/],
    ['a/b/c', /at most one "\/"/],
    ['/name', /prefix before "\/" must not be empty/],
    ['Example.com/name', /prefix must be a DNS subdomain/],
    ['example.com/', /name part must not be empty/],
    ['x'.repeat(64), /at most 63 characters/],
    [`${'a'.repeat(254)}/n`, /prefix must be at most 253/],
  ];
  for (const [key, message] of badKeys) {
    it(`rejects key ${JSON.stringify(key.slice(0, 40))}`, () => assert.match(labelKeyError(key) ?? '', message));
  }

  for (const value of ['', 'batch', 'v1.2_3-x', 'A', 'x'.repeat(63)]) {
    it(`accepts value ${JSON.stringify(value.slice(0, 20))}`, () => assert.equal(labelValueError(value), undefined));
  }
  for (const value of ['has space', '-x', 'x-', 'a/b', 'x'.repeat(64)]) {
    it(`rejects value ${JSON.stringify(value.slice(0, 20))}`, () => assert.ok(labelValueError(value)));
  }

  it('checks operator/values combinations like Kubernetes', () => {
    assert.match(requirementValuesError('In', undefined) ?? '', /In needs a non-empty "values"/);
    assert.match(requirementValuesError('NotIn', []) ?? '', /NotIn needs a non-empty "values"/);
    assert.equal(requirementValuesError('In', ['a']), undefined);
    assert.match(requirementValuesError('Exists', ['a']) ?? '', /Exists takes no "values"/);
    assert.match(requirementValuesError('DoesNotExist', ['a']) ?? '', /DoesNotExist takes no "values"/);
    assert.equal(requirementValuesError('Exists', []), undefined);
    assert.equal(requirementValuesError('DoesNotExist', undefined), undefined);
  });
});

describe('matchesSelector', () => {
  const labels = { team: 'batch', env: 'prod' };
  const table: Array<[string, LabelSelector, Record<string, string>, boolean]> = [
    ['empty selector, any labels', {}, labels, true],
    ['empty selector, no labels', {}, {}, true],
    ['empty lists', { matchLabels: {}, matchExpressions: [] }, {}, true],
    ['matchLabels hit', { matchLabels: { team: 'batch' } }, labels, true],
    ['matchLabels wrong value', { matchLabels: { team: 'web' } }, labels, false],
    ['matchLabels missing key', { matchLabels: { tier: 'x' } }, labels, false],
    ['matchLabels all must hold', { matchLabels: { team: 'batch', env: 'dev' } }, labels, false],
    ['matchLabels empty value vs missing', { matchLabels: { tier: '' } }, labels, false],
    ['matchLabels empty value vs empty', { matchLabels: { tier: '' } }, { tier: '' }, true],
    ['In hit', { matchExpressions: [{ key: 'env', operator: 'In', values: ['dev', 'prod'] }] }, labels, true],
    ['In miss', { matchExpressions: [{ key: 'env', operator: 'In', values: ['dev'] }] }, labels, false],
    ['In absent key', { matchExpressions: [{ key: 'tier', operator: 'In', values: ['a'] }] }, labels, false],
    ['NotIn hit', { matchExpressions: [{ key: 'env', operator: 'NotIn', values: ['dev'] }] }, labels, true],
    ['NotIn miss', { matchExpressions: [{ key: 'env', operator: 'NotIn', values: ['prod'] }] }, labels, false],
    ['NotIn absent key matches', { matchExpressions: [{ key: 'tier', operator: 'NotIn', values: ['a'] }] }, labels, true],
    ['Exists', { matchExpressions: [{ key: 'team', operator: 'Exists' }] }, labels, true],
    ['Exists absent', { matchExpressions: [{ key: 'tier', operator: 'Exists' }] }, labels, false],
    ['DoesNotExist', { matchExpressions: [{ key: 'tier', operator: 'DoesNotExist' }] }, labels, true],
    ['DoesNotExist present', { matchExpressions: [{ key: 'team', operator: 'DoesNotExist' }] }, labels, false],
    [
      'labels and expressions ANDed',
      { matchLabels: { team: 'batch' }, matchExpressions: [{ key: 'env', operator: 'NotIn', values: ['prod'] }] },
      labels,
      false,
    ],
    ['prototype keys are not labels', { matchExpressions: [{ key: 'constructor', operator: 'Exists' }] }, {}, false],
  ];
  for (const [name, selector, input, expected] of table) {
    it(name, () => assert.equal(matchesSelector(selector, input), expected));
  }

  it('knows an empty selector', () => {
    assert.equal(isEmptySelector({}), true);
    assert.equal(isEmptySelector({ matchLabels: {} }), true);
    assert.equal(isEmptySelector({ matchLabels: { a: 'b' } }), false);
  });
});
