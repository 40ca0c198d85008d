// sweep() end to end against the scripted gateway: the stages in order, what is written, what a
// dry run and a stop change. The same against the real API server: test/e2e/sweep.test.ts.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { PassThrough } from 'node:stream';
import { describe, it } from 'node:test';
import type { EventsV1Event, V1Job, V1Pod } from '@kubernetes/client-node';
import { ANNOTATIONS, LABELS } from '../../src/policy/annotations.ts';
import { createLogger } from '../../src/report/logger.ts';
import { sweep, type SweepOptions } from '../../src/sweep.ts';
import { apiError, scriptedGateway, type Script } from '../support/scripted-gateway.ts';
import { NOW, secondsAgo } from './judge-fixtures.ts';

const dir = mkdtempSync(join(tmpdir(), 'sweep-unit-'));
const POLICY = join(dir, 'policy.yaml');
writeFileSync(POLICY, '{}\n');

const JOB_UID = 'uid-job-a';
const jobObject: V1Job = {
  metadata: { name: 'a', namespace: 'ci', uid: JOB_UID, resourceVersion: '100' },
  spec: { template: { spec: { containers: [{ name: 'main', image: 'registry.example/app:missing' }] } } },
  status: { startTime: secondsAgo(3600) },
};

const stuckPod: V1Pod = {
  metadata: {
    name: 'a-pod',
    namespace: 'ci',
    uid: 'uid-a-pod',
    resourceVersion: '7',
    ownerReferences: [{ apiVersion: 'batch/v1', kind: 'Job', name: 'a', uid: JOB_UID, controller: true }],
  },
  spec: { nodeName: 'n1', containers: [{ name: 'main', image: 'registry.example/app:missing' }] },
  status: {
    phase: 'Pending',
    startTime: secondsAgo(3600),
    conditions: [
      { type: 'PodReadyToStartContainers', status: 'True', lastTransitionTime: secondsAgo(3600) },
      { type: 'Initialized', status: 'True', lastTransitionTime: secondsAgo(3600) },
    ],
    containerStatuses: [
      {
        name: 'main',
        image: 'registry.example/app:missing',
        imageID: '',
        ready: false,
        restartCount: 0,
        state: { waiting: { reason: 'ImagePullBackOff', message: 'Back-off pulling image "registry.example/app:missing": not found' } },
      },
    ],
  },
};

/** The cluster of one stuck pod of Job ci/a, plus `more`. */
const oneStuckJob = (more: Script = {}): Script => ({
  listPodRows: [{ items: [{ namespace: 'ci', name: 'a-pod', status: 'ImagePullBackOff' }], continueToken: undefined }],
  readPod: [stuckPod],
  readServerVersion: [{ major: '1', minor: '36', gitVersion: 'v1.36.0' }],
  readJob: [jobObject],
  ...more,
});

const WRITES = new Set([
  'mergePatchJob',
  'jsonPatchJob',
  'patchPodStatus',
  'patchJobStatus',
  'deletePod',
  'createEvent',
  'mergePatchCronJob',
]);

async function run(script: Script, over: Partial<SweepOptions> = {}, serverClock = true) {
  const scripted = scriptedGateway(script, serverClock ? { serverDate: { date: NOW, ageMs: 0 } } : {});
  const stream = new PassThrough();
  const chunks: string[] = [];
  stream.on('data', (c: Buffer) => chunks.push(c.toString()));
  const logger = createLogger({ format: 'text', stream });
  const result = await sweep(
    { gateway: scripted.gateway, monotonicMs: () => 0, logger },
    { dryRun: false, namespaces: ['ci'], policy: { kind: 'file', path: POLICY }, instance: 'unit', ...over },
  );
  return { ...scripted, result, writes: () => scripted.methods().filter((m) => WRITES.has(m)), text: () => chunks.join('') };
}

describe('sweep()', () => {
  it('observes, attributes, judges and fails the stuck Job, in that order', async () => {
    const { result, methods } = await run(oneStuckJob());
    assert.equal(result.status, 'done');
    assert.deepEqual(
      result.results.map((r) => [r.decision.job, r.outcome]),
      [['a', 'failed']],
    );
    // The namespace's Pending pods, then its Running ones (a container restarted in place);
    // The server's version and the pending Jobs (listJobs) are read beside the Job's read;
    // readConfigMap: Kueue's configuration, once per process (no Kueue here: 404, nothing said).
    assert.deepEqual(methods(), [
      'listPodRows',
      'listPodRows',
      'readPod',
      'readServerVersion',
      'listJobs',
      'readJob',
      'readConfigMap',
      'patchJobStatus',
      'createEvent',
    ]);
    assert.equal(result.summary?.exitCode, 0);
  });

  it('in parts, keeps the failed Jobs and the errors as results and counts the rest, for the same summary', async () => {
    const job = (name: string): V1Job => ({ ...jobObject, metadata: { ...jobObject.metadata, name, uid: `uid-job-${name}` } });
    const pod = (name: string, stuckFor: number): V1Pod => {
      const p = structuredClone(stuckPod);
      p.metadata = {
        ...p.metadata,
        name: `${name}-pod`,
        uid: `uid-${name}-pod`,
        ownerReferences: [{ ...p.metadata!.ownerReferences![0]!, name, uid: `uid-job-${name}` }],
      };
      for (const c of p.status!.conditions!) c.lastTransitionTime = secondsAgo(stuckFor);
      return p;
    };
    const pods = { 'a-pod': pod('a', 3600), 'b-pod': pod('b', 1800), 'c-pod': pod('c', 900) };
    const limited = join(dir, 'one-a-sweep.yaml');
    writeFileSync(limited, 'limits: { maxJobsPerSweep: 1 }\n');
    const { result } = await run(
      oneStuckJob({
        listPodRows: [
          { items: Object.keys(pods).map((name) => ({ namespace: 'ci', name, status: 'ImagePullBackOff' })), continueToken: undefined },
        ],
        // One answer a call: each read answers by name.
        readPod: Object.keys(pods).map(() => (_ns: string, name: string) => pods[name as keyof typeof pods]),
        readJob: Object.keys(pods).map(() => (_ns: string, name: string) => job(name)),
      }),
      { chunkSize: 1, policy: { kind: 'file', path: limited } },
    );
    assert.deepEqual(
      result.results.map((r) => [r.decision.job, r.outcome]),
      [['a', 'failed']],
      'the oldest failed, kept',
    );
    assert.equal(result.counted?.total, 2, 'the two deferred, counted');
    assert.equal(result.summary?.decisions, 3);
    assert.equal(result.summary?.deferred, 2);
    assert.deepEqual(result.summary?.byNamespace, { ci: { failed: 1, deferred: 2 } });
  });

  it('a dry run reads the same, sends no write, and says would-fail', async () => {
    const { result, writes, text } = await run(oneStuckJob(), { dryRun: true });
    assert.deepEqual(
      result.results.map((r) => r.outcome),
      ['would-fail'],
    );
    assert.deepEqual(writes(), []);
    assert.match(text(), /^WOULD FAIL +ci\/job\/a /m);
    assert.match(text(), /Dry run [0-9a-f]{8}: 1 decision\(s\) \(1 would fail\)/);
  });

  it('a server dry run sends the same writes through the server-dry-run gateway, and says would-fail', async () => {
    const { result, methods, writes, text } = await run(oneStuckJob(), { dryRun: true, dryRunMode: 'server' });
    assert.equal(methods()[0], 'serverDryRun', 'the gateway is picked before the first call');
    assert.deepEqual(writes(), ['patchJobStatus', 'createEvent'], 'sent, for the API server to judge');
    assert.deepEqual(
      result.results.map((r) => r.outcome),
      ['would-fail'],
    );
    assert.equal(result.status, 'done');
    assert.match(text(), /^WOULD FAIL +ci\/job\/a /m);
    assert.match(text(), /Dry run [0-9a-f]{8}: 1 decision\(s\) \(1 would fail\)/);
  });

  it('a write the API server refuses in a server dry run is an error, logged at error, exit 1', async () => {
    // The status write refused, its fallback too.
    const refusedStatus = apiError(403, 'Forbidden', 'jobs.batch "a" is forbidden: User "sa" cannot patch resource "jobs/status"');
    const refused = apiError(403, 'Forbidden', 'jobs.batch "a" is forbidden: User "sa" cannot patch resource "jobs"');
    const script = oneStuckJob({ patchJobStatus: [refusedStatus], mergePatchJob: [refused] });
    const { result, text, writes } = await run(script, { dryRun: true, dryRunMode: 'server' });
    assert.deepEqual(writes(), ['patchJobStatus', 'mergePatchJob']);
    assert.deepEqual(
      result.results.map((r) => r.outcome),
      ['error'],
    );
    assert.match(result.results[0]!.error ?? '', /cannot patch resource "jobs"/);
    assert.equal(result.status, 'actions-failed');
    assert.equal(result.summary?.exitCode, 1);
    assert.match(text(), /^ERROR +ci\/job\/a /m);
  });

  it('a client dry run never asks for the server-dry-run gateway', async () => {
    const { methods } = await run(oneStuckJob(), { dryRun: true, dryRunMode: 'client' });
    assert.ok(!methods().includes('serverDryRun'));
  });

  it('stopped (SIGTERM) before acting: every Job deferred, nothing written', async () => {
    const { result, writes, text } = await run(oneStuckJob(), { signal: AbortSignal.abort() });
    assert.deepEqual(
      result.results.map((r) => r.outcome),
      ['deferred'],
    );
    assert.deepEqual(writes(), []);
    assert.match(text(), /sweep stopped by a signal/);
  });

  it('without the API server clock nothing is judged or written', async () => {
    const { result, writes } = await run(oneStuckJob(), {}, false);
    assert.equal(result.status, 'no-server-clock');
    assert.deepEqual(writes(), []);
  });

  it('backfills the FailJob Event of a Job an earlier sweep failed, then drops its pending label', async () => {
    const finished: V1Job = {
      metadata: {
        name: 'old',
        namespace: 'ci',
        uid: 'uid-old',
        resourceVersion: '50',
        labels: { [LABELS.pending]: 'true' },
        annotations: { [ANNOTATIONS.failedAt]: '2026-11-29T11:00:00Z', [ANNOTATIONS.claim]: 'c0', [ANNOTATIONS.message]: 'm' },
      },
      spec: { template: { spec: { containers: [{ name: 'main' }] } } },
      status: { conditions: [{ type: 'Failed', status: 'True' }] },
    };
    const pending = { listJobs: [{ items: [finished], continueToken: undefined }], listPodRows: [{ items: [], continueToken: undefined }] };
    const live = await run(pending);
    assert.deepEqual(live.writes(), ['createEvent', 'mergePatchJob']);
    assert.equal((live.calls.find((c) => c.method === 'createEvent')!.args[1] as EventsV1Event).regarding?.name, 'old');
    assert.match(live.text(), /wrote the missing FailJob Event of a Job failed by an earlier sweep/);
    const dry = await run(pending, { dryRun: true });
    assert.deepEqual(dry.writes(), []);
    assert.doesNotMatch(dry.text(), /FailJob Event/);
    // A server dry run sends them to be judged: nothing said written, a refusal is an error.
    const server = await run(pending, { dryRun: true, dryRunMode: 'server' });
    assert.deepEqual(server.writes(), ['createEvent', 'mergePatchJob']);
    assert.doesNotMatch(server.text(), /wrote the missing FailJob Event/);
    assert.equal(server.result.summary?.exitCode, 0);
    const refused = await run(
      { ...pending, mergePatchJob: [apiError(403, 'Forbidden', 'jobs.batch "old" is forbidden')] },
      { dryRun: true, dryRunMode: 'server' },
    );
    assert.match(refused.text(), /label could not be removed: jobs.batch "old" is forbidden/);
    assert.equal(refused.result.summary?.exitCode, 1);
  });

  it('an invalid policy ConfigMap gets its InvalidPolicy Event; a dry run records it and sends nothing', async () => {
    const policy = { kind: 'configmap' as const, namespace: 'ops', name: 'sweeper-policy' };
    const invalid = { readConfigMap: [{ metadata: { uid: 'cm-1' }, data: { 'policy.yaml': 'limits: nonsense\n' } }] };
    const live = await run(invalid, { policy });
    assert.equal(live.result.status, 'invalid-policy');
    assert.deepEqual(live.writes(), ['createEvent']);
    assert.equal((live.calls[1]!.args[1] as EventsV1Event).reason, 'InvalidPolicy');
    const dry = await run(invalid, { policy, dryRun: true });
    assert.equal(dry.result.status, 'invalid-policy');
    assert.deepEqual(dry.writes(), []);
  });
});
