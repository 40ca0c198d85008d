// CronJob suspension (cronJobs.suspendAfter) on the real control plane, with the real CronJob
// controller running: the sweeper counts its failed Jobs on the CronJob itself, so the count
// survives the CronJob's history limit; a run that succeeds in between starts the count again.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { BatchV1Api, PatchStrategy, setHeaderOptions, type KubeConfig, type V1CronJob } from '@kubernetes/client-node';
import { useTestCluster } from '../support/hooks.ts';
import {
  MISSING_IMAGE,
  createCronJob,
  createStuckJob,
  ownedBy,
  policyFile,
  readCronJob,
  runSweep,
  sweeperEvents,
  waitForJobFailed,
} from '../support/sweeper.ts';

const TIMEOUT = { timeout: 240_000 };
let kc: KubeConfig;
const env = useTestCluster((hooks) => {
  kc = hooks.kc;
});
const SUSPEND_AFTER_2 = policyFile('cronJobs: { suspendAfter: 2 }\n');
const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

const cronLines = (records: Record<string, unknown>[]) => records.filter((r) => r.message === 'cronjob');

describe('cronJobs.suspendAfter', () => {
  it('suspends an every-minute CronJob after 2 failed Jobs on its missing image, and it stays suspended', TIMEOUT, async () => {
    const ns = await env.namespace('cron-suspend');
    const batch = kc.makeApiClient(BatchV1Api);
    const cronJob = await createCronJob(kc, ns, 'every-minute', { failedJobsHistoryLimit: 1 });
    // Another CronJob, annotated to be left alone: its Jobs are failed, it is never suspended.
    const ignored = await createCronJob(kc, ns, 'hands-off', {
      schedule: '0 3 1 1 *',
      annotations: { 'imagepull-sweeper/ignore': 'true' },
    });

    await createStuckJob(kc, ns, 'every-minute-1', { stuckFor: 9999, ownerReferences: ownedBy(cronJob) });
    await createStuckJob(kc, ns, 'hands-off-1', { stuckFor: 9999, ownerReferences: ownedBy(ignored) });
    const first = await runSweep(kc, { namespaces: [ns], policy: SUSPEND_AFTER_2 });
    assert.equal(first.exitCode, 0);
    const firstLines = Object.fromEntries(cronLines(first.records).map((l) => [l.cronJob, l]));
    assert.equal(firstLines['every-minute']?.outcome, 'counted', JSON.stringify(first.records));
    assert.equal(firstLines['every-minute']?.failedInARow, 1);
    assert.equal(firstLines['hands-off']?.outcome, 'skipped');
    let current = await readCronJob(kc, ns, 'every-minute');
    assert.equal(current.spec?.suspend, false);
    assert.equal(current.metadata?.annotations?.['imagepull-sweeper/failed-in-a-row'], '1');
    const ignoredVersion = (await readCronJob(kc, ns, 'hands-off')).metadata?.resourceVersion;

    // Failed; then the history limit removes it. The count lives on the CronJob, not its Jobs.
    await waitForJobFailed(kc, ns, 'every-minute-1');
    await batch.deleteNamespacedJob({ namespace: ns, name: 'every-minute-1', propagationPolicy: 'Background' }).catch((e: unknown) => {
      if ((e as { code?: number }).code !== 404) throw e; // the CronJob controller was first
    });
    await createStuckJob(kc, ns, 'every-minute-2', { stuckFor: 9999, ownerReferences: ownedBy(cronJob) });
    await createStuckJob(kc, ns, 'hands-off-2', { stuckFor: 9999, ownerReferences: ownedBy(ignored) });

    // A dry run says what it would suspend, and writes nothing. (Not compared by resourceVersion:
    // the CronJob controller updates the status meanwhile, e.g. when the failed Job goes.)
    const written = (c: V1CronJob) => JSON.stringify([c.metadata?.annotations ?? {}, c.metadata?.labels ?? {}, c.spec]);
    const before = written(await readCronJob(kc, ns, 'every-minute'));
    const dry = await runSweep(kc, { namespaces: [ns], policy: SUSPEND_AFTER_2, dryRun: true });
    const dryLine = cronLines(dry.records).find((l) => l.cronJob === 'every-minute');
    assert.equal(dryLine?.outcome, 'would-suspend', JSON.stringify(dry.records));
    assert.equal(dry.summary?.cronJobs['would-suspend'], 1);
    assert.equal(written(await readCronJob(kc, ns, 'every-minute')), before);

    const second = await runSweep(kc, { namespaces: [ns], policy: SUSPEND_AFTER_2 });
    assert.equal(second.exitCode, 0);
    const line = cronLines(second.records).find((l) => l.cronJob === 'every-minute');
    assert.equal(line?.outcome, 'suspended', JSON.stringify(second.records));
    assert.deepEqual(line?.jobs, ['every-minute-1', 'every-minute-2']);
    assert.equal(second.summary?.cronJobs.suspended, 1);
    current = await readCronJob(kc, ns, 'every-minute');
    assert.equal(current.spec?.suspend, true);
    const a = current.metadata!.annotations!;
    assert.match(a['imagepull-sweeper/suspended-at']!, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    assert.ok(a['imagepull-sweeper/message']!.includes(MISSING_IMAGE));
    assert.match(a['imagepull-sweeper/message']!, /every-minute-1, every-minute-2/);
    const events = (await sweeperEvents(kc, ns)).filter((e) => e.action === 'SuspendCronJob');
    assert.equal(events.length, 1);
    assert.equal(events[0]!.reason, 'ImagePullStuck');
    assert.equal(events[0]!.type, 'Warning');
    assert.equal(events[0]!.regarding?.kind, 'CronJob');
    assert.equal(events[0]!.regarding?.name, 'every-minute');
    assert.equal(events[0]!.regarding?.uid, cronJob.metadata!.uid);

    // The ignored one: its Jobs were failed, but it was never written to.
    assert.equal((await readCronJob(kc, ns, 'hands-off')).metadata?.resourceVersion, ignoredVersion);
    assert.equal((await readCronJob(kc, ns, 'hands-off')).spec?.suspend, false);

    // Stays suspended: the CronJob controller starts no Job, another sweep changes nothing.
    const third = await runSweep(kc, { namespaces: [ns], policy: SUSPEND_AFTER_2 });
    assert.equal(third.exitCode, 0);
    assert.equal((await readCronJob(kc, ns, 'every-minute')).spec?.suspend, true);
    assert.equal((await sweeperEvents(kc, ns)).filter((e) => e.action === 'SuspendCronJob').length, 1);
    const jobs = await batch.listNamespacedJob({ namespace: ns });
    const started = jobs.items.filter(
      (j) => j.metadata?.ownerReferences?.[0]?.name === 'every-minute' && !/^every-minute-\d$/.test(j.metadata!.name!),
    );
    const suspendedAt = new Date(a['imagepull-sweeper/suspended-at']!).getTime();
    assert.ok(
      started.every((j) => new Date(j.metadata!.creationTimestamp!).getTime() <= suspendedAt + 1000),
      'no Job started after the suspension',
    );

    // The owner's own act resumes it (and the count starts again).
    await batch.patchNamespacedCronJob({ namespace: ns, name: 'every-minute', body: { spec: { suspend: false } } }, mergePatch);
    assert.equal((await readCronJob(kc, ns, 'every-minute')).spec?.suspend, false);
  });

  it('does not suspend a CronJob whose run succeeded between failures', TIMEOUT, async () => {
    const ns = await env.namespace('cron-recovered');
    const batch = kc.makeApiClient(BatchV1Api);
    const cronJob = await createCronJob(kc, ns, 'flaky', { schedule: '0 3 1 1 *' });
    await createStuckJob(kc, ns, 'flaky-1', { stuckFor: 9999, ownerReferences: ownedBy(cronJob) });
    const first = await runSweep(kc, { namespaces: [ns], policy: SUSPEND_AFTER_2 });
    assert.equal(cronLines(first.records)[0]?.outcome, 'counted', JSON.stringify(first.records));

    // A run succeeded: what the CronJob controller records when one of its Jobs completes.
    await batch.patchNamespacedCronJobStatus(
      { namespace: ns, name: 'flaky', body: { status: { lastSuccessfulTime: new Date().toISOString().replace(/\.\d{3}Z$/, 'Z') } } },
      mergePatch,
    );
    await createStuckJob(kc, ns, 'flaky-2', { stuckFor: 9999, ownerReferences: ownedBy(cronJob) });
    const second = await runSweep(kc, { namespaces: [ns], policy: SUSPEND_AFTER_2 });
    const line = cronLines(second.records)[0];
    assert.equal(line?.outcome, 'counted', JSON.stringify(second.records));
    assert.equal(line?.failedInARow, 1);
    assert.deepEqual(line?.jobs, ['flaky-2']);
    const current = await readCronJob(kc, ns, 'flaky');
    assert.equal(current.spec?.suspend, false);
    assert.equal(current.metadata?.annotations?.['imagepull-sweeper/suspended-at'], undefined);
    assert.equal((await sweeperEvents(kc, ns)).filter((e) => e.action === 'SuspendCronJob').length, 0);
  });
});
