// API requests per failed Job, by mechanism, on the real control plane (pods played by the status
// stand-in): the sweep that fails the Jobs, and the next one that settles them. Held exact, so a
// change in the write sequence shows up here; the figures are in docs/performance.md.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { KubeConfig } from '@kubernetes/client-node';
import { describeApiError } from '../../src/kube/errors.ts';
import { createGateway, type KubeGateway } from '../../src/kube/gateway.ts';
import { mapBounded } from '../../src/concurrency.ts';
import { useTestCluster } from '../support/hooks.ts';
import { refuseStatusWrites } from '../support/policy-engine.ts';
import { createStuckJob, policyFile, runSweep, sweeperEvents, trueCondition, waitForJobFailed } from '../support/sweeper.ts';

const JOBS = 10;
const PFP = { podFailurePolicy: { rules: [{ action: 'FailJob', onPodConditions: [{ type: 'ImagePullStuck', status: 'True' }] }] } };
const POLICY = policyFile('{}\n');

let kc: KubeConfig;
const env = useTestCluster((hooks) => {
  kc = hooks.kc;
});

/**
 * The plain gateway, counting calls per method (each call is one HTTP request). A call the server
 * refused is counted under `method:status` instead, e.g. `mergePatchJob:409`.
 */
function counting(plain: KubeGateway): { gateway: KubeGateway; counts: Record<string, number> } {
  const counts: Record<string, number> = {};
  const count = (key: string) => (counts[key] = (counts[key] ?? 0) + 1);
  const gateway = new Proxy(plain, {
    get: (target, name: string) => {
      const method = Reflect.get(target, name) as (...args: unknown[]) => Promise<unknown>;
      if (name === 'lastServerDate') return method; // not a request
      return async (...args: unknown[]) => {
        try {
          const answer = await method(...args);
          count(name);
          return answer;
        } catch (error) {
          const status = describeApiError(error).status;
          count(status === undefined ? `${name}:unanswered` : `${name}:${status}`);
          throw error;
        }
      };
    },
  });
  return { gateway, counts };
}

/** Answers that are no fault: the settling sweep's Event (409, already there), Kueue's configuration read at start-up (404, no Kueue), the status write a policy engine refuses. */
const EXPECTED = new Set(['createEvent:409', 'readConfigMap:404', 'patchJobStatus:403']);

/**
 * The Job controller may update a Job between the sweep's LIST and its claim (a real race): the
 * claim is refused (409), the Job re-read and claimed again. Each such conflict must cost exactly
 * one re-read and one more claim attempt, and nothing else may be refused.
 */
function assertConflictsOnlyCostARetry(counts: Record<string, number>): void {
  const claims = ['patchJobStatus:409', 'mergePatchJob:409'];
  const conflicts = claims.reduce((n, k) => n + (counts[k] ?? 0), 0);
  const refused = Object.keys(counts).filter((k) => k.includes(':') && !claims.includes(k) && !EXPECTED.has(k));
  assert.deepEqual(refused, [], `only claim conflicts (and the answers in EXPECTED) are expected: ${JSON.stringify(counts)}`);
  assert.equal(counts.readJob ?? 0, conflicts, `one re-read per claim conflict: ${JSON.stringify(counts)}`);
}

async function measure(
  label: string,
  spec: object,
  o: { refused?: boolean } = {},
): Promise<{ fail: Record<string, number>; settle: Record<string, number>; reasons: string[] }> {
  const ns = await env.namespace(label);
  if (o.refused) await refuseStatusWrites(env, ns);
  const names = Array.from({ length: JOBS }, (_, i) => `j-${i}`);
  await mapBounded(names, 8, (name) => createStuckJob(kc, ns, name, { stuckFor: 9999, spec }));
  const first = counting(createGateway(kc));
  const run = await runSweep(kc, { namespaces: [ns], policy: POLICY }, first.gateway);
  assert.equal(run.exitCode, 0);
  assert.equal(run.lines.filter((l) => l.outcome === 'failed').length, JOBS);
  const reasons: string[] = [];
  for (const name of names) reasons.push(trueCondition(await waitForJobFailed(kc, ns, name), 'Failed')?.reason ?? '(none)');
  const second = counting(createGateway(kc));
  assert.equal((await runSweep(kc, { namespaces: [ns], policy: POLICY }, second.gateway)).exitCode, 0);
  assert.equal((await sweeperEvents(kc, ns)).filter((e) => e.action === 'FailJob').length, JOBS);
  assertConflictsOnlyCostARetry(first.counts);
  assertConflictsOnlyCostARetry(second.counts);
  const perJob = (c: Record<string, number>) => Object.fromEntries(Object.entries(c).map(([k, v]) => [k, v / JOBS]));
  console.log(
    `[requests] ${label}, ${JOBS} Jobs: failing sweep ${JSON.stringify(first.counts)}; next sweep ${JSON.stringify(second.counts)}`,
  );
  console.log(`[requests] ${label}: Failed reasons ${JSON.stringify(reasons)}`);
  return { fail: perJob(first.counts), settle: perJob(second.counts), reasons: [...new Set(reasons)] };
}

const WRITES = ['patchJobStatus', 'mergePatchJob', 'jsonPatchJob', 'patchPodStatus', 'deletePod', 'createEvent'];
/** Writes the server accepted, the settling sweep's re-sent Event (409) and a refused status write; claim conflicts are held by assertConflictsOnlyCostARetry. */
const writesOnly = (c: Record<string, number>) =>
  Object.fromEntries(Object.entries(c).filter(([k]) => WRITES.includes(k) || k === 'createEvent:409' || k === 'patchJobStatus:403'));

describe('API requests per failed Job', () => {
  it(
    'by its own condition: one status patch claims it and adds its FailureTarget, the Event; the next sweep re-sends the Event (409) and drops the label',
    { timeout: 300_000 },
    async () => {
      // A podFailurePolicy changes nothing on this path.
      const { fail, settle, reasons } = await measure('req-condition', PFP);
      assert.deepEqual(reasons, ['ImagePullStuck']);
      assert.deepEqual(writesOnly(fail), { patchJobStatus: 1, createEvent: 1 });
      assert.deepEqual(writesOnly(settle), { 'createEvent:409': 1, mergePatchJob: 1 });
    },
  );

  it(
    'the deadline (status write refused): the refused write, one claim patch that also sets the deadline, the Event; then as above',
    { timeout: 300_000 },
    async () => {
      const { fail, settle, reasons } = await measure('req-deadline', {}, { refused: true });
      // No write to the Job after the claim: the Job controller's status update cannot conflict
      // after it deleted the pod, which would end these backoffLimit-0 Jobs as BackoffLimitExceeded.
      assert.deepEqual(reasons, ['DeadlineExceeded']);
      assert.deepEqual(writesOnly(fail), { 'patchJobStatus:403': 1, mergePatchJob: 1, createEvent: 1 });
      assert.deepEqual(writesOnly(settle), { 'createEvent:409': 1, mergePatchJob: 1 });
    },
  );

  it(
    'podFailurePolicy (status write refused): the refused write, claim, pod condition, pod delete, Event; then as above',
    { timeout: 300_000 },
    async () => {
      const { fail, settle, reasons } = await measure('req-pfp', PFP, { refused: true });
      assert.deepEqual(reasons, ['PodFailurePolicy']);
      assert.deepEqual(writesOnly(fail), { 'patchJobStatus:403': 1, mergePatchJob: 1, patchPodStatus: 1, deletePod: 1, createEvent: 1 });
      assert.deepEqual(writesOnly(settle), { 'createEvent:409': 1, mergePatchJob: 1 });
    },
  );
});
