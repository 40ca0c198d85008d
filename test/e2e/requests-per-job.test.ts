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
import { realPullMessage, setPodRunning } from '../support/kubelet.ts';
import { CoreV1Api } from '@kubernetes/client-node';

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
        // A pod list by what it selects: the Pending pods (observe), a Job's pods, the Running pods (healing).
        const what =
          name === 'listPods'
            ? `listPods(${String((args[0] as { fieldSelector?: string; labelSelector?: string }).fieldSelector ?? 'label')})`
            : name;
        try {
          const answer = await method(...args);
          count(what);
          return answer;
        } catch (error) {
          const status = describeApiError(error).status;
          count(status === undefined ? `${what}:unanswered` : `${what}:${status}`);
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

const IGNORE_DISRUPTION = {
  podFailurePolicy: { rules: [{ action: 'Ignore', onPodConditions: [{ type: 'DisruptionTarget', status: 'True' }] }] },
};
const HEAL = policyFile('defaults: { heal: true }\n');
/** The reads healing adds (observe's own lists aside). */
const HEAL_READS = ['readServiceAccount', 'readSecretMetadata', 'listPods(status.phase=Running)'];
const healReads = (c: Record<string, number>) =>
  Object.fromEntries(Object.entries(c).filter(([k]) => HEAL_READS.some((r) => k.startsWith(r))));
const HEAL_WRITES = [...WRITES, 'evictPod'];
const healWrites = (c: Record<string, number>) => Object.fromEntries(Object.entries(c).filter(([k]) => HEAL_WRITES.includes(k)));

/** JOBS Jobs stuck on `image` with the kubelet's words for `kind`, then their cause gone, healing on: the healing sweep's and the next sweep's requests. */
async function measureHeal(
  label: string,
  image: string,
  kind: 'auth-no-secret' | 'connection-refused',
  causeGone: (ns: string) => Promise<void>,
) {
  const ns = await env.namespace(label);
  const names = Array.from({ length: JOBS }, (_, i) => `j-${i}`);
  const message = realPullMessage(kind, image);
  await mapBounded(names, 8, (name) => createStuckJob(kc, ns, name, { stuckFor: 60, image, message, spec: IGNORE_DISRUPTION }));
  await causeGone(ns);
  const first = counting(createGateway(kc));
  const run = await runSweep(kc, { namespaces: [ns], policy: HEAL }, first.gateway);
  assert.equal(run.exitCode, 0, JSON.stringify(run.records));
  assert.deepEqual(
    run.lines.map((l) => l.outcome),
    names.map(() => 'healed'),
    JSON.stringify(run.lines.map((l) => l.heal)),
  );
  const second = counting(createGateway(kc));
  assert.equal((await runSweep(kc, { namespaces: [ns], policy: HEAL }, second.gateway)).exitCode, 0);
  assert.equal((await sweeperEvents(kc, ns)).filter((e) => e.reason === 'ImagePullHealed').length, JOBS);
  assertConflictsOnlyCostARetry(first.counts);
  console.log(
    `[requests] ${label}, ${JOBS} Jobs: healing sweep ${JSON.stringify(first.counts)}; next sweep ${JSON.stringify(second.counts)}`,
  );
  return { first: first.counts, second: second.counts };
}

describe('API requests per healed Job', () => {
  it(
    'auth, the ServiceAccount given the secret: one ServiceAccount read a sweep; per Job the record, the eviction, the Event; then nothing',
    { timeout: 300_000 },
    async () => {
      const { first, second } = await measureHeal('req-heal-auth', 'registry.example/team/private:1', 'auth-no-secret', async (ns) => {
        const core = kc.makeApiClient(CoreV1Api);
        await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'regcred' }, stringData: { x: 'y' } } });
        await core.patchNamespacedServiceAccount({
          namespace: ns,
          name: 'default',
          body: [{ op: 'add', path: '/imagePullSecrets', value: [{ name: 'regcred' }] }],
        });
      });
      assert.deepEqual(healReads(first), { readServiceAccount: 1 });
      assert.deepEqual(healWrites(first), { mergePatchJob: JOBS, evictPod: JOBS, createEvent: JOBS });
      assert.deepEqual([healReads(second), healWrites(second)], [{}, {}]);
    },
  );

  it('transient, a Running pod pulled the reference since: one Running-pod list a sweep', { timeout: 300_000 }, async () => {
    const image = 'registry.example/team/app:1';
    const { first, second } = await measureHeal('req-heal-transient', image, 'connection-refused', async (ns) => {
      const core = kc.makeApiClient(CoreV1Api);
      await core.createNamespacedPod({
        namespace: ns,
        body: { metadata: { name: 'puller' }, spec: { containers: [{ name: 'main', image }] } },
      });
      await setPodRunning(core, ns, 'puller', { since: new Date(Date.now() + 5_000), imageID: 'registry.example/team/app@sha256:1' });
    });
    assert.deepEqual(healReads(first), { 'listPods(status.phase=Running)': 1 });
    assert.deepEqual(healWrites(first), { mergePatchJob: JOBS, evictPod: JOBS, createEvent: JOBS });
    assert.deepEqual([healReads(second), healWrites(second)], [{}, {}]);
  });

  it('the quiet day: healing on, nothing it could heal: not one request more than with healing off', { timeout: 300_000 }, async () => {
    const ns = await env.namespace('req-heal-quiet');
    await mapBounded(
      Array.from({ length: JOBS }, (_, i) => `j-${i}`),
      8,
      (name) => createStuckJob(kc, ns, name, { stuckFor: 60, spec: IGNORE_DISRUPTION }),
    );
    const off = counting(createGateway(kc));
    await runSweep(kc, { namespaces: [ns], policy: POLICY, dryRun: true }, off.gateway);
    const on = counting(createGateway(kc));
    await runSweep(kc, { namespaces: [ns], policy: HEAL, dryRun: true }, on.gateway);
    assert.deepEqual(on.counts, off.counts);
    assert.deepEqual(healReads(on.counts), {});
  });
});
