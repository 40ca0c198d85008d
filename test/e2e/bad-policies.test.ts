// The corpus of malformed policies (test/support/bad-policies.ts: the fixtures plus a
// multi-megabyte file, binary garbage and deep nesting) through all three ways in: `policy
// validate`, `sweep --policy-file` and `sweep --policy-configmap`. Each must exit 2 naming
// file:line:col and the field, write nothing to the cluster (but the InvalidPolicy Event), and stay
// within a bounded peak RSS and CPU time (user+sys), which unlike wall time do not depend on how
// loaded the machine is.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { CoreV1Api, type KubeConfig } from '@kubernetes/client-node';
import { mapBounded } from '../../src/concurrency.ts';
import { badPolicyCorpus, type BadPolicy } from '../support/bad-policies.ts';
import { ensureBuilt, runCli, type Exec } from '../support/cli.ts';
import { useTestCluster } from '../support/hooks.ts';
import { createStuckJob, settledSnapshot, sweeperEvents } from '../support/sweeper.ts';

/** V8 heap cap for every CLI run: a policy that needs more crashes the run and fails the test. */
const HEAP_MB = 128;
/** Peak resident set of one CLI run (the CLI with its Kubernetes client idles at ~100 MB). */
const MAX_RSS_MB = 250;
/** CPU seconds (user+sys) of one CLI run; generous, it is there to catch a runaway parse. */
const MAX_CPU_S = 20;
const generated = mkdtempSync(join(tmpdir(), 'ips-bad-policies-'));

// Preloaded into every CLI run: its own peak RSS and CPU time, written when it exits.
const RUSAGE = join(generated, 'rusage.mjs');
writeFileSync(
  RUSAGE,
  `import { writeFileSync } from 'node:fs';
process.on('exit', () => {
  const u = process.resourceUsage();
  writeFileSync(process.env.IPS_RUSAGE_OUT, JSON.stringify({ maxRssKb: u.maxRSS, cpuUs: u.userCPUTime + u.systemCPUTime }));
});
`,
);

const LOCATED = (source: string) => new RegExp(`${source.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:(\\d+):(\\d+) (\\S+): \\S`);

/** Output as a person reads it: each JSON line's message, other lines as they are. */
function readable(text: string): string {
  return text
    .split('\n')
    .map((line) => {
      if (!line.startsWith('{')) return line;
      try {
        return String((JSON.parse(line) as { message?: unknown }).message);
      } catch {
        return line;
      }
    })
    .join('\n');
}

/** The first located problem in the output, as "line:column path". */
function firstProblem(text: string, source: string): string | undefined {
  const m = LOCATED(source).exec(readable(text));
  return m ? `${m[1]}:${m[2]} ${m[3]}` : undefined;
}

interface Measured extends Exec {
  rssMb: number;
  cpuS: number;
}

let runs = 0;
async function measured(args: string[], input?: string): Promise<Measured> {
  const out = join(generated, `rusage-${++runs}.json`);
  const env = { NODE_OPTIONS: `--max-old-space-size=${HEAP_MB} --import=${RUSAGE}`, IPS_RUSAGE_OUT: out };
  const r = await runCli(args, { env, input, timeoutMs: 300_000 });
  let usage = { maxRssKb: Number.NaN, cpuUs: Number.NaN };
  try {
    usage = JSON.parse(readFileSync(out, 'utf8')) as typeof usage;
  } catch {
    // No figures: the process died before its exit handlers ran; the exit status says why.
  }
  return { ...r, rssMb: Math.round(usage.maxRssKb / 1024), cpuS: Math.round(usage.cpuUs / 10_000) / 100 };
}

let kc: KubeConfig;
let kubeconfig: string;
const env = useTestCluster((hooks) => {
  ensureBuilt();
  kc = hooks.kc;
  kubeconfig = hooks.cluster.kubeconfigPath;
});

describe('malformed policies', () => {
  const cases = badPolicyCorpus(generated);
  const peak = { rssMb: 0, rssWhat: '', cpuS: 0, cpuWhat: '' };

  it(`the corpus has at least 40 cases (${cases.length})`, () => assert.ok(cases.length >= 40));

  function check(r: Measured, c: BadPolicy, source: string, where: string): void {
    const text = `${r.stdout}\n${r.stderr}`;
    const context = `${c.name} via ${where}: exit ${r.code}, peak RSS ${r.rssMb} MB, CPU ${r.cpuS} s\n${text.slice(0, 2000)}`;
    assert.equal(r.code, 2, context);
    assert.doesNotMatch(text, /unexpected error|\n\s+at |call stack/, context);
    const found = firstProblem(text, source);
    assert.ok(found, `no ${source}:line:col field in\n${context}`);
    if (c.at) assert.equal(found, c.at, context);
    assert.ok(r.rssMb <= MAX_RSS_MB, context);
    assert.ok(r.cpuS <= MAX_CPU_S, context);
    if (r.rssMb > peak.rssMb) Object.assign(peak, { rssMb: r.rssMb, rssWhat: `${c.name} via ${where}` });
    if (r.cpuS > peak.cpuS) Object.assign(peak, { cpuS: r.cpuS, cpuWhat: `${c.name} via ${where}` });
  }

  it('policy validate FILE: exit 2, file:line:col and the field, bounded memory and CPU', { timeout: 900_000 }, async () => {
    await mapBounded(cases, 3, async (c) => check(await measured(['policy', 'validate', c.path]), c, c.path, 'policy validate'));
  });

  it('policy validate - (stdin) says the same as with the file', { timeout: 300_000 }, async () => {
    const sample = cases.filter((c) =>
      /^(tabs-indent|duplicate-key|unknown-key-namespace|duration-days|alias-bomb|binary-garbage)\.yaml$/.test(c.name),
    );
    await mapBounded(sample, 3, async (c) =>
      check(await measured(['policy', 'validate', '-'], readFileSync(c.path, 'utf8')), c, '<stdin>', 'stdin'),
    );
  });

  it(
    'sweep --policy-file and --policy-configmap: exit 2, nothing written but the InvalidPolicy Event',
    { timeout: 1_800_000 },
    async () => {
      const ns = await env.namespace('badpolicy');
      await createStuckJob(kc, ns, 'stuck', { stuckFor: 99_999 });
      const before = await settledSnapshot(kc, ns);
      const core = kc.makeApiClient(CoreV1Api);
      const base = ['sweep', '--kubeconfig', kubeconfig, '--namespace', ns, '--output', 'json'];

      await mapBounded(cases, 3, async (c) => check(await measured([...base, '--policy-file', c.path]), c, c.path, '--policy-file'));

      const inConfigMaps = cases.filter((c) => c.configMap);
      const configMaps = new Map<string, string | undefined>();
      await mapBounded(inConfigMaps, 3, async (c) => {
        const name = `policy-${c.name.replace(/\.yaml$/, '').replace(/[^a-z0-9-]/g, '-')}`.slice(0, 63);
        const text = readFileSync(c.path, 'utf8');
        const created = await core.createNamespacedConfigMap({
          namespace: ns,
          body: { metadata: { name }, data: { 'policy.yaml': text } },
        });
        configMaps.set(name, created.metadata?.resourceVersion);
        check(await measured([...base, '--policy-configmap', `${ns}/${name}`]), c, `${ns}/${name}:policy.yaml`, 'ConfigMap');
      });

      const after = await settledSnapshot(kc, ns);
      assert.deepEqual(after, before, 'no Job or Pod was written');
      for (const [name, resourceVersion] of configMaps) {
        const now = await core.readNamespacedConfigMap({ namespace: ns, name });
        assert.equal(now.metadata?.resourceVersion, resourceVersion, `ConfigMap ${name} was written`);
      }
      const events = await sweeperEvents(kc, ns);
      assert.deepEqual(
        events.filter((e) => e.reason !== 'InvalidPolicy').map((e) => `${e.reason} ${e.regarding?.name}`),
        [],
      );
      assert.ok(
        events.every((e) => e.regarding?.kind === 'ConfigMap' && configMaps.has(e.regarding.name ?? '')),
        'InvalidPolicy Events only on the policy ConfigMaps',
      );
      assert.ok(
        events.length <= configMaps.size,
        `one InvalidPolicy Event per ConfigMap at most, got ${events.length} for ${configMaps.size}`,
      );
      process.stderr.write(
        `[bad-policies] ${cases.length} cases (${inConfigMaps.length} also as ConfigMaps), ${runs} CLI runs, heap capped at ${HEAP_MB} MB; ` +
          `peak RSS ${peak.rssMb} MB (${peak.rssWhat}); most CPU ${peak.cpuS} s (${peak.cpuWhat})\n`,
      );
    },
  );
});
