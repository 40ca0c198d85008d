// `run --leader-elect` on the real control plane, as the shipped ServiceAccount (exactly the
// shipped RBAC and admission guard): of two replicas exactly one sweeps; SIGKILL the leader and
// the other takes over once the lease has stood unrenewed for its duration; SIGTERM releases the
// Lease, so a follower takes over at its next retry.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import { CoordinationV1Api, PatchStrategy, setHeaderOptions, type KubeConfig } from '@kubernetes/client-node';
import { ensureBuilt, jsonLines, startCli } from '../support/cli.ts';
import { useTestCluster } from '../support/hooks.ts';
import { waitFor } from '../support/kubelet.ts';
import { applyManifests, INSTALL_NS, serviceAccountKubeconfig } from '../support/manifests.ts';
import { createStuckJob, waitForJobFailed } from '../support/sweeper.ts';

const TIMEOUT = { timeout: 240_000 };
const LEASE = 'imagepull-sweeper';
const LEASE_DURATION_MS = 15_000;
const RETRY_MS = 2_000;

let kc: KubeConfig;
let saKubeconfig: string;
let saDir: string;
const env = useTestCluster(async (hooks) => {
  kc = hooks.kc;
  await ensureBuilt();
  await applyManifests(kc);
  const sa = await serviceAccountKubeconfig(kc);
  hooks.onCleanup(async () => sa.remove());
  ({ path: saKubeconfig, dir: saDir } = sa);
});

type Replica = ReturnType<typeof startCli> & { name: string };

describe('run --leader-elect', () => {
  let ns: string;
  let policy: string;
  const replicas: Replica[] = [];

  before(async () => {
    ns = await env.namespace('leader');
    policy = join(saDir, 'leader-policy.yaml');
    writeFileSync(policy, 'defaults: { action: fail }\n');
    const leases = kc.makeApiClient(CoordinationV1Api);
    await leases.deleteNamespacedLease({ namespace: INSTALL_NS, name: LEASE }).catch(() => undefined);
    env.onCleanup(async () => {
      for (const r of replicas) r.child.kill('SIGKILL');
      await leases.deleteNamespacedLease({ namespace: INSTALL_NS, name: LEASE }).catch(() => undefined);
    });
  });

  const start = (name: string): Replica => {
    const replica = {
      name,
      ...startCli(
        [
          'run',
          '--leader-elect',
          '--leader-elect-namespace',
          INSTALL_NS,
          '--schedule',
          '*/2 * * * * *',
          '--namespace',
          ns,
          '--policy-file',
          policy,
          '--kubeconfig',
          saKubeconfig,
          '--output',
          'json',
        ],
        { POD_NAME: name, POD_NAMESPACE: INSTALL_NS },
      ),
    };
    replicas.push(replica);
    return replica;
  };
  const lines = (r: Replica, message: string) => jsonLines(r.output()).filter((l) => l.message === message);
  const leads = (r: Replica) => lines(r, 'became the leader: sweeping').length > 0;
  const sweeps = (r: Replica) => lines(r, 'summary').length;
  const holder = async () =>
    (await kc.makeApiClient(CoordinationV1Api).readNamespacedLease({ namespace: INSTALL_NS, name: LEASE })).spec?.holderIdentity ??
    undefined;

  it('two replicas: exactly one sweeps; SIGKILL hands over within the lease duration; SIGTERM releases', TIMEOUT, async () => {
    const a = start('replica-a');
    const b = start('replica-b');
    await waitFor(() => leads(a) || leads(b), 30_000, 'a leader');
    const [leader, follower] = leads(a) ? [a, b] : [b, a];
    await createStuckJob(kc, ns, 'stuck', { stuckFor: 9999 });
    await waitForJobFailed(kc, ns, 'stuck', 60_000);
    await waitFor(() => sweeps(leader) >= 3, 30_000, 'three sweeps by the leader');
    assert.equal(leads(follower), false, follower.output());
    assert.equal(sweeps(follower), 0, 'the follower never swept');
    assert.match(String(await holder()), new RegExp(`^${leader.name}_`));
    assert.ok(lines(follower, 'lease held by another sweeper').length > 0);
    // The shipped Role lets it watch the one Lease by its name.
    assert.ok(lines(follower, 'watching the lease').length > 0, follower.output());
    assert.equal(lines(follower, 'cannot watch the lease: following it by reads every retry period').length, 0, follower.output());

    leader.child.kill('SIGKILL');
    const killedAt = performance.now();
    await waitFor(() => leads(follower), LEASE_DURATION_MS * 3, 'the follower takes over');
    const takeoverMs = performance.now() - killedAt;
    process.stderr.write(
      `[leader-election] takeover after SIGKILL: ${Math.round(takeoverMs)} ms (lease duration ${LEASE_DURATION_MS} ms)\n`,
    );
    // At most a lease duration after the last renewal it saw, plus one jittered retry period.
    assert.ok(takeoverMs <= LEASE_DURATION_MS + 1.2 * RETRY_MS + 2_000, `took ${Math.round(takeoverMs)} ms`);
    await waitFor(() => sweeps(follower) >= 1, 30_000, 'the new leader sweeps');
    assert.match(String(await holder()), new RegExp(`^${follower.name}_`));

    const c = start('replica-c');
    await waitFor(() => lines(c, 'lease held by another sweeper').length > 0, 30_000, 'the third replica sees the leader');
    follower.child.kill('SIGTERM');
    const stoppedAt = performance.now();
    assert.equal(await follower.exited, 0, follower.output());
    assert.ok(lines(follower, 'released the lease').length > 0, follower.output());
    await waitFor(() => leads(c), LEASE_DURATION_MS * 2, 'the third replica takes over');
    const handoverMs = performance.now() - stoppedAt;
    process.stderr.write(`[leader-election] takeover after SIGTERM (released): ${Math.round(handoverMs)} ms\n`);
    // Well before the lease would have expired: it was released, not waited out.
    assert.ok(handoverMs < LEASE_DURATION_MS, `took ${Math.round(handoverMs)} ms`);
    await waitFor(() => sweeps(c) >= 1, 30_000, 'the third replica sweeps');
    c.child.kill('SIGTERM');
    assert.equal(await c.exited, 0, c.output());
    assert.equal(await holder(), undefined, 'released on exit');
  });

  it(
    'a leader that sees another holder (a partition healed, a follower with other timings) stops at once and exits 1',
    TIMEOUT,
    async () => {
      const leases = kc.makeApiClient(CoordinationV1Api);
      await leases.deleteNamespacedLease({ namespace: INSTALL_NS, name: LEASE }).catch(() => undefined);
      const d = start('replica-d');
      await waitFor(() => leads(d) && sweeps(d) >= 1, 30_000, 'a leader sweeping');
      // Another identity writes itself in, as a follower that took the Lease would.
      await leases.patchNamespacedLease(
        { namespace: INSTALL_NS, name: LEASE, body: { spec: { holderIdentity: 'intruder' } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
      assert.equal(await d.exited, 1, d.output());
      const lost = lines(d, 'lost the lease: stopping at once, abandoning the writes in flight');
      assert.equal(lost.length, 1, d.output());
      assert.equal(lost[0]!.holder, 'intruder');
      assert.equal(await holder(), 'intruder', 'a lost Lease is not released');
      assert.equal(lines(d, 'released the lease').length, 0);
    },
  );
});
