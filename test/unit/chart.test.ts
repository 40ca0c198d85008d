// The chart's values: values.schema.json and README.md are what scripts/chart.ts generates from
// scripts/chart-values.ts and values.yaml, and values.yaml itself is valid and documents every value.
// What helm does with the schema (lint and install refuse bad values) is test/e2e/helm.test.ts.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { parse } from 'yaml';
import { chartValuesSchema } from '../../scripts/chart-values.ts';
import { CHART_DIR, renderReadme, renderValuesSchema, valueRows } from '../../scripts/chart.ts';

const read = (file: string): string => readFileSync(join(CHART_DIR, file), 'utf8');
const valuesYaml = read('values.yaml');
const values = parse(valuesYaml) as Record<string, unknown>;

describe('chart values', () => {
  it('values.schema.json is generated from scripts/chart-values.ts (npm run chart)', () => {
    assert.equal(read('values.schema.json'), renderValuesSchema());
  });

  it('README.md is generated from the schema and values.yaml (npm run chart)', () => {
    assert.equal(read('README.md'), renderReadme(valuesYaml));
  });

  it('values.yaml is valid and has a default for every value', () => {
    const parsed = chartValuesSchema.safeParse(values);
    assert.ok(parsed.success, parsed.error?.message ?? '');
    for (const row of valueRows(values)) assert.notEqual(row.value, undefined, `${row.key} has no default in values.yaml`);
  });

  it('refuses a typo, an unknown key and a wrong type, naming the value', () => {
    const problems = (patch: Record<string, unknown>) =>
      chartValuesSchema.safeParse({ ...values, ...patch }).error?.issues.map((i) => `${i.path.join('.')}: ${i.code}`) ?? [];
    assert.deepEqual(problems({ global: { imageRegistry: 'r.example' } }), [], 'as a dependency, Helm adds global');
    assert.deepEqual(problems({ mode: 'Deployment' }), ['mode: invalid_value']);
    assert.deepEqual(problems({ replicas: 3 }), [': unrecognized_keys']);
    assert.deepEqual(problems({ deployment: { replicas: '2', metricsPort: 9090, watch: true } }), ['deployment.replicas: invalid_type']);
    assert.deepEqual(problems({ image: { repository: 'r', tag: '', digest: 'latest', pullPolicy: 'Always' } }), [
      'image.digest: invalid_format',
    ]);
  });

  it('Chart.yaml: Kubernetes 1.34 or later, and Artifact Hub annotations that parse', () => {
    const chart = parse(read('Chart.yaml')) as { kubeVersion: string; appVersion: string; annotations: Record<string, string> };
    assert.equal(chart.kubeVersion, '>=1.34.0-0');
    assert.equal(
      chart.appVersion,
      (JSON.parse(readFileSync(join(CHART_DIR, '..', '..', 'package.json'), 'utf8')) as { version: string }).version,
    );
    assert.equal(chart.annotations['artifacthub.io/license'], 'Apache-2.0');
    for (const key of ['artifacthub.io/links', 'artifacthub.io/changes']) {
      const list = parse(chart.annotations[key]!) as Record<string, string>[];
      assert.ok(Array.isArray(list) && list.length > 0, key);
    }
  });
});
