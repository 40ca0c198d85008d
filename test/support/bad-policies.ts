// The corpus of malformed policies: the files in test/fixtures/bad-policies/ (expected.json says
// where each one's first problem is) plus three too big or too odd to commit, made on the fly.
import { readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { REPO } from './cli.ts';
import { seededRandom } from './fault-proxy.ts';

export const BAD_POLICIES = join(REPO, 'test/fixtures/bad-policies');

export interface BadPolicy {
  name: string;
  path: string;
  /** The first problem reported, as "line:column path"; undefined: any located problem. */
  at: string | undefined;
  /** Can be a live ConfigMap's policy.yaml (a bare policy, under 1 MiB). */
  configMap: boolean;
  generated: boolean;
}

/** Every case of the corpus; the generated files are written into `dir`. */
export function badPolicyCorpus(dir: string): BadPolicy[] {
  const expected = JSON.parse(readFileSync(join(BAD_POLICIES, 'expected.json'), 'utf8')) as Record<string, string>;
  const cases: BadPolicy[] = readdirSync(BAD_POLICIES)
    .filter((f) => f.endsWith('.yaml'))
    .sort()
    .map((name) => ({
      name,
      path: join(BAD_POLICIES, name),
      at: expected[name],
      configMap: !name.startsWith('configmap-') && name !== 'not-a-configmap.yaml',
      generated: false,
    }));
  const missing = cases.filter((c) => c.at === undefined).map((c) => c.name);
  if (missing.length > 0) throw new Error(`${join(BAD_POLICIES, 'expected.json')}: no entry for ${missing.join(', ')}`);

  // ~5 MB of valid-looking rules: refused by size, unparsed.
  const big = join(dir, 'multi-megabyte.yaml');
  writeFileSync(
    big,
    `rules:\n${Array.from({ length: 60_000 }, (_, i) => `  - name: rule-${i}\n    namespaces: ["ns-${i}-*"]\n    grace: { permanent: 1m }\n`).join('')}`,
  );
  const random = seededRandom(42);
  const binary = join(dir, 'binary-garbage.yaml');
  writeFileSync(binary, Buffer.from(Array.from({ length: 65_536 }, () => Math.floor(random() * 256))));
  const deep = join(dir, 'deep-nesting.yaml');
  writeFileSync(deep, `rules: ${'['.repeat(5_000)}${']'.repeat(5_000)}\n`);
  cases.push(
    { name: 'multi-megabyte.yaml', path: big, at: '1:1 (root)', configMap: false, generated: true },
    { name: 'binary-garbage.yaml', path: binary, at: undefined, configMap: true, generated: true },
    { name: 'deep-nesting.yaml', path: deep, at: undefined, configMap: true, generated: true },
  );
  return cases;
}
