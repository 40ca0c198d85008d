// `run --watch` through the fault proxy, between the sweeper and the real API server: a watch cut
// while Jobs get stuck is resumed from its resourceVersion, and one whose resourceVersion etcd has
// compacted meanwhile gets the real 410 Gone and lists again. No Job is missed, none is failed
// twice. A private control plane with the watch cache off, so the watch is served by etcd and an
// etcd compaction expires its resourceVersion as on a cluster whose cache cannot serve it.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { CoreV1Api } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { ensureBuilt, jsonLines, startCli } from '../support/cli.ts';
import { compactEtcd, startCluster, type Cluster } from '../support/cluster.ts';
import { startFaultProxy, type FaultProxy } from '../support/fault-proxy.ts';
import { createNamespace } from '../support/fixtures.ts';
import { waitFor } from '../support/kubelet.ts';
import { createStuckJob, sweeperEvents, waitForJobFailed } from '../support/sweeper.ts';

let cluster: Cluster;
let proxy: FaultProxy;
before(async () => {
  ensureBuilt();
  cluster = await startCluster({ apiserverArgs: ['--watch-cache=false'] });
  const cfg = parse(readFileSync(cluster.kubeconfigPath, 'utf8')) as { clusters: { cluster: Record<string, string> }[] };
  const upstreamCa = Buffer.from(cfg.clusters[0]!.cluster['certificate-authority-data']!, 'base64').toString('utf8');
  proxy = await startFaultProxy({ upstream: cluster.server, upstreamCa, seed: 37, faultRate: 0 });
});
after(async () => {
  await proxy?.close();
  await cluster?.stop();
});

describe('run --watch: watches that fail', () => {
  it('resumes a dropped watch, lists again after 410 Gone, and fails every Job once', { timeout: 300_000 }, async () => {
    const kc = cluster.kubeConfig;
    const ns = (await createNamespace(kc, 'watch-faults')).name;
    const dir = mkdtempSync(join(tmpdir(), 'ips-watch-faults-'));
    const policy = join(dir, 'policy.yaml');
    writeFileSync(policy, 'defaults: { grace: { permanent: 15s } }\n');
    const kubeconfig = proxy.writeKubeconfig(cluster.kubeconfigPath);
    const proc = startCli([
      'run',
      '--watch',
      '--schedule',
      '0 0 1 1 *',
      '--namespace',
      ns,
      '--policy-file',
      policy,
      '--kubeconfig',
      kubeconfig,
      '--output',
      'json',
    ]);
    const said = (pattern: RegExp) => jsonLines(proc.output()).some((l) => pattern.test(String(l.message)));
    const jobs = ['before-drop', 'while-dropped', 'while-expired'];
    try {
      await waitFor(() => said(/^summary$/), 60_000, 'the first sweep');
      await createStuckJob(kc, ns, 'before-drop', { stuckFor: 0 });

      // Cut: the Job stuck meanwhile reaches the watch when it resumes from its resourceVersion.
      proxy.refuseWatches(true);
      assert.ok(proxy.dropWatches() >= 1, 'a pod watch was open');
      await createStuckJob(kc, ns, 'while-dropped', { stuckFor: 5 });
      await waitFor(() => said(/^watch failed; resuming/), 30_000, 'the failed watch reported');
      proxy.refuseWatches(false);

      // Cut again, and etcd compacts past the watch's resourceVersion: the API server answers 410.
      await waitFor(() => proxy.openWatches() >= 1, 60_000, 'the watch resumed');
      proxy.refuseWatches(true);
      proxy.dropWatches();
      await createStuckJob(kc, ns, 'while-expired', { stuckFor: 5 });
      await kc.makeApiClient(CoreV1Api).createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'bump' } } });
      await compactEtcd(cluster.state.etcdUrl);
      proxy.refuseWatches(false);
      await waitFor(() => said(/^watch expired \(410 Gone\); listing again$/), 60_000, 'the expired watch listed again');

      for (const job of jobs) await waitForJobFailed(kc, ns, job, 60_000);
    } finally {
      proc.child.kill('SIGTERM');
    }
    assert.equal(await proc.exited, 0, proc.output());
    const lines = jsonLines(proc.output());
    for (const job of jobs) {
      const failed = lines.filter((l) => l.message === 'decision' && l.job === job && l.outcome === 'failed');
      assert.equal(failed.length, 1, `${job}: ${failed.length} failed decisions`);
    }
    const events = (await sweeperEvents(kc, ns)).filter((e) => e.reason === 'ImagePullStuck');
    assert.deepEqual(events.map((e) => e.regarding?.name).sort(), [...jobs].sort());
    // The first cut resumed from its resourceVersion; only the 410 listed again.
    assert.equal(lines.filter((l) => /^watch expired/.test(String(l.message))).length, 1);
    assert.ok(proxy.watchRequests().every((url) => /resourceVersion=\d+/.test(url)));
    process.stderr.write(`[watch-faults] ${proxy.watchRequests().length} watch requests; ${proxy.report()}\n`);
  });
});
