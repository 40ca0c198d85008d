import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { toPolicy } from '../../src/policy/convert.ts';
import { FALLBACK_POLICY } from '../../src/policy/defaults.ts';
import { loadPolicy, readPolicyFile } from '../../src/policy/load.ts';
import { MAX_POLICY_BYTES, parsePolicyYaml } from '../../src/policy/parse.ts';
import { formatPath } from '../../src/policy/problems.ts';
import type { Policy, PolicyProblem } from '../../src/policy/types.ts';

/** The policy example of SPEC.md, verbatim. */
const SPEC_EXAMPLE = `defaults:
  action: fail            # fail | report | ignore
  grace:                  # how long a container may wait on its image before its Job is failed
    permanent: 2m         # image or tag not found, manifest unknown, invalid name, ErrImageNeverPull
    auth: 10m             # unauthorized, denied, insufficient_scope, no credentials
    transient: 1h         # 429/toomanyrequests, pull QPS exceeded, 5xx, dial/DNS/TLS/timeouts
    unknown: 15m          # anything else
    stalled: 30m          # no pull error at all, but the container has waited in ContainerCreating
                          # since its pod's sandbox was ready (a registry that never answers)
  jobOverrides: { allowed: true, maxGrace: 1h }
  heal: false             # recreate a stuck pod once its cause is gone (see "Healing")
rules:                    # first match wins; a rule's matchers must all match; unset fields
                          # (and unset grace classes) fall back to defaults
  - name: ci
    namespaces: ["ci-*", "tenant-*"]          # globs
    namespaceSelector: { matchLabels: { team: batch } }
    grace: { permanent: 30s, unknown: 5m }
  - name: system
    namespaces: ["kube-system"]
    action: ignore
limits:
  maxJobsPerSweep: 100
  maxJobsPerNamespace: 20
  confirmWithin: 5m       # a Job failed by the sweeper but not Failed by then is failed again
  forceDeleteAfter: 60s   # a never-started pod of such a Job still terminating by then is force-deleted
  outage: { minStuckPods: 20, minImages: 5, transientFraction: 0.6, authFraction: 0.6 }
`;

const BUILTIN_DEFAULTS: Policy['defaults'] = {
  action: 'fail',
  grace: { permanent: 120, auth: 600, transient: 3600, unknown: 900, stalled: 1800 },
  jobOverrides: { allowed: true, maxGraceSeconds: 3600 },
  heal: false,
};
const BUILTIN_LIMITS: Policy['limits'] = {
  maxJobsPerSweep: 100,
  maxJobsPerNamespace: 20,
  outage: { minStuckPods: 20, minImages: 5, transientFraction: 0.6, authFraction: 0.6 },
  confirmWithinSeconds: 300,
  forceDeleteAfterSeconds: 60,
};

function valid(text: string): Policy {
  const result = parsePolicyYaml(text);
  if (!result.ok) assert.fail(`expected a valid policy, got ${JSON.stringify(result.problems, null, 2)}`);
  return result.policy;
}

function problems(text: string): PolicyProblem[] {
  const result = parsePolicyYaml(text);
  if (result.ok) assert.fail('expected problems, got a valid policy');
  return result.problems;
}

/** `line:column path` of each problem, in order. */
function where(list: PolicyProblem[]): string[] {
  return list.map((p) => `${p.line}:${p.column} ${p.path}`);
}

function only(text: string): PolicyProblem {
  const list = problems(text);
  assert.equal(list.length, 1, JSON.stringify(list, null, 2));
  return list[0]!;
}

describe('parsePolicyYaml: valid policies', () => {
  it('parses the SPEC example verbatim', () => {
    assert.deepEqual(valid(SPEC_EXAMPLE), {
      defaults: BUILTIN_DEFAULTS,
      rules: [
        {
          name: 'ci',
          namespaces: ['ci-*', 'tenant-*'],
          namespaceSelector: { matchLabels: { team: 'batch' } },
          grace: { permanent: 30, unknown: 300 },
        },
        { name: 'system', namespaces: ['kube-system'], action: 'ignore' },
      ],
      limits: BUILTIN_LIMITS,
      cronJobs: { suspendAfter: 0 },
    });
  });

  it('the SPEC example defaults are the built-in defaults', () => {
    const spec = valid(SPEC_EXAMPLE);
    assert.deepEqual(spec.defaults, toPolicy({}).defaults);
    assert.deepEqual(spec.limits, toPolicy({}).limits);
  });

  for (const [name, text] of [
    ['{}', '{}\n'],
    ['{} with comments', '# all defaults\n{}  # for now\n'],
    ['empty sections', 'defaults: {}\nrules: []\nlimits: {}\n'],
  ] as const) {
    it(`gives all defaults for ${name}`, () => {
      assert.deepEqual(valid(text), { defaults: BUILTIN_DEFAULTS, rules: [], limits: BUILTIN_LIMITS, cronJobs: { suspendAfter: 0 } });
    });
  }

  for (const [name, text] of [
    ['an empty document', ''],
    ['only whitespace', '  \n\n'],
    ['only comments', '# nothing yet\n'],
    ['an explicit null document', '---\n~\n'],
    ['null', 'null\n'],
  ] as const) {
    it(`refuses ${name}, and says to write {} for all defaults`, () => {
      const p = only(text);
      assert.equal(p.path, '');
      assert.match(p.message, /^the policy is empty .*write \{\} to mean "all built-in defaults"/);
    });
  }

  it('fills unset grace classes and limits from the built-in defaults', () => {
    const policy = valid(
      'defaults:\n  grace:\n    auth: 1m\n  jobOverrides: { maxGrace: 2h }\nlimits:\n  maxJobsPerSweep: 7\n  outage: { minImages: 2 }\n',
    );
    assert.deepEqual(policy.defaults.grace, { permanent: 120, auth: 60, transient: 3600, unknown: 900, stalled: 1800 });
    assert.deepEqual(policy.defaults.jobOverrides, { allowed: true, maxGraceSeconds: 7200 });
    assert.deepEqual(policy.limits, {
      maxJobsPerSweep: 7,
      maxJobsPerNamespace: 20,
      outage: { minStuckPods: 20, minImages: 2, transientFraction: 0.6, authFraction: 0.6 },
      confirmWithinSeconds: 300,
      forceDeleteAfterSeconds: 60,
    });
    assert.equal(valid('limits:\n  confirmWithin: 90s\n').limits.confirmWithinSeconds, 90);
  });

  it('forceDeleteAfter: a duration, or 0 (YAML number or string) for never', () => {
    assert.equal(valid('limits:\n  forceDeleteAfter: 90s\n').limits.forceDeleteAfterSeconds, 90);
    assert.equal(valid('limits:\n  forceDeleteAfter: 1m30s\n').limits.forceDeleteAfterSeconds, 90);
    assert.equal(valid('limits:\n  forceDeleteAfter: 0\n').limits.forceDeleteAfterSeconds, 0);
    assert.equal(valid('limits:\n  forceDeleteAfter: "0"\n').limits.forceDeleteAfterSeconds, 0);
    assert.equal(valid('limits:\n  forceDeleteAfter: 0s\n').limits.forceDeleteAfterSeconds, 0);
  });

  it('heal: off by default; a rule sets it or leaves it to defaults.heal', () => {
    assert.equal(valid('{}\n').defaults.heal, false);
    assert.equal(valid('defaults: { heal: true }\n').defaults.heal, true);
    const policy = valid('rules:\n  - name: on\n    heal: true\n  - name: off\n    heal: false\n  - name: unset\n');
    assert.deepEqual(
      policy.rules.map((r) => r.heal),
      [true, false, undefined],
    );
  });

  it('keeps rule fields unset when the file leaves them out', () => {
    const policy = valid('rules:\n  - name: r\n    grace: { auth: 90s }\n    jobOverrides: { allowed: false }\n');
    assert.deepEqual(policy.rules, [{ name: 'r', grace: { auth: 90 }, jobOverrides: { allowed: false } }]);
  });

  it('reads full selectors, every action and fractional limits', () => {
    const policy = valid(`rules:
  - name: a
    action: report
    namespaceSelector:
      matchLabels: { "app.kubernetes.io/part-of": ci }
      matchExpressions:
        - { key: env, operator: NotIn, values: [prod, staging] }
        - { key: legacy, operator: DoesNotExist }
  - name: b
    action: fail
  - name: c
    action: ignore
limits:
  outage: { transientFraction: 1 }
`);
    assert.deepEqual(policy.rules[0], {
      name: 'a',
      action: 'report',
      namespaceSelector: {
        matchLabels: { 'app.kubernetes.io/part-of': 'ci' },
        matchExpressions: [
          { key: 'env', operator: 'NotIn', values: ['prod', 'staging'] },
          { key: 'legacy', operator: 'DoesNotExist' },
        ],
      },
    });
    assert.equal(policy.limits.outage.transientFraction, 1);
  });

  it('resolves YAML anchors and aliases', () => {
    const policy = valid('defaults:\n  grace: &g { permanent: 1m }\nrules:\n  - name: r\n    grace: *g\n');
    assert.deepEqual(policy.rules[0]!.grace, { permanent: 60 });
  });

  it('warns about rules after a catch-all rule', () => {
    const result = parsePolicyYaml('rules:\n  - name: everything\n    action: report\n  - name: ci\n    namespaces: ["ci-*"]\n');
    assert.ok(result.ok);
    assert.deepEqual(result.warnings, [
      { line: 4, column: 5, path: 'rules[1]', message: 'rule "ci" can never match: rule "everything" before it matches every namespace' },
    ]);
  });

  it('treats namespaces "*" with no selector as a catch-all, but not with a selector', () => {
    const shadowed = parsePolicyYaml('rules:\n  - name: a\n    namespaces: ["*"]\n  - name: b\n');
    assert.ok(shadowed.ok);
    assert.equal(shadowed.warnings.length, 1);
    const fine = parsePolicyYaml(
      'rules:\n  - name: a\n    namespaces: ["*"]\n    namespaceSelector: { matchLabels: { a: b } }\n  - name: b\n',
    );
    assert.ok(fine.ok);
    assert.deepEqual(fine.warnings, []);
  });
});

describe('parsePolicyYaml: problems with exact positions', () => {
  it('unknown key at the top level', () => {
    assert.deepEqual(only('defaults: {}\nrule:\n  - name: x\n'), {
      line: 2,
      column: 1,
      path: 'rule',
      message: 'unknown key "rule"; did you mean "rules"?',
    });
  });

  it('`namespace` in a rule suggests `namespaces`, not `name`', () => {
    assert.equal(only('rules:\n  - name: a\n    namespace: [x]\n').message, 'unknown key "namespace"; did you mean "namespaces"?');
    assert.equal(
      only('rules:\n  - name: a\n    namespaceselector: {}\n').message,
      'unknown key "namespaceselector"; did you mean "namespaceSelector"?',
    );
    assert.equal(problems('rules:\n  - nam: a\n')[0]!.message, 'unknown key "nam"; did you mean "name"?');
    assert.equal(only('defaults:\n  grace:\n    perm: 1m\n').message, 'unknown key "perm"; did you mean "permanent"?');
  });

  it('unknown key with no close match lists the allowed keys', () => {
    assert.deepEqual(only('banana: 1\n'), {
      line: 1,
      column: 1,
      path: 'banana',
      message: 'unknown key "banana"; allowed keys: defaults, rules, limits, cronJobs',
    });
  });

  it('unknown keys nested in defaults, rules and flow maps', () => {
    const list = problems(`defaults:
  grace:
    permanant: 1m
rules:
  - name: x
    graceful: {}
limits:
  outage: { minStuckPods: 3, minImagez: 2 }
`);
    assert.deepEqual(where(list), ['3:5 defaults.grace.permanant', '6:5 rules[0].graceful', '8:30 limits.outage.minImagez']);
    assert.equal(list[0]!.message, 'unknown key "permanant"; did you mean "permanent"?');
    assert.equal(list[1]!.message, 'unknown key "graceful"; did you mean "grace"?');
    assert.equal(list[2]!.message, 'unknown key "minImagez"; did you mean "minImages"?');
  });

  it('bad durations point at the value', () => {
    const list = problems('defaults:\n  grace:\n    permanent: 1d\n    auth: 30\n    unknown: -5m\n  jobOverrides: { maxGrace: 1 hour }\n');
    assert.deepEqual(where(list), [
      '3:16 defaults.grace.permanent',
      '4:11 defaults.grace.auth',
      '5:14 defaults.grace.unknown',
      '6:29 defaults.jobOverrides.maxGrace',
    ]);
    assert.match(list[0]!.message, /unknown unit "d" in duration "1d"/);
    assert.equal(list[1]!.message, 'expected a duration string such as "30s" or "1h30m", got number 30');
    assert.equal(list[2]!.message, 'duration "-5m" is negative');
    assert.match(list[3]!.message, /unknown unit " hour" in duration "1 hour"/);
  });

  it('bad forceDeleteAfter values point at the value, 0 being the only number allowed', () => {
    const list = problems('limits:\n  maxJobsPerSweep: 5\n  forceDeleteAfter: 60\n');
    assert.deepEqual(where(list), ['3:21 limits.forceDeleteAfter']);
    assert.equal(list[0]!.message, 'expected a duration string such as "60s", or 0 for never, got number 60');
    assert.match(only('limits: { forceDeleteAfter: 1d }\n').message, /unknown unit "d" in duration "1d"/);
    assert.equal(only('limits: { forceDeleteAfter: -1m }\n').message, 'duration "-1m" is negative');
    assert.equal(
      only('limits: { forceDeleteAfter: true }\n').message,
      'expected a duration string such as "60s", or 0 for never, got boolean true',
    );
    assert.equal(only('limits: { forceDeleteAfter: [60s] }\n').path, 'limits.forceDeleteAfter');
  });

  it('bad globs point at the glob', () => {
    const list = problems('rules:\n  - name: x\n    namespaces: ["ci-*", "ci-[a", "Team"]\n');
    assert.deepEqual(where(list), ['3:26 rules[0].namespaces[1]', '3:35 rules[0].namespaces[2]']);
    assert.equal(list[0]!.message, 'glob "ci-[a" has an unclosed "[" (at position 4)');
    assert.match(list[1]!.message, /namespace names are lowercase/);
  });

  it('an empty namespaces list is an error', () => {
    assert.deepEqual(only('rules:\n  - name: x\n    namespaces: []\n'), {
      line: 3,
      column: 17,
      path: 'rules[0].namespaces',
      message: 'list at least one glob, or leave "namespaces" out to match every namespace',
    });
  });

  it('bad selectors: operator, values, label key and value', () => {
    const list = problems(`rules:
  - name: x
    namespaceSelector:
      matchLabels:
        "bad key": v
        team: "no spaces allowed"
        enabled: true
      matchExpressions:
        - key: env
          operator: in
          values: [a]
        - key: env
          operator: In
        - { key: env, operator: Exists, values: [x] }
        - { key: "a/b/c", operator: Exists }
        - { key: env, operator: In, values: [a], extra: 1 }
`);
    assert.deepEqual(where(list), [
      '5:9 rules[0].namespaceSelector.matchLabels["bad key"]',
      '6:15 rules[0].namespaceSelector.matchLabels.team',
      '7:18 rules[0].namespaceSelector.matchLabels.enabled',
      '10:21 rules[0].namespaceSelector.matchExpressions[0].operator',
      '12:11 rules[0].namespaceSelector.matchExpressions[1]',
      '14:49 rules[0].namespaceSelector.matchExpressions[2].values',
      '15:18 rules[0].namespaceSelector.matchExpressions[3].key',
      '16:50 rules[0].namespaceSelector.matchExpressions[4].extra',
    ]);
    const messages = list.map((p) => p.message);
    assert.match(messages[0]!, /^invalid label key "bad key"/);
    assert.match(messages[1]!, /^invalid label value "no spaces allowed"/);
    assert.equal(messages[2], 'expected a string, got boolean true (quote it: "true")');
    assert.equal(messages[3], 'expected one of "In", "NotIn", "Exists", "DoesNotExist", got "in"');
    assert.equal(messages[4], 'operator In needs a non-empty "values" list');
    assert.equal(messages[5], 'operator Exists takes no "values"');
    assert.match(messages[6]!, /at most one "\/"/);
    assert.match(messages[7]!, /^unknown key "extra"/);
  });

  it('duplicate rule names point at the second name', () => {
    assert.deepEqual(only('rules:\n  - name: ci\n  - name: other\n  - name: ci\n    action: report\n'), {
      line: 4,
      column: 11,
      path: 'rules[2].name',
      message: 'duplicate rule name "ci" (first used by rules[0])',
    });
  });

  it('duplicate names are found even when other rules have type errors', () => {
    const list = problems('rules:\n  - name: a\n    action: 3\n  - name: a\n');
    assert.deepEqual(where(list), ['3:13 rules[0].action', '4:11 rules[1].name']);
  });

  it('a missing rule name points at the rule mapping', () => {
    assert.deepEqual(only('rules:\n  - namespaces: ["a"]\n    action: ignore\n'), {
      line: 2,
      column: 5,
      path: 'rules[0].name',
      message: 'missing required key "name"',
    });
  });

  it('bad rule names', () => {
    assert.match(only('rules:\n  - name: defaults\n').message, /"defaults" is reserved/);
    assert.match(only('rules:\n  - name: "my rule"\n').message, /must consist of alphanumerics/);
    assert.match(only('rules:\n  - name: ""\n').message, /must not be empty/);
    assert.match(only(`rules:\n  - name: ${'r'.repeat(64)}\n`).message, /longer than 63/);
  });

  it('wrong types', () => {
    const list = problems(`defaults:
  action: Fail
  jobOverrides: { allowed: "yes" }
rules:
  - name: x
    grace: 5m
    heal: "yes"
  - 42
limits:
  maxJobsPerSweep: 0
  maxJobsPerNamespace: 2.5
  outage:
    minStuckPods: "20"
    transientFraction: 1.5
`);
    assert.deepEqual(where(list), [
      '2:11 defaults.action',
      '3:28 defaults.jobOverrides.allowed',
      '6:12 rules[0].grace',
      '7:11 rules[0].heal',
      '8:5 rules[1]',
      '10:20 limits.maxJobsPerSweep',
      '11:24 limits.maxJobsPerNamespace',
      '13:19 limits.outage.minStuckPods',
      '14:24 limits.outage.transientFraction',
    ]);
    assert.deepEqual(
      list.map((p) => p.message),
      [
        'expected one of "fail", "report", "ignore", got "Fail"',
        'expected true or false, got "yes"',
        'expected a mapping, got "5m"',
        'expected true or false, got "yes"',
        'expected a mapping, got number 42',
        'expected a positive integer, got number 0',
        'expected a positive integer, got number 2.5',
        'expected a positive integer, got "20"',
        'expected a fraction greater than 0 and at most 1, got number 1.5',
      ],
    );
  });

  it('an empty value is an error at its key', () => {
    assert.deepEqual(only('defaults:\n  action:\nrules: []\n'), {
      line: 2,
      column: 3,
      path: 'defaults.action',
      message: 'expected one of "fail", "report", "ignore", got an empty value',
    });
    assert.deepEqual(where(problems('rules:\n')), ['1:1 rules']);
  });

  it('a zero transientFraction is rejected', () => {
    assert.equal(
      only('limits: { outage: { transientFraction: 0 } }\n').message,
      'expected a fraction greater than 0 and at most 1, got number 0',
    );
  });

  it('YAML syntax errors carry their position', () => {
    const problem = only('defaults:\n  action: fail\n rules: x\n');
    assert.equal(problem.path, '');
    assert.equal(problem.line, 3);
    assert.match(problem.message, /^YAML syntax error: /);
  });

  it('duplicate YAML keys are syntax errors at the second key', () => {
    const problem = only('defaults: {}\ndefaults: {}\n');
    assert.deepEqual([problem.line, problem.column], [2, 1]);
    assert.match(problem.message, /unique/);
  });

  it('several YAML documents are an error', () => {
    assert.match(only('defaults: {}\n---\nrules: []\n').message, /multiple documents/);
  });

  it('a non-mapping root is a problem', () => {
    assert.deepEqual(only('- name: x\n'), {
      line: 1,
      column: 1,
      path: '',
      message: 'the policy must be a mapping (with keys defaults, rules, limits), got a list',
    });
    assert.match(only('just a string\n').message, /must be a mapping.*got "just a string"/);
  });

  it('reports every problem at once, in document order', () => {
    const list = problems(`defaults:
  actoin: fail
  grace: { permanent: 2x }
rules:
  - name: a
    namespaces: ["[z-a]"]
  - name: a
    namespaceSelector: { matchExpressions: [{ key: k, operator: Has }] }
limits:
  maxJobsPerSweep: -1
bogus: true
`);
    assert.deepEqual(where(list), [
      '2:3 defaults.actoin',
      '3:23 defaults.grace.permanent',
      '6:18 rules[0].namespaces[0]',
      '7:11 rules[1].name',
      '8:65 rules[1].namespaceSelector.matchExpressions[0].operator',
      '10:20 limits.maxJobsPerSweep',
      '11:1 bogus',
    ]);
  });
});

describe('built-in policies', () => {
  it('built-in policies cannot be changed by accident', () => {
    assert.throws(() => {
      (FALLBACK_POLICY.rules as unknown[]).push({ name: 'x' });
    }, TypeError);
    assert.throws(() => {
      (FALLBACK_POLICY.defaults.grace as { permanent: number }).permanent = 1;
    }, TypeError);
  });
});

describe('formatPath', () => {
  it('formats keys, indices and unusual keys', () => {
    assert.equal(formatPath([]), '');
    assert.equal(formatPath(['rules', 0, 'grace', 'permanent']), 'rules[0].grace.permanent');
    assert.equal(formatPath(['matchLabels', 'app.kubernetes.io/name']), 'matchLabels["app.kubernetes.io/name"]');
    assert.equal(formatPath(['data', 'policy.yaml']), 'data["policy.yaml"]');
  });
});

describe('parsePolicyYaml: bounded time and memory', () => {
  it('refuses a policy over 1 MiB without parsing it', () => {
    const text = `rules:\n${'  - name: r\n    namespaces: ["x"]\n'.repeat(40_000)}`;
    assert.ok(Buffer.byteLength(text) > MAX_POLICY_BYTES);
    const started = performance.now();
    const p = only(text);
    assert.ok(performance.now() - started < 100, 'refused before parsing');
    assert.deepEqual([p.line, p.column, p.path], [1, 1, '']);
    assert.match(p.message, /larger than 1 MiB \(1048576 bytes\).*not parsed/);
  });

  it('counts bytes, not characters', () => {
    const text = `# ${'é'.repeat(MAX_POLICY_BYTES / 2)}\n{}\n`;
    assert.ok(text.length < MAX_POLICY_BYTES);
    assert.match(only(text).message, /larger than 1 MiB/);
  });

  it('accepts a policy just under the limit', () => {
    const text = `{}\n${'#'.repeat(MAX_POLICY_BYTES - 10)}\n`;
    assert.ok(parsePolicyYaml(text).ok);
  });

  it('stops an alias bomb with a clear problem', () => {
    const level = (name: string, prev: string) => `${name}: &${name} [${Array(9).fill(`*${prev}`).join(', ')}]\n`;
    let text = 'a: &a ["x", "x", "x", "x", "x", "x", "x", "x", "x"]\n';
    for (const [name, prev] of [
      ['b', 'a'],
      ['c', 'b'],
      ['d', 'c'],
      ['e', 'd'],
      ['f', 'e'],
      ['g', 'f'],
      ['h', 'g'],
    ] as const)
      text += level(name, prev);
    const started = performance.now();
    assert.match(only(text).message, /expands more than 100 aliases/);
    assert.ok(performance.now() - started < 2000);
  });

  it('says a runaway nesting is too deep, not that the parser ran out of stack', () => {
    const p = only(`rules: ${'['.repeat(5000)}${']'.repeat(5000)}\n`);
    assert.match(p.message, /nests too deeply/);
    assert.doesNotMatch(p.message, /call stack/);
    assert.equal(p.line, 1);
  });
});

describe('readPolicyFile', () => {
  it('reads at most one byte past the limit, so a huge file is refused in bounded memory', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ips-read-'));
    const path = join(dir, 'huge.yaml');
    writeFileSync(path, Buffer.alloc(8 * MAX_POLICY_BYTES, 0x23));
    const text = await readPolicyFile(path);
    assert.equal(text.length, MAX_POLICY_BYTES + 1);
    assert.match(only(text).message, /larger than 1 MiB/);
    writeFileSync(join(dir, 'small.yaml'), '{}\n');
    assert.equal(await readPolicyFile(join(dir, 'small.yaml')), '{}\n');
  });

  it('reads all of a file whose size is not known beforehand (a pipe)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ips-read-'));
    const fifo = join(dir, 'policy.fifo');
    execFileSync('mkfifo', [fifo]);
    const text = `# ${'x'.repeat(20_000)}\nrules: []\n`;
    const [read] = await Promise.all([readPolicyFile(fifo), writeFile(fifo, text)]);
    assert.equal(read, text);
  });
});

describe('loadPolicy from a file', () => {
  it('serves the same parsed policy while the text is unchanged, and parses an edit', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ips-load-'));
    const path = join(dir, 'policy.yaml');
    writeFileSync(path, 'rules:\n  - name: a\n    grace: { permanent: 5m }\n');
    const first = await loadPolicy(undefined, { kind: 'file', path });
    const again = await loadPolicy(undefined, { kind: 'file', path });
    assert.ok(first.ok && again.ok);
    assert.equal(again.policy, first.policy);
    writeFileSync(path, 'rules:\n  - name: b\n    grace: { permanent: 7m }\n');
    const edited = await loadPolicy(undefined, { kind: 'file', path });
    assert.ok(edited.ok);
    assert.notEqual(edited.policy, first.policy);
    assert.deepEqual(
      edited.policy.rules.map((r) => r.name),
      ['b'],
    );
  });
});
