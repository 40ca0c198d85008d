// Hostile data in the cluster, as the real API server stores it: a megabyte-long waiting message
// full of control characters, a status for a container the spec does not have, owner references
// whose uid does not match, owners already deleted. No crash, the right decisions, nothing written
// to the wrong object, and audit lines that stay bounded. A private control plane without the
// garbage collector, which would otherwise delete the orphaned pods before the sweep sees them.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { BatchV1Api, CoreV1Api, EventsV1Api } from '@kubernetes/client-node';
import { WAITING_MESSAGE_LIMIT } from '../../src/report/audit.ts';
import { CONTROLLERS, startCluster, type Cluster } from '../support/cluster.ts';
import { createNamespace, jobManifest } from '../support/fixtures.ts';
import { setImagePullStuck, setPodRunning, waitForJobPods } from '../support/kubelet.ts';
import {
  MISSING_IMAGE,
  NOT_FOUND_MESSAGE,
  createStuckJob,
  policyFile,
  runSweep,
  settledSnapshot,
  snapshot,
  waitForJobFailed,
} from '../support/sweeper.ts';

let cluster: Cluster;
before(async () => {
  cluster = await startCluster({ controllers: CONTROLLERS.filter((c) => c !== 'garbage-collector-controller') });
});
after(async () => cluster?.stop());

const POLICY = policyFile('{}\n');
const HOUR_AGO = () => new Date(Date.now() - 3600_000);

describe('hostile cluster data', () => {
  it('a megabyte of control characters in the waiting message: the Job is failed, every output bounded', { timeout: 300_000 }, async () => {
    const kc = cluster.kubeConfig;
    const ns = (await createNamespace(kc, 'hostile-msg')).name;
    // A megabyte of text with control characters sprinkled in (each is 6 bytes of JSON on the wire).
    const junk = Array.from({ length: 1024 * 1024 }, (_, i) => (i % 997 === 0 ? String.fromCharCode(i % 32) : 'x')).join('');
    const message = `${NOT_FOUND_MESSAGE}\u0000\u001b[2J\r\n{"outcome":"skipped"}${junk}`;
    await createStuckJob(kc, ns, 'loud', { stuckFor: 3600, message });
    const pod = (await kc.makeApiClient(CoreV1Api).listNamespacedPod({ namespace: ns })).items[0]!;
    assert.ok(pod.status!.containerStatuses![0]!.state!.waiting!.message!.length > 1024 * 1024, 'the API server stored the whole message');

    const run = await runSweep(kc, { namespaces: [ns], policy: POLICY });
    assert.equal(run.exitCode, 0);
    assert.equal(run.lines.length, 1);
    assert.equal(run.lines[0]!.outcome, 'failed');
    assert.equal(run.lines[0]!.class, 'permanent');
    assert.ok(Buffer.byteLength(run.lines[0]!.waitingMessage) <= WAITING_MESSAGE_LIMIT);
    const job = await waitForJobFailed(kc, ns, 'loud');
    assert.ok(Buffer.byteLength(job.metadata!.annotations!['imagepull-sweeper/message']!) <= 4096);
    const events = (await kc.makeApiClient(EventsV1Api).listNamespacedEvent({ namespace: ns })).items.filter(
      (e) => e.reportingController === 'imagepull-sweeper',
    );
    assert.equal(events.length, 1);
    assert.ok(Buffer.byteLength(events[0]!.note!) <= 1024);
    const longest = Math.max(...run.records.map((r) => JSON.stringify(r).length));
    assert.ok(longest < 16_384, `longest log record ${longest} characters`);
  });

  it('a status for a container the spec does not have: never judged, nothing written', { timeout: 300_000 }, async () => {
    const kc = cluster.kubeConfig;
    const core = kc.makeApiClient(CoreV1Api);
    const ns = (await createNamespace(kc, 'hostile-ghost')).name;
    await kc.makeApiClient(BatchV1Api).createNamespacedJob({ namespace: ns, body: jobManifest('ghostly', 'registry.example/app:1') });
    const [p] = await waitForJobPods(core, ns, 'ghostly');
    const name = p!.metadata!.name!;
    await setPodRunning(core, ns, name, { since: HOUR_AGO() });
    // Add a waiting status for a container named nowhere in the spec.
    const pod = await core.readNamespacedPod({ namespace: ns, name });
    const ghost = {
      name: 'ghost',
      image: MISSING_IMAGE,
      imageID: '',
      ready: false,
      restartCount: 0,
      state: { waiting: { reason: 'ImagePullBackOff', message: NOT_FOUND_MESSAGE } },
    };
    let accepted = true;
    try {
      await core.replaceNamespacedPodStatus({
        namespace: ns,
        name,
        body: { ...pod, status: { ...pod.status, phase: 'Pending', containerStatuses: [...pod.status!.containerStatuses!, ghost] } },
      });
    } catch {
      accepted = false;
    }
    const before = await settledSnapshot(kc, ns);
    const run = await runSweep(kc, { namespaces: [ns], policy: POLICY, dryRun: true });
    process.stderr.write(
      `[hostile] ghost container status ${accepted ? 'stored' : 'rejected'} by the API server; dry-run decisions: ${JSON.stringify(run.lines.map((l) => [l.container, l.outcome, l.detail]))}\n`,
    );
    assert.ok(accepted, 'the API server (v1.37) stores a status for a container the spec does not have');
    assert.equal(run.exitCode, 0);
    assert.deepEqual(await snapshot(kc, ns), before, 'a dry run wrote nothing');
    // Only containers the spec names are judged: the healthy Job is not even reported.
    assert.deepEqual(run.lines, [], 'no decision for a container the spec does not have');
  });

  it('owner references whose uid does not match, and owners already deleted: reported, nothing written', { timeout: 300_000 }, async () => {
    const kc = cluster.kubeConfig;
    const core = kc.makeApiClient(CoreV1Api);
    const batch = kc.makeApiClient(BatchV1Api);
    const ns = (await createNamespace(kc, 'hostile-owner')).name;
    // A real Job whose name an impostor pod claims with another uid.
    await createStuckJob(kc, ns, 'real', { stuckFor: 60, annotations: { 'imagepull-sweeper/ignore': 'true' } });
    const orphan = async (podName: string, owner: { name: string; uid: string }) => {
      await core.createNamespacedPod({
        namespace: ns,
        body: {
          metadata: {
            name: podName,
            ownerReferences: [{ apiVersion: 'batch/v1', kind: 'Job', name: owner.name, uid: owner.uid, controller: true }],
          },
          spec: { restartPolicy: 'Never', containers: [{ name: 'main', image: MISSING_IMAGE }] },
        },
      });
      await setImagePullStuck(core, ns, podName, {
        since: HOUR_AGO(),
        stuck: [{ container: 'main', reason: 'ImagePullBackOff', message: NOT_FOUND_MESSAGE }],
      });
    };
    await orphan('impostor', { name: 'real', uid: '00000000-0000-4000-8000-000000000001' });
    await orphan('left-behind', { name: 'deleted-long-ago', uid: '00000000-0000-4000-8000-000000000002' });
    // A Job deleted for real; with no garbage collector its stuck pod stays behind.
    const { pod: abandoned } = await createStuckJob(kc, ns, 'gone', { stuckFor: 3600 });
    await batch.deleteNamespacedJob({ namespace: ns, name: 'gone', propagationPolicy: 'Background' });
    await waitForGone(() => batch.readNamespacedJob({ namespace: ns, name: 'gone' }));

    const before = await snapshot(kc, ns);
    const run = await runSweep(kc, { namespaces: [ns], policy: POLICY });
    assert.equal(run.exitCode, 0, JSON.stringify(run.records.filter((r) => r.level === 'error')));
    const byPod = new Map(run.lines.map((l) => [l.pod, l]));
    for (const pod of ['impostor', 'left-behind', abandoned]) {
      const line = byPod.get(pod);
      assert.ok(line, `no decision for ${pod}`);
      assert.notEqual(line.outcome, 'failed', `${pod}: ${line.detail}`);
      assert.notEqual(line.outcome, 'error', `${pod}: ${line.detail}`);
    }
    assert.match(byPod.get('impostor')!.detail, /uid differs|replaced/);
    assert.match(byPod.get('left-behind')!.detail, /no longer exists/);
    assert.deepEqual(await snapshot(kc, ns), before, 'no Job or Pod was written');
    const events = (await kc.makeApiClient(EventsV1Api).listNamespacedEvent({ namespace: ns })).items.filter(
      (e) => e.reportingController === 'imagepull-sweeper',
    );
    assert.deepEqual(
      events.map((e) => `${e.action} ${e.regarding?.kind}/${e.regarding?.name}`),
      [],
    );
  });
});

async function waitForGone(read: () => Promise<unknown>): Promise<void> {
  for (let i = 0; i < 100; i += 1) {
    try {
      await read();
    } catch {
      return;
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error('still there');
}
