// An expired continue token from the real API server: etcd is compacted between two pages of
// one of the sweep's lists (pods, a namespace's Jobs, the pending Jobs), the API server answers
// 410 Gone, and the sweep lists again from the start.
// A private control plane with the watch cache off: the shared one serves later pages from its
// cache snapshots, which an etcd compaction does not expire (a cluster's apiserver goes to etcd
// when its cache cannot serve the token, e.g. after a restart).
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { BatchV1Api, CoreV1Api } from '@kubernetes/client-node';
import { describeApiError } from '../../src/kube/errors.ts';
import { createGateway, type KubeGateway } from '../../src/kube/gateway.ts';
import { compactEtcd as compact, startCluster, type Cluster } from '../support/cluster.ts';
import { createNamespace, jobManifest } from '../support/fixtures.ts';
import { createStuckJob, policyFile, runSweep, sweeperEvents, waitForJobFailed } from '../support/sweeper.ts';

let cluster: Cluster;
const compactEtcd = () => compact(cluster.state.etcdUrl);
before(async () => {
  cluster = await startCluster({ apiserverArgs: ['--watch-cache=false'] });
});
after(async () => cluster?.stop());

describe('an expired continue token', () => {
  it('restarts the pod list from the start, and every Job is judged once', { timeout: 300_000 }, async () => {
    const kc = cluster.kubeConfig;
    const ns = (await createNamespace(kc, 'continue')).name;
    const core = kc.makeApiClient(CoreV1Api);
    for (let i = 0; i < 5; i += 1) await createStuckJob(kc, ns, `job-${i}`, { stuckFor: 3600 });

    // The real gateway; after the first page, a write moves etcd on and etcd is compacted.
    const real = createGateway(kc);
    const pages: { continued: boolean; status: number | 'ok' }[] = [];
    let compactedAt: number | undefined;
    const gateway: KubeGateway = {
      ...real,
      async listPodRows(opts) {
        try {
          const page = await real.listPodRows(opts);
          pages.push({ continued: opts.continueToken !== undefined, status: 'ok' });
          if (page.continueToken && compactedAt === undefined) {
            await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'bump' } } });
            compactedAt = await compactEtcd();
          }
          return page;
        } catch (error) {
          pages.push({ continued: opts.continueToken !== undefined, status: describeApiError(error).status ?? 0 });
          throw error;
        }
      },
    };
    const { exitCode, summary, lines, records } = await runSweep(
      kc,
      { namespaces: [ns], policy: policyFile('{}\n'), pageSize: 2 },
      gateway,
    );

    assert.ok(compactedAt !== undefined, 'etcd was compacted between pages');
    const expired = pages.findIndex((p) => p.continued && p.status === 410);
    assert.ok(expired > 0, `the API server answered 410 Gone to the continue token: ${JSON.stringify(pages)}`);
    assert.equal(pages[expired + 1]?.continued, false, 'the list started again without a token');
    assert.ok(records.some((r) => r.level === 'warn' && /continue token expired; listing again/.test(String(r.message))));

    assert.equal(exitCode, 0, 'done');
    assert.equal(summary?.podsScanned, 5, 'pods of the abandoned pass are not counted twice');
    const jobs = lines.map((l) => `${l.job} ${l.outcome}`).sort();
    assert.deepEqual(
      jobs,
      [0, 1, 2, 3, 4].map((i) => `job-${i} failed`),
    );
    for (let i = 0; i < 5; i += 1) await waitForJobFailed(kc, ns, `job-${i}`);
    assert.equal((await sweeperEvents(kc, ns)).length, 5);
    process.stderr.write(`[continue] pages: ${JSON.stringify(pages)}; etcd compacted at revision ${compactedAt}\n`);
  });
  it("restarts the Job lists (a namespace's Jobs, the pending Jobs), and every Job is judged once", { timeout: 300_000 }, async () => {
    const kc = cluster.kubeConfig;
    const ns = (await createNamespace(kc, 'continue-jobs')).name;
    const core = kc.makeApiClient(CoreV1Api);
    const batch = kc.makeApiClient(BatchV1Api);
    // 12 stuck Jobs: at least 10 in one namespace, so their owners come from one paged LIST.
    for (let i = 0; i < 12; i += 1) await createStuckJob(kc, ns, `stuck-${i}`, { stuckFor: 3600 });
    // 4 Jobs failed a moment ago by an earlier sweep, not finished yet: found by their label.
    const failedAt = new Date(Date.now() - 10_000).toISOString().replace(/\.\d+Z$/, 'Z');
    for (let i = 0; i < 4; i += 1) {
      const body = jobManifest(`pending-${i}`, 'registry.invalid/app:1');
      body.metadata = {
        ...body.metadata,
        labels: { 'imagepull-sweeper/pending': 'true' },
        annotations: { 'imagepull-sweeper/failed-at': failedAt, 'imagepull-sweeper/claim': `earlier-${i}` },
      };
      await batch.createNamespacedJob({ namespace: ns, body });
    }

    // Pages of 3 Jobs; after the first page of each kind of Job list, etcd moves on and is compacted.
    const real = createGateway(kc);
    const calls: { list: string; continued: boolean; status: number | 'ok' }[] = [];
    const compacted = new Set<string>();
    let compaction = Promise.resolve();
    const gateway: KubeGateway = {
      ...real,
      async listJobs(opts) {
        const list = opts.labelSelector ? 'pending' : 'namespace';
        try {
          const page = await real.listJobs({ ...opts, limit: 3 });
          calls.push({ list, continued: opts.continueToken !== undefined, status: 'ok' });
          if (page.continueToken && !compacted.has(list)) {
            compacted.add(list);
            // The two lists run at once: one compaction at a time, each past a revision of its own.
            compaction = compaction.then(async () => {
              await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: `bump-${list}` } } });
              await compactEtcd();
            });
            await compaction;
          }
          return page;
        } catch (error) {
          calls.push({ list, continued: opts.continueToken !== undefined, status: describeApiError(error).status ?? 0 });
          throw error;
        }
      },
    };
    const { exitCode, summary, lines: audited, records } = await runSweep(kc, { namespaces: [ns], policy: policyFile('{}\n') }, gateway);

    for (const list of ['namespace', 'pending']) {
      const mine = calls.filter((c) => c.list === list);
      const expired = mine.findIndex((c) => c.continued && c.status === 410);
      assert.ok(expired > 0, `the ${list} Job list got 410 Gone for its continue token: ${JSON.stringify(mine)}`);
      assert.equal(mine[expired + 1]?.continued, false, `the ${list} Job list started again without a token`);
    }
    assert.ok(records.some((r) => r.level === 'warn' && /^Job list continue token expired; listing again/.test(String(r.message))));
    assert.ok(records.some((r) => r.level === 'warn' && /^pending Job list continue token expired; listing again/.test(String(r.message))));

    assert.equal(exitCode, 0, 'done');
    const lines = audited.map((l) => `${l.job} ${l.outcome}`).sort();
    const expected = [
      ...[0, 1, 2, 3].map((i) => `pending-${i} skipped`),
      ...Array.from({ length: 12 }, (_, i) => `stuck-${i} failed`),
    ].sort();
    assert.deepEqual(lines, expected, 'each Job judged exactly once');
    assert.equal(summary?.awaitingFailed, 16);
    for (let i = 0; i < 12; i += 1) await waitForJobFailed(kc, ns, `stuck-${i}`);
    assert.equal((await sweeperEvents(kc, ns)).length, 12);
    process.stderr.write(`[continue] Job list calls: ${JSON.stringify(calls)}\n`);
  });
});
