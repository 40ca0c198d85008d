// The sweeper through a fault-injecting TLS proxy (test/support/fault-proxy.ts) in front of the
// real API server: every sweep is the built CLI in its own process. FAULT_SEED / FAULT_SEEDS below.
// 100 stuck Jobs (a third on the podFailurePolicy path) and 20 healthy ones: after a few sweeps
// every stuck Job is Failed with exactly one FailJob Event, and no healthy Job was written.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { BatchV1Api, CoreV1Api, type KubeConfig, type V1Job } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { mapBounded } from '../../src/concurrency.ts';
import { ensureBuilt, jsonLines, runCli, type Exec } from '../support/cli.ts';
import { startFaultProxy, type FaultProxy } from '../support/fault-proxy.ts';
import { jobManifest } from '../support/fixtures.ts';
import { useTestCluster } from '../support/hooks.ts';
import { refuseStatusWrites } from '../support/policy-engine.ts';
import { setPodRunning, waitFor, waitForJobPods } from '../support/kubelet.ts';
import { createStuckJob, sweeperEvents, trueCondition, waitForJobFailed } from '../support/sweeper.ts';

// FAULT_SEED=N replays one seed; FAULT_SEEDS=N,M,... runs each in turn (a sweep across seeds).
const SEEDS = (process.env.FAULT_SEEDS ?? process.env.FAULT_SEED ?? '20261130').split(',').map(Number);
const FAULT_RATE = 0.3;
const REQUEST_TIMEOUT = '2s';
const dir = mkdtempSync(join(tmpdir(), 'ips-faults-'));
const POLICY = join(dir, 'policy.yaml');
// confirmWithin short, so a claim whose pod steps all failed is completed within the test.
const CONFIRM_WITHIN_S = 20;
writeFileSync(POLICY, `limits: { confirmWithin: ${CONFIRM_WITHIN_S}s }\n`);
const PFP = {
  podFailurePolicy: { rules: [{ action: 'FailJob' as const, onPodConditions: [{ type: 'ImagePullStuck', status: 'True' }] }] },
};

let kc: KubeConfig;
let adminKubeconfig: string;
// Hundreds of Jobs: on the shared control plane, its Job controller would fall behind for the files
// beside this one (test/e2e/suites.ts).
const env = useTestCluster(
  (hooks) => {
    ensureBuilt();
    kc = hooks.kc;
    adminKubeconfig = hooks.cluster.kubeconfigPath;
  },
  { ownControlPlane: true },
);

function caOf(kubeconfigPath: string): string {
  const cfg = parse(readFileSync(kubeconfigPath, 'utf8')) as { clusters: { cluster: Record<string, string> }[] };
  return Buffer.from(cfg.clusters[0]!.cluster['certificate-authority-data']!, 'base64').toString('utf8');
}

function sweepArgs(kubeconfig: string, namespaces: string[]): string[] {
  return [
    'sweep',
    '--kubeconfig',
    kubeconfig,
    '--policy-file',
    POLICY,
    '--output',
    'json',
    '--request-timeout',
    REQUEST_TIMEOUT,
    ...namespaces.flatMap((n) => ['--namespace', n]),
  ];
}

/** The exit status agrees with what the sweep says it did (SPEC "Exit status"). */
function assertExitStatusRight(r: Exec, label: string): void {
  const records = jsonLines(r.stdout);
  const summary = records.find((l) => l.message === 'summary') as { exitCode: number; actionErrors: number } | undefined;
  const context = `${label}: exit ${r.code}\nstderr: ${r.stderr}\nstdout tail: ${r.stdout.slice(-3000)}`;
  assert.doesNotMatch(r.stderr, /unexpected error/, context);
  if (!summary) {
    assert.equal(r.code, 3, context);
    assert.ok(
      records.some((l) => l.level === 'error' && /nothing was changed/.test(String(l.message))),
      context,
    );
    return;
  }
  const decisions = records.filter((l) => l.message === 'decision');
  const errors = decisions.filter((l) => l.outcome === 'error' || l.error !== null).length;
  const lookups = records.filter((l) => l.level === 'error' && /^could not (read|list)/.test(String(l.message))).length;
  // A Job failed earlier whose missing Event or pending label could not be written this time.
  const unsettled = records.filter((l) => /^Job failed by an earlier sweep: /.test(String(l.message))).length;
  assert.equal(r.code, summary.exitCode, context);
  assert.equal(r.code, errors > 0 || summary.actionErrors > 0 || lookups > 0 || unsettled > 0 ? 1 : 0, context);
}

describe('a sweep through injected faults', () => {
  for (const seed of SEEDS) {
    it(
      `fails 100 stuck Jobs exactly once each, touches none of 20 healthy ones, and says so in its exit status (seed ${seed})`,
      { timeout: 900_000 },
      async () => {
        const proxy = await startFaultProxy({
          upstream: env.cluster.server,
          upstreamCa: caOf(adminKubeconfig),
          seed,
          faultRate: FAULT_RATE,
          slowMs: 3_000,
        });
        try {
          await sweepThroughFaults(proxy, seed);
        } finally {
          await proxy.close();
        }
      },
    );
  }
});

async function sweepThroughFaults(proxy: FaultProxy, seed: number): Promise<void> {
  const kubeconfig = proxy.writeKubeconfig(adminKubeconfig);
  const batch = kc.makeApiClient(BatchV1Api);
  const core = kc.makeApiClient(CoreV1Api);
  const namespaces = await Promise.all([0, 1, 2, 3, 4].map(() => env.namespace('faults')));
  const stuck: { ns: string; name: string; pfp: boolean }[] = [];
  const healthy: { ns: string; name: string; pod: string }[] = [];
  namespaces.forEach((ns, n) => {
    for (let i = 0; i < 20; i += 1) stuck.push({ ns, name: `stuck-${n}-${i}`, pfp: (n * 20 + i) % 3 === 0 });
  });
  await mapBounded(stuck, 12, (j) => createStuckJob(kc, j.ns, j.name, { stuckFor: 3600, spec: j.pfp ? PFP : {} }));
  await mapBounded([...Array(20).keys()], 8, async (i) => {
    const ns = namespaces[i % namespaces.length]!;
    const name = `healthy-${i}`;
    await batch.createNamespacedJob({ namespace: ns, body: jobManifest(name, 'registry.example/app:1', i % 2 ? PFP : {}) });
    const [pod] = await waitForJobPods(core, ns, name);
    await setPodRunning(core, ns, pod!.metadata!.name!, { since: new Date(Date.now() - 7200_000) });
    healthy.push({ ns, name, pod: pod!.metadata!.name! });
  });
  // The healthy Jobs as the Job controller leaves them once it has seen their pods run (two
  // equal reads a second apart), so any later write is the sweeper's.
  const readHealthy = async () =>
    new Map(
      await mapBounded(
        healthy,
        8,
        async (h) => [`${h.ns}/${h.name}`, await batch.readNamespacedJob({ namespace: h.ns, name: h.name })] as const,
      ),
    );
  const versions = (m: Map<string, V1Job>) => JSON.stringify([...m].map(([k, j]) => [k, j.metadata?.resourceVersion]));
  let healthyBefore = await readHealthy();
  await waitFor(
    async () => {
      await new Promise((r) => setTimeout(r, 1000));
      const now = await readHealthy();
      const settled = versions(now) === versions(healthyBefore);
      healthyBefore = now;
      return settled;
    },
    60_000,
    'healthy Jobs settled',
  );
  assert.equal(stuck.filter((j) => j.pfp).length, 34);

  const isFailed = async (j: { ns: string; name: string }) =>
    trueCondition(await batch.readNamespacedJob({ namespace: j.ns, name: j.name }), 'Failed') !== undefined;
  // Sweep until a sweep finds nothing left to do: every decision `skipped`, no Job awaiting
  // `Failed`, no Event written for an earlier sweep, exit 0.
  const sweeps: {
    code: number | null;
    retries: number;
    outcomes: Record<string, number>;
    backfilled: number;
    awaiting: number;
    idle: boolean;
  }[] = [];
  for (let n = 1; n <= 6; n += 1) {
    const r = await runCli(sweepArgs(kubeconfig, namespaces), { timeoutMs: 600_000 });
    assertExitStatusRight(r, `sweep ${n}`);
    const records = jsonLines(r.stdout);
    const outcomes: Record<string, number> = {};
    for (const l of records.filter((x) => x.message === 'decision')) outcomes[String(l.outcome)] = (outcomes[String(l.outcome)] ?? 0) + 1;
    const retries = records.filter((l) => /^retrying /.test(String(l.message))).length;
    const backfilled = records.filter((l) => /^wrote the missing FailJob Event/.test(String(l.message))).length;
    const summary = records.find((l) => l.message === 'summary') as { awaitingFailed?: number } | undefined;
    const awaiting = summary?.awaitingFailed ?? -1;
    const idle = r.code === 0 && awaiting === 0 && backfilled === 0 && Object.keys(outcomes).every((o) => o === 'skipped');
    sweeps.push({ code: r.code, retries, outcomes, backfilled, awaiting, idle });
    process.stderr.write(
      `[faults] sweep ${n}: exit ${r.code}, ${retries} retries, outcomes ${JSON.stringify(outcomes)}, ${backfilled} Events written for earlier sweeps, ` +
        `${awaiting} awaiting Failed; proxy so far: ${proxy.report()}\n`,
    );
    if (idle) break;
    // Give the Job controller time to act on what landed (and confirmWithin to pass for the rest).
    await waitFor(
      async () => (await mapBounded(stuck, 8, isFailed)).every(Boolean),
      (CONFIRM_WITHIN_S + 5) * 1000,
      'stuck Jobs Failed',
    ).catch(() => undefined);
  }
  const stats = proxy.stats();
  const converged = sweeps.findIndex((s) => s.idle);
  const retries = sweeps.reduce((a, s) => a + s.retries, 0);
  process.stderr.write(
    `[faults] seed ${seed}: ${converged < 0 ? `not converged after ${sweeps.length} sweeps` : `converged in ${converged} sweep(s) (+1 that found nothing to do)`}; ` +
      `exits ${sweeps.map((s) => s.code).join(',')}; ${retries} retries logged; ` +
      `${sweeps.reduce((a, s) => a + s.backfilled, 0)} Events written by a later sweep; ${proxy.report()}\n`,
  );
  const failed = await mapBounded(stuck, 8, isFailed);
  const remaining = stuck.filter((_, i) => !failed[i]);
  assert.deepEqual(
    remaining.map((j) => `${j.ns}/${j.name}`),
    [],
    'every stuck Job ends Failed',
  );

  // Faults really were injected, of every kind, on at least 20% of requests.
  const faults = Object.values(stats.faults).reduce((a, b) => a + b, 0);
  assert.ok(faults / stats.requests >= 0.2, proxy.report());
  for (const [kind, count] of Object.entries(stats.faults)) assert.ok(count > 0, `no ${kind} fault injected: ${proxy.report()}`);
  assert.ok(stats.lostWrites > 0, proxy.report());

  assert.ok(converged >= 0, `a sweep finding nothing to do never came: ${JSON.stringify(sweeps)}`);

  // Exactly one FailJob Event per stuck Job, none on healthy ones; reasons as the mechanism says.
  let duplicates = 0;
  for (const ns of namespaces) {
    const events = (await sweeperEvents(kc, ns)).filter((e) => e.action === 'FailJob');
    const perJob = new Map<string, number>();
    for (const e of events) perJob.set(e.regarding!.name!, (perJob.get(e.regarding!.name!) ?? 0) + 1);
    for (const j of stuck.filter((s) => s.ns === ns)) {
      const count = perJob.get(j.name) ?? 0;
      if (count > 1) duplicates += count - 1;
      assert.equal(count, 1, `${ns}/${j.name} has ${count} FailJob Events`);
    }
    for (const h of healthy.filter((x) => x.ns === ns)) assert.equal(perJob.get(h.name), undefined, `${ns}/${h.name} got an Event`);
  }
  process.stderr.write(`[faults] duplicates: ${duplicates}\n`);
  for (const j of stuck) {
    const job = await batch.readNamespacedJob({ namespace: j.ns, name: j.name });
    assert.ok(job.metadata?.annotations?.['imagepull-sweeper/failed-at'], `${j.ns}/${j.name} lacks failed-at`);
    assert.equal(job.metadata?.annotations?.['imagepull-sweeper/reason'], 'ImagePullBackOff', `${j.ns}/${j.name}`);
  }
  for (const h of healthy) {
    const job = await batch.readNamespacedJob({ namespace: h.ns, name: h.name });
    const before = healthyBefore.get(`${h.ns}/${h.name}`)!;
    const ours = Object.keys({ ...job.metadata?.annotations, ...job.metadata?.labels }).filter((k) => k.startsWith('imagepull-sweeper/'));
    assert.deepEqual(ours, [], `${h.ns}/${h.name} carries the sweeper's marks`);
    assert.equal(job.spec?.activeDeadlineSeconds, before.spec?.activeDeadlineSeconds, `${h.ns}/${h.name} got a deadline`);
    assert.equal(job.metadata?.resourceVersion, before.metadata?.resourceVersion, `${h.ns}/${h.name} was written`);
    assert.equal(trueCondition(job, 'Failed'), undefined);
    const pod = await core.readNamespacedPod({ namespace: h.ns, name: h.pod });
    assert.equal(pod.metadata?.deletionTimestamp, undefined, `${h.pod} is being deleted`);
    assert.ok(!(pod.status?.conditions ?? []).some((c) => c.type === 'ImagePullStuck'), `${h.pod} got a condition`);
  }
}

// The path that lost a FailJob Event in a cold CI run, replayed exactly: the pod delete of the
// podFailurePolicy path (the fallback where the status write is refused) is held by the proxy past the client's timeout (then carried out anyway),
// and every retry is refused before it reaches the API server, so the sweep gives up and reads the
// pod back still undeleted. Releasing the claim then let the late delete fail the Job through its
// policy with no claim and no Event; the claim must stay, and a later sweep writes the Event.
describe('a pod delete that lands after the sweep gave up on it', () => {
  let proxy: FaultProxy;
  let kubeconfig: string;
  const HELD_MS = 15_000;
  before(async () => {
    proxy = await startFaultProxy({
      upstream: env.cluster.server,
      upstreamCa: caOf(adminKubeconfig),
      seed: SEEDS[0]!,
      faultRate: 0,
      script: [
        {
          method: 'DELETE',
          path: /^\/api\/v1\/namespaces\/[^/]+\/pods\//,
          faults: ['slow', 'throttle', 'throttle', 'throttle'],
          slowMs: HELD_MS,
        },
      ],
    });
    kubeconfig = proxy.writeKubeconfig(adminKubeconfig);
  });
  after(async () => proxy?.close());

  it('keeps the claim, so the Job failed by that delete gets its one FailJob Event', { timeout: 300_000 }, async () => {
    const batch = kc.makeApiClient(BatchV1Api);
    const ns = await env.namespace('faults-late');
    // A policy engine refuses the FailureTarget status write: the podFailurePolicy fallback deletes the pod.
    await refuseStatusWrites(env, ns);
    await createStuckJob(kc, ns, 'late', { stuckFor: 3600, spec: PFP });

    const first = await runCli(sweepArgs(kubeconfig, [ns]), { timeoutMs: 120_000 });
    const line = jsonLines(first.stdout).find((l) => l.message === 'decision' && l.job === 'late');
    assert.equal(first.code, 1, first.stdout);
    assert.equal(line?.outcome, 'error', first.stdout);
    assert.match(String(line?.error), /the pod may be deleted: claim kept/, first.stdout);
    assert.deepEqual(proxy.stats().byRequest.get(`DELETE /api/v1/namespaces/${ns}/pods/${String(line?.pod)}`), [
      'slow',
      'throttle',
      'throttle',
      'throttle',
    ]);

    // The held delete is carried out, and the Job controller fails the Job by its policy.
    const failed = await waitForJobFailed(kc, ns, 'late', 120_000);
    assert.equal(trueCondition(failed, 'Failed')?.reason, 'PodFailurePolicy');
    assert.ok(failed.metadata?.annotations?.['imagepull-sweeper/failed-at'], 'the claim is kept');

    const second = await runCli(sweepArgs(kubeconfig, [ns]), { timeoutMs: 120_000 });
    assertExitStatusRight(second, 'second sweep');
    assert.equal(second.code, 0, second.stdout);
    assert.ok(
      jsonLines(second.stdout).some((l) => /^wrote the missing FailJob Event/.test(String(l.message))),
      second.stdout,
    );
    const events = (await sweeperEvents(kc, ns)).filter((e) => e.action === 'FailJob' && e.regarding?.name === 'late');
    assert.equal(events.length, 1);
    const job = await batch.readNamespacedJob({ namespace: ns, name: 'late' });
    assert.equal(job.metadata?.labels?.['imagepull-sweeper/pending'], undefined, 'settled');
  });
});
