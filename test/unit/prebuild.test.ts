import { test } from 'node:test';
import assert from 'node:assert/strict';
import { prebuildMinors } from '../support/prebuild.ts';

test('prebuild: the listed minors but the run own, in order, each once', () => {
  assert.deepEqual(prebuildMinors('1.34,1.36,1.35', '1.37'), ['1.34', '1.36', '1.35']);
  assert.deepEqual(prebuildMinors('1.34, v1.36,1.34,,1.35', 'v1.34'), ['1.36', '1.35']);
  assert.deepEqual(prebuildMinors('1.35', '1.35'), []);
  assert.deepEqual(prebuildMinors(undefined, '1.37'), []);
});
