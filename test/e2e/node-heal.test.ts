// Healing on the real node of each runtime of the run, as the shipped ServiceAccount (manifests/
// and the Component manifests/heal/) under the admission guard: a pod stuck `auth` whose
// ServiceAccount gets the pull secret, or whose named pull Secret is corrected, is recreated
// and its Job completes (its container runs), through the Eviction API without `status.failed`
// growing when the Job's podFailurePolicy ignores DisruptionTarget, by deletion within
// backoffLimit otherwise; a Job with backoffLimit 0 and no such rule is not healed and the audit
// says why. A registry stopped and started again: the stuck `transient` pod of a Job healing is on
// for is recreated once another pod pulled its reference, and the time to completion with and
// without healing is printed (HEAL_OUTAGE_FAILURES: the refused pulls before the registry comes
// back, default 3; each one doubles the kubelet's back-off, from 10 s). The two Jobs pull two tags:
// a tag already on the node starts a pod at the kubelet's next sync, back-off or not.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import * as net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { BatchV1Api, CoreV1Api, Watch, type KubeConfig, type V1Job, type V1Pod } from '@kubernetes/client-node';
import { ensureBuilt, jsonLines, startCli } from '../support/cli.ts';
import { closedPort } from '../support/cluster.ts';
import { guardEnforced } from '../support/guard.ts';
import { useTestCluster } from '../support/hooks.ts';
import { waitFor, waitForJobPods } from '../support/kubelet.ts';
import { applyHealComponent, installShipped } from '../support/manifests.ts';
import {
  addRegistryHost,
  nodeSkipReason,
  removeRegistryHost,
  runtimeLabel,
  testNode,
  testRuntimes,
  type NodeRuntime,
  type TestNodeHandle,
} from '../support/node.ts';
import { dockerConfig, nodePodSpec, observeReasons } from '../support/node-cases.ts';
import { policyFile, readJob, runSweep, sweeperEvents, trueCondition, type SweepRun } from '../support/sweeper.ts';

const skip = nodeSkipReason();
const TIMEOUT = { timeout: 300_000, skip };
const OUTAGE_TIMEOUT = { timeout: 900_000, skip };
const HEAL = policyFile('defaults: { heal: true }\n');
const FAILURES = Number(process.env.HEAL_OUTAGE_FAILURES ?? 3);
const IGNORE_DISRUPTION = { rules: [{ action: 'Ignore', onPodConditions: [{ type: 'DisruptionTarget', status: 'True' }] }] };

let saKc: KubeConfig;
let saKubeconfig: string;
const policyDir = mkdtempSync(join(tmpdir(), 'ips-heal-'));
const env = useTestCluster(async (hooks) => {
  if (skip) return;
  ensureBuilt();
  const sa = await installShipped(hooks);
  saKc = sa.kc;
  saKubeconfig = sa.path;
  await applyHealComponent(hooks);
});

/** A sweep of `namespaces` in-process, as the shipped ServiceAccount (its token, the guard on its writes). */
async function sweepAs(namespaces: string[], policy = HEAL, dryRunMode?: 'server'): Promise<SweepRun> {
  const run = await runSweep(saKc, { namespaces, policy, ...(dryRunMode ? { dryRun: true, dryRunMode } : {}) });
  assert.equal(run.exitCode, 0, JSON.stringify(run.records, null, 1));
  return run;
}

function lineOf(run: SweepRun, job: string) {
  const line = run.lines.find((l) => l.job === job);
  assert.ok(line, `a decision about Job ${job}: ${JSON.stringify(run.records, null, 1)}`);
  return line;
}

function healJob(name: string, node: TestNodeHandle, image: string, spec: Partial<NonNullable<V1Job['spec']>>, pod: object = {}): V1Job {
  return {
    metadata: { name },
    spec: {
      backoffLimit: 0,
      template: { spec: nodePodSpec(node, [{ name: 'main', image, command: ['/pause', '1s'] }], pod) },
      ...spec,
    },
  };
}

async function waitForComplete(kc: KubeConfig, ns: string, name: string, timeoutMs = 120_000): Promise<V1Job> {
  return waitFor(
    async () => {
      const job = await readJob(kc, ns, name);
      if (trueCondition(job, 'Failed')) throw new Error(`Job ${ns}/${name} Failed: ${JSON.stringify(job.status)}`);
      return trueCondition(job, 'Complete') ? job : undefined;
    },
    timeoutMs,
    `Job ${ns}/${name} Complete`,
    200,
  );
}

async function createPullSecret(kc: KubeConfig, ns: string, name: string, node: TestNodeHandle, password: string): Promise<void> {
  await kc.makeApiClient(CoreV1Api).createNamespacedSecret({
    namespace: ns,
    body: {
      metadata: { name },
      type: 'kubernetes.io/dockerconfigjson',
      stringData: { '.dockerconfigjson': dockerConfig(node.authRegistry, node.authUser, password) },
    },
  });
}

/** How many times each pod of the namespace has failed a pull so far (the waiting reason turning to a pull error). */
async function countFailedPulls(kc: KubeConfig, ns: string): Promise<{ of: (pod: string) => number; stop(): void }> {
  const last = new Map<string, string>();
  const counts = new Map<string, number>();
  const req = await new Watch(kc).watch(
    `/api/v1/namespaces/${ns}/pods`,
    {},
    (_type, pod: V1Pod) => {
      const name = pod.metadata?.name ?? '';
      const reason = pod.status?.containerStatuses?.[0]?.state?.waiting?.reason ?? '';
      if (reason !== last.get(name) && ['ErrImagePull', 'RegistryUnavailable'].includes(reason))
        counts.set(name, (counts.get(name) ?? 0) + 1);
      last.set(name, reason);
    },
    () => undefined,
  );
  return { of: (pod) => counts.get(pod) ?? 0, stop: () => req.abort() };
}

/** A registry that can be stopped: a TCP forwarder to the node's open registry, nothing listening on its port while stopped. */
async function stoppableRegistry(upstream: string): Promise<{ host: string; start(): Promise<void>; stop(): Promise<void> }> {
  const port = await closedPort();
  const [upstreamHost, upstreamPort] = upstream.split(':');
  const sockets = new Set<net.Socket>();
  let server: net.Server | undefined;
  const stop = async () => {
    for (const s of sockets) s.destroy();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
    server = undefined;
  };
  return {
    host: `127.0.0.1:${port}`,
    async start() {
      server = net.createServer((client) => {
        const up = net.connect(Number(upstreamPort), upstreamHost);
        for (const s of [client, up]) {
          sockets.add(s);
          s.on('error', () => undefined);
          s.on('close', () => sockets.delete(s));
        }
        client.pipe(up).pipe(client);
      });
      await new Promise<void>((resolve, reject) => {
        server!.once('error', reject);
        server!.listen(port, '127.0.0.1', resolve);
      });
    },
    stop,
  };
}

// Each runtime's node, registries, images and namespaces are its own, and most of a runtime's time
// is the kubelet's back-off: the runtimes run side by side, each one's tests in order (the last
// changes its node's registry configuration).
describe('healing on the real nodes', { concurrency: true }, () => {
  for (const runtime of testRuntimes()) healingOn(runtime);
});

function healingOn(runtime: NodeRuntime): void {
  describe(`healing on the real node, as the shipped ServiceAccount under the guard: ${runtimeLabel(runtime)}`, { concurrency: 1 }, () => {
    let node: TestNodeHandle;
    /**
     * An image of the auth registry for one test: an image a test before it pulled is on the node,
     * and a runtime may then start it without asking the registry again (CRI-O does).
     */
    const authImage = (test: string) => node.pushImage(`team/heal-${runtime}-${test}:1`, { auth: true });
    before(async () => {
      if (skip) return;
      node = await testNode(env.cluster.kubeconfigPath, { runtime });
      await guardEnforced(env.kc, saKc, await env.namespace(`heal-guard-${runtime}`));
    });

    it('auth: its ServiceAccount gets the pull secret; evicted, its Job completes and status.failed stays 0', TIMEOUT, async () => {
      const ns = await env.namespace(`heal-sa-${runtime}`);
      const core = env.kc.makeApiClient(CoreV1Api);
      await core.createNamespacedServiceAccount({ namespace: ns, body: { metadata: { name: 'builder' } } });
      const job = healJob('build', node, await authImage('sa'), { podFailurePolicy: IGNORE_DISRUPTION }, { serviceAccountName: 'builder' });
      await env.kc.makeApiClient(BatchV1Api).createNamespacedJob({ namespace: ns, body: job });
      const [pod] = await waitForJobPods(core, ns, 'build');
      const stuck = pod!.metadata!;
      await observeReasons(env.kc, ns, stuck.name!, { container: 'main', containerKind: 'regular', reasons: ['ErrImagePull'] });

      const waiting = lineOf(await sweepAs([ns]), 'build');
      assert.deepEqual([waiting.outcome, waiting.class], ['skipped', 'auth']);
      assert.match(
        waiting.heal ?? '',
        /^waiting for evidence its cause is gone: ServiceAccount builder lists no pull secret pod build-\w+ lacks/,
      );

      await createPullSecret(env.kc, ns, 'regcred', node, node.authPassword);
      await core.patchNamespacedServiceAccount({
        namespace: ns,
        name: 'builder',
        body: [{ op: 'add', path: '/imagePullSecrets', value: [{ name: 'regcred' }] }],
      });

      // A server dry run: the eviction and the Job patch judged by RBAC and the guard, nothing kept.
      const dry = lineOf(await sweepAs([ns], HEAL, 'server'), 'build');
      assert.equal(dry.outcome, 'would-heal', JSON.stringify(dry));
      assert.match(dry.detail, /; would evict pod build-\w+$/);
      const untouched = await core.readNamespacedPod({ namespace: ns, name: stuck.name! });
      assert.deepEqual([untouched.metadata?.uid, untouched.metadata?.deletionTimestamp], [stuck.uid, undefined]);
      assert.equal((await readJob(env.kc, ns, 'build')).metadata?.annotations?.['imagepull-sweeper/healed-at'], undefined);

      const t0 = Date.now();
      const healed = lineOf(await sweepAs([ns]), 'build');
      assert.equal(healed.outcome, 'healed', JSON.stringify(healed));
      assert.match(
        healed.heal ?? '',
        /^ServiceAccount builder now lists pull secret regcred, which pod build-\w+ lacks: a new pod gets it$/,
      );
      assert.match(
        healed.detail,
        /through the Eviction API: podFailurePolicy rule 1 \(Ignore on DisruptionTarget=True\) ignores the evicted pod, nothing spent; evicted pod build-\w+$/,
      );
      const done = await waitForComplete(env.kc, ns, 'build');
      const completeMs = Date.now() - t0;
      assert.equal(done.status?.failed ?? 0, 0, JSON.stringify(done.status));
      assert.ok(done.metadata?.annotations?.['imagepull-sweeper/healed-at']);
      const pods = (await core.listNamespacedPod({ namespace: ns, labelSelector: 'batch.kubernetes.io/job-name=build' })).items;
      assert.ok(
        pods.some((p) => p.metadata?.uid !== stuck.uid && p.status?.phase === 'Succeeded'),
        'a new pod ran to completion',
      );
      const events = (await sweeperEvents(env.kc, ns)).filter((e) => e.reason === 'ImagePullHealed');
      assert.deepEqual(
        events.map((e) => [e.type, e.action, e.related?.name, e.regarding?.name]),
        [['Normal', 'Heal', stuck.name, 'build']],
      );
      assert.match(events[0]!.note ?? '', /ServiceAccount builder now lists pull secret regcred/);
      process.stderr.write(`[heal] ${runtime} auth, ServiceAccount: Job Complete ${completeMs} ms after the healing sweep started\n`);

      // Healed once: the next sweep has nothing stuck to judge.
      assert.equal((await sweepAs([ns])).lines.length, 0);
    });

    it(
      'auth: its named pull Secret corrected; deleted within backoffLimit 1, its Job completes with status.failed 1',
      TIMEOUT,
      async () => {
        const ns = await env.namespace(`heal-secret-${runtime}`);
        const core = env.kc.makeApiClient(CoreV1Api);
        await createPullSecret(env.kc, ns, 'creds', node, 'not-the-password');
        const job = healJob('fetch', node, await authImage('secret'), { backoffLimit: 1 }, { imagePullSecrets: [{ name: 'creds' }] });
        await env.kc.makeApiClient(BatchV1Api).createNamespacedJob({ namespace: ns, body: job });
        const failures = await countFailedPulls(env.kc, ns);
        try {
          const [pod] = await waitForJobPods(core, ns, 'fetch');
          const stuck = pod!.metadata!;
          // Three refused pulls: the kubelet's next try is 40 s away, so the corrected Secret is not
          // picked up by the kubelet itself before the sweep.
          await waitFor(() => failures.of(stuck.name!) >= 3, 120_000, `3 refused pulls of ${stuck.name}`, 200);
          const waiting = lineOf(await sweepAs([ns]), 'fetch');
          assert.equal(waiting.outcome, 'skipped');
          assert.match(waiting.heal ?? '', /pull secret\(s\) creds unchanged since it got stuck/);

          const secret = await core.readNamespacedSecret({ namespace: ns, name: 'creds' });
          await core.replaceNamespacedSecret({
            namespace: ns,
            name: 'creds',
            body: {
              ...secret,
              data: undefined,
              stringData: { '.dockerconfigjson': dockerConfig(node.authRegistry, node.authUser, node.authPassword) },
            },
          });
          const t0 = Date.now();
          const healed = lineOf(await sweepAs([ns]), 'fetch');
          assert.equal(healed.outcome, 'healed', JSON.stringify(healed));
          assert.match(healed.heal ?? '', /^pull secret creds was changed at \S+, after pod fetch-\w+ got stuck at \S+$/);
          assert.match(healed.detail, /by deletion, spending 1 of its retries \(0 failed of backoffLimit 1\); deleted pod fetch-\w+$/);
          const done = await waitForComplete(env.kc, ns, 'fetch');
          assert.equal(done.status?.failed, 1, JSON.stringify(done.status));
          process.stderr.write(
            `[heal] ${runtime} auth, Secret changed: Job Complete ${Date.now() - t0} ms after the healing sweep started\n`,
          );
        } finally {
          failures.stop();
        }
      },
    );

    it('backoffLimit 0 and no podFailurePolicy rule: not healed, and the audit line says why', TIMEOUT, async () => {
      const ns = await env.namespace(`heal-strict-${runtime}`);
      const core = env.kc.makeApiClient(CoreV1Api);
      await createPullSecret(env.kc, ns, 'regcred', node, node.authPassword);
      await env.kc
        .makeApiClient(BatchV1Api)
        .createNamespacedJob({ namespace: ns, body: healJob('strict', node, await authImage('strict'), {}) });
      const [pod] = await waitForJobPods(core, ns, 'strict');
      const stuck = pod!.metadata!;
      await observeReasons(env.kc, ns, stuck.name!, { container: 'main', containerKind: 'regular', reasons: ['ErrImagePull'] });
      await core.patchNamespacedServiceAccount({
        namespace: ns,
        name: 'default',
        body: [{ op: 'add', path: '/imagePullSecrets', value: [{ name: 'regcred' }] }],
      });

      const line = lineOf(await sweepAs([ns]), 'strict');
      assert.equal(line.outcome, 'skipped');
      assert.equal(
        line.heal,
        'not healed: a deletion would spend one of its retries (0 failed + 1 > backoffLimit 0), and no podFailurePolicy rule ignores DisruptionTarget (for the Eviction API)',
      );
      const same = await core.readNamespacedPod({ namespace: ns, name: stuck.name! });
      assert.deepEqual([same.metadata?.uid, same.metadata?.deletionTimestamp], [stuck.uid, undefined]);
      assert.equal((await sweeperEvents(env.kc, ns)).length, 0);
      assert.equal((await readJob(env.kc, ns, 'strict')).metadata?.annotations?.['imagepull-sweeper/healed'], undefined);
    });

    // The watch's reaction depends on no runtime: on the first one only.
    if (runtime === testRuntimes()[0])
      it(
        "run --watch: a ServiceAccount given the pull secret heals at once, not at the Job's grace nor the backstop",
        TIMEOUT,
        async () => {
          const ns = await env.namespace(`heal-watch-${runtime}`);
          const core = env.kc.makeApiClient(CoreV1Api);
          await core.createNamespacedServiceAccount({ namespace: ns, body: { metadata: { name: 'builder' } } });
          const job = healJob(
            'build',
            node,
            await authImage('watch'),
            { podFailurePolicy: IGNORE_DISRUPTION },
            { serviceAccountName: 'builder' },
          );
          await env.kc.makeApiClient(BatchV1Api).createNamespacedJob({ namespace: ns, body: job });
          const [pod] = await waitForJobPods(core, ns, 'build');
          await observeReasons(env.kc, ns, pod!.metadata!.name!, {
            container: 'main',
            containerKind: 'regular',
            reasons: ['ErrImagePull'],
          });
          const policyPath = join(policyDir, `heal-${runtime}.yaml`);
          writeFileSync(policyPath, 'defaults: { heal: true }\n');
          // The backstop never comes, and the auth grace (10 min by default) is far: only the ServiceAccount's event can heal it.
          const proc = startCli(
            ['run', '--watch', '--schedule', '0 0 1 1 *', '--output', 'json', '--namespace', ns, '--policy-file', policyPath],
            { KUBECONFIG: saKubeconfig },
          );
          try {
            await waitFor(() => jsonLines(proc.output()).some((l) => l.message === 'summary'), 60_000, 'the first sweep of the watch');
            await createPullSecret(env.kc, ns, 'regcred', node, node.authPassword);
            const t0 = Date.now();
            await core.patchNamespacedServiceAccount({
              namespace: ns,
              name: 'builder',
              body: [{ op: 'add', path: '/imagePullSecrets', value: [{ name: 'regcred' }] }],
            });
            const healed = await waitFor(
              () => jsonLines(proc.output()).find((l) => l.message === 'decision' && l.job === 'build' && l.outcome === 'healed'),
              60_000,
              'the healed decision',
              100,
            );
            const healedMs = Date.now() - t0;
            assert.match(String(healed.heal), /^ServiceAccount builder now lists pull secret regcred, which pod build-\w+ lacks/);
            const done = await waitForComplete(env.kc, ns, 'build');
            assert.equal(done.status?.failed ?? 0, 0, JSON.stringify(done.status));
            const given = jsonLines(proc.output()).filter((l) => String(l.message).startsWith('a ServiceAccount was given a pull secret'));
            assert.deepEqual(
              given.map((l) => [l.serviceAccount, l.jobs]),
              [[`${ns}/builder`, 1]],
            );
            process.stderr.write(
              `[heal] ${runtime} run --watch: healed ${healedMs} ms after the ServiceAccount was given the secret, Job Complete ${Date.now() - t0} ms after\n`,
            );
          } finally {
            proc.child.kill('SIGTERM');
          }
          assert.equal(await proc.exited, 0, proc.output());
        },
      );

    describe('a registry stopped, then started again', () => {
      let registry: Awaited<ReturnType<typeof stoppableRegistry>>;
      before(async () => {
        if (skip) return;
        registry = await stoppableRegistry(node.registry);
        await addRegistryHost(node, registry.host);
      });
      after(async () => {
        if (!registry) return;
        await registry.stop();
        await removeRegistryHost(node, registry.host);
      });

      it(
        `transient: recreated once another pod pulled its reference; both Jobs complete (times printed, ${FAILURES} refused pulls)`,
        OUTAGE_TIMEOUT,
        async () => measureOutage(runtime, node, registry),
      );
    });
  });
}

async function measureOutage(
  runtime: NodeRuntime,
  node: TestNodeHandle,
  registry: Awaited<ReturnType<typeof stoppableRegistry>>,
): Promise<void> {
  const healNs = await env.namespace(`heal-outage-${runtime}`);
  const plainNs = await env.namespace(`plain-outage-${runtime}`);
  const core = env.kc.makeApiClient(CoreV1Api);
  const batch = env.kc.makeApiClient(BatchV1Api);
  // One tag each: a tag pulled to the node starts a pod of it at the kubelet's next sync,
  // whatever its back-off, so neither Job may profit from the other's (or the probe's) pull.
  await node.pushImage(`team/outage-${runtime}:heal`);
  await node.pushImage(`team/outage-${runtime}:plain`);
  const image = `${registry.host}/team/outage-${runtime}:heal`;
  const plainImage = `${registry.host}/team/outage-${runtime}:plain`;
  const policy = policyFile(`rules:\n  - name: heal\n    namespaces: ["${healNs}"]\n    heal: true\n`);
  const counters = await Promise.all([healNs, plainNs].map((ns) => countFailedPulls(env.kc, ns)));
  try {
    await batch.createNamespacedJob({ namespace: healNs, body: healJob('etl', node, image, { podFailurePolicy: IGNORE_DISRUPTION }) });
    await batch.createNamespacedJob({
      namespace: plainNs,
      body: healJob('etl', node, plainImage, { podFailurePolicy: IGNORE_DISRUPTION }),
    });
    const [healPod, plainPod] = await Promise.all(
      [healNs, plainNs].map(async (ns) => (await waitForJobPods(core, ns, 'etl'))[0]!.metadata!),
    );
    await waitFor(
      () => counters[0]!.of(healPod!.name!) >= FAILURES && counters[1]!.of(plainPod!.name!) >= FAILURES,
      60_000 * FAILURES,
      `${FAILURES} refused pulls of both pods`,
      200,
    );
    const down = await sweepAs([healNs, plainNs], policy);
    assert.equal(lineOf(down, 'etl').class, 'transient');
    assert.deepEqual(
      down.lines.map((l) => l.outcome),
      ['skipped', 'skipped'],
    );

    await registry.start();
    const t0 = Date.now();
    // Another pod pulls the same reference: the registry serves it again.
    await core.createNamespacedPod({
      namespace: healNs,
      body: { metadata: { name: 'probe' }, spec: nodePodSpec(node, [{ name: 'main', image, command: ['/pause', '10m'] }]) },
    });
    const healedAt = await waitFor(
      async () => {
        const line = (await sweepAs([healNs, plainNs], policy)).lines.find((l) => l.namespace === healNs && l.job === 'etl');
        return line?.outcome === 'healed' ? line : undefined;
      },
      120_000,
      'the sweep that heals the Job',
      1_000,
    );
    assert.match(healedAt.heal ?? '', /^pod probe started .* after pod etl-\w+ got stuck at .*: registry 127\.0\.0\.1:\d+ serves it$/);
    const healMs = Date.now() - t0;
    const [healed, plain] = await Promise.all([
      waitForComplete(env.kc, healNs, 'etl').then((job) => ({ job, ms: Date.now() - t0 })),
      waitForComplete(env.kc, plainNs, 'etl', 60_000 * FAILURES).then((job) => ({ job, ms: Date.now() - t0 })),
    ]);
    assert.equal(healed.job.status?.failed ?? 0, 0, JSON.stringify(healed.job.status));
    assert.equal(plain.job.status?.failed ?? 0, 0);
    assert.equal(plain.job.metadata?.annotations?.['imagepull-sweeper/healed-at'], undefined);
    const plainPods = (await core.listNamespacedPod({ namespace: plainNs })).items;
    assert.deepEqual(
      plainPods.map((p) => p.metadata?.uid),
      [plainPod!.uid],
      'the Job healing is off for kept its one pod, recovered by the kubelet',
    );
    process.stderr.write(
      `[heal] ${runtime} registry back after ${FAILURES} refused pulls: Job Complete ${healed.ms} ms after with healing ` +
        `(healed ${healMs} ms after), ${plain.ms} ms after without (the kubelet's back-off alone)\n`,
    );
  } finally {
    for (const c of counters) c.stop();
    await core.deleteNamespacedPod({ namespace: healNs, name: 'probe', gracePeriodSeconds: 0 }).catch(() => undefined);
  }
}
