// The force-delete writes (act/force-delete.ts, and the retry that carries them) against the
// scripted gateway: which calls are made, with what, and what each answer leads to. What the real
// API server answers is proven in test/e2e/node-force-delete.test.ts and test/e2e/guard.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { EventsV1Event, V1Pod } from '@kubernetes/client-node';
import { act, type ActOptions } from '../../src/act/act.ts';
import { forceDeletePods } from '../../src/act/force-delete.ts';
import { judgePending } from '../../src/judge/pending.ts';
import type { Decision } from '../../src/judge/types.ts';
import { dryRunGateway } from '../../src/kube/dry-run-gateway.ts';
import { withRetries } from '../../src/kube/retrying.ts';
import { wordResult } from '../../src/report/wording.ts';
import { apiError, scriptedGateway } from '../support/scripted-gateway.ts';
import { job, NOW, secondsAgo } from './judge-fixtures.ts';
import { REAL_NODE } from './real-node.ts';

const CLAIM_MESSAGE =
  'regular container main of pod hung-abcde waited 5s on image 127.0.0.1:1/team/app:1 (class stalled, rule defaults, grace 5s): ContainerCreating: ';

/** A pending Job failed `failedAgo` s ago (given up on by the Job controller, or not) whose one pod, recorded stalled on the real node, is terminating. */
function pendingDecision(failedAgo: number, givenUp = true): Decision {
  const j = job('hung', {
    annotations: {
      'imagepull-sweeper/failed-at': secondsAgo(failedAgo)
        .toISOString()
        .replace(/\.\d{3}Z$/, 'Z'),
      'imagepull-sweeper/reason': 'ContainerCreating',
      'imagepull-sweeper/message': CLAIM_MESSAGE,
      'imagepull-sweeper/claim': 'c-1',
    },
    failed: givenUp,
    finished: givenUp,
    failing: givenUp,
  });
  const pod: V1Pod = structuredClone(REAL_NODE.stalled.find((c) => c.id === 'stalled')!.pods.ContainerCreating!);
  pod.metadata = {
    ...pod.metadata,
    name: 'hung-abcde',
    uid: 'uid-pod-1',
    resourceVersion: 'rv-judged',
    deletionTimestamp: new Date(secondsAgo(failedAgo - 2).getTime() + 30_000),
    deletionGracePeriodSeconds: 30,
    ownerReferences: [{ apiVersion: 'batch/v1', kind: 'Job', name: 'hung', uid: j.uid, controller: true }],
  };
  const p = judgePending({
    labelled: [j],
    decisions: [],
    confirmWithinSeconds: 300,
    forceDeleteAfterSeconds: 60,
    podsByJob: new Map([[j.uid, [pod]]]),
    now: NOW,
  });
  return p.decisions[0]!;
}

const options = (): ActOptions => ({
  concurrency: 2,
  now: NOW,
  instance: 'unit',
  claim: 'c-2',
  rejudge: () => assert.fail('no rejudge expected'),
});

describe('forceDeletePods', () => {
  it('deletes each planned pod with grace period 0 and its uid, then writes its Event', async () => {
    const d = pendingDecision(70);
    const { gateway, calls } = scriptedGateway();
    const r = await forceDeletePods(gateway, d, { instance: 'unit', now: NOW });
    assert.deepEqual(r, {
      done: [{ kind: 'force-deleted', pod: 'pod hung-abcde (terminating 1m8s, no container ever started)' }],
      error: undefined,
    });
    assert.deepEqual(calls[0], { method: 'deletePod', args: ['ci-a', 'hung-abcde', 'uid-pod-1', 'rv-judged', { gracePeriodSeconds: 0 }] });
    assert.equal(calls[1]!.method, 'createEvent');
    const event = calls[1]!.args[1] as EventsV1Event;
    assert.equal(event.action, 'FailJob');
    assert.equal(event.reason, 'ImagePullStuck');
    assert.equal(event.type, 'Warning');
    assert.deepEqual(
      [event.regarding?.kind, event.regarding?.name, event.related?.kind, event.related?.name, event.related?.uid],
      ['Job', 'hung', 'Pod', 'hung-abcde', 'uid-pod-1'],
    );
    assert.equal(event.note, `Failing Job: force-deleted pod hung-abcde (terminating 1m8s, no container ever started); ${CLAIM_MESSAGE}`);
    assert.equal(calls.length, 2);
  });

  it('names the Event by Job and pod, so a repeat is the same Event (409 counts as written)', async () => {
    const a = scriptedGateway();
    const b = scriptedGateway({ createEvent: [apiError(409, 'AlreadyExists', 'exists')] });
    await forceDeletePods(a.gateway, pendingDecision(70), { instance: 'unit', now: NOW });
    const r = await forceDeletePods(b.gateway, pendingDecision(90), { instance: 'other', now: new Date(NOW.getTime() + 20_000) });
    assert.equal((a.calls[1]!.args[1] as EventsV1Event).metadata?.name, (b.calls[1]!.args[1] as EventsV1Event).metadata?.name);
    assert.equal(r.error, undefined);
  });

  it('a pod already gone (404) is done; one changed since it was read (409: uid or resourceVersion) is left; no Event for either', async () => {
    const gone = scriptedGateway({ deletePod: [apiError(404, 'NotFound', 'pods "hung-abcde" not found')] });
    assert.deepEqual(await forceDeletePods(gone.gateway, pendingDecision(70), { instance: 'unit', now: NOW }), {
      done: [{ kind: 'found', text: 'pod hung-abcde already gone' }],
      error: undefined,
    });
    const other = scriptedGateway({
      deletePod: [apiError(409, 'Conflict', 'Precondition failed: UID in precondition: uid-pod-1, UID in object meta: uid-new')],
    });
    const r = await forceDeletePods(other.gateway, pendingDecision(70), { instance: 'unit', now: NOW });
    assert.deepEqual(r, {
      done: [{ kind: 'found', text: 'pod hung-abcde changed since it was read (another pod, or a new status), left for the next sweep' }],
      error: undefined,
    });
    assert.deepEqual(
      [...gone.calls, ...other.calls].map((c) => c.method),
      ['deletePod', 'deletePod'],
    );
  });

  it('through the retry layer: a first-attempt 404 is "already gone" with no Event; a 404 after a lost answer is our delete', async () => {
    const noWait = { sleep: async () => undefined };
    const gone = scriptedGateway({ deletePod: [apiError(404, 'NotFound', 'pods "hung-abcde" not found')] });
    assert.deepEqual(await forceDeletePods(withRetries(gone.gateway, noWait), pendingDecision(70), { instance: 'unit', now: NOW }), {
      done: [{ kind: 'found', text: 'pod hung-abcde already gone' }],
      error: undefined,
    });
    assert.deepEqual(gone.methods(), ['deletePod']);
    const dropped = Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
    const lost = scriptedGateway({ deletePod: [dropped, apiError(404, 'NotFound', 'pods "hung-abcde" not found')] });
    const r = await forceDeletePods(withRetries(lost.gateway, noWait), pendingDecision(70), { instance: 'unit', now: NOW });
    assert.deepEqual(r.done, [{ kind: 'force-deleted', pod: 'pod hung-abcde (terminating 1m8s, no container ever started)' }]);
    assert.deepEqual(lost.methods(), ['deletePod', 'deletePod', 'createEvent']);
  });

  it('reports a refused delete (e.g. the guard) or a lost Event as an error', async () => {
    const refused = scriptedGateway({ deletePod: [apiError(403, 'Forbidden', 'imagepull-sweeper guard: pods: ...')] });
    const r = await forceDeletePods(refused.gateway, pendingDecision(70), { instance: 'unit', now: NOW });
    assert.deepEqual(r.done, []);
    assert.match(r.error ?? '', /^could not force-delete pod hung-abcde: Forbidden: imagepull-sweeper guard/);
    const noEvent = scriptedGateway({ createEvent: [apiError(500, 'InternalError', 'etcd down')] });
    const e = await forceDeletePods(noEvent.gateway, pendingDecision(70), { instance: 'unit', now: NOW });
    assert.equal(e.done.length, 1);
    assert.match(e.error ?? '', /^pod hung-abcde force-deleted, but its Event was not written: etcd down/);
  });
});

describe('act: a pending Job with a pod to force-delete', () => {
  it('before confirmWithin: only the force-delete and its Event, audited retried', async () => {
    const { gateway, calls } = scriptedGateway();
    const [r] = await act(gateway, [pendingDecision(70)], options());
    assert.equal(r!.outcome, 'retried');
    assert.equal(r!.error, undefined);
    assert.deepEqual(
      calls.map((c) => c.method),
      ['deletePod', 'createEvent'],
    );
    assert.match(
      wordResult(r!, false).decision.detail,
      /; pods still terminating after forceDeleteAfter 1m; force-deleted pod hung-abcde \(terminating 1m8s, no container ever started\)$/,
    );
  });

  it('after confirmWithin, a Job given up on: the force-delete, what it found and the FailJob Event, nothing re-sent', async () => {
    const { gateway, calls } = scriptedGateway();
    const [r] = await act(gateway, [pendingDecision(400)], options());
    assert.equal(r!.outcome, 'retried');
    assert.deepEqual(
      calls.map((c) => c.method),
      ['deletePod', 'createEvent', 'listPods', 'createEvent'],
    );
    assert.match(
      wordResult(r!, false).decision.detail,
      /the Job controller has given up on it and waits for its pods to end; force-deleted pod hung-abcde \(terminating 6m38s, no container ever started\); found no pods left$/,
    );
  });

  it('a Job the controller has not given up on (failed by a fallback): the force-delete, its Event, then its FailureTarget', async () => {
    const { gateway, calls } = scriptedGateway();
    const [r] = await act(gateway, [pendingDecision(70, false)], options());
    assert.equal(r!.outcome, 'retried');
    assert.deepEqual(
      calls.map((c) => c.method),
      ['deletePod', 'createEvent', 'listPods', 'patchJobStatus', 'createEvent'],
    );
    const patch = calls[3]!.args[2] as { metadata: object; status: { conditions: { type: string; reason: string; message: string }[] } };
    assert.deepEqual(patch.metadata, { resourceVersion: '100' });
    const [condition] = patch.status.conditions;
    assert.deepEqual([condition!.type, condition!.reason], ['FailureTarget', 'ImagePullStuck']);
    assert.equal(condition!.message, `imagepull-sweeper: ${CLAIM_MESSAGE}`);
  });

  it('...and where that status write is refused, its deadline again', async () => {
    const { gateway, calls } = scriptedGateway({ patchJobStatus: [apiError(403, 'Forbidden', 'cannot patch resource "jobs/status"')] });
    const [r] = await act(gateway, [pendingDecision(70, false)], options());
    assert.deepEqual([r!.outcome, r!.decision.mechanism], ['retried', 'activeDeadlineSeconds']);
    assert.deepEqual(
      calls.map((c) => c.method),
      ['deletePod', 'createEvent', 'listPods', 'patchJobStatus', 'mergePatchJob', 'createEvent'],
    );
    assert.deepEqual(calls[4]!.args, ['ci-a', 'hung', { spec: { activeDeadlineSeconds: 3600 } }]);
    assert.match(r!.decision.fallback!, /^the status write was refused \(Forbidden: /);
  });

  it('a dry run writes nothing and says would', async () => {
    const { gateway, calls } = scriptedGateway();
    const [live] = await act(dryRunGateway(gateway), [pendingDecision(70)], options());
    const r = wordResult(live!, true);
    assert.equal(r.outcome, 'would-retry');
    assert.deepEqual(calls, []);
    assert.match(r.decision.detail, /; would force-delete pod hung-abcde \(terminating 1m8s, no container ever started\)$/);
  });

  it('a failed delete makes the line an error-carrying retry (exit 1), and nothing else is skipped', async () => {
    const { gateway } = scriptedGateway({ deletePod: [apiError(503, 'ServiceUnavailable', 'later')] });
    const [r] = await act(gateway, [pendingDecision(70)], options());
    assert.equal(r!.outcome, 'retried');
    assert.match(r!.error ?? '', /could not force-delete pod hung-abcde: ServiceUnavailable: later/);
  });
});
