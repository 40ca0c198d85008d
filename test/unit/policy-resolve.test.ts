import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ANNOTATION_PREFIX, ANNOTATIONS, ignoredByAnnotation } from '../../src/policy/annotations.ts';
import { toPolicy } from '../../src/policy/convert.ts';
import { FALLBACK_POLICY } from '../../src/policy/defaults.ts';
import { parsePolicyYaml } from '../../src/policy/parse.ts';
import {
  describeGraceSource,
  explainRules,
  graceForJob,
  matchRule,
  policyNeedsNamespaceLabels,
  resolveForNamespace,
} from '../../src/policy/resolve.ts';
import type { EffectivePolicy, Policy } from '../../src/policy/types.ts';

function policy(text: string): Policy {
  const result = parsePolicyYaml(text);
  if (!result.ok) assert.fail(JSON.stringify(result.problems));
  return result.policy;
}

const POLICY = policy(`defaults:
  action: fail
  grace: { permanent: 2m, auth: 10m, transient: 1h, unknown: 15m }
  jobOverrides: { allowed: true, maxGrace: 1h }
rules:
  - name: ci
    namespaces: ["ci-*", "tenant-*"]
    namespaceSelector: { matchLabels: { team: batch } }
    grace: { permanent: 30s, unknown: 5m }
  - name: ci-other
    namespaces: ["ci-*"]
    action: report
    jobOverrides: { maxGrace: 10m }
  - name: prod
    namespaceSelector:
      matchExpressions: [{ key: env, operator: In, values: [prod] }]
    action: ignore
    jobOverrides: { allowed: false }
  - name: system
    namespaces: ["kube-system"]
    action: ignore
`);

describe('resolveForNamespace', () => {
  it('first matching rule wins, and all of its matchers must match', () => {
    assert.equal(resolveForNamespace(POLICY, { name: 'ci-1', labels: { team: 'batch' } }).rule, 'ci');
    assert.equal(resolveForNamespace(POLICY, { name: 'ci-1', labels: { team: 'web' } }).rule, 'ci-other');
    assert.equal(resolveForNamespace(POLICY, { name: 'tenant-a', labels: { team: 'web' } }).rule, 'defaults');
    assert.equal(resolveForNamespace(POLICY, { name: 'tenant-a', labels: { team: 'batch', env: 'prod' } }).rule, 'ci');
    assert.equal(resolveForNamespace(POLICY, { name: 'shop', labels: { env: 'prod' } }).rule, 'prod');
    assert.equal(resolveForNamespace(POLICY, { name: 'kube-system' }).rule, 'system');
    assert.equal(resolveForNamespace(POLICY, { name: 'kube-system-x' }).rule, 'defaults');
  });

  it('missing labels count as no labels', () => {
    assert.equal(resolveForNamespace(POLICY, { name: 'ci-1' }).rule, 'ci-other');
    assert.equal(resolveForNamespace(POLICY, { name: 'shop' }).rule, 'defaults');
  });

  it('unset grace classes fall back to defaults, with sources', () => {
    const effective = resolveForNamespace(POLICY, { name: 'ci-1', labels: { team: 'batch' } });
    assert.deepEqual(effective, {
      rule: 'ci',
      action: 'fail',
      grace: { permanent: 30, auth: 600, transient: 3600, unknown: 300, stalled: 1800 },
      jobOverrides: { allowed: true, maxGraceSeconds: 3600 },
      heal: false,
      sources: {
        action: 'defaults',
        grace: { permanent: 'ci', auth: 'defaults', transient: 'defaults', unknown: 'ci', stalled: 'defaults' },
        jobOverrides: 'defaults',
        jobOverridesDetail: { allowed: 'defaults', maxGraceSeconds: 'defaults' },
        heal: 'defaults',
      },
    } satisfies EffectivePolicy);
  });

  it("heal: the rule's own value, else defaults.heal, with its source", () => {
    const base = { ...POLICY, defaults: { ...POLICY.defaults, heal: true } };
    const on = resolveForNamespace(base, { name: 'shop' });
    assert.deepEqual([on.heal, on.sources.heal], [true, 'defaults']);
    const ruled = { ...base, rules: [{ name: 'no-heal', namespaces: ['shop'], heal: false }, ...POLICY.rules] };
    const off = resolveForNamespace(ruled, { name: 'shop' });
    assert.deepEqual([off.heal, off.sources.heal], [false, 'no-heal']);
    const inherits = resolveForNamespace({ ...ruled, rules: [{ name: 'plain', namespaces: ['shop'] }] }, { name: 'shop' });
    assert.deepEqual([inherits.heal, inherits.sources.heal], [true, 'defaults']);
  });

  it('a rule setting one jobOverrides field inherits the other', () => {
    const effective = resolveForNamespace(POLICY, { name: 'ci-2' });
    assert.equal(effective.action, 'report');
    assert.equal(effective.sources.action, 'ci-other');
    assert.deepEqual(effective.jobOverrides, { allowed: true, maxGraceSeconds: 600 });
    assert.equal(effective.sources.jobOverrides, 'ci-other');
    assert.deepEqual(effective.sources.jobOverridesDetail, { allowed: 'defaults', maxGraceSeconds: 'ci-other' });
  });

  it('no matching rule: everything from defaults', () => {
    const effective = resolveForNamespace(POLICY, { name: 'web' });
    assert.equal(effective.rule, 'defaults');
    assert.deepEqual(effective.grace, POLICY.defaults.grace);
    assert.deepEqual(Object.values(effective.sources.grace), ['defaults', 'defaults', 'defaults', 'defaults', 'defaults']);
  });

  it('returns copies, not the policy objects', () => {
    const effective = resolveForNamespace(POLICY, { name: 'web' });
    effective.grace.permanent = 1;
    assert.equal(POLICY.defaults.grace.permanent, 120);
  });

  it('a rule with no matchers matches every namespace', () => {
    const p = policy('rules:\n  - name: everything\n    action: report\n');
    assert.equal(resolveForNamespace(p, { name: 'anything' }).rule, 'everything');
  });

  it('an empty namespaceSelector matches every namespace', () => {
    const p = policy('rules:\n  - name: any\n    namespaceSelector: {}\n');
    assert.equal(resolveForNamespace(p, { name: 'x' }).rule, 'any');
  });

  it('globs with character classes and NotIn selectors', () => {
    const p = policy(`rules:
  - name: team-ab
    namespaces: ["team-[ab]-*"]
    namespaceSelector: { matchExpressions: [{ key: env, operator: NotIn, values: [prod] }] }
`);
    assert.equal(resolveForNamespace(p, { name: 'team-a-x' }).rule, 'team-ab');
    assert.equal(resolveForNamespace(p, { name: 'team-a-x', labels: { env: 'prod' } }).rule, 'defaults');
    assert.equal(resolveForNamespace(p, { name: 'team-c-x' }).rule, 'defaults');
  });

  it('explains every rule', () => {
    assert.deepEqual(explainRules(POLICY, { name: 'ci-1', labels: { team: 'web' } }), [
      { rule: 'ci', matched: false, namespaces: true, namespaceSelector: false },
      { rule: 'ci-other', matched: true, namespaces: true, namespaceSelector: undefined },
      { rule: 'prod', matched: false, namespaces: undefined, namespaceSelector: false },
      { rule: 'system', matched: false, namespaces: false, namespaceSelector: undefined },
    ]);
    assert.deepEqual(matchRule({ name: 'all' }, { name: 'x' }), {
      rule: 'all',
      matched: true,
      namespaces: undefined,
      namespaceSelector: undefined,
    });
  });
});

describe('policyNeedsNamespaceLabels', () => {
  it('is true only when some rule has a namespaceSelector', () => {
    assert.equal(policyNeedsNamespaceLabels(POLICY), true);
    assert.equal(policyNeedsNamespaceLabels(FALLBACK_POLICY), false);
    assert.equal(policyNeedsNamespaceLabels(toPolicy({})), false);
  });
});

describe('fallback policy', () => {
  for (const ns of ['kube-system', 'kube-public', 'kube-node-lease']) {
    it(`ignores ${ns}`, () => {
      const effective = resolveForNamespace(FALLBACK_POLICY, { name: ns });
      assert.equal(effective.action, 'ignore');
      assert.equal(effective.rule, 'builtin-system-namespaces');
    });
  }
  it('fails other namespaces on the default grace', () => {
    const effective = resolveForNamespace(FALLBACK_POLICY, { name: 'default' });
    assert.equal(effective.action, 'fail');
    assert.equal(effective.rule, 'defaults');
    assert.deepEqual(effective.grace, { permanent: 120, auth: 600, transient: 3600, unknown: 900, stalled: 1800 });
  });
});

describe('graceForJob', () => {
  const ci = resolveForNamespace(POLICY, { name: 'ci-1', labels: { team: 'batch' } });
  const ciOther = resolveForNamespace(POLICY, { name: 'ci-2' });
  const prod = resolveForNamespace(POLICY, { name: 'shop', labels: { env: 'prod' } });

  it('without the annotation: the namespace grace, no warning', () => {
    const job = graceForJob(ci, { other: 'x' });
    assert.deepEqual({ ...job, sources: undefined }, { grace: ci.grace, sources: undefined, override: undefined, warnings: [] });
  });

  it('says per class where the grace came from: the rule, or the defaults it left unset', () => {
    const job = graceForJob(ci, {});
    assert.deepEqual(job.sources.permanent, { kind: 'rule', rule: 'ci', clamped: false });
    assert.deepEqual(job.sources.auth, { kind: 'defaults', rule: undefined, clamped: false });
    assert.equal(describeGraceSource(job.sources.permanent), 'rule ci');
    assert.equal(describeGraceSource(job.sources.auth), 'defaults');
  });

  it('says "annotation" when the annotation set it, and "clamped to maxGrace" when it was', () => {
    const plain = graceForJob(ci, { [ANNOTATIONS.grace]: '45s' });
    assert.ok(Object.values(plain.sources).every((s) => s.kind === 'annotation' && !s.clamped));
    assert.equal(describeGraceSource(plain.sources.permanent), 'annotation');
    const clamped = graceForJob(ciOther, { [ANNOTATIONS.grace]: '2h' });
    assert.ok(Object.values(clamped.sources).every((s) => s.kind === 'annotation' && s.clamped));
    assert.equal(describeGraceSource(clamped.sources.unknown), 'annotation, clamped to maxGrace');
    const refused = graceForJob(prod, { [ANNOTATIONS.grace]: '45s' });
    assert.equal(refused.sources.permanent.kind, 'defaults');
  });

  it('sets one grace for every class', () => {
    const job = graceForJob(ci, { [ANNOTATIONS.grace]: '45s' });
    assert.deepEqual(
      { ...job, sources: undefined },
      {
        grace: { permanent: 45, auth: 45, transient: 45, unknown: 45, stalled: 45 },
        sources: undefined,
        override: { requested: 45, applied: 45, clamped: false },
        warnings: [],
      },
    );
  });

  it('may lengthen up to maxGrace exactly', () => {
    const job = graceForJob(ci, { [ANNOTATIONS.grace]: '1h' });
    assert.deepEqual(job.override, { requested: 3600, applied: 3600, clamped: false });
  });

  it('clamps a longer value to maxGrace, with a warning', () => {
    const job = graceForJob(ciOther, { [ANNOTATIONS.grace]: '2h' });
    assert.deepEqual(job.grace, { permanent: 600, auth: 600, transient: 600, unknown: 600, stalled: 600 });
    assert.deepEqual(job.override, { requested: 7200, applied: 600, clamped: true });
    assert.deepEqual(job.warnings, ['annotation imagepull-sweeper/grace="2h" clamped to 10m (jobOverrides.maxGrace in rule "ci-other")']);
  });

  it('is ignored with a warning when overrides are not allowed', () => {
    const job = graceForJob(prod, { [ANNOTATIONS.grace]: '45s' });
    assert.deepEqual(job.grace, prod.grace);
    assert.equal(job.override, undefined);
    assert.deepEqual(job.warnings, [
      'annotation imagepull-sweeper/grace="45s" ignored: per-Job grace is not allowed (jobOverrides.allowed is false in rule "prod")',
    ]);
  });

  it('names the defaults when they disallow overrides', () => {
    const p = policy('defaults:\n  jobOverrides: { allowed: false }\n');
    const job = graceForJob(resolveForNamespace(p, { name: 'x' }), { [ANNOTATIONS.grace]: '1m' });
    assert.match(job.warnings[0]!, /jobOverrides.allowed is false in defaults\)$/);
  });

  for (const value of ['soon', '', '1d', '-5m', '30']) {
    it(`ignores the unparseable value ${JSON.stringify(value)} with a warning naming it`, () => {
      const job = graceForJob(ci, { [ANNOTATIONS.grace]: value });
      assert.deepEqual(job.grace, ci.grace);
      assert.equal(job.override, undefined);
      assert.equal(job.warnings.length, 1);
      assert.ok(job.warnings[0]!.startsWith(`annotation imagepull-sweeper/grace=${JSON.stringify(value)} ignored: `), job.warnings[0]!);
    });
  }

  it('tolerates surrounding whitespace', () => {
    assert.equal(graceForJob(ci, { [ANNOTATIONS.grace]: ' 90s ' }).override?.applied, 90);
  });

  it('does not change the effective policy', () => {
    graceForJob(ci, { [ANNOTATIONS.grace]: '45s' }).grace.auth = 1;
    assert.equal(ci.grace.auth, 600);
  });
});

describe('annotations', () => {
  it('names every annotation of the contract under the prefix', () => {
    assert.equal(ANNOTATION_PREFIX, 'imagepull-sweeper/');
    assert.deepEqual(
      { ...ANNOTATIONS },
      {
        ignore: 'imagepull-sweeper/ignore',
        grace: 'imagepull-sweeper/grace',
        failedAt: 'imagepull-sweeper/failed-at',
        reason: 'imagepull-sweeper/reason',
        message: 'imagepull-sweeper/message',
        reportedAt: 'imagepull-sweeper/reported-at',
        suspendedAt: 'imagepull-sweeper/suspended-at',
        cronFailedInARow: 'imagepull-sweeper/failed-in-a-row',
        cronFailedImage: 'imagepull-sweeper/failed-image',
        cronFailedJobs: 'imagepull-sweeper/failed-jobs',
        cronLastSuccess: 'imagepull-sweeper/last-success-seen',
        cronCountedAt: 'imagepull-sweeper/counted-at',
        jobSetSpent: 'imagepull-sweeper/spent',
        claim: 'imagepull-sweeper/claim',
        stuck: 'imagepull-sweeper/stuck',
        healedAt: 'imagepull-sweeper/healed-at',
        healed: 'imagepull-sweeper/healed',
        outageHeld: 'imagepull-sweeper/outage-held',
      },
    );
  });

  it('ignore: "true" ignores, "false" or absent does not, anything else ignores with a warning', () => {
    assert.deepEqual(ignoredByAnnotation({}), { ignored: false, warning: undefined });
    assert.deepEqual(ignoredByAnnotation({ [ANNOTATIONS.ignore]: 'true' }), { ignored: true, warning: undefined });
    assert.deepEqual(ignoredByAnnotation({ [ANNOTATIONS.ignore]: 'True' }), { ignored: true, warning: undefined });
    assert.deepEqual(ignoredByAnnotation({ [ANNOTATIONS.ignore]: 'false' }), { ignored: false, warning: undefined });
    const odd = ignoredByAnnotation({ [ANNOTATIONS.ignore]: 'yes' });
    assert.equal(odd.ignored, true);
    assert.match(odd.warning ?? '', /"yes" is not "true" or "false"/);
  });
});
