import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  compileNamespaceGlob,
  matchesAnyNamespaceGlob,
  matchesNamespaceGlob,
  namespaceGlobError,
  parseNamespaceGlob,
} from '../../src/policy/glob.ts';

describe('namespace globs: matching', () => {
  const table: Array<[string, string, boolean]> = [
    ['ci-*', 'ci-runner', true],
    ['ci-*', 'ci-', true],
    ['ci-*', 'xci-runner', false],
    ['ci-*', 'ci', false],
    ['*-prod', 'team-a-prod', true],
    ['*-prod', 'team-a-prod2', false],
    ['*', 'anything', true],
    ['kube-system', 'kube-system', true],
    ['kube-system', 'kube-system2', false],
    ['kube-system', 'my-kube-system', false],
    ['tenant-?', 'tenant-a', true],
    ['tenant-?', 'tenant-ab', false],
    ['tenant-?', 'tenant-', false],
    ['team-[abc]', 'team-b', true],
    ['team-[abc]', 'team-d', false],
    ['team-[a-c]x', 'team-bx', true],
    ['team-[a-c]x', 'team-dx', false],
    ['v[0-9]', 'v7', true],
    ['v[0-9]', 'va', false],
    ['env-[!p]*', 'env-dev', true],
    ['env-[!p]*', 'env-prod', false],
    ['x[-a]y', 'x-y', true],
    ['x[a-]y', 'x-y', true],
    ['x[a-]y', 'xay', true],
    ['a*b*c', 'axxbyyc', true],
    ['a*b*c', 'acb', false],
  ];
  for (const [glob, name, expected] of table) {
    it(`${JSON.stringify(glob)} ${expected ? 'matches' : 'does not match'} ${JSON.stringify(name)}`, () => {
      assert.equal(matchesNamespaceGlob(glob, name), expected);
    });
  }

  it('treats regex metacharacters in names as plain text', () => {
    assert.equal(compileNamespaceGlob('ci-*')('ci-\nx'), false);
  });

  it('matches any of several globs', () => {
    assert.equal(matchesAnyNamespaceGlob(['ci-*', 'tenant-*'], 'tenant-x'), true);
    assert.equal(matchesAnyNamespaceGlob(['ci-*', 'tenant-*'], 'prod'), false);
    assert.equal(matchesAnyNamespaceGlob([], 'prod'), false);
  });
});

describe('namespace globs: validation', () => {
  const invalid: Array<[string, RegExp]> = [
    ['', /glob is empty/],
    ['ci-[a', /unclosed "\[" \(at position 4\)/],
    ['ci-[', /unclosed "\["/],
    ['ci-]', /"\]" without a matching "\["/],
    ['[]x', /empty character class/],
    ['[!]x', /empty character class/],
    ['Ci-*', /"C" is not allowed \(namespace names are lowercase\)/],
    ['ns/one', /"\/" is not allowed/],
    ['a.b', /"\." is not allowed/],
    ['a_b', /"_" is not allowed/],
    ['[A-Z]', /"A" is not allowed/],
    ['[a-Z]', /"Z" is not allowed/],
    ['[z-a]', /reversed range "z-a"/],
    ['[a[b]', /"\[" inside a character class/],
    ['-foo', /cannot start or end with "-"/],
    ['foo-', /cannot start or end with "-"/],
    ['*-', /cannot start or end with "-"/],
    ['a'.repeat(64), /at most 63 characters/],
    ['x\\*', /"\\\\" is not allowed/],
  ];
  for (const [glob, message] of invalid) {
    it(`rejects ${JSON.stringify(glob)}`, () => {
      const error = namespaceGlobError(glob);
      assert.ok(error, 'expected an error');
      assert.match(error, message);
      assert.equal(parseNamespaceGlob(glob).ok, false);
      assert.throws(() => compileNamespaceGlob(glob), message);
    });
  }

  for (const glob of ['*', 'ci-*', 'a'.repeat(63), 'a'.repeat(63) + '*', '[-a]', '?', '*x', 'x[!a-c0-9-]y']) {
    it(`accepts ${JSON.stringify(glob)}`, () => assert.equal(namespaceGlobError(glob), undefined));
  }
});
