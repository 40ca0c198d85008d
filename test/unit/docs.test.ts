// The documentation stands alone and says what the code does: every relative link resolves (file
// and heading), the README stays short and reaches every page, the contract names what the code
// emits, and each table that restates code is checked against it. Facts, not wording.
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { Writable } from 'node:stream';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import type { Command } from 'commander';
import { parseAllDocuments } from 'yaml';
import { buildProgram } from '../../src/cli/program.ts';
import { EXIT } from '../../src/cli/exit.ts';
import { EVENT_REASON_HEALED, EVENT_REASON_INVALID_POLICY, EVENT_REASON_STUCK, REPORTING_CONTROLLER } from '../../src/act/events.ts';
import { DRY_RUN_OUTCOMES, OUTCOMES, PULL_CLASSES } from '../../src/model.ts';
import { ANNOTATIONS, LABELS } from '../../src/policy/annotations.ts';
import { POLICY_KEY } from '../../src/policy/configmap.ts';
import type { AuditLine } from '../../src/report/audit.ts';
import { AUDIT_DECISION } from '../../src/report/logger.ts';
import { formatDuration } from '../../src/policy/duration.ts';
import { DEFAULT_POLICY_CONFIGMAP } from '../../src/policy/load.ts';
import { parsePolicyYaml } from '../../src/policy/parse.ts';
import { GRACE_SOURCES, type Policy } from '../../src/policy/types.ts';
import { SweepMetrics } from '../../src/run/metrics.ts';

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const SKIP = new Set(['node_modules', 'dist', '.git', '.cache']);
const README_MAX_LINES = 300;

function markdownFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    if (SKIP.has(e.name)) return [];
    const path = join(dir, e.name);
    return e.isDirectory() ? markdownFiles(path) : e.name.endsWith('.md') ? [path] : [];
  });
}

const read = (path: string): string => readFileSync(join(REPO, path), 'utf8');
const docsPages = readdirSync(join(REPO, 'docs'))
  .filter((f) => f.endsWith('.md'))
  .map((f) => `docs/${f}`);
/** The user and contributor documentation, whose links must resolve to the heading too. */
const DOCUMENTATION = ['README.md', 'CONTRIBUTING.md', 'test/support/README.md', ...docsPages];

/** The text outside fenced code blocks. */
function prose(text: string): string {
  return text.replace(/^```[^\n]*\n[\s\S]*?^```\s*$/gm, '');
}

/** Targets of inline Markdown links and images: [text](target). */
function links(text: string): string[] {
  return [...prose(text).matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)].map((m) => m[1]!);
}

/** The anchors GitHub gives a file's headings: lower case, punctuation dropped, spaces to hyphens, repeats numbered. */
function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const result = new Set<string>();
  for (const [, heading = ''] of prose(text).matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const base = heading
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\p{M}\s_-]/gu, '')
      .replace(/ /g, '-');
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    result.add(n === 0 ? base : `${base}-${n}`);
  }
  return result;
}

/** The rows of the first Markdown table after `heading` (cells trimmed, header and rule dropped). */
function tableAfter(text: string, heading: string): string[][] {
  const start = text.indexOf(heading);
  assert.ok(start >= 0, `no "${heading}"`);
  const lines = text.slice(start).split('\n');
  const first = lines.findIndex((l) => l.startsWith('|'));
  const rows: string[][] = [];
  for (const line of lines.slice(first + 2)) {
    if (!line.startsWith('|')) break;
    rows.push(
      line
        .replace(/^\||\|$/g, '')
        .split(/(?<!\\)\|/)
        .map((c) => c.trim()),
    );
  }
  return rows;
}

/** The names in `code` spans of a text. */
const codeSpans = (text: string): string[] => [...text.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);

describe('documentation: links', () => {
  const files = markdownFiles(REPO);

  it('has the README, CONTRIBUTING and the contract', () => {
    for (const f of ['README.md', 'CONTRIBUTING.md', 'docs/contract.md']) assert.ok(files.includes(join(REPO, f)), f);
  });

  for (const file of files) {
    it(`${relative(REPO, file)}: every relative link points at a file inside the repository`, () => {
      for (const target of links(readFileSync(file, 'utf8'))) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('#')) continue;
        const path = resolve(dirname(file), decodeURI(target.split('#')[0]!));
        assert.ok(!relative(REPO, path).startsWith('..'), `${target} leaves the repository`);
        assert.ok(existsSync(path), `${target} does not exist`);
      }
    });
  }

  for (const file of DOCUMENTATION) {
    it(`${file}: every #anchor names a heading of its target`, () => {
      for (const target of links(read(file))) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target) || !target.includes('#')) continue;
        const [path = '', anchor = ''] = target.split('#');
        const targetFile = path === '' ? join(REPO, file) : resolve(dirname(join(REPO, file)), decodeURI(path));
        if (!targetFile.endsWith('.md')) continue;
        assert.ok(
          anchors(readFileSync(targetFile, 'utf8')).has(decodeURI(anchor)),
          `${target}: no heading #${anchor} in ${relative(REPO, targetFile)}`,
        );
      }
    });
  }

  it('the anchors are the ones GitHub makes', () => {
    const made = anchors(
      "# The `run` mode and its metrics\n## Policy (the ConfigMap's `policy.yaml`)\n## Limits\n## Limits\n```\n# not a heading\n```\n",
    );
    assert.deepEqual([...made], ['the-run-mode-and-its-metrics', 'policy-the-configmaps-policyyaml', 'limits', 'limits-1']);
  });
});

describe('documentation: the README', () => {
  const readme = read('README.md');

  it(`is at most ${README_MAX_LINES} lines`, () => {
    const lines = readme.split('\n').length - (readme.endsWith('\n') ? 1 : 0);
    assert.ok(lines <= README_MAX_LINES, `${lines} lines`);
  });

  it('links every page of docs/ and CONTRIBUTING.md, so nothing moved out of it is out of reach', () => {
    const linked = new Set(links(readme).map((t) => t.split('#')[0]));
    for (const page of [...docsPages, 'CONTRIBUTING.md']) assert.ok(linked.has(page), page);
  });

  it('names every exit status the CLI uses', () => {
    for (const code of Object.values(EXIT)) assert.match(readme, new RegExp(`\`${code}\``), String(code));
  });

  it('its flag table lists exactly the options of the commands', () => {
    const sink = new Writable({ write: (_c, _e, done) => done() });
    const program = buildProgram({ stdout: sink, stderr: sink, readStdin: async () => '', onStopSignal: () => {} }, () => {});
    const commands = (c: Command): Command[] => [c, ...c.commands.flatMap(commands)];
    const options = new Set(commands(program).flatMap((c) => c.options.map((o) => o.long!)));
    options.delete('--version');
    const documented = new Set(tableAfter(readme, '| flag |').flatMap(([flags = '']) => codeSpans(flags).map((s) => s.split(' ')[0]!)));
    assert.deepEqual([...documented].sort(), [...options].sort());
  });
});

describe('documentation: the contract and the names the code emits', () => {
  const contract = read('docs/contract.md');
  const everything = ['README.md', ...docsPages].map(read).join('\n');
  const keys = [...Object.values(ANNOTATIONS), ...Object.values(LABELS)];

  it('names every outcome and grace source the audit lines carry', () => {
    for (const word of [...OUTCOMES, ...DRY_RUN_OUTCOMES, ...GRACE_SOURCES]) assert.match(contract, new RegExp(`\\b${word}\\b`), word);
  });

  it('names the exit statuses, the Event reason and controller, and the policy ConfigMap the code uses', () => {
    for (const code of Object.values(EXIT)) assert.match(contract, new RegExp(`\`${code}\``), String(code));
    for (const name of [EVENT_REASON_STUCK, EVENT_REASON_HEALED, REPORTING_CONTROLLER, DEFAULT_POLICY_CONFIGMAP, POLICY_KEY])
      assert.ok(contract.includes(name), name);
  });

  it('names the annotations users set and read, each one the code uses', () => {
    for (const key of [
      ANNOTATIONS.ignore,
      ANNOTATIONS.grace,
      ANNOTATIONS.failedAt,
      ANNOTATIONS.reason,
      ANNOTATIONS.message,
      ANNOTATIONS.suspendedAt,
    ]) {
      assert.ok(contract.includes(key), key);
    }
    const named = new Set([...contract.matchAll(/imagepull-sweeper\/[a-z][a-z-]*/g)].map((m) => m[0]));
    for (const name of named) assert.ok((keys as string[]).includes(name), `the contract names ${name}, which the code does not use`);
  });

  it('every imagepull-sweeper/ name the documentation uses is one the code uses', () => {
    const pages = ['README.md', 'CONTRIBUTING.md', ...docsPages];
    const policyConfigMap = `imagepull-sweeper/${DEFAULT_POLICY_CONFIGMAP}`; // NAMESPACE/NAME, not a key
    for (const page of pages) {
      for (const [name] of read(page).matchAll(/(?<![\w./-])imagepull-sweeper\/[a-z][a-z-]*/g)) {
        if (name !== policyConfigMap) assert.ok((keys as string[]).includes(name), `${page} names ${name}`);
      }
    }
  });

  it('every annotation, label and Event reason the code writes is documented', () => {
    for (const name of [...keys, EVENT_REASON_STUCK, EVENT_REASON_INVALID_POLICY, EVENT_REASON_HEALED])
      assert.ok(everything.includes(name), name);
  });
});

describe('documentation: tables and examples that restate code', () => {
  const builtIn = parsePolicyYaml('{}');
  assert.ok(builtIn.ok);
  const defaults: Policy = builtIn.policy;

  const policyExamples: [string, string][] = ['README.md', 'docs/policy.md', 'docs/contract.md'].flatMap((file) =>
    [...read(file).matchAll(/^```yaml\n([\s\S]*?)^```/gm)]
      .map((m) => [file, m[1]!] as [string, string])
      .filter(([, y]) => /^defaults:/m.test(y)),
  );

  it('each policy example is a valid policy whose defaults, limits and cronJobs are the built-in ones', () => {
    assert.ok(policyExamples.length >= 3);
    for (const [file, yaml] of policyExamples) {
      const parsed = parsePolicyYaml(yaml);
      assert.ok(parsed.ok, `${file}: ${JSON.stringify(!parsed.ok && parsed.problems)}`);
      const { defaults: d, limits, cronJobs } = parsed.policy;
      assert.deepEqual(
        { defaults: d, limits, cronJobs },
        { defaults: defaults.defaults, limits: defaults.limits, cronJobs: defaults.cronJobs },
        file,
      );
    }
  });

  it("docs/policy.md's classes table: every class, with its built-in grace", () => {
    const rows = tableAfter(read('docs/policy.md'), '## Classes and grace');
    const table = rows.map(([cls = '', , grace = '']) => [codeSpans(cls)[0], codeSpans(grace)[0]]);
    assert.deepEqual(
      table,
      PULL_CLASSES.map((c) => [c, formatDuration(defaults.defaults.grace[c])]),
    );
  });

  it("docs/security.md's RBAC table grants exactly what manifests/rbac.yaml grants", () => {
    const role = parseAllDocuments(read('manifests/rbac.yaml'))
      .map((d) => d.toJS() as { kind: string; rules?: { resources: string[]; verbs: string[] }[] })
      .find((d) => d.kind === 'ClusterRole');
    assert.ok(role?.rules);
    const granted = new Map<string, Set<string>>();
    const grant = (resource: string, verbs: string[]): void => {
      granted.set(resource, new Set([...(granted.get(resource) ?? []), ...verbs]));
    };
    for (const rule of role.rules) for (const resource of rule.resources) grant(resource, rule.verbs);
    const documented = new Map<string, Set<string>>();
    for (const [resource = '', verbs = ''] of tableAfter(read('docs/security.md'), '## RBAC')) {
      const name = codeSpans(resource)[0]!;
      documented.set(name, new Set([...(documented.get(name) ?? []), ...codeSpans(verbs)]));
    }
    const sorted = (m: Map<string, Set<string>>) => [...m].map(([r, v]) => [r, [...v].sort()]).sort();
    assert.deepEqual(sorted(documented), sorted(granted));
  });

  it("docs/how-it-works.md's decision line has exactly the fields of an audit line", () => {
    const fields: Record<keyof AuditLine, true> = {
      sweepId: true,
      namespace: true,
      job: true,
      cronJob: true,
      owners: true,
      pod: true,
      container: true,
      containerKind: true,
      image: true,
      volume: true,
      reason: true,
      class: true,
      stuckSeconds: true,
      graceSeconds: true,
      graceSource: true,
      graceClamped: true,
      rule: true,
      action: true,
      outcome: true,
      dryRun: true,
      detail: true,
      hint: true,
      mechanism: true,
      error: true,
      warnings: true,
      waitingMessage: true,
      freed: true,
      heal: true,
    };
    const example = /^```json\n([\s\S]*?)^```/m.exec(read('docs/how-it-works.md'))?.[1];
    assert.ok(example);
    const { message, level, timestamp, ...line } = JSON.parse(example) as Record<string, unknown>;
    assert.equal(message, AUDIT_DECISION);
    assert.ok(level && timestamp);
    assert.deepEqual(Object.keys(line).sort(), Object.keys(fields).sort());
  });

  it("docs/how-it-works.md's metrics table names metrics the run mode serves", async () => {
    const served = new Set((await new SweepMetrics().registry.getMetricsAsJSON()).map((m) => m.name));
    const rows = tableAfter(read('docs/how-it-works.md'), '| metric |');
    assert.ok(rows.length > 0);
    for (const [metric = ''] of rows) {
      const name = codeSpans(metric)[0]!.replace(/\{.*\}$/, '');
      assert.ok(served.has(name), name);
    }
  });
});
