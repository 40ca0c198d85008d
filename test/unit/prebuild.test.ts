import { test } from 'node:test';
import assert from 'node:assert/strict';
import { prebuildMinors, prebuildTools } from '../support/prebuild.ts';

test('prebuild: the listed minors but the run own, in order, each once', () => {
  assert.deepEqual(prebuildMinors('1.34,1.36,1.35', '1.37'), ['1.34', '1.36', '1.35']);
  assert.deepEqual(prebuildMinors('1.34, v1.36,1.34,,1.35', 'v1.34'), ['1.36', '1.35']);
  assert.deepEqual(prebuildMinors('1.35', '1.35'), []);
  assert.deepEqual(prebuildMinors(undefined, '1.37'), []);
});

test('prebuild: the listed tools, in order, each once', () => {
  assert.deepEqual(prebuildTools('helm'), ['helm']);
  assert.deepEqual(prebuildTools(' helm,,helm, promtool'), ['helm', 'promtool']);
  assert.deepEqual(prebuildTools(undefined), []);
});
