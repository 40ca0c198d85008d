// Owners rules (docs/policy.md "Owners other than a Job"): which pods without a Job a rule opts in,
// how they are judged, and how the policy refuses owners that recreate pods for ever. Pure.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { passedPodDeadline, stuckPodEvent } from '../../src/act/fail-owned-pod.ts';
import { findStuckContainers } from '../../src/classify/index.ts';
import { formatClaimMessage } from '../../src/judge/claim-message.ts';
import { judge } from '../../src/judge/judge.ts';
import type { OwnerRef, PodOwner, StuckContainer } from '../../src/model.ts';
import { ownerKindOf } from '../../src/policy/owners.ts';
import { parsePolicyYaml } from '../../src/policy/parse.ts';
import { explainRules, resolveForNamespace } from '../../src/policy/resolve.ts';
import type { Policy } from '../../src/policy/types.ts';
import { job, NOW, ownersFor, secondsAgo, stuckIn } from './judge-fixtures.ts';
import { recordedPod } from './real-node.ts';

const SPARK: OwnerRef = {
  apiVersion: 'sparkoperator.k8s.io/v1beta2',
  kind: 'SparkApplication',
  name: 'etl',
  uid: 'u-spark',
  controller: true,
};
const ARGO: OwnerRef = { apiVersion: 'argoproj.io/v1alpha1', kind: 'Workflow', name: 'wf', uid: 'u-wf', controller: true };
const RS: OwnerRef = { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-1', uid: 'u-rs', controller: true };

function policy(yaml: string): Policy {
  const parsed = parsePolicyYaml(yaml);
  if (!parsed.ok) assert.fail(JSON.stringify(parsed.problems));
  return parsed.policy;
}

const SPARK_POLICY = policy(`
rules:
  - name: spark
    namespaces: ["spark-*"]
    owners: ["SparkApplication.sparkoperator.k8s.io", "Pod"]
    grace: { permanent: 1m }
  - name: ci
    namespaces: ["spark-*"]
    grace: { permanent: 30m }
`);

function podOf(controller: OwnerRef | undefined, over: Partial<StuckContainer> = {}): StuckContainer {
  return { ...stuckIn(undefined, { namespace: 'spark-a', stuckSince: secondsAgo(600), ...over }), controller };
}

function decide(stuck: StuckContainer[], p: Policy = SPARK_POLICY, ownerOf?: (uid: string) => PodOwner) {
  const owner = ownerOf ?? ((uid: string) => ({ kind: 'not-a-job' as const, owner: stuck.find((c) => c.podUid === uid)?.controller }));
  return judge({ stuck, ownerOf: owner, namespaceLabels: new Map(), policy: p, now: NOW }).decisions;
}

describe('owners rules: which pods they opt in', () => {
  it('fails a SparkApplication driver stuck past the rule grace, by its own deadline', () => {
    const [d] = decide([podOf(SPARK)]);
    assert.equal(d!.plan, 'fail');
    assert.equal(d!.mechanism, 'podActiveDeadlineSeconds');
    assert.equal(d!.rule, 'spark');
    assert.equal(d!.graceSeconds, 60);
    assert.deepEqual(d!.owners, ['SparkApplication/etl']);
    assert.equal(d!.job, undefined);
    assert.match(d!.detail, /pod of SparkApplication etl, by its own deadline/);
    assert.match(formatClaimMessage(d!), /owners SparkApplication\/etl/);
  });

  it('a bare pod is `Pod`', () => {
    const [d] = decide([podOf(undefined)]);
    assert.equal(d!.plan, 'fail');
    assert.deepEqual(d!.owners, []);
  });

  it('an owner no rule lists is only reported, as before', () => {
    const [d] = decide([podOf(ARGO)]);
    assert.equal(d!.plan, 'skip');
    assert.match(d!.detail, /owner is Workflow wf, not a Job: never acted on/);
    assert.deepEqual(d!.owners, ['Workflow/wf']);
  });

  it('outside the rule namespaces, not at all', () => {
    const [d] = decide([podOf(SPARK, { namespace: 'other' })]);
    assert.equal(d!.plan, 'skip');
  });

  it("rules with owners never apply to a Job's pods", () => {
    const j = job('build', { namespace: 'spark-a' });
    const stuck = [stuckIn(j, { stuckSince: secondsAgo(600) })];
    const [d] = decide(stuck, SPARK_POLICY, ownersFor(stuck, [j]));
    assert.equal(d!.rule, 'ci');
    assert.equal(d!.plan, 'skip');
    assert.match(d!.detail, /within grace/);
  });

  it("the pod's own ignore and grace annotations count as a Job's do", () => {
    const [ignored] = decide([podOf(SPARK, { podAnnotations: { 'imagepull-sweeper/ignore': 'true' } })]);
    assert.equal(ignored!.action, 'ignore');
    assert.equal(ignored!.plan, 'skip');
    const [longer] = decide([podOf(SPARK, { podAnnotations: { 'imagepull-sweeper/grace': '20m' } })]);
    assert.equal(longer!.plan, 'skip');
    assert.equal(longer!.graceSource?.kind, 'annotation');
  });

  it('a pod already failed by the sweeper is left alone; report-only rules report', () => {
    const [done] = decide([podOf(SPARK, { podAnnotations: { 'imagepull-sweeper/failed-at': '2026-11-29T11:00:00Z' } })]);
    assert.equal(done!.plan, 'skip');
    assert.match(done!.detail, /already failed/);
    const reporting = policy('rules: [{ name: spark, owners: ["SparkApplication.sparkoperator.k8s.io"], action: report }]');
    const [r] = decide([podOf(SPARK)], reporting);
    assert.equal(r!.plan, 'report');
  });

  it('the owner kind of a controller reference', () => {
    assert.equal(ownerKindOf(SPARK), 'SparkApplication.sparkoperator.k8s.io');
    assert.equal(ownerKindOf(RS), 'ReplicaSet.apps');
    assert.equal(ownerKindOf({ apiVersion: 'v1', kind: 'ReplicationController' }), 'ReplicationController');
    assert.equal(ownerKindOf(undefined), 'Pod');
  });
});

describe('owners in the policy', () => {
  for (const [entry, problem] of [
    ['Deployment.apps', /recreates its pods for ever/],
    ['ReplicaSet.apps', /recreates its pods for ever/],
    ['StatefulSet.apps', /recreates its pods for ever/],
    ['DaemonSet.apps', /recreates its pods for ever/],
    ['ReplicationController', /recreates its pods for ever/],
    ['Deployment', /recreates its pods for ever/],
    ['Job.batch', /follow the rules without "owners"/],
    ['sparkapplication', /is not Kind\.group/],
    ['SparkApplication', /is not Kind\.group/],
  ] as const) {
    it(`refuses ${entry}, located`, () => {
      const parsed = parsePolicyYaml(`rules:\n  - name: r\n    owners: ["Pod", "${entry}"]\n`);
      assert.equal(parsed.ok, false);
      const [p] = parsed.ok ? [] : parsed.problems;
      assert.equal(p!.path, 'rules[0].owners[1]');
      assert.deepEqual([p!.line, p!.column], [3, 21]);
      assert.match(p!.message, problem);
    });
  }

  it('explain shows an owners rule as not applying to Jobs, and resolves it for its owners', () => {
    const ns = { name: 'spark-a' };
    const rules = explainRules(SPARK_POLICY, ns);
    assert.deepEqual(
      rules.map((r) => [r.rule, r.matched, r.owners]),
      [
        ['spark', false, ['SparkApplication.sparkoperator.k8s.io', 'Pod']],
        ['ci', true, undefined],
      ],
    );
    assert.equal(resolveForNamespace(SPARK_POLICY, ns).rule, 'ci');
    assert.equal(resolveForNamespace(SPARK_POLICY, ns, 'Pod').rule, 'spark');
  });

  it('warns of an owners rule shadowed by an earlier catch-all for the same owners, not by a Job rule', () => {
    const parsed = parsePolicyYaml(
      'rules:\n  - name: all-jobs\n  - name: pods\n    owners: [Pod]\n  - name: more-pods\n    namespaces: ["a-*"]\n    owners: [Pod]\n',
    );
    assert.ok(parsed.ok);
    assert.deepEqual(
      parsed.warnings.map((w) => w.message),
      ['rule "more-pods" can never match: rule "pods" before it matches every namespace for the pods of Pod'],
    );
  });
});

describe('the pod mechanism', () => {
  const pod = (startTime: string | undefined, deadline?: number): V1Pod => ({
    spec: { containers: [], ...(deadline ? { activeDeadlineSeconds: deadline } : {}) },
    status: startTime ? { startTime: new Date(startTime) } : {},
  });
  it('a deadline that has passed, counted from the pod start, never raised', () => {
    assert.equal(passedPodDeadline(pod('2026-11-29T11:50:00Z'), NOW), 600);
    assert.equal(passedPodDeadline(pod('2026-11-29T11:50:00Z', 3600), NOW), 600);
    assert.equal(passedPodDeadline(pod('2026-11-29T11:50:00Z', 30), NOW), 30);
    assert.equal(passedPodDeadline(pod(undefined), NOW), 1);
    assert.equal(passedPodDeadline(pod('2026-11-29T12:00:00Z'), NOW), 1);
  });

  it('the Event regards the pod, action FailPod or Report, and is named for one write per claim', () => {
    const stuck = findStuckContainers(recordedPod('repo-missing', 'ImagePullBackOff'));
    const [d] = decide(stuck.map((c) => ({ ...c, namespace: 'spark-a', controller: SPARK })));
    const reporter = { instance: 't', now: NOW };
    const event = stuckPodEvent(d!, 'FailPod', reporter, 'claim-1');
    assert.equal(event.regarding?.kind, 'Pod');
    assert.equal(event.regarding?.uid, d!.podUid);
    assert.equal(event.action, 'FailPod');
    assert.equal(event.reason, 'ImagePullStuck');
    assert.equal(event.metadata?.name, stuckPodEvent(d!, 'FailPod', reporter, 'claim-1').metadata?.name);
    assert.notEqual(event.metadata?.name, stuckPodEvent(d!, 'Report', reporter, 'claim-1').metadata?.name);
    assert.match(event.note ?? '', /^Failing pod: /);
  });
});
