import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { describePodsFound } from '../../src/act/retry-job.ts';
import { judge } from '../../src/judge/judge.ts';
import { judgePending } from '../../src/judge/pending.ts';
import type { JobView } from '../../src/model.ts';
import { parsePolicyYaml } from '../../src/policy/parse.ts';
import { job, NOW, ownersFor, secondsAgo, stuckIn } from './judge-fixtures.ts';

const MESSAGE =
  'regular container main of pod build-7-abcde waited 3m on image reg.example/app:nope (class permanent, rule ci, grace 2m): ImagePullBackOff: not found';

function claimed(name: string, failedSecondsAgo: number, over: Partial<JobView> = {}): JobView {
  return job(name, {
    annotations: {
      'imagepull-sweeper/failed-at': secondsAgo(failedSecondsAgo)
        .toISOString()
        .replace(/\.\d{3}Z$/, 'Z'),
      'imagepull-sweeper/reason': 'ImagePullBackOff',
      'imagepull-sweeper/message': MESSAGE,
      'imagepull-sweeper/claim': 'c-1',
    },
    ...over,
  });
}

const policy = (() => {
  const r = parsePolicyYaml('{}');
  if (!r.ok) throw new Error('bad test policy');
  return r.policy;
})();

describe('judgePending: the confirmation rule', () => {
  it('waits while confirmWithin has not passed, and counts the Job as awaiting Failed', () => {
    const j = claimed('waiting', 60);
    const p = judgePending({ labelled: [j], decisions: [], confirmWithinSeconds: 300, now: NOW });
    assert.equal(p.awaiting, 1);
    assert.equal(p.decisions.length, 1);
    assert.equal(p.decisions[0]!.plan, 'skip');
    assert.match(p.decisions[0]!.detail, /waiting for the Job controller \(1m of confirmWithin 5m\)/);
  });

  it('retries by its own condition once confirmWithin has passed, even with no stuck pod left', () => {
    const p = judgePending({ labelled: [claimed('overdue', 301)], decisions: [], confirmWithinSeconds: 300, now: NOW });
    const d = p.decisions[0]!;
    assert.equal(d.plan, 'retry');
    assert.equal(d.mechanism, 'condition');
    // The line says what the claim recorded.
    assert.equal(d.pod, 'build-7-abcde');
    assert.equal(d.image, 'reg.example/app:nope');
    assert.equal(d.pullClass, 'permanent');
    assert.equal(d.rule, 'ci');
  });

  it('an unreadable failed-at is overdue', () => {
    const j = claimed('garbled', 0);
    j.annotations['imagepull-sweeper/failed-at'] = 'yesterday';
    assert.equal(judgePending({ labelled: [j], decisions: [], confirmWithinSeconds: 300, now: NOW }).decisions[0]!.plan, 'retry');
  });

  it('replaces the "already failed" line of a Job whose pod is still stuck (the pod the kubelet replaced)', () => {
    const j = claimed('replaced-pod', 400);
    const stuck = [stuckIn(j, { pod: 'replaced-pod-new' })];
    const judged = judge({ stuck, ownerOf: ownersFor(stuck, [j]), namespaceLabels: new Map(), policy, now: NOW });
    assert.match(judged.decisions[0]!.detail, /already failed/);
    // Not labelled (e.g. failed by an older version): found through its stuck pod all the same.
    const p = judgePending({ labelled: [], decisions: judged.decisions, confirmWithinSeconds: 300, now: NOW });
    assert.equal(p.decisions.length, 1);
    assert.equal(p.decisions[0]!.plan, 'retry');
    assert.equal(p.decisions[0]!.pod, 'replaced-pod-new');
  });

  it('hands finished labelled Jobs over for settling, and leaves Jobs being deleted alone', () => {
    const done = claimed('done', 30, { finished: true, failed: true });
    const deleting = claimed('deleting', 900, { deleting: true });
    const p = judgePending({ labelled: [done, deleting], decisions: [], confirmWithinSeconds: 300, now: NOW });
    assert.deepEqual(
      p.finished.map((j) => j.name),
      ['done'],
    );
    assert.equal(p.decisions.length, 0);
    assert.equal(p.awaiting, 0);
  });

  it('keeps every other decision as it was', () => {
    const other = job('fresh');
    const stuck = [stuckIn(other, { stuckSince: secondsAgo(999) })];
    const judged = judge({ stuck, ownerOf: ownersFor(stuck, [other]), namespaceLabels: new Map(), policy, now: NOW });
    const p = judgePending({ labelled: [claimed('waiting', 10)], decisions: judged.decisions, confirmWithinSeconds: 300, now: NOW });
    assert.deepEqual(
      p.decisions.map((d) => [d.job, d.plan]),
      [
        ['fresh', 'fail'],
        ['waiting', 'skip'],
      ],
    );
  });
});

describe('describePodsFound: what a retry reports', () => {
  const pod = (o: { deletedSecondsAgo?: number; node?: string; phase?: string; waiting?: string }): V1Pod => ({
    metadata: {
      name: 'p',
      ...(o.deletedSecondsAgo !== undefined
        ? { deletionTimestamp: new Date(secondsAgo(o.deletedSecondsAgo).getTime() + 30_000), deletionGracePeriodSeconds: 30 }
        : {}),
    },
    spec: { containers: [], nodeName: o.node },
    status: {
      phase: o.phase ?? 'Pending',
      containerStatuses: o.waiting
        ? [{ name: 'main', image: '', imageID: '', ready: false, restartCount: 0, state: { waiting: { reason: o.waiting } } }]
        : [],
    },
  });

  it('says how long pods have been terminating, and where', () => {
    const text = describePodsFound([pod({ deletedSecondsAgo: 180, node: 'n1' }), pod({ deletedSecondsAgo: 60, node: 'n1' })], NOW);
    assert.equal(text, '2 pod(s) terminating for 3m on node(s) n1');
  });

  it('counts the other pods by phase, with their waiting reasons', () => {
    assert.equal(
      describePodsFound([pod({ waiting: 'ImagePullBackOff' }), pod({ phase: 'Running' })], NOW),
      '1 pod(s) Pending (ImagePullBackOff); 1 pod(s) Running',
    );
    assert.equal(describePodsFound([], NOW), 'no pods left');
  });
});
