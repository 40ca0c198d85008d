// Writes the chart's values.schema.json and README.md from scripts/chart-values.ts (types and
// descriptions) and values.yaml (defaults): `npm run chart`. test/unit/chart.test.ts fails while
// either is stale.
import { readFileSync, realpathSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse as parseYaml } from 'yaml';
import * as z from 'zod';
import { chartValuesSchema } from './chart-values.ts';

export const CHART_DIR = join(resolve(dirname(fileURLToPath(import.meta.url)), '..'), 'charts', 'imagepull-sweeper');

interface JsonSchema {
  type?: string;
  anyOf?: JsonSchema[];
  description?: string;
  properties?: Record<string, JsonSchema>;
  required?: string[];
  additionalProperties?: unknown;
}

/** values.schema.json: what helm lint, install and upgrade check the values against. */
export function valuesJsonSchema(): JsonSchema {
  return z.toJSONSchema(chartValuesSchema, { target: 'draft-07', io: 'input', unrepresentable: 'throw' }) as JsonSchema;
}

export function renderValuesSchema(): string {
  return `${JSON.stringify(valuesJsonSchema(), null, 2)}\n`;
}

/** Each documented value (Helm's optional `global` aside): its dotted key, the schema, and its default from values.yaml. */
export function valueRows(values: Record<string, unknown>): { key: string; schema: JsonSchema; value: unknown }[] {
  const rows: { key: string; schema: JsonSchema; value: unknown }[] = [];
  const walk = (schema: JsonSchema, value: unknown, key: string): void => {
    if (schema.type === 'object' && schema.properties && schema.additionalProperties === false) {
      for (const [name, child] of Object.entries(schema.properties).filter(([n]) => schema.required?.includes(n)))
        walk(child, (value as Record<string, unknown> | undefined)?.[name], key ? `${key}.${name}` : name);
    } else rows.push({ key, schema, value });
  };
  walk(valuesJsonSchema(), values, '');
  return rows;
}

const cell = (s: string): string => s.replace(/\|/g, '\\|').replace(/\n/g, ' ');

const typeOf = (schema: JsonSchema): string => [...new Set(schema.anyOf?.map(typeOf) ?? [schema.type ?? 'any'])].join(' or ');

function shownDefault(value: unknown): string {
  if (typeof value === 'string') return value.includes('\n') ? 'see values.yaml' : `\`${cell(JSON.stringify(value))}\``;
  const json = JSON.stringify(value);
  return json.length > 60 ? 'see values.yaml' : `\`${cell(json)}\``;
}

export function renderReadme(valuesYaml: string): string {
  const rows = valueRows(parseYaml(valuesYaml) as Record<string, unknown>).map(
    ({ key, schema, value }) => `| \`${key}\` | ${typeOf(schema)} | ${shownDefault(value)} | ${cell(schema.description ?? '')} |`,
  );
  return `# imagepull-sweeper

Fails Kubernetes Jobs whose pods are stuck pulling their image, on a namespace policy, with an
audit trail. Kubernetes 1.34 or later.

\`\`\`sh
helm install imagepull-sweeper charts/imagepull-sweeper -n imagepull-sweeper --create-namespace \\
  --set image.repository=YOUR-REGISTRY/imagepull-sweeper
helm test imagepull-sweeper -n imagepull-sweeper   # one dry-run sweep as the sweeper's ServiceAccount
\`\`\`

The default render is \`kubectl apply -k manifests/\` object by object; \`mode: deployment\` adds the
\`manifests/deployment\` component. Install into \`imagepull-sweeper\`: the cluster-scoped objects have
fixed names (one sweeper per cluster). Modes, leader election, alerts and OpenShift:
[docs/helm.md](https://github.com/imagepull-sweeper/imagepull-sweeper/blob/main/docs/helm.md).

## Values

Generated from \`scripts/chart-values.ts\` and \`values.yaml\` (\`npm run chart\`). An unknown key or a
wrong type fails \`helm lint\`, \`install\` and \`upgrade\` (\`values.schema.json\`).

| Key | Type | Default | Description |
|---|---|---|---|
${rows.join('\n')}
`;
}

if (process.argv[1] && realpathSync(process.argv[1]) === fileURLToPath(import.meta.url)) {
  writeFileSync(join(CHART_DIR, 'values.schema.json'), renderValuesSchema());
  writeFileSync(join(CHART_DIR, 'README.md'), renderReadme(readFileSync(join(CHART_DIR, 'values.yaml'), 'utf8')));
}
