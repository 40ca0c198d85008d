import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { formatClaimMessage as describeStuck } from '../../src/judge/claim-message.ts';
import { judge, rejudgeJob, type JudgeInput } from '../../src/judge/judge.ts';
import type { Decision } from '../../src/judge/types.ts';
import type { JobView, StuckContainer } from '../../src/model.ts';
import { FALLBACK_POLICY } from '../../src/policy/defaults.ts';
import { parsePolicyYaml } from '../../src/policy/parse.ts';
import type { Policy } from '../../src/policy/types.ts';
import { NOW, job, ownersFor, secondsAgo, stuckIn } from './judge-fixtures.ts';

function policy(yaml: string): Policy {
  const parsed = parsePolicyYaml(yaml);
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.problems));
  return parsed.policy;
}

function run(stuck: StuckContainer[], jobs: JobView[], p: Policy = policy('{}'), labels: Record<string, Record<string, string>> = {}) {
  const input: JudgeInput = {
    stuck,
    ownerOf: ownersFor(stuck, jobs),
    namespaceLabels: new Map(Object.entries(labels)),
    policy: p,
    now: NOW,
  };
  return { input, plan: judge(input) };
}

function only(decisions: Decision[]): Decision {
  assert.equal(decisions.length, 1, `expected one decision, got ${decisions.length}`);
  return decisions[0]!;
}

describe('judge: grace', () => {
  it('fails a Job stuck past the grace of its class', () => {
    const j = job('build');
    const d = only(run([stuckIn(j, { stuckSince: secondsAgo(121) })], [j]).plan.decisions);
    assert.equal(d.plan, 'fail');
    assert.equal(d.action, 'fail');
    assert.equal(d.graceSeconds, 120);
    assert.equal(d.stuckSeconds, 121);
    assert.equal(d.mechanism, 'condition');
    assert.equal(d.job, 'build');
    assert.equal(d.rule, 'defaults');
  });

  it('leaves a Job within grace alone and says how long it has waited', () => {
    const j = job('build');
    const d = only(run([stuckIn(j, { stuckSince: secondsAgo(119) })], [j]).plan.decisions);
    assert.equal(d.plan, 'skip');
    assert.match(d.detail, /within grace \(1m59s of 2m from defaults\)/);
  });

  it('fails at exactly the grace', () => {
    const j = job('build');
    assert.equal(only(run([stuckIn(j, { stuckSince: secondsAgo(120) })], [j]).plan.decisions).plan, 'fail');
  });

  for (const [pullClass, grace] of [
    ['permanent', 120],
    ['auth', 600],
    ['transient', 3600],
    ['unknown', 900],
  ] as const) {
    it(`uses the ${pullClass} grace of ${grace}s by default`, () => {
      const j = job('g');
      const before = only(run([stuckIn(j, { pullClass, stuckSince: secondsAgo(grace - 1) })], [j]).plan.decisions);
      const after = only(run([stuckIn(j, { pullClass, stuckSince: secondsAgo(grace + 1) })], [j]).plan.decisions);
      assert.equal(before.plan, 'skip');
      assert.equal(after.plan, 'fail');
    });
  }

  it('judges a Job by its most overdue container, one decision per Job', () => {
    const j = job('multi');
    const transientLong = stuckIn(j, { container: 'a', pullClass: 'transient', stuckSince: secondsAgo(1000) });
    const permanentShort = stuckIn(j, { container: 'b', pullClass: 'permanent', stuckSince: secondsAgo(300) });
    const d = only(run([transientLong, permanentShort], [j]).plan.decisions);
    assert.equal(d.plan, 'fail');
    assert.equal(d.container, 'b');
    assert.equal(d.stuckPods, 2);
  });

  it('uses the grace override annotation, clamped to maxGrace', () => {
    const short = job('short', { annotations: { 'imagepull-sweeper/grace': '45s' } });
    const long = job('long', { annotations: { 'imagepull-sweeper/grace': '5h' } });
    const { plan } = run(
      [stuckIn(short, { pullClass: 'transient', stuckSince: secondsAgo(50) }), stuckIn(long, { stuckSince: secondsAgo(3599) })],
      [short, long],
    );
    const [l, s] = plan.decisions;
    assert.equal(s!.job, 'short');
    assert.equal(s!.plan, 'fail');
    assert.equal(s!.graceSeconds, 45);
    assert.deepEqual(s!.graceSource, { kind: 'annotation', rule: undefined, clamped: false });
    assert.match(s!.detail, /stuck past grace \(45s from annotation\)/);
    assert.match(describeStuck(s!), /rule defaults, grace 45s from annotation\)/);
    assert.equal(l!.job, 'long');
    assert.equal(l!.plan, 'skip');
    assert.equal(l!.graceSeconds, 3600);
    assert.deepEqual(l!.graceSource, { kind: 'annotation', rule: undefined, clamped: true });
    assert.match(l!.detail, /of 1h from annotation, clamped to maxGrace\)/);
    assert.match(describeStuck(l!), /grace 1h from annotation, clamped to maxGrace\)/);
    assert.ok(
      l!.warnings.some((w) => /clamp/i.test(w)),
      `expected a clamp warning, got ${JSON.stringify(l!.warnings)}`,
    );
  });

  it('ignores the grace annotation with a warning when overrides are not allowed', () => {
    const j = job('j', { annotations: { 'imagepull-sweeper/grace': '10m' } });
    const p = policy('defaults:\n  jobOverrides: { allowed: false }\n');
    const d = only(run([stuckIn(j, { stuckSince: secondsAgo(130) })], [j], p).plan.decisions);
    assert.equal(d.plan, 'fail');
    assert.equal(d.graceSeconds, 120);
    assert.equal(d.graceSource?.kind, 'defaults');
    assert.ok(d.warnings.length > 0);
  });
});

describe('judge: never touches what it must not', () => {
  const cases: [string, Partial<JobView>, RegExp][] = [
    ['finished', { finished: true }, /finished/],
    ['being deleted', { deleting: true }, /being deleted/],
    ['already annotated', { annotations: { 'imagepull-sweeper/failed-at': '2026-11-29T11:00:00Z' } }, /already failed/],
    ['ignored by annotation', { annotations: { 'imagepull-sweeper/ignore': 'true' } }, /ignore=true/],
    ['managed by another controller', { managedBy: 'kueue.x-k8s.io/multikueue' }, /managed by kueue/],
    ['suspended', { suspended: true }, /suspended/],
  ];
  for (const [name, over, detail] of cases) {
    it(`skips a Job that is ${name}`, () => {
      const j = job('x', over);
      const d = only(run([stuckIn(j, { stuckSince: secondsAgo(99_999) })], [j]).plan.decisions);
      assert.equal(d.plan, 'skip');
      assert.match(d.detail, detail);
      assert.equal(d.mechanism, undefined);
    });
  }

  it('fails safe on an ignore annotation that is neither "true" nor "false": ignored, and says why', () => {
    const j = job('x', { annotations: { 'imagepull-sweeper/ignore': 'yes' } });
    const d = only(run([stuckIn(j, { stuckSince: secondsAgo(999) })], [j]).plan.decisions);
    assert.equal(d.plan, 'skip');
    assert.match(d.detail, /not "true" or "false"/);
  });

  it('acts on a Job annotated ignore=false', () => {
    const j = job('x', { annotations: { 'imagepull-sweeper/ignore': 'false' } });
    assert.equal(only(run([stuckIn(j, { stuckSince: secondsAgo(999) })], [j]).plan.decisions).plan, 'fail');
  });

  it('marks the ignore annotation as action ignore in the audit', () => {
    const j = job('x', { annotations: { 'imagepull-sweeper/ignore': 'true' } });
    assert.equal(only(run([stuckIn(j)], [j]).plan.decisions).action, 'ignore');
  });

  it('accepts the built-in Job controller as managedBy', () => {
    const j = job('x', { managedBy: 'kubernetes.io/job-controller' });
    assert.equal(only(run([stuckIn(j)], [j]).plan.decisions).plan, 'fail');
  });

  it('reports bare pods and pods of other controllers but never acts on them', () => {
    const bare = stuckIn(undefined, { stuckSince: secondsAgo(99_999) });
    const rs = stuckIn(undefined, {
      stuckSince: secondsAgo(99_999),
      controller: { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-1', uid: 'rs', controller: true },
    });
    const { plan } = run([bare, rs], []);
    assert.equal(plan.decisions.length, 2);
    for (const d of plan.decisions) {
      assert.equal(d.plan, 'skip');
      assert.equal(d.job, undefined);
    }
    assert.ok(plan.decisions.some((d) => /ReplicaSet web-1, not a Job/.test(d.detail)));
    assert.ok(plan.decisions.some((d) => /no controller/.test(d.detail)));
  });

  it('records a Job that could not be read as an error, and a gone Job as skipped', () => {
    const stuckA = stuckIn(undefined, { controller: { apiVersion: 'batch/v1', kind: 'Job', name: 'a', uid: 'ua', controller: true } });
    const stuckB = stuckIn(undefined, { controller: { apiVersion: 'batch/v1', kind: 'Job', name: 'b', uid: 'ub', controller: true } });
    const input: JudgeInput = {
      stuck: [stuckA, stuckB],
      ownerOf: (uid) =>
        uid === stuckA.podUid
          ? { kind: 'unreadable', owner: stuckA.controller, detail: 'could not read Job a' }
          : { kind: 'job-gone', owner: stuckB.controller!, detail: 'Job b no longer exists' },
      namespaceLabels: new Map(),
      policy: policy('{}'),
      now: NOW,
    };
    const [a, b] = judge(input).decisions;
    assert.equal(a!.plan, 'error');
    assert.equal(a!.job, 'a');
    assert.equal(b!.plan, 'skip');
    assert.equal(b!.job, 'b');
  });

  it('the built-in policy ignores kube-system', () => {
    const j = job('sys', { namespace: 'kube-system' });
    const d = only(run([stuckIn(j, { stuckSince: secondsAgo(99_999) })], [j], FALLBACK_POLICY).plan.decisions);
    assert.equal(d.plan, 'skip');
    assert.equal(d.action, 'ignore');
  });
});

describe('judge: rules', () => {
  const p = policy(`
defaults: { action: fail }
rules:
  - name: ci
    namespaces: ["ci-*"]
    grace: { permanent: 30s }
  - name: batch
    namespaceSelector: { matchLabels: { team: batch } }
    action: report
  - name: system
    namespaces: ["kube-system"]
    action: ignore
`);

  it('uses the first matching rule and falls back to defaults for unset classes', () => {
    const j = job('a', { namespace: 'ci-7' });
    const permanent = only(run([stuckIn(j, { stuckSince: secondsAgo(31) })], [j], p).plan.decisions);
    assert.equal(permanent.rule, 'ci');
    assert.equal(permanent.graceSeconds, 30);
    assert.deepEqual(permanent.graceSource, { kind: 'rule', rule: 'ci', clamped: false });
    assert.match(describeStuck(permanent), /rule ci, grace 30s from rule ci\)/);
    assert.equal(permanent.plan, 'fail');
    const auth = only(run([stuckIn(j, { pullClass: 'auth', stuckSince: secondsAgo(31) })], [j], p).plan.decisions);
    assert.equal(auth.graceSeconds, 600);
    assert.equal(auth.graceSource?.kind, 'defaults');
    assert.match(auth.detail, /of 10m from defaults\)/);
    assert.equal(auth.plan, 'skip');
  });

  it('matches rules by namespace labels', () => {
    const j = job('b', { namespace: 'payroll' });
    const d = only(run([stuckIn(j, { stuckSince: secondsAgo(999) })], [j], p, { payroll: { team: 'batch' } }).plan.decisions);
    assert.equal(d.rule, 'batch');
    assert.equal(d.plan, 'report');
    assert.equal(d.action, 'report');
  });

  it('falls through to defaults when no rule matches', () => {
    const j = job('c', { namespace: 'payroll' });
    const d = only(run([stuckIn(j, { stuckSince: secondsAgo(999) })], [j], p, { payroll: { team: 'web' } }).plan.decisions);
    assert.equal(d.rule, 'defaults');
    assert.equal(d.plan, 'fail');
  });

  it('skips namespaces whose rule says ignore', () => {
    const j = job('d', { namespace: 'kube-system' });
    const d = only(run([stuckIn(j, { stuckSince: secondsAgo(99_999) })], [j], p).plan.decisions);
    assert.equal(d.plan, 'skip');
    assert.match(d.detail, /rule system: action ignore/);
  });

  it('notes an earlier report in the detail so the Event is not repeated', () => {
    const j = job('e', { namespace: 'payroll', annotations: { 'imagepull-sweeper/reported-at': '2026-11-29T11:00:00Z' } });
    const d = only(run([stuckIn(j, { stuckSince: secondsAgo(999) })], [j], p, { payroll: { team: 'batch' } }).plan.decisions);
    assert.equal(d.plan, 'report');
    assert.match(d.detail, /already emitted/);
  });
});

describe('judge: fail mechanism', () => {
  it('fails a Job by its own condition, whatever its pod failure policy', () => {
    const j = job('plain');
    assert.equal(only(run([stuckIn(j)], [j]).plan.decisions).mechanism, 'condition');
  });

  it('keeps the pod failure policy rule for the fallback when the Job has a FailJob rule on a pod condition', () => {
    const j = job('pfp', { podFailureRules: [{ action: 'FailJob', onPodConditions: [{ type: 'ImagePullStuck', status: 'True' }] }] });
    const d = only(run([stuckIn(j)], [j]).plan.decisions);
    assert.equal(d.mechanism, 'condition');
    assert.equal(d.failJobCondition, 'ImagePullStuck');
  });

  it('keeps no rule for the fallback when an earlier rule would swallow the deleted pod (the fallback is the deadline)', () => {
    const j = job('shadowed', {
      podFailureRules: [
        { action: 'Ignore', onExitCodes: { operator: 'In', values: [137] } },
        { action: 'FailJob', onPodConditions: [{ type: 'ImagePullStuck', status: 'True' }] },
      ],
    });
    const d = only(run([stuckIn(j)], [j]).plan.decisions);
    assert.equal(d.mechanism, 'condition');
    assert.equal(d.failJobCondition, undefined);
    assert.equal(d.detail, 'stuck past grace (2m from defaults)');
  });
});

describe('judge: limits', () => {
  it('fails at most maxJobsPerSweep, oldest stuck first, and defers the rest', () => {
    const p = policy('limits: { maxJobsPerSweep: 2, maxJobsPerNamespace: 10 }');
    const jobs = [job('young'), job('oldest'), job('middle'), job('old')];
    const ages = { young: 200, oldest: 900, middle: 400, old: 600 } as Record<string, number>;
    const stuck = jobs.map((j) => stuckIn(j, { stuckSince: secondsAgo(ages[j.name]!) }));
    const { plan } = run(stuck, jobs, p);
    const byJob = Object.fromEntries(plan.decisions.map((d) => [d.job, d]));
    assert.equal(byJob.oldest!.plan, 'fail');
    assert.equal(byJob.old!.plan, 'fail');
    assert.equal(byJob.middle!.plan, 'defer');
    assert.equal(byJob.young!.plan, 'defer');
    assert.match(byJob.young!.detail, /maxJobsPerSweep \(2\)/);
    assert.equal(byJob.young!.mechanism, undefined);
  });

  it('bounds each namespace separately', () => {
    const p = policy('limits: { maxJobsPerSweep: 10, maxJobsPerNamespace: 1 }');
    const jobs = [job('a1', { namespace: 'a' }), job('a2', { namespace: 'a' }), job('b1', { namespace: 'b' })];
    const stuck = [
      stuckIn(jobs[0], { stuckSince: secondsAgo(500) }),
      stuckIn(jobs[1], { stuckSince: secondsAgo(900) }),
      stuckIn(jobs[2], { stuckSince: secondsAgo(300) }),
    ];
    const byJob = Object.fromEntries(run(stuck, jobs, p).plan.decisions.map((d) => [d.job, d.plan]));
    assert.deepEqual(byJob, { a1: 'defer', a2: 'fail', b1: 'fail' });
  });

  it('does not count report-only or skipped Jobs against the limits', () => {
    const p = policy(`
limits: { maxJobsPerSweep: 1 }
rules: [{ name: r, namespaces: ["rep"], action: report }]`);
    const jobs = [job('r1', { namespace: 'rep' }), job('r2', { namespace: 'rep' }), job('f1'), job('f2', { finished: true })];
    const stuck = jobs.map((j) => stuckIn(j, { stuckSince: secondsAgo(999) }));
    const byJob = Object.fromEntries(run(stuck, jobs, p).plan.decisions.map((d) => [d.job, d.plan]));
    assert.deepEqual(byJob, { r1: 'report', r2: 'report', f1: 'fail', f2: 'skip' });
  });
});

describe('judge: outage breaker', () => {
  const p = policy('limits: { outage: { minStuckPods: 4, minImages: 2, transientFraction: 0.5 } }');

  function outageScenario(transientCount: number, images: number, total: number) {
    const jobs = Array.from({ length: total }, (_, i) => job(`j${i}`));
    const stuck = jobs.map((j, i) =>
      stuckIn(j, {
        pullClass: i < transientCount ? 'transient' : 'permanent',
        image: `img-${i % images}`,
        stuckSince: secondsAgo(99_999),
      }),
    );
    return run(stuck, jobs, p).plan;
  }

  it('reports transient Jobs instead of failing them when the registry looks down', () => {
    const plan = outageScenario(3, 2, 4);
    assert.equal(plan.outage.tripped, true);
    assert.equal(plan.outage.stuckPods, 4);
    const transient = plan.decisions.filter((d) => d.pullClass === 'transient');
    assert.equal(transient.length, 3);
    for (const d of transient) {
      assert.equal(d.plan, 'report');
      assert.equal(d.action, 'report');
      assert.match(d.detail, /outage breaker/);
    }
    assert.equal(plan.decisions.find((d) => d.pullClass === 'permanent')!.plan, 'fail');
  });

  it('stays closed below minStuckPods, minImages or transientFraction', () => {
    assert.equal(outageScenario(3, 2, 3).outage.tripped, false);
    assert.equal(outageScenario(4, 1, 4).outage.tripped, false);
    assert.equal(outageScenario(1, 2, 4).outage.tripped, false);
    for (const d of outageScenario(1, 2, 4).decisions) assert.equal(d.plan, 'fail');
  });

  it('counts pods, not containers', () => {
    const j = job('one');
    const stuck = Array.from({ length: 6 }, (_, i) =>
      stuckIn(j, { pod: 'same-pod', podUid: 'same', container: `c${i}`, image: `img-${i}`, pullClass: 'transient' }),
    );
    const plan = run(stuck, [j], p).plan;
    assert.equal(plan.outage.stuckPods, 1);
    assert.equal(plan.outage.tripped, false);
  });
});

describe('rejudgeJob', () => {
  it('re-decides from the fresh Job: a Job finished meanwhile is skipped', () => {
    const j = job('race');
    const { input, plan } = run([stuckIn(j)], [j]);
    const again = rejudgeJob(input, plan.decisions[0]!, { ...j, resourceVersion: '101', finished: true });
    assert.equal(again.plan, 'skip');
    assert.match(again.detail, /finished/);
  });

  it('keeps failing a Job whose change does not matter', () => {
    const j = job('race');
    const { input, plan } = run([stuckIn(j)], [j]);
    const again = rejudgeJob(input, plan.decisions[0]!, { ...j, resourceVersion: '101', annotations: { unrelated: 'x' } });
    assert.equal(again.plan, 'fail');
  });

  it('skips a Job that was replaced by another with the same name', () => {
    const j = job('race');
    const { input, plan } = run([stuckIn(j)], [j]);
    assert.equal(rejudgeJob(input, plan.decisions[0]!, { ...j, uid: 'other' }).plan, 'skip');
  });
});
