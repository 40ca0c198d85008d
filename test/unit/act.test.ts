// The write path (src/act/) against the scripted gateway: every branch of failing, reporting and
// settling a Job, one second per run. The same paths against the real API server, with real
// conflicts and lost answers, are test/e2e/sweep.test.ts, reliability.test.ts and faults.test.ts.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { EventsV1Event, V1Job, V1Pod } from '@kubernetes/client-node';
import { act, type ActOptions } from '../../src/act/act.ts';
import { settleFinished } from '../../src/act/settle.ts';
import { hintFor } from '../../src/judge/hint.ts';
import type { Decision } from '../../src/judge/types.ts';
import { dryRunGateway, type RecordedWrites } from '../../src/kube/dry-run-gateway.ts';
import { withRetries } from '../../src/kube/retrying.ts';
import { auditLine } from '../../src/report/audit.ts';
import { wordResult } from '../../src/report/wording.ts';
import type { JobView } from '../../src/model.ts';
import { ANNOTATIONS, LABELS } from '../../src/policy/annotations.ts';
import { apiError, lostAnswer, scriptedGateway } from '../support/scripted-gateway.ts';
import { defaultDecision, job, NOW, secondsAgo } from './judge-fixtures.ts';

const PFP = { podFailureRules: [{ action: 'FailJob', onPodConditions: [{ type: 'ImagePullStuck', status: 'True' }] }] };

function decisionFor(name: string, over: Partial<JobView> = {}): Decision {
  const d = defaultDecision(name, 600, over);
  assert.equal(d.plan, 'fail');
  return d;
}

const options = (over: Partial<ActOptions> = {}): ActOptions => ({
  concurrency: 1,
  now: NOW,
  instance: 'unit',
  claim: 'claim-1',
  rejudge: () => assert.fail('no rejudge expected'),
  ...over,
});

/** The Job as a read returns it, carrying the given annotations. */
const jobObject = (d: Decision, annotations: Record<string, string> = {}): V1Job => ({
  metadata: { name: d.job, namespace: d.namespace, uid: d.jobView!.uid, resourceVersion: '101', annotations },
  spec: { template: { spec: { containers: [{ name: 'main' }] } } },
});

/** The stuck pod as a read returns it: `marked` with the FailJob condition, or recovered (Running). */
const podObject = (d: Decision, state: 'marked' | 'recovered', resourceVersion = '8'): V1Pod => ({
  metadata: { name: d.pod, namespace: d.namespace, uid: d.podUid, resourceVersion },
  status: {
    phase: state === 'recovered' ? 'Running' : 'Pending',
    conditions: state === 'marked' ? [{ type: 'ImagePullStuck', status: 'True' }] : [],
  },
});

/** The status write refused, as RBAC without `patch jobs/status` (or a policy engine) answers it. */
const REFUSED = apiError(403, 'Forbidden', 'jobs.batch "a" is forbidden: cannot patch resource "jobs/status"');

interface ClaimPatch {
  metadata: { resourceVersion: string; annotations: Record<string, string>; labels: Record<string, string> };
  status?: { conditions: { type: string; status: string; reason: string; message: string }[] };
  spec?: object;
}

describe('failing a Job by its own condition', () => {
  it('claims it and adds its FailureTarget in one conditional status patch, then writes its Event', async () => {
    const d = decisionFor('a');
    assert.equal(d.mechanism, 'condition');
    const { gateway, calls, methods } = scriptedGateway();
    const [r] = await act(gateway, [d], options());
    assert.deepEqual([r!.outcome, r!.error], ['failed', undefined]);
    assert.deepEqual(methods(), ['patchJobStatus', 'createEvent']);
    const patch = calls[0]!.args[2] as ClaimPatch;
    assert.equal(patch.metadata.resourceVersion, '100');
    assert.equal(patch.metadata.annotations[ANNOTATIONS.claim], 'claim-1');
    assert.equal(patch.metadata.labels[LABELS.pending], 'true');
    assert.equal(patch.spec, undefined, 'no spec change');
    const [condition] = patch.status!.conditions;
    assert.deepEqual([condition!.type, condition!.status, condition!.reason], ['FailureTarget', 'True', 'ImagePullStuck']);
    assert.match(condition!.message, /^imagepull-sweeper: regular container main of pod a-pod waited 10m on image /);
    assert.ok(condition!.message.includes(hintFor(d)), condition!.message);
    assert.equal((calls[1]!.args[1] as EventsV1Event).action, 'FailJob');
  });

  it('on a claim conflict reads the Job again and acts on the new judgement', async () => {
    const d = decisionFor('a');
    const { gateway, calls, methods } = scriptedGateway({
      patchJobStatus: [apiError(409, 'Conflict', 'the object has been modified')],
      readJob: [jobObject(d)],
    });
    const rejudged: JobView[] = [];
    const [r] = await act(gateway, [d], options({ rejudge: (prev, fresh) => (rejudged.push(fresh), { ...prev, jobView: fresh }) }));
    assert.equal(r!.outcome, 'failed');
    assert.deepEqual(methods(), ['patchJobStatus', 'readJob', 'patchJobStatus', 'createEvent']);
    assert.equal(rejudged[0]!.resourceVersion, '101');
    assert.equal((calls[2]!.args[2] as ClaimPatch).metadata.resourceVersion, '101');
  });

  it('a conflict whose re-read finds the Job gone is a skip', async () => {
    const { gateway, methods } = scriptedGateway({ patchJobStatus: [apiError(409, 'Conflict', 'modified')] });
    const [r] = await act(gateway, [decisionFor('a')], options());
    assert.deepEqual([r!.outcome, r!.decision.detail], ['skipped', 'Job no longer exists']);
    assert.deepEqual(methods(), ['patchJobStatus', 'readJob']);
  });

  it('gives up after maxConflicts re-reads, as an error', async () => {
    const d = decisionFor('a');
    const conflict = apiError(409, 'Conflict', 'modified');
    const { gateway, methods } = scriptedGateway({ patchJobStatus: [conflict, conflict], readJob: [jobObject(d)] });
    const [r] = await act(gateway, [d], options({ maxConflicts: 1, rejudge: (prev) => prev }));
    assert.deepEqual([r!.outcome, r!.error], ['error', 'Conflict: modified']);
    assert.deepEqual(methods(), ['patchJobStatus', 'readJob', 'patchJobStatus']);
  });

  it('a claim whose answer was lost, read back carrying this claim, counts as written', async () => {
    const d = decisionFor('a');
    const { gateway, methods } = scriptedGateway({
      patchJobStatus: [lostAnswer()],
      readJob: [jobObject(d, { [ANNOTATIONS.claim]: 'claim-1' })],
    });
    const [r] = await act(gateway, [d], options());
    assert.deepEqual([r!.outcome, r!.error], ['failed', undefined]);
    assert.deepEqual(methods(), ['patchJobStatus', 'readJob', 'createEvent']);
  });

  it('a claim whose answer was lost, read back without it, is an error and nothing more is written (no fallback)', async () => {
    const d = decisionFor('a');
    const { gateway, methods } = scriptedGateway({ patchJobStatus: [lostAnswer()], readJob: [jobObject(d)] });
    const [r] = await act(gateway, [d], options());
    assert.deepEqual([r!.outcome, r!.error], ['error', 'ECONNRESET: socket hang up']);
    assert.deepEqual(methods(), ['patchJobStatus', 'readJob']);
  });

  it('a Job gone at the claim (404) is stood down: no mechanism, no pod condition', async () => {
    const d = decisionFor('a', PFP);
    assert.equal(d.failJobCondition, 'ImagePullStuck');
    const { gateway } = scriptedGateway({ patchJobStatus: [apiError(404, 'NotFound', 'jobs "a" not found')] });
    const [r] = await act(gateway, [d], options());
    assert.deepEqual([r!.outcome, r!.decision.plan, r!.decision.detail], ['skipped', 'skip', 'Job or pod no longer exists']);
    assert.equal(r!.decision.mechanism, undefined);
    assert.equal(r!.decision.failJobCondition, undefined);
  });

  it('a lost Event is the decision error; the Job stays failed', async () => {
    const { gateway } = scriptedGateway({ createEvent: [apiError(500, 'InternalError', 'etcd down')] });
    const [r] = await act(gateway, [decisionFor('a')], options());
    assert.deepEqual([r!.outcome, r!.error], ['failed', 'Job failed, but its Event was not written: etcd down']);
  });
});

describe('where the status write is refused: failing a Job by its deadline', () => {
  it('claims and fails it in one conditional patch, says why in the claim, the audit and a warning, then the Event', async () => {
    const d = decisionFor('a');
    const { gateway, calls, methods } = scriptedGateway({ patchJobStatus: [REFUSED] });
    const [r] = await act(gateway, [d], options());
    assert.deepEqual([r!.outcome, r!.error], ['failed', undefined]);
    assert.deepEqual(methods(), ['patchJobStatus', 'mergePatchJob', 'createEvent']);
    const patch = calls[1]!.args[2] as ClaimPatch;
    assert.equal(patch.metadata.resourceVersion, '100');
    assert.deepEqual(patch.spec, { activeDeadlineSeconds: 3600 });
    assert.equal(r!.decision.mechanism, 'activeDeadlineSeconds');
    assert.match(r!.decision.fallback!, /^the status write was refused \(Forbidden: .*jobs\/status/);
    assert.match(r!.decision.warnings.at(-1)!, /refused, so the Job was failed by activeDeadlineSeconds .*grant patch on jobs\/status/);
    const message = patch.metadata.annotations[ANNOTATIONS.message]!;
    assert.match(message, /Failed by its deadline \(activeDeadlineSeconds\), not by its own condition: the status write was refused/);
    assert.ok((calls[2]!.args[1] as EventsV1Event).note!.includes('Failed by its deadline'));
    const line = auditLine('s', r!, false);
    assert.match(line.mechanism!, /^activeDeadlineSeconds \(the status write was refused \(Forbidden: /);
  });

  it('a fallback claim that conflicts is judged again and claimed by the fallback at once: the refused write is not sent again', async () => {
    const d = decisionFor('a');
    const { gateway, calls, methods } = scriptedGateway({
      patchJobStatus: [REFUSED],
      mergePatchJob: [apiError(409, 'Conflict', 'the object has been modified')],
      readJob: [jobObject(d)],
    });
    // As judge/rejudgeJob does: the fresh judgement chooses the Job's own condition again.
    const [r] = await act(gateway, [d], options({ rejudge: (_prev, fresh) => ({ ...d, jobView: fresh }) }));
    assert.deepEqual([r!.outcome, r!.error], ['failed', undefined]);
    assert.deepEqual(methods(), ['patchJobStatus', 'mergePatchJob', 'readJob', 'mergePatchJob', 'createEvent']);
    assert.equal((calls[3]!.args[2] as ClaimPatch).metadata.resourceVersion, '101');
    assert.equal(r!.decision.mechanism, 'activeDeadlineSeconds');
    assert.match(r!.decision.fallback!, /^the status write was refused \(Forbidden: /);
  });

  it('400 and 422 from admission are refusals too; a 503 (the answer may come later) is not', async () => {
    for (const refusal of [apiError(400, 'BadRequest', 'denied by a webhook'), apiError(422, 'Invalid', 'denied')]) {
      const { gateway, methods } = scriptedGateway({ patchJobStatus: [refusal] });
      const [r] = await act(gateway, [decisionFor('a')], options());
      assert.deepEqual([r!.outcome, r!.decision.mechanism], ['failed', 'activeDeadlineSeconds']);
      assert.deepEqual(methods(), ['patchJobStatus', 'mergePatchJob', 'createEvent']);
    }
    const { gateway, methods } = scriptedGateway({ patchJobStatus: [apiError(503, 'ServiceUnavailable', 'later')] });
    const [r] = await act(gateway, [decisionFor('a')], options());
    assert.deepEqual([r!.outcome, r!.error, r!.refused], ['error', 'ServiceUnavailable: later', undefined]);
    assert.deepEqual(methods(), ['patchJobStatus', 'readJob']);
  });

  it('a claim refused by the fallback too is an error marked refused (the watch tries it again more slowly than a fault)', async () => {
    const { gateway } = scriptedGateway({ patchJobStatus: [REFUSED], mergePatchJob: [apiError(403, 'Forbidden', 'denied')] });
    const [r] = await act(gateway, [decisionFor('a')], options());
    assert.deepEqual([r!.outcome, r!.refused], ['error', true]);
  });

  it('a refusal after an attempt that may still land (a timeout first) is no refusal: no fallback, the claim read back', async () => {
    const timedOut = Object.assign(new Error('no answer within the request timeout'), { name: 'TimeoutError' });
    const d = decisionFor('a');
    const forbidden = apiError(403, 'Forbidden', 'a webhook, reachable again');
    const { gateway, methods } = scriptedGateway({ patchJobStatus: [timedOut, forbidden], readJob: [jobObject(d)] });
    const [r] = await act(withRetries(gateway, { sleep: async () => undefined }), [d], options());
    assert.equal(r!.outcome, 'error');
    assert.deepEqual(methods(), ['patchJobStatus', 'patchJobStatus', 'readJob']);
  });

  it('a Job whose pod failure policy has an earlier rule in the way says so in why it fell back to the deadline', async () => {
    const d = decisionFor('a', {
      podFailureRules: [{ action: 'Ignore', onExitCodes: { operator: 'In', values: [137] } }, ...PFP.podFailureRules],
    });
    const { gateway } = scriptedGateway({ patchJobStatus: [REFUSED] });
    const [r] = await act(gateway, [d], options());
    assert.equal(r!.decision.mechanism, 'activeDeadlineSeconds');
    assert.match(
      r!.decision.fallback!,
      /; podFailurePolicy rule 1 \(Ignore on exit code In \[137\]\) would match the deleted pod before rule 2/,
    );
  });
});

describe('where the status write is refused: failing a Job by its pod failure policy', () => {
  it('claims, marks the pod, deletes it with its uid and resourceVersion, then the Event', async () => {
    const d = decisionFor('p', PFP);
    const { gateway, calls, methods } = scriptedGateway({
      patchJobStatus: [REFUSED],
      patchPodStatus: [{ metadata: { resourceVersion: '9' } }],
    });
    const [r] = await act(gateway, [d], options());
    assert.deepEqual([r!.outcome, r!.error], ['failed', undefined]);
    assert.deepEqual(methods(), ['patchJobStatus', 'mergePatchJob', 'patchPodStatus', 'deletePod', 'createEvent']);
    assert.equal((calls[1]!.args[2] as { spec?: object }).spec, undefined, 'no deadline on this path');
    const status = calls[2]!.args[2] as {
      metadata: { resourceVersion: string };
      status: { conditions: { type: string; status: string }[] };
    };
    assert.equal(status.metadata.resourceVersion, d.podResourceVersion);
    assert.deepEqual([status.status.conditions[0]!.type, status.status.conditions[0]!.status], ['ImagePullStuck', 'True']);
    assert.deepEqual(calls[3]!.args, [d.namespace, d.pod, d.podUid, '9']);
  });

  it('a pod changed since it was seen (409) releases the claim and judges the Job again with the pod as it is now', async () => {
    const d = decisionFor('p', PFP);
    const { gateway, calls, methods } = scriptedGateway({
      patchJobStatus: [REFUSED],
      patchPodStatus: [apiError(409, 'Conflict', 'the object has been modified')],
      readPod: [podObject(d, 'recovered')],
      readJob: [jobObject(d)],
    });
    let freshPod: unknown;
    const rejudge: ActOptions['rejudge'] = (prev, _fresh, pod) => (
      (freshPod = pod),
      { ...prev, plan: 'skip', mechanism: undefined, failJobCondition: undefined, detail: 'no longer stuck' }
    );
    const [r] = await act(gateway, [d], options({ rejudge }));
    assert.deepEqual(methods(), ['patchJobStatus', 'mergePatchJob', 'patchPodStatus', 'readPod', 'jsonPatchJob', 'readJob']);
    const release = calls[4]!.args[2] as { op: string; path: string; value?: string }[];
    assert.deepEqual(release[0], { op: 'test', path: '/metadata/annotations/imagepull-sweeper~1claim', value: 'claim-1' });
    assert.deepEqual(freshPod, { podUid: d.podUid, stuck: [] });
    assert.deepEqual([r!.outcome, r!.decision.detail], ['skipped', 'no longer stuck']);
  });

  it('a pod status patch whose answer was lost, read back marked, goes on to delete the pod as it is now', async () => {
    const d = decisionFor('p', PFP);
    const { gateway, calls, methods } = scriptedGateway({
      patchJobStatus: [REFUSED],
      patchPodStatus: [lostAnswer()],
      readPod: [podObject(d, 'marked', '12')],
    });
    const [r] = await act(gateway, [d], options());
    assert.equal(r!.outcome, 'failed');
    assert.deepEqual(methods(), ['patchJobStatus', 'mergePatchJob', 'patchPodStatus', 'readPod', 'deletePod', 'createEvent']);
    assert.equal(calls[4]!.args[3], '12');
  });

  it('a delete refused (the guard) releases the claim: an error saying so', async () => {
    const d = decisionFor('p', PFP);
    const { gateway, methods } = scriptedGateway({
      patchJobStatus: [REFUSED],
      deletePod: [apiError(403, 'Forbidden', 'guard')],
      readPod: [podObject(d, 'marked')],
    });
    const [r] = await act(gateway, [d], options());
    assert.deepEqual([r!.outcome, r!.error, r!.refused], ['error', 'Forbidden: guard; claim released', true]);
    assert.deepEqual(methods(), ['patchJobStatus', 'mergePatchJob', 'patchPodStatus', 'deletePod', 'readPod', 'jsonPatchJob']);
  });

  it('a delete whose answer and read back both failed keeps the claim: the pod may be gone and its Job failing', async () => {
    const d = decisionFor('p', PFP);
    const { gateway, methods } = scriptedGateway({
      patchJobStatus: [REFUSED],
      deletePod: [apiError(503, 'ServiceUnavailable', 'answer lost')],
      readPod: [apiError(503, 'ServiceUnavailable', 'later')],
    });
    const [r] = await act(gateway, [d], options());
    assert.deepEqual(
      [r!.outcome, r!.error],
      ['error', 'ServiceUnavailable: answer lost; the pod may be deleted: claim kept, completed after confirmWithin'],
    );
    assert.deepEqual(methods(), ['patchJobStatus', 'mergePatchJob', 'patchPodStatus', 'deletePod', 'readPod']);
  });

  it('a delete given up on after an attempt that may still land keeps the claim, though the pod read back is not deleted', async () => {
    // The first attempt timed out (its request may be carried out later), the others were refused
    // before reaching the API server: releasing the claim now would let that late delete fail the
    // Job through its pod failure policy with no claim and no Event.
    const d = decisionFor('p', PFP);
    const timedOut = Object.assign(new Error('no answer within the request timeout'), { name: 'TimeoutError' });
    const throttled = apiError(429, 'TooManyRequests', 'later');
    const { gateway, methods } = scriptedGateway({
      patchJobStatus: [REFUSED],
      deletePod: [timedOut, throttled, throttled, throttled],
      readPod: [podObject(d, 'marked')],
    });
    const [r] = await act(withRetries(gateway, { sleep: async () => undefined }), [d], options());
    assert.deepEqual(
      [r!.outcome, r!.error],
      ['error', 'TooManyRequests: later; the pod may be deleted: claim kept, completed after confirmWithin'],
    );
    assert.deepEqual(methods(), [
      'patchJobStatus',
      'mergePatchJob',
      'patchPodStatus',
      'deletePod',
      'deletePod',
      'deletePod',
      'deletePod',
      'readPod',
    ]);
  });

  it('a release that fails too leaves the claim for the confirmation rule', async () => {
    const d = decisionFor('p', PFP);
    const { gateway } = scriptedGateway({
      patchJobStatus: [REFUSED],
      deletePod: [apiError(403, 'Forbidden', 'guard')],
      readPod: [podObject(d, 'marked')],
      jsonPatchJob: [apiError(503, 'ServiceUnavailable', 'later')],
      readJob: [jobObject(d, { [ANNOTATIONS.claim]: 'claim-1' })],
    });
    const [r] = await act(gateway, [d], options());
    assert.deepEqual([r!.outcome, r!.error], ['error', 'Forbidden: guard; claim kept, completed after confirmWithin']);
  });

  it('a delete that conflicts with a kubelet write is sent again for the pod as it is now, while it is still stuck', async () => {
    const d = decisionFor('p', PFP);
    const stillStuck: V1Pod = {
      ...podObject(d, 'marked', '15'),
      metadata: {
        ...podObject(d, 'marked', '15').metadata,
        ownerReferences: [{ apiVersion: 'batch/v1', kind: 'Job', name: 'p', uid: d.jobView!.uid, controller: true }],
      },
      spec: { containers: [{ name: 'main', image: d.image }] },
      status: {
        phase: 'Pending',
        startTime: secondsAgo(600),
        conditions: [
          { type: 'ImagePullStuck', status: 'True' },
          { type: 'PodReadyToStartContainers', status: 'True', lastTransitionTime: secondsAgo(600) },
        ],
        containerStatuses: [
          {
            name: 'main',
            image: d.image,
            imageID: '',
            ready: false,
            restartCount: 0,
            state: { waiting: { reason: 'ImagePullBackOff', message: 'not found' } },
          },
        ],
      },
    };
    const { gateway, calls, methods } = scriptedGateway({
      patchJobStatus: [REFUSED],
      deletePod: [apiError(409, 'Conflict', 'modified')],
      readPod: [stillStuck],
    });
    const [r] = await act(gateway, [d], options());
    assert.equal(r!.outcome, 'failed');
    assert.deepEqual(methods(), ['patchJobStatus', 'mergePatchJob', 'patchPodStatus', 'deletePod', 'readPod', 'deletePod', 'createEvent']);
    assert.equal(calls[5]!.args[3], '15');
  });
});

describe('a Job Kueue queues, not failed: what it is stuck on is kept on it first', () => {
  const queued = (plan: 'skip' | 'report'): Decision => ({
    ...decisionFor('q', { queue: { name: 'lq', suspendedSince: undefined } }),
    plan,
    remember: '{"image":"x"}',
  });

  it('within grace: one conditional merge patch, the memory and the queued label', async () => {
    const { gateway, calls, methods } = scriptedGateway();
    const [r] = await act(gateway, [queued('skip')], options());
    assert.deepEqual([r!.outcome, r!.error], ['skipped', undefined]);
    assert.deepEqual(methods(), ['mergePatchJob']);
    assert.deepEqual(calls[0]!.args[2], {
      metadata: { resourceVersion: '100', annotations: { [ANNOTATIONS.stuck]: '{"image":"x"}' }, labels: { [LABELS.pending]: 'queued' } },
    });
  });

  it('reported (a report-only rule, the outage breaker): the memory, then the Report Event and its annotation', async () => {
    const { gateway, methods } = scriptedGateway();
    const [r] = await act(gateway, [queued('report')], options());
    assert.deepEqual([r!.outcome, r!.error], ['reported', undefined]);
    assert.deepEqual(methods(), ['mergePatchJob', 'createEvent', 'mergePatchJob']);
  });

  it('a Job changed since (409) is left for the next sweep; a refused write is the error', async () => {
    const changed = scriptedGateway({ mergePatchJob: [apiError(409, 'Conflict', 'modified')] });
    assert.equal((await act(changed.gateway, [queued('skip')], options()))[0]!.error, undefined);
    const refused = scriptedGateway({ mergePatchJob: [apiError(403, 'Forbidden', 'guard')] });
    assert.match(
      (await act(refused.gateway, [queued('skip')], options()))[0]!.error ?? '',
      /could not be kept on the Job \(Forbidden: guard\)/,
    );
  });
});

describe('reporting a Job', () => {
  it('writes the Report Event, then marks the Job reported; a Job already reported is left alone', async () => {
    const d = { ...decisionFor('r'), plan: 'report' as const, action: 'report' as const };
    const { gateway, calls, methods } = scriptedGateway();
    const [r] = await act(gateway, [d, { ...d, jobView: { ...d.jobView!, annotations: { [ANNOTATIONS.reportedAt]: 'x' } } }], options());
    assert.equal(r!.outcome, 'reported');
    assert.deepEqual(methods(), ['createEvent', 'mergePatchJob']);
    assert.equal((calls[0]!.args[1] as EventsV1Event).action, 'Report');
  });

  it('names the Report Event by Job and cause: a report whose annotation was lost is written again as the same Event (409), then marked', async () => {
    const d = { ...decisionFor('r'), plan: 'report' as const, action: 'report' as const };
    const first = scriptedGateway({ mergePatchJob: [apiError(503, 'ServiceUnavailable', 'later')] });
    const [lost] = await act(first.gateway, [d], options());
    assert.equal(lost!.outcome, 'error');
    const second = scriptedGateway({ createEvent: [apiError(409, 'AlreadyExists', 'exists')] });
    const [r] = await act(second.gateway, [d], options({ now: new Date(NOW.getTime() + 120_000), claim: 'claim-2' }));
    assert.equal(r!.outcome, 'reported');
    assert.deepEqual(second.methods(), ['createEvent', 'mergePatchJob']);
    const name = (g: typeof first) => (g.calls[0]!.args[1] as EventsV1Event).metadata?.name;
    assert.equal(name(second), name(first));
    assert.match(name(first) ?? '', /^r\.[0-9a-f]{16}$/);
    const otherCause = scriptedGateway();
    await act(otherCause.gateway, [{ ...d, image: 'registry.example/other:2' }], options());
    assert.notEqual(name(otherCause), name(first));
  });
});

describe('a stop (SIGTERM) between writes', () => {
  it('lets the Job in flight finish and starts no other: the rest are deferred, stood down', async () => {
    const stop = new AbortController();
    const { gateway, methods } = scriptedGateway();
    const decisions = [decisionFor('first'), decisionFor('second', PFP)];
    const results = await act(gateway, decisions, options({ signal: stop.signal, onResult: () => stop.abort() }));
    assert.deepEqual(
      results.map((r) => r.outcome),
      ['failed', 'deferred'],
    );
    assert.deepEqual(methods(), ['patchJobStatus', 'createEvent']);
    assert.match(results[1]!.decision.detail, /^sweep stopped before acting, waits for the next sweep \(was: /);
    assert.equal(results[1]!.decision.failJobCondition, undefined);
  });
});

describe('settling finished Jobs (Event backfill)', () => {
  const failedJob = job('done', {
    failed: true,
    finished: true,
    annotations: { [ANNOTATIONS.failedAt]: '2026-11-29T11:00:00Z', [ANNOTATIONS.claim]: 'c0' },
  });
  const settle = (gateway: Parameters<typeof settleFinished>[0], signal?: AbortSignal) =>
    settleFinished(gateway, [failedJob], { concurrency: 1, reporter: { instance: 'unit', now: NOW }, signal });

  it('writes the FailJob Event the claiming sweep could not, then drops the pending label', async () => {
    const { gateway, calls, methods } = scriptedGateway();
    const [s] = await settle(gateway);
    assert.deepEqual([s!.eventWritten, s!.error], [true, undefined]);
    assert.deepEqual(methods(), ['createEvent', 'mergePatchJob']);
    assert.deepEqual(calls[1]!.args[2], { metadata: { labels: { [LABELS.pending]: null } } });
  });

  it('an Event already there (409) was written by the claiming sweep', async () => {
    const { gateway } = scriptedGateway({ createEvent: [apiError(409, 'AlreadyExists', 'exists')] });
    const [s] = await settle(gateway);
    assert.deepEqual([s!.eventWritten, s!.error], [false, undefined]);
  });

  it('an Event that cannot be written keeps the label, so the next sweep tries again', async () => {
    const { gateway, methods } = scriptedGateway({ createEvent: [apiError(500, 'InternalError', 'etcd down')] });
    const [s] = await settle(gateway);
    assert.deepEqual([s!.eventWritten, s!.error], [false, 'its Event could not be written: etcd down']);
    assert.deepEqual(methods(), ['createEvent']);
  });

  it('writes nothing once stopped', async () => {
    const { gateway, calls } = scriptedGateway();
    await settle(gateway, AbortSignal.abort());
    assert.deepEqual(calls, []);
  });
});

describe('a dry run: the gateway records the writes', () => {
  it('walks the same write path, sends nothing, and says would-fail', async () => {
    const { gateway, calls } = scriptedGateway();
    const recorded: RecordedWrites = { methods: [] };
    const [r] = await act(dryRunGateway(gateway, recorded), [decisionFor('p', PFP)], options());
    assert.deepEqual([r!.outcome, r!.error], ['failed', undefined]);
    assert.deepEqual([wordResult(r!, true).outcome, wordResult(r!, false).outcome], ['would-fail', 'failed']);
    assert.deepEqual(calls, []);
    assert.deepEqual(recorded.methods, ['patchJobStatus', 'createEvent']);
  });
});
