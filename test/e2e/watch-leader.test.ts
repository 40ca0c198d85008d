// `run --watch --leader-elect` on the real control plane, as the shipped ServiceAccount with the
// Deployment mode's RBAC: every replica watches, only the leader writes; kill -9 it while a Job's timer is pending, and
// the new leader fails that Job (whose grace ran out while there was no leader) as soon as it
// takes the Lease; a Job the dead leader failed without writing its Event gets it from the new one.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import {
  BatchV1Api,
  CoordinationV1Api,
  KubernetesObjectApi,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
} from '@kubernetes/client-node';
import { ensureBuilt, jsonLines, startCli } from '../support/cli.ts';
import { jobManifest } from '../support/fixtures.ts';
import { useTestCluster } from '../support/hooks.ts';
import { waitFor } from '../support/kubelet.ts';
import { applyManifests, INSTALL_NS, loadManifest, serviceAccountKubeconfig } from '../support/manifests.ts';
import { createStuckJob, readJob, sweeperEvents, waitForJobFailed } from '../support/sweeper.ts';

const LEASE = 'imagepull-sweeper';

let kc: KubeConfig;
let saKubeconfig: string;
let saDir: string;
const env = useTestCluster(async (hooks) => {
  kc = hooks.kc;
  ensureBuilt();
  await applyManifests(kc);
  // The Deployment mode's addition for the watch.
  const api = KubernetesObjectApi.makeApiClient(kc);
  for (const obj of loadManifest('deployment/watch-rbac.yaml'))
    await api.patch(obj, undefined, undefined, 'imagepull-sweeper-test', true, PatchStrategy.ServerSideApply);
  const sa = await serviceAccountKubeconfig(kc);
  hooks.onCleanup(async () => sa.remove());
  ({ path: saKubeconfig, dir: saDir } = sa);
});

type Replica = ReturnType<typeof startCli> & { name: string };

describe('run --watch --leader-elect', () => {
  const replicas: Replica[] = [];
  before(async () => {
    const leases = kc.makeApiClient(CoordinationV1Api);
    await leases.deleteNamespacedLease({ namespace: INSTALL_NS, name: LEASE }).catch(() => undefined);
    env.onCleanup(async () => {
      for (const r of replicas) r.child.kill('SIGKILL');
      await leases.deleteNamespacedLease({ namespace: INSTALL_NS, name: LEASE }).catch(() => undefined);
    });
  });

  it(
    'followers watch and write nothing; after kill -9 the new leader fails the Job whose grace ran out meanwhile, at once',
    { timeout: 240_000 },
    async () => {
      const ns = await env.namespace('watch-leader');
      const policy = join(saDir, 'watch-leader.yaml');
      writeFileSync(policy, 'defaults: { grace: { permanent: 8s } }\n');
      const start = (name: string): Replica => {
        const args = ['run', '--watch', '--leader-elect', '--leader-elect-namespace', INSTALL_NS, '--schedule', '0 0 1 1 *'];
        const replica = {
          name,
          ...startCli([...args, '--namespace', ns, '--policy-file', policy, '--kubeconfig', saKubeconfig, '--output', 'json'], {
            POD_NAME: name,
            POD_NAMESPACE: INSTALL_NS,
          }),
        };
        replicas.push(replica);
        return replica;
      };
      const lines = (r: Replica, message: string) => jsonLines(r.output()).filter((l) => l.message === message);
      const leads = (r: Replica) => lines(r, 'became the leader: sweeping').length > 0;
      const synced = (r: Replica) => lines(r, 'watching: the pod cache is synced').length > 0;

      const a = start('watch-a');
      const b = start('watch-b');
      await waitFor(() => (leads(a) && synced(a)) || (leads(b) && synced(b)), 60_000, 'a leader watching');
      const [leader, follower] = leads(a) ? [a, b] : [b, a];
      await waitFor(() => lines(follower, 'lease held by another sweeper').length > 0, 30_000, 'the follower sees the leader');
      // Followers keep their view warm: the follower lists and watches too.
      await waitFor(() => synced(follower), 60_000, 'the follower watching');

      // A Job the leader failed just before it died, killed between the claim and the Event: the
      // claim as the sweeper writes it (one status patch: annotations, pending label, FailureTarget),
      // 2 minutes ago. Its pod is gone once the Job controller fails it, so no watch stands for it.
      const batch = kc.makeApiClient(BatchV1Api);
      await batch.createNamespacedJob({ namespace: ns, body: jobManifest('left', 'registry.invalid/team/app:does-not-exist') });
      const failedAt = new Date(Date.now() - 120_000).toISOString().replace(/\.\d{3}Z$/, 'Z');
      const message =
        'regular container main of pod left-x waited 3m on image registry.invalid/team/app:does-not-exist (class permanent, rule defaults, grace 8s): ErrImagePull: not found';
      await batch.patchNamespacedJobStatus(
        {
          namespace: ns,
          name: 'left',
          body: {
            metadata: {
              labels: { 'imagepull-sweeper/pending': 'true' },
              annotations: {
                'imagepull-sweeper/failed-at': failedAt,
                'imagepull-sweeper/reason': 'ErrImagePull',
                'imagepull-sweeper/message': message,
                'imagepull-sweeper/claim': 'killed-leader',
              },
            },
            status: {
              conditions: [
                {
                  type: 'FailureTarget',
                  status: 'True',
                  reason: 'ImagePullStuck',
                  message: `imagepull-sweeper: ${message}`,
                  lastTransitionTime: new Date(failedAt),
                  lastProbeTime: new Date(failedAt),
                },
              ],
            },
          },
        },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      await waitForJobFailed(kc, ns, 'left', 30_000);

      // Both set the Job's timer; the leader dies before it fires (8 s grace).
      await createStuckJob(kc, ns, 'orphaned', { stuckFor: 0 });
      leader.child.kill('SIGKILL');
      await waitFor(() => leads(follower), 60_000, 'the follower takes over');
      await waitForJobFailed(kc, ns, 'orphaned', 30_000);

      const failed = jsonLines(follower.output()).filter((l) => l.message === 'decision' && l.job === 'orphaned' && l.outcome === 'failed');
      assert.equal(failed.length, 1, follower.output());
      // From the API server's side: the Lease's acquireTime, written as the follower took it, to the
      // claim's failed-at, the sweep's "now" on the server's clock (never later than the write).
      const lease = await kc.makeApiClient(CoordinationV1Api).readNamespacedLease({ namespace: INSTALL_NS, name: LEASE });
      const job = await readJob(kc, ns, 'orphaned');
      const reactionMs =
        Date.parse(String(job.metadata?.annotations?.['imagepull-sweeper/failed-at'])) - new Date(lease.spec!.acquireTime!).getTime();
      process.stderr.write(`[watch-leader] the new leader failed the Job ${reactionMs} ms after taking the Lease\n`);
      assert.ok(reactionMs <= 1_000, `${reactionMs} ms after taking the Lease`);
      assert.ok(Number(failed[0]!.stuckSeconds) >= 8);
      assert.equal(
        jsonLines(leader.output()).filter((l) => l.message === 'decision' && l.outcome === 'failed').length,
        0,
        'the killed leader failed nothing',
      );
      // The Job the dead leader left: its Event written by the new leader, its label gone.
      await waitFor(
        async () => (await readJob(kc, ns, 'left')).metadata?.labels?.['imagepull-sweeper/pending'] === undefined,
        30_000,
        "the left Job's label removed",
      );
      const events = (await sweeperEvents(kc, ns)).filter((e) => e.reason === 'ImagePullStuck');
      assert.deepEqual(events.map((e) => e.regarding?.name).sort(), ['left', 'orphaned'], 'one Event each');
      assert.equal(events.find((e) => e.regarding?.name === 'left')?.action, 'FailJob');
      assert.equal(lines(follower, 'wrote the missing FailJob Event of a Job failed by an earlier sweep').length, 1, follower.output());
      follower.child.kill('SIGTERM');
      assert.equal(await follower.exited, 0, follower.output());
    },
  );
});
