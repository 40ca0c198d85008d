// The sweep end to end against the real control plane: each path of SPEC, judged by what the
// real Job controller does with the sweeper's writes, plus annotations, Events and audit lines.
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { describe, it } from 'node:test';
import {
  AdmissionregistrationV1Api,
  BatchV1Api,
  CoreV1Api,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
} from '@kubernetes/client-node';
import { act } from '../../src/act/act.ts';
import { attributeToJobs } from '../../src/attribute/attribute.ts';
import { judge, rejudgeJob, type JudgeInput } from '../../src/judge/judge.ts';
import { createGateway, type KubeGateway } from '../../src/kube/gateway.ts';
import { withRetries } from '../../src/kube/retrying.ts';
import { createLogger } from '../../src/report/logger.ts';
import { sweep } from '../../src/sweep.ts';
import { observeStuckContainers } from '../../src/observe/pods.ts';
import { toPolicy } from '../../src/policy/convert.ts';
import { jobManifest } from '../support/fixtures.ts';
import { useTestCluster } from '../support/hooks.ts';
import { refuseStatusWrites } from '../support/policy-engine.ts';
import { setImagePullStuck, setPodRunning, waitFor, waitForJobPods } from '../support/kubelet.ts';
import {
  assertFailedBySweeper,
  createStuckJob,
  policyFile,
  readJob,
  runSweep,
  settledSnapshot,
  type SweepRun,
  sweeperEvents,
  trueCondition,
  waitForJobFailed,
} from '../support/sweeper.ts';

const TIMEOUT = { timeout: 180_000 };
let kc: KubeConfig;
const env = useTestCluster((hooks) => {
  kc = hooks.kc;
});
const namespace = env.namespace;

const EMPTY_POLICY_FILE = policyFile('{}\n');

// Stuck init containers and sidecars are swept on real pods in node-sweep.test.ts; the real-node
// forms of every mechanism are in node-fail.test.ts.
describe('sweep fails stuck Jobs', () => {
  it(
    "by its own condition: Failed/ImagePullStuck with the sweeper's message and hint, annotations, Event, audit line",
    TIMEOUT,
    async () => {
      const ns = await namespace('condition');
      const { pod } = await createStuckJob(kc, ns, 'build', { stuckFor: 300 });
      const run = await runSweep(kc, { namespaces: [ns], policy: EMPTY_POLICY_FILE });
      assert.equal(run.exitCode, 0);

      const job = await waitForJobFailed(kc, ns, 'build');
      assertFailedBySweeper(job);
      const failed = trueCondition(job, 'Failed')!;
      const a = job.metadata!.annotations!;
      assert.equal(failed.message, `imagepull-sweeper: ${a['imagepull-sweeper/message']}`);
      assert.match(
        failed.message ?? '',
        /\): the image or tag does not exist in that repository, or the repository does not exist: check the reference, or push the image first\. ImagePullBackOff: /,
      );
      assert.match(a['imagepull-sweeper/failed-at']!, /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
      assert.equal(a['imagepull-sweeper/reason'], 'ImagePullBackOff');
      assert.match(
        a['imagepull-sweeper/message']!,
        /container main .* on image registry\.invalid\/team\/app:does-not-exist \(class permanent, rule defaults, grace 2m from defaults\)/,
      );
      assert.equal(job.spec!.activeDeadlineSeconds, undefined, 'no spec change');
      // The Job controller says it too, in its own Event.
      const own = await kc.makeApiClient(CoreV1Api).listNamespacedEvent({ namespace: ns, fieldSelector: 'involvedObject.name=build' });
      assert.ok(
        own.items.some((e) => e.reason === 'ImagePullStuck' && e.message === failed.message),
        'the Job controller Event',
      );

      const [event, ...more] = await sweeperEvents(kc, ns);
      assert.equal(more.length, 0);
      assert.equal(event!.type, 'Warning');
      assert.equal(event!.reason, 'ImagePullStuck');
      assert.equal(event!.action, 'FailJob');
      assert.equal(event!.regarding?.kind, 'Job');
      assert.equal(event!.regarding?.name, 'build');
      assert.equal(event!.regarding?.uid, job.metadata!.uid);
      assert.equal(event!.related?.kind, 'Pod');
      assert.equal(event!.related?.name, pod);

      const [line] = run.lines;
      assert.equal(run.lines.length, 1);
      assert.equal(line!.outcome, 'failed');
      assert.equal(line!.job, 'build');
      assert.equal(line!.pod, pod);
      assert.equal(line!.class, 'permanent');
      assert.equal(line!.mechanism, 'condition');
      assert.match(line!.hint, /^the image or tag does not exist/);
      assert.ok(line!.stuckSeconds >= 300);
      assert.equal(run.summary!.outcomes.failed, 1);

      // The next sweep sees the Job finished and only takes its pending label off; after that a
      // sweep changes nothing.
      assert.equal(job.metadata!.labels?.['imagepull-sweeper/pending'], 'true');
      const settling = await runSweep(kc, { namespaces: [ns], policy: EMPTY_POLICY_FILE });
      assert.equal(settling.exitCode, 0);
      assert.equal((await readJob(kc, ns, 'build')).metadata!.labels?.['imagepull-sweeper/pending'], undefined);
      const before = await settledSnapshot(kc, ns);
      const again = await runSweep(kc, { namespaces: [ns], policy: EMPTY_POLICY_FILE });
      assert.equal(again.exitCode, 0);
      assert.ok(again.lines.every((l) => l.outcome === 'skipped'));
      assert.deepEqual(await settledSnapshot(kc, ns), before);
      assert.equal((await sweeperEvents(kc, ns)).length, 1);
    },
  );

  it(
    "where a policy engine refuses the status write: the Job's podFailurePolicy (Failed/PodFailurePolicy), else its deadline (DeadlineExceeded), said",
    TIMEOUT,
    async () => {
      const ns = await namespace('fallback');
      await refuseStatusWrites(env, ns);
      const { pod } = await createStuckJob(kc, ns, 'tenant-run', {
        stuckFor: 300,
        spec: { podFailurePolicy: { rules: [{ action: 'FailJob', onPodConditions: [{ type: 'ImagePullStuck', status: 'True' }] }] } },
      });
      await createStuckJob(kc, ns, 'build', { stuckFor: 300 });
      const run = await runSweep(kc, { namespaces: [ns], policy: EMPTY_POLICY_FILE });
      assert.equal(run.exitCode, 0);
      const byJob = new Map(run.lines.map((l) => [l.job, l]));
      assert.match(
        byJob.get('tenant-run')!.mechanism ?? '',
        /^podFailurePolicy \(the status write was refused \(Forbidden: .*a policy engine refuses/,
      );
      assert.match(byJob.get('build')!.mechanism ?? '', /^activeDeadlineSeconds \(the status write was refused \(Forbidden: /);
      for (const line of byJob.values()) assert.match(line.warnings.join('\n'), /the FailureTarget status write was refused/);
      assert.equal(byJob.get('tenant-run')!.pod, pod);
      const job = await waitForJobFailed(kc, ns, 'tenant-run');
      assert.equal(trueCondition(job, 'Failed')?.reason, 'PodFailurePolicy');
      assert.equal(job.spec!.activeDeadlineSeconds, undefined);
      assert.equal(job.metadata!.annotations!['imagepull-sweeper/reason'], 'ImagePullBackOff');
      assert.match(
        job.metadata!.annotations!['imagepull-sweeper/message']!,
        /Failed by its pod failure policy, not by its own condition: the status write was refused/,
      );
      const deadline = await waitForJobFailed(kc, ns, 'build');
      assert.equal(trueCondition(deadline, 'Failed')?.reason, 'DeadlineExceeded');
      assert.ok(deadline.spec!.activeDeadlineSeconds! >= 1);
      assert.deepEqual(
        (await sweeperEvents(kc, ns)).map((e) => e.action),
        ['FailJob', 'FailJob'],
      );
    },
  );

  it('names the CronJob that owns the Job', TIMEOUT, async () => {
    const ns = await namespace('cron');
    const batch = kc.makeApiClient(BatchV1Api);
    const cron = await batch.createNamespacedCronJob({
      namespace: ns,
      body: {
        metadata: { name: 'nightly' },
        spec: { schedule: '0 0 1 1 *', suspend: true, jobTemplate: { spec: jobManifest('x', 'img').spec! } },
      },
    });
    await createStuckJob(kc, ns, 'nightly-manual', {
      stuckFor: 300,
      ownerReferences: [{ apiVersion: 'batch/v1', kind: 'CronJob', name: 'nightly', uid: cron.metadata!.uid!, controller: true }],
    });
    const run = await runSweep(kc, { namespaces: [ns], policy: EMPTY_POLICY_FILE });
    assert.equal(run.lines[0]!.cronJob, 'nightly');
    assert.equal(run.lines[0]!.outcome, 'failed');
    await waitForJobFailed(kc, ns, 'nightly-manual');
  });

  it("uses the Job's grace annotation", TIMEOUT, async () => {
    const ns = await namespace('override');
    await createStuckJob(kc, ns, 'quick', { stuckFor: 20, annotations: { 'imagepull-sweeper/grace': '10s' } });
    await createStuckJob(kc, ns, 'default-grace', { stuckFor: 20 });
    const run = await runSweep(kc, { namespaces: [ns], policy: EMPTY_POLICY_FILE });
    const byJob = Object.fromEntries(run.lines.map((l) => [l.job, l]));
    assert.equal(byJob.quick!.outcome, 'failed');
    assert.equal(byJob.quick!.graceSeconds, 10);
    assert.equal(byJob.quick!.graceSource, 'annotation');
    assert.equal(byJob['default-grace']!.outcome, 'skipped');
    assert.equal(byJob['default-grace']!.graceSource, 'defaults');
    const quick = await waitForJobFailed(kc, ns, 'quick');
    assert.match(quick.metadata!.annotations!['imagepull-sweeper/message']!, /rule defaults, grace 10s from annotation\)/);
    const [event] = await sweeperEvents(kc, ns);
    assert.match(event!.note!, /grace 10s from annotation\)/);
    assert.equal(trueCondition(await readJob(kc, ns, 'default-grace'), 'Failed'), undefined);
  });
});

describe('sweep leaves alone what it must', () => {
  it('a Job still within grace, a healthy Job, a bare pod, ignored Jobs: nothing written', TIMEOUT, async () => {
    const ns = await namespace('alone');
    const core = kc.makeApiClient(CoreV1Api);
    const batch = kc.makeApiClient(BatchV1Api);
    await createStuckJob(kc, ns, 'young', { stuckFor: 30 });
    await createStuckJob(kc, ns, 'ignored', { stuckFor: 9999, annotations: { 'imagepull-sweeper/ignore': 'true' } });
    await createStuckJob(kc, ns, 'other-controller', {
      stuckFor: 9999,
      spec: { managedBy: 'example.com/batch-controller' },
      podByOtherController: true,
    });
    await batch.createNamespacedJob({ namespace: ns, body: jobManifest('healthy', 'busybox:1.36') });
    const [healthyPod] = await waitForJobPods(core, ns, 'healthy');
    await setPodRunning(core, ns, healthyPod!.metadata!.name!);
    await core.createNamespacedPod({
      namespace: ns,
      body: { metadata: { name: 'bare' }, spec: { containers: [{ name: 'main', image: 'registry.invalid/x:1' }] } },
    });
    await setImagePullStuck(core, ns, 'bare', {
      since: new Date(Date.now() - 9999_000),
      stuck: [{ container: 'main', reason: 'ErrImagePull', message: 'manifest unknown' }],
    });

    const before = await settledSnapshot(kc, ns);
    const run = await runSweep(kc, { namespaces: [ns], policy: EMPTY_POLICY_FILE });
    assert.equal(run.exitCode, 0);
    const byTarget = Object.fromEntries(run.lines.map((l) => [l.job ?? `pod/${l.pod}`, l]));
    assert.deepEqual(Object.keys(byTarget).sort(), ['ignored', 'other-controller', 'pod/bare', 'young']);
    for (const l of run.lines) assert.equal(l.outcome, 'skipped', `${l.job ?? l.pod}: ${l.detail}`);
    assert.match(byTarget.young!.detail, /within grace/);
    assert.equal(byTarget.ignored!.action, 'ignore');
    assert.match(byTarget['other-controller']!.detail, /managed by example\.com\/batch-controller/);
    assert.match(byTarget['pod/bare']!.detail, /no controller/);
    assert.deepEqual(await settledSnapshot(kc, ns), before);
    assert.equal((await sweeperEvents(kc, ns)).length, 0);
  });

  it('an ignore rule', TIMEOUT, async () => {
    const ns = await namespace('quiet');
    await createStuckJob(kc, ns, 'job', { stuckFor: 9999 });
    const policy = policyFile(`rules:\n  - name: quiet\n    namespaces: ["quiet-*"]\n    action: ignore\n`);
    const before = await settledSnapshot(kc, ns);
    const run = await runSweep(kc, { namespaces: [ns], policy });
    assert.equal(run.lines[0]!.outcome, 'skipped');
    assert.equal(run.lines[0]!.rule, 'quiet');
    assert.equal(run.lines[0]!.action, 'ignore');
    assert.deepEqual(await settledSnapshot(kc, ns), before);
  });

  it('report only: Event and annotation, never failed, and the Event is not repeated', TIMEOUT, async () => {
    const ns = await namespace('watch', { team: 'observe' });
    await createStuckJob(kc, ns, 'job', { stuckFor: 9999 });
    const policy = policyFile(
      `rules:\n  - name: observe-only\n    namespaceSelector: { matchLabels: { team: observe } }\n    action: report\n`,
    );
    const run = await runSweep(kc, { namespaces: [ns], policy });
    assert.equal(run.lines[0]!.outcome, 'reported');
    assert.equal(run.lines[0]!.rule, 'observe-only');
    const [event] = await sweeperEvents(kc, ns);
    assert.equal(event!.action, 'Report');
    assert.equal(event!.reason, 'ImagePullStuck');
    const job = await readJob(kc, ns, 'job');
    assert.ok(job.metadata!.annotations!['imagepull-sweeper/reported-at']);
    assert.equal(job.metadata!.annotations!['imagepull-sweeper/failed-at'], undefined);
    assert.equal(job.spec!.activeDeadlineSeconds, undefined);

    await runSweep(kc, { namespaces: [ns], policy });
    await new Promise((r) => setTimeout(r, 2000));
    assert.equal(trueCondition(await readJob(kc, ns, 'job'), 'Failed'), undefined);
    assert.equal((await sweeperEvents(kc, ns)).length, 1);
  });

  it('dry run decides everything and writes nothing', TIMEOUT, async () => {
    const ns = await namespace('dry');
    await createStuckJob(kc, ns, 'a', { stuckFor: 9999 });
    await createStuckJob(kc, ns, 'b', {
      stuckFor: 9999,
      spec: { podFailurePolicy: { rules: [{ action: 'FailJob', onPodConditions: [{ type: 'ImagePullStuck', status: 'True' }] }] } },
    });
    const before = await settledSnapshot(kc, ns);
    const run = await runSweep(kc, { namespaces: [ns], policy: EMPTY_POLICY_FILE, dryRun: true });
    assert.equal(run.exitCode, 0);
    assert.equal(run.lines.length, 2);
    for (const l of run.lines) {
      assert.equal(l.outcome, 'would-fail');
      assert.equal(l.dryRun, true);
    }
    assert.equal(run.summary!.outcomes['would-fail'], 2);
    assert.equal(run.summary!.outcomes.failed, undefined);
    assert.deepEqual(await settledSnapshot(kc, ns), before);
    assert.equal((await sweeperEvents(kc, ns)).length, 0);
  });

  it('limits fail the oldest stuck first and defer the rest to the next sweep', TIMEOUT, async () => {
    const ns = await namespace('limits');
    await createStuckJob(kc, ns, 'oldest', { stuckFor: 5000 });
    await createStuckJob(kc, ns, 'middle', { stuckFor: 4000 });
    await createStuckJob(kc, ns, 'newest', { stuckFor: 3000 });
    const policy = policyFile('limits:\n  maxJobsPerNamespace: 1\n');
    const run = await runSweep(kc, { namespaces: [ns], policy });
    const outcome = Object.fromEntries(run.lines.map((l) => [l.job, l.outcome]));
    assert.deepEqual(outcome, { oldest: 'failed', middle: 'deferred', newest: 'deferred' });
    assert.equal(run.summary!.deferred, 2);
    await waitForJobFailed(kc, ns, 'oldest');
    assert.equal(trueCondition(await readJob(kc, ns, 'middle'), 'Failed'), undefined);

    const next = await runSweep(kc, { namespaces: [ns], policy });
    const nextOutcome = Object.fromEntries(next.lines.map((l) => [l.job, l.outcome]));
    assert.equal(nextOutcome.middle, 'failed');
    assert.equal(nextOutcome.newest, 'deferred');
  });

  it(
    "in parts: one summary, the limits across the parts (oldest first), the namespace's Jobs listed once, each Job judged once",
    TIMEOUT,
    async () => {
      const ns = await namespace('parts');
      const ages = [9000, 8000, 7000, 6000, 5000, 4000, 3000, 2000, 1500, 1200, 1100, 1000];
      await Promise.all(ages.map((stuckFor, i) => createStuckJob(kc, ns, `job-${i}`, { stuckFor })));
      const policy = policyFile('limits:\n  maxJobsPerSweep: 4\n');
      const real = createGateway(kc);
      const jobLists: string[] = [];
      const counting: KubeGateway = {
        ...real,
        listJobs: (o) => (jobLists.push(o.labelSelector ?? 'all'), real.listJobs(o)),
      };
      // 12 stuck Jobs in parts of 5: 3 parts.
      const run = await runSweep(kc, { namespaces: [ns], policy, chunkSize: 5 }, counting);
      assert.equal(run.exitCode, 0);
      assert.equal(run.records.filter((r) => r.message === 'summary').length, 1);
      const outcome = Object.fromEntries(run.lines.map((l) => [l.job, l.outcome]));
      assert.equal(run.lines.length, 12, 'one line per Job');
      // Part by part, oldest first: each part's lines before the next part's.
      const parts = [run.lines.slice(0, 5), run.lines.slice(5, 10), run.lines.slice(10)].map((p) => p.map((l) => l.job).sort());
      assert.deepEqual(parts, [
        ['job-0', 'job-1', 'job-2', 'job-3', 'job-4'],
        ['job-5', 'job-6', 'job-7', 'job-8', 'job-9'],
        ['job-10', 'job-11'],
      ]);
      assert.deepEqual(
        ages.map((_, i) => outcome[`job-${i}`]),
        ['failed', 'failed', 'failed', 'failed', ...Array<string>(8).fill('deferred')],
      );
      assert.equal(run.summary!.decisions, 12);
      assert.equal(run.summary!.deferred, 8);
      assert.equal(jobLists.filter((l) => l === 'all').length, 1, "one list of the namespace's Jobs for the three parts");
      for (let i = 0; i < 4; i += 1) assertFailedBySweeper(await waitForJobFailed(kc, ns, `job-${i}`));

      // The four failed Jobs are pending now (labelled): each is judged with its part, once.
      const next = await runSweep(kc, { namespaces: [ns], policy, chunkSize: 5 });
      const seen = next.lines.map((l) => l.job);
      assert.equal(new Set(seen).size, seen.length, `no Job judged twice: ${seen.join(' ')}`);
      const nextOutcome = Object.fromEntries(next.lines.map((l) => [l.job, l.outcome]));
      assert.deepEqual(
        ages.slice(4).map((_, i) => nextOutcome[`job-${i + 4}`]),
        ['failed', 'failed', 'failed', 'failed', 'deferred', 'deferred', 'deferred', 'deferred'],
      );
      assert.equal((await sweeperEvents(kc, ns)).filter((e) => e.reason === 'ImagePullStuck').length, 8, 'one Event per failed Job');
    },
  );

  it('an invalid policy ConfigMap changes nothing, exits 2 and leaves one Warning Event per distinct problem set', TIMEOUT, async () => {
    const ns = await namespace('badpolicy');
    await createStuckJob(kc, ns, 'job', { stuckFor: 9999 });
    const core = kc.makeApiClient(CoreV1Api);
    const name = 'imagepull-sweeper-policy';
    const location = { kind: 'configmap' as const, namespace: ns, name };
    await core.createNamespacedConfigMap({
      namespace: ns,
      body: { metadata: { name }, data: { 'policy.yaml': 'defaults:\n  grace:\n    permanent: 2 minutes\n' } },
    });
    const before = await settledSnapshot(kc, ns);
    const run = await runSweep(kc, { namespaces: [ns], policy: location });
    assert.equal(run.exitCode, 2);
    assert.equal(run.lines.length, 0);
    assert.ok(
      run.records.some((r) => /3:16 defaults\.grace\.permanent/.test(String(r.message))),
      JSON.stringify(run.records),
    );
    assert.deepEqual(await settledSnapshot(kc, ns), before);
    const [event, ...rest] = await sweeperEvents(kc, ns);
    assert.equal(rest.length, 0);
    assert.equal(event!.reason, 'InvalidPolicy');
    assert.equal(event!.type, 'Warning');
    assert.equal(event!.regarding?.kind, 'ConfigMap');
    assert.equal(event!.regarding?.name, name);
    assert.match(event!.note!, /defaults\.grace\.permanent/);

    // The same problems again: no new Event, however many sweeps.
    for (let i = 0; i < 2; i += 1) assert.equal((await runSweep(kc, { namespaces: [ns], policy: location })).exitCode, 2);
    assert.equal((await sweeperEvents(kc, ns)).length, 1);

    // A different problem: one new Event, once.
    await core.replaceNamespacedConfigMap({
      namespace: ns,
      name,
      body: { metadata: { name }, data: { 'policy.yaml': 'defaults: { action: maybe }\n' } },
    });
    for (let i = 0; i < 2; i += 1) assert.equal((await runSweep(kc, { namespaces: [ns], policy: location })).exitCode, 2);
    const events = await sweeperEvents(kc, ns);
    assert.equal(events.length, 2);
    assert.equal(events.filter((e) => /defaults\.action/.test(e.note ?? '')).length, 1);

    // The ConfigMap re-created with the first problem is a new object (new uid): a new Event.
    await core.deleteNamespacedConfigMap({ namespace: ns, name });
    await core.createNamespacedConfigMap({
      namespace: ns,
      body: { metadata: { name }, data: { 'policy.yaml': 'defaults:\n  grace:\n    permanent: 2 minutes\n' } },
    });
    assert.equal((await runSweep(kc, { namespaces: [ns], policy: location })).exitCode, 2);
    assert.equal((await sweeperEvents(kc, ns)).length, 3);
    assert.deepEqual(await settledSnapshot(kc, ns), before);
  });

  it('a missing default policy ConfigMap means the built-in defaults, with a warning on every sweep', TIMEOUT, async () => {
    const ns = await namespace('nopolicy');
    await createStuckJob(kc, ns, 'job', { stuckFor: 9999 });
    const location = { kind: 'configmap' as const, namespace: ns, name: 'imagepull-sweeper-policy', isDefault: true };
    const run = await runSweep(kc, { namespaces: [ns], policy: location, dryRun: true });
    const warning = (r: SweepRun) => r.records.filter((x) => x.level === 'warn' && /built-in defaults/.test(String(x.message)));
    assert.equal(run.exitCode, 0);
    assert.equal(warning(run).length, 1, JSON.stringify(run.records));
    assert.match(String(warning(run)[0]!.message), new RegExp(`no ConfigMap ${ns}/imagepull-sweeper-policy.*--policy-configmap`));
    const real = await runSweep(kc, { namespaces: [ns], policy: location });
    assert.equal(warning(real).length, 1);
    assert.equal(real.lines[0]!.outcome, 'failed');
    assert.equal(real.summary!.policy, `built-in defaults (no ConfigMap ${ns}/imagepull-sweeper-policy)`);
  });

  it('a named policy ConfigMap that is missing is an invalid policy: exit 2, nothing changed', TIMEOUT, async () => {
    const ns = await namespace('namedmissing');
    await createStuckJob(kc, ns, 'job', { stuckFor: 9999 });
    const before = await settledSnapshot(kc, ns);
    const run = await runSweep(kc, { namespaces: [ns], policy: { kind: 'configmap', namespace: ns, name: 'team-policy' } });
    assert.equal(run.exitCode, 2);
    assert.equal(run.lines.length, 0);
    assert.ok(
      run.records.some((r) => r.level === 'error' && new RegExp(`ConfigMap ${ns}/team-policy does not exist`).test(String(r.message))),
      JSON.stringify(run.records),
    );
    assert.deepEqual(await settledSnapshot(kc, ns), before);
    const events = await sweeperEvents(kc, ns);
    assert.deepEqual(
      events.map((e) => [e.reason, e.regarding?.name]),
      [['InvalidPolicy', 'team-policy']],
    );

    // A ConfigMap without policy.yaml is just as invalid.
    await kc
      .makeApiClient(CoreV1Api)
      .createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'team-policy' }, data: { other: 'x' } } });
    const empty = await runSweep(kc, { namespaces: [ns], policy: { kind: 'configmap', namespace: ns, name: 'team-policy' } });
    assert.equal(empty.exitCode, 2);
    assert.ok(empty.records.some((r) => /no data key "policy\.yaml"/.test(String(r.message))));
    assert.deepEqual(await settledSnapshot(kc, ns), before);
  });
});

describe('sweep under real API failures and races', () => {
  it('one Job the API refuses to patch does not stop the others; exit 1 and an error line', TIMEOUT, async () => {
    const ns = await namespace('refused');
    const admission = kc.makeApiClient(AdmissionregistrationV1Api);
    const policyName = `freeze-${ns}`;
    await admission.createValidatingAdmissionPolicy({
      body: {
        metadata: { name: policyName },
        spec: {
          failurePolicy: 'Fail',
          matchConstraints: {
            namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': ns } },
            resourceRules: [{ apiGroups: ['batch'], apiVersions: ['v1'], operations: ['UPDATE'], resources: ['jobs', 'jobs/status'] }],
          },
          // Denies every update of a Job once it carries the label (so the label itself can be added).
          validations: [
            {
              expression: "!(has(oldObject.metadata.labels) && 'e2e-frozen' in oldObject.metadata.labels)",
              message: 'frozen by the e2e test',
            },
          ],
        },
      },
    });
    await admission.createValidatingAdmissionPolicyBinding({
      body: { metadata: { name: policyName }, spec: { policyName, validationActions: ['Deny'] } },
    });
    env.onCleanup(async () => {
      await admission.deleteValidatingAdmissionPolicyBinding({ name: policyName }).catch(() => undefined);
      await admission.deleteValidatingAdmissionPolicy({ name: policyName }).catch(() => undefined);
    });
    const batch = kc.makeApiClient(BatchV1Api);
    await createStuckJob(kc, ns, 'frozen', { stuckFor: 9999 });
    await batch.patchNamespacedJob(
      { namespace: ns, name: 'frozen', body: { metadata: { labels: { 'e2e-frozen': 'true' } } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    await createStuckJob(kc, ns, 'fine', { stuckFor: 9000 });
    // The policy is enforced once the API server's informer has it.
    await waitFor(
      async () =>
        batch
          .patchNamespacedJob(
            { namespace: ns, name: 'frozen', body: { metadata: { annotations: { probe: String(Date.now()) } } } },
            setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
          )
          .then(
            () => false,
            () => true,
          ),
      30_000,
      'the admission policy to be enforced',
    );

    const run = await runSweep(kc, { namespaces: [ns], policy: EMPTY_POLICY_FILE });
    assert.equal(run.exitCode, 1);
    const byJob = Object.fromEntries(run.lines.map((l) => [l.job, l]));
    assert.equal(byJob.frozen!.outcome, 'error');
    assert.match(byJob.frozen!.error!, /frozen by the e2e test/);
    assert.equal(byJob.fine!.outcome, 'failed');
    assert.equal(run.summary!.actionErrors, 1);
    await waitForJobFailed(kc, ns, 'fine');
    const frozen = await readJob(kc, ns, 'frozen');
    assert.equal(trueCondition(frozen, 'Failed'), undefined);
    assert.equal(frozen.metadata?.annotations?.['imagepull-sweeper/failed-at'], undefined);
  });

  it('a Job changed between judging and acting is re-read and re-judged (a real 409)', TIMEOUT, async () => {
    const ns = await namespace('race');
    await createStuckJob(kc, ns, 'touched', { stuckFor: 9999 });
    await createStuckJob(kc, ns, 'ignored-meanwhile', { stuckFor: 9999 });
    await settledSnapshot(kc, ns);
    const gateway = withRetries(createGateway(kc));
    const observation = await observeStuckContainers(gateway, { namespaces: [ns], pageSize: 100 });
    const attribution = await attributeToJobs(gateway, observation.stuck, { concurrency: 2, listConcurrency: 2, listThreshold: 10 });
    const input: JudgeInput = {
      stuck: observation.stuck,
      ownerOf: attribution.ownerOf,
      namespaceLabels: new Map(),
      policy: toPolicy({}),
      now: new Date(),
    };
    const plan = judge(input);
    assert.deepEqual(
      plan.decisions.map((d) => d.plan),
      ['fail', 'fail'],
    );

    const batch = kc.makeApiClient(BatchV1Api);
    const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
    await batch.patchNamespacedJob(
      { namespace: ns, name: 'touched', body: { metadata: { annotations: { 'team/owner': 'data' } } } },
      merge,
    );
    await batch.patchNamespacedJob(
      { namespace: ns, name: 'ignored-meanwhile', body: { metadata: { annotations: { 'imagepull-sweeper/ignore': 'true' } } } },
      merge,
    );

    let rejudged = 0;
    const results = await act(gateway, plan.decisions, {
      concurrency: 2,
      now: input.now,
      instance: 'e2e',
      claim: 'e2e-claim',
      rejudge: (d, fresh) => {
        rejudged += 1;
        return rejudgeJob(input, d, fresh);
      },
    });
    assert.equal(rejudged, 2);
    const byJob = Object.fromEntries(results.map((r) => [r.decision.job, r]));
    assert.equal(byJob.touched!.outcome, 'failed');
    assert.equal(byJob['ignored-meanwhile']!.outcome, 'skipped');
    assert.equal(byJob['ignored-meanwhile']!.decision.action, 'ignore');
    await waitForJobFailed(kc, ns, 'touched');
    const ignored = await readJob(kc, ns, 'ignored-meanwhile');
    assert.equal(ignored.metadata!.annotations!['imagepull-sweeper/failed-at'], undefined);
    assert.equal(ignored.spec!.activeDeadlineSeconds, undefined);
  });

  it('pages through the pod list (limit + continue) and finds every stuck pod', TIMEOUT, async () => {
    const ns = await namespace('paged');
    for (let i = 0; i < 5; i += 1) await createStuckJob(kc, ns, `job-${i}`, { stuckFor: 30 });
    const run = await runSweep(kc, { namespaces: [ns], policy: EMPTY_POLICY_FILE, pageSize: 2 });
    assert.equal(run.exitCode, 0);
    assert.deepEqual(run.lines.map((l) => l.job).sort(), ['job-0', 'job-1', 'job-2', 'job-3', 'job-4']);
    assert.equal(run.summary!.podsScanned, 5);
  });
});

describe('sweep when responses are lost', () => {
  /** The real plain gateway, except that the first response of each listed call is lost after the write landed. */
  function losingFirstResponses(names: (keyof KubeGateway)[]): { gateway: KubeGateway; lost: string[] } {
    const real = createGateway(kc);
    const lost: string[] = [];
    const gateway = { ...real };
    for (const name of names) {
      const call = real[name] as (...args: unknown[]) => Promise<unknown>;
      (gateway as Record<string, unknown>)[name] = async (...args: unknown[]) => {
        const result = await call(...args);
        if (!lost.includes(name)) {
          lost.push(name);
          throw Object.assign(new Error('socket hang up'), { code: 'ECONNRESET' });
        }
        return result;
      };
    }
    return { gateway, lost };
  }

  async function sweepWith(gateway: KubeGateway, ns: string) {
    const logger = createLogger({ format: 'json', stream: new PassThrough().resume() });
    const retried: string[] = [];
    const retrying = withRetries(gateway, { onRetry: (n) => retried.push(n.request.split(' ')[0]!) });
    const result = await sweep(
      { gateway: retrying, monotonicMs: () => performance.now(), logger },
      { dryRun: false, namespaces: [ns], policy: EMPTY_POLICY_FILE, instance: 'e2e' },
    );
    return { ...result, retried };
  }

  it('retries a landed Job status patch and Event create without losing or repeating anything', TIMEOUT, async () => {
    const ns = await namespace('lost');
    await createStuckJob(kc, ns, 'job', { stuckFor: 9999 });
    const { gateway, lost } = losingFirstResponses(['patchJobStatus', 'createEvent']);
    const result = await sweepWith(gateway, ns);
    assert.deepEqual(lost.sort(), ['createEvent', 'patchJobStatus']);
    assert.deepEqual(result.retried.sort(), ['createEvent', 'patchJobStatus'], 'one retry notice per retried request');
    assert.equal(result.status, 'done');
    assert.equal(result.results[0]!.outcome, 'failed');
    assertFailedBySweeper(await waitForJobFailed(kc, ns, 'job'));
    assert.equal((await sweeperEvents(kc, ns)).length, 1);
  });

  it('retries a landed pod delete on the pod-failure-policy path (the status write refused)', TIMEOUT, async () => {
    const ns = await namespace('lostpod');
    await refuseStatusWrites(env, ns);
    await createStuckJob(kc, ns, 'job', {
      stuckFor: 9999,
      spec: { podFailurePolicy: { rules: [{ action: 'FailJob', onPodConditions: [{ type: 'ImagePullStuck', status: 'True' }] }] } },
    });
    const { gateway, lost } = losingFirstResponses(['mergePatchJob', 'patchPodStatus', 'deletePod']);
    const result = await sweepWith(gateway, ns);
    assert.equal(lost.length, 3);
    assert.equal(result.status, 'done');
    assert.equal(result.results[0]!.outcome, 'failed');
    const job = await waitForJobFailed(kc, ns, 'job');
    assert.equal(trueCondition(job, 'Failed')?.reason, 'PodFailurePolicy');
    assert.ok(job.metadata!.annotations!['imagepull-sweeper/failed-at']);
  });
});
