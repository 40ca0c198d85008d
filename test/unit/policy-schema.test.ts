import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { policyJsonSchema } from '../../src/policy/json-schema.ts';

type Schema = {
  $schema?: string;
  title?: string;
  type?: string;
  properties?: Record<string, Schema>;
  items?: Schema;
  required?: string[];
  additionalProperties?: unknown;
  default?: unknown;
  description?: string;
  enum?: unknown[];
  pattern?: string;
  anyOf?: Schema[];
  const?: unknown;
};

const schema = policyJsonSchema() as Schema;

function at(path: string[]): Schema {
  let node = schema;
  for (const key of path) {
    const next = key === '[]' ? node.items : node.properties?.[key];
    assert.ok(next, `no schema at ${path.join('.')}`);
    node = next;
  }
  return node;
}

/** Every object schema in the tree. */
function objects(node: Schema, path = '$'): Array<[string, Schema]> {
  const found: Array<[string, Schema]> = node.type === 'object' ? [[path, node]] : [];
  for (const [key, child] of Object.entries(node.properties ?? {})) found.push(...objects(child, `${path}.${key}`));
  if (node.items) found.push(...objects(node.items, `${path}[]`));
  return found;
}

describe('policyJsonSchema', () => {
  it('is a titled draft-07 object schema with the top-level sections', () => {
    assert.equal(schema.$schema, 'http://json-schema.org/draft-07/schema#');
    assert.equal(schema.title, 'imagepull-sweeper policy');
    assert.equal(schema.type, 'object');
    assert.deepEqual(Object.keys(schema.properties ?? {}), ['defaults', 'rules', 'limits', 'cronJobs']);
    assert.equal(schema.required, undefined);
  });

  it('rejects unknown keys everywhere except label maps', () => {
    for (const [path, node] of objects(schema)) {
      if (path.endsWith('.matchLabels')) assert.deepEqual(node.additionalProperties, { type: 'string' }, path);
      else assert.equal(node.additionalProperties, false, path);
    }
    assert.equal(schema.additionalProperties, false);
  });

  it('shows the built-in defaults', () => {
    assert.equal(at(['defaults', 'action']).default, 'fail');
    assert.deepEqual(at(['defaults', 'action']).enum, ['fail', 'report', 'ignore']);
    assert.equal(at(['defaults', 'grace', 'permanent']).default, '2m');
    assert.equal(at(['defaults', 'grace', 'auth']).default, '10m');
    assert.equal(at(['defaults', 'grace', 'transient']).default, '1h');
    assert.equal(at(['defaults', 'grace', 'unknown']).default, '15m');
    assert.equal(at(['defaults', 'jobOverrides', 'allowed']).default, true);
    assert.equal(at(['defaults', 'jobOverrides', 'maxGrace']).default, '1h');
    assert.equal(at(['defaults', 'heal']).default, false);
    assert.equal(at(['limits', 'maxJobsPerSweep']).default, 100);
    assert.equal(at(['limits', 'maxJobsPerNamespace']).default, 20);
    assert.equal(at(['limits', 'outage', 'minStuckPods']).default, 20);
    assert.equal(at(['limits', 'outage', 'minImages']).default, 5);
    assert.equal(at(['limits', 'outage', 'transientFraction']).default, 0.6);
    assert.equal(at(['limits', 'confirmWithin']).default, '5m');
    assert.equal(at(['limits', 'forceDeleteAfter']).default, '60s');
  });

  it('forceDeleteAfter: a Go duration string, or the number 0 (never)', () => {
    const node = at(['limits', 'forceDeleteAfter']);
    assert.match(node.description ?? '', /grace period 0.*0 = never/);
    const [text, zero] = node.anyOf ?? [];
    assert.equal(text?.type, 'string');
    assert.match('90s', new RegExp(text?.pattern ?? '^$'));
    assert.deepEqual({ type: zero?.type, const: zero?.const }, { type: 'number', const: 0 });
  });

  it('rule fields have no defaults (they fall back to defaults.*) and name is required', () => {
    const rule = at(['rules', '[]']);
    assert.deepEqual(rule.required, ['name']);
    assert.deepEqual(Object.keys(rule.properties ?? {}), [
      'name',
      'namespaces',
      'namespaceSelector',
      'owners',
      'action',
      'grace',
      'jobOverrides',
      'heal',
    ]);
    assert.equal(at(['rules', '[]', 'grace', 'permanent']).default, undefined);
    assert.equal(at(['rules', '[]', 'heal']).default, undefined);
    assert.equal(at(['rules', '[]', 'heal']).type, 'boolean');
    assert.equal(at(['rules', '[]', 'action']).default, undefined);
  });

  it('describes fields and constrains durations with a pattern', () => {
    assert.ok(at(['rules']).description);
    assert.ok(at(['defaults', 'grace', 'permanent']).description?.includes('Go duration'));
    const pattern = new RegExp(at(['defaults', 'grace', 'permanent']).pattern ?? '');
    for (const ok of ['2m', '1h30m', '1.5h', '300ms', '0']) assert.match(ok, pattern);
    for (const bad of ['1d', '30', '-5m', '']) assert.doesNotMatch(bad, pattern);
  });

  it('is plain JSON', () => {
    assert.deepEqual(JSON.parse(JSON.stringify(schema)), schema);
  });
});
