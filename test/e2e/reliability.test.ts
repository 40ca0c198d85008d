// Crash safety, races and stops, on the real control plane (pods played by the status stand-in):
// kill -9 at many points of a batch, three sweepers at once, SIGTERM mid-batch, a claim left
// behind by a crash, a write whose answer was lost, a pod that changed under the sweeper (on the
// podFailurePolicy fallback, where a policy engine refuses the status write), and a
// podFailurePolicy whose earlier rule would swallow the deleted pod.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { describe, it } from 'node:test';
import { ApiException, BatchV1Api, CoreV1Api, PatchStrategy, setHeaderOptions, type KubeConfig, type V1Job } from '@kubernetes/client-node';
import { act } from '../../src/act/act.ts';
import { attributeToJobs } from '../../src/attribute/attribute.ts';
import { judge, rejudgeJob, type JudgeInput } from '../../src/judge/judge.ts';
import { createGateway, type KubeGateway } from '../../src/kube/gateway.ts';
import { withRetries } from '../../src/kube/retrying.ts';
import { observeStuckContainers } from '../../src/observe/pods.ts';
import { parsePolicyYaml } from '../../src/policy/parse.ts';
import { mapBounded } from '../../src/concurrency.ts';
import { CLI, ensureBuilt, jsonLines } from '../support/cli.ts';
import { useTestCluster } from '../support/hooks.ts';
import { setImagePullStuck, setPodRunning, waitFor } from '../support/kubelet.ts';
import { refuseStatusWrites } from '../support/policy-engine.ts';
import { createStuckJob, policyFile, readJob, runSweep, sweeperEvents, trueCondition, waitForJobFailed } from '../support/sweeper.ts';

const TIMEOUT = { timeout: 900_000 };
const CONFIRM_WITHIN_S = 3;
const POLICY_YAML = `limits: { maxJobsPerSweep: 1000, maxJobsPerNamespace: 1000, confirmWithin: ${CONFIRM_WITHIN_S}s }\n`;
const POLICY = policyFile(POLICY_YAML);
const PFP = { podFailurePolicy: { rules: [{ action: 'FailJob', onPodConditions: [{ type: 'ImagePullStuck', status: 'True' }] }] } };

let kc: KubeConfig;
let kubeconfigPath: string;
// Hundreds of Jobs: on the shared control plane, its Job controller would fall behind for the files
// beside this one (test/e2e/suites.ts).
const env = useTestCluster(
  (hooks) => {
    kc = hooks.kc;
    kubeconfigPath = hooks.cluster.kubeconfigPath;
    ensureBuilt();
  },
  { ownControlPlane: true },
);

/** `count` stuck Jobs `j-000`…; every `pfpEvery`-th has a podFailurePolicy FailJob rule. */
async function stuckJobs(ns: string, count: number, pfpEvery: number): Promise<string[]> {
  const names = Array.from({ length: count }, (_, i) => `j-${String(i).padStart(3, '0')}`);
  await mapBounded(names, 16, (name) =>
    createStuckJob(kc, ns, name, { stuckFor: 9999, spec: Number(name.slice(2)) % pfpEvery === 0 ? PFP : {} }),
  );
  return names;
}

interface CliRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  lines: Record<string, unknown>[];
}

/** Runs `sweep` as a process; `onLine` may return a signal to send it (once). */
function sweepProcess(ns: string, onLine?: (failedSoFar: number) => NodeJS.Signals | undefined, delayMs = 0): Promise<CliRun> {
  const args = [
    'sweep',
    '--namespace',
    ns,
    '--policy-file',
    POLICY.kind === 'file' ? POLICY.path : '',
    '--kubeconfig',
    kubeconfigPath,
    '--output',
    'json',
  ];
  const child = spawn(process.execPath, [CLI, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  let failed = 0;
  let signalled = false;
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    out += chunk;
    failed += (chunk.match(/"outcome":"failed"/g) ?? []).length;
    const signal = signalled ? undefined : onLine?.(failed);
    if (signal) {
      signalled = true;
      setTimeout(() => child.kill(signal), delayMs);
    }
  });
  child.stderr.resume();
  return new Promise((resolve) => child.on('close', (code, signal) => resolve({ code, signal, lines: jsonLines(out) })));
}

async function listJobs(ns: string): Promise<V1Job[]> {
  return (await kc.makeApiClient(BatchV1Api).listNamespacedJob({ namespace: ns })).items;
}

/** FailJob Events per Job name. */
async function failJobEvents(ns: string): Promise<Map<string, string[]>> {
  const byJob = new Map<string, string[]>();
  for (const e of await sweeperEvents(kc, ns)) {
    if (e.action !== 'FailJob') continue;
    const name = e.regarding!.name!;
    byJob.set(name, [...(byJob.get(name) ?? []), e.metadata!.name!]);
  }
  return byJob;
}

async function waitAllFailed(ns: string, names: string[], timeoutMs = 180_000): Promise<V1Job[]> {
  return waitFor(
    async () => {
      const jobs = await listJobs(ns);
      return names.every((n) => jobs.some((j) => j.metadata!.name === n && trueCondition(j, 'Failed'))) ? jobs : undefined;
    },
    timeoutMs,
    `all ${names.length} Jobs Failed in ${ns}`,
    1000,
  );
}

/** Every Job Failed, with exactly one FailJob Event, named after the claim on the Job. */
async function assertFailedOnceEach(ns: string, names: string[]): Promise<{ duplicates: number; missing: number }> {
  const jobs = await waitAllFailed(ns, names);
  const events = await failJobEvents(ns);
  let duplicates = 0;
  let missing = 0;
  for (const name of names) {
    const n = events.get(name)?.length ?? 0;
    if (n > 1) duplicates += n - 1;
    if (n === 0) missing += 1;
    const job = jobs.find((j) => j.metadata!.name === name)!;
    assert.ok(job.metadata!.annotations?.['imagepull-sweeper/claim'], `${name} carries its claim`);
  }
  return { duplicates, missing };
}

const failedLinesPerJob = (runs: CliRun[]): Map<string, number> => {
  const count = new Map<string, number>();
  for (const run of runs)
    for (const l of run.lines)
      if (l.message === 'decision' && l.outcome === 'failed') count.set(String(l.job), (count.get(String(l.job)) ?? 0) + 1);
  return count;
};

describe('crash safety', () => {
  it(
    'kill -9 at many points of a batch of 200 (half podFailurePolicy): one more sweep fails every Job exactly once, with one Event',
    TIMEOUT,
    async () => {
      const ns = await env.namespace('kill9');
      const names = await stuckJobs(ns, 200, 2);
      // Kill points: once this process has audited `after` Jobs failed, at once or a few ms later
      // (mid write sequence). Output comes in bursts, so each run fails at least that many.
      const killPoints: { after: number; delayMs: number }[] = [
        { after: 0, delayMs: 0 },
        { after: 1, delayMs: 0 },
        { after: 1, delayMs: 9 },
        { after: 3, delayMs: 0 },
        { after: 2, delayMs: 30 },
        { after: 5, delayMs: 4 },
        { after: 1, delayMs: 60 },
        { after: 8, delayMs: 0 },
        { after: 4, delayMs: 17 },
        { after: 2, delayMs: 2 },
        { after: 6, delayMs: 45 },
        { after: 3, delayMs: 120 },
      ];
      const runs: CliRun[] = [];
      for (const point of killPoints) {
        const run = await sweepProcess(ns, (failed) => (failed >= point.after ? 'SIGKILL' : undefined), point.delayMs);
        runs.push(run);
        if (run.signal !== 'SIGKILL') break; // nothing left to fail before the kill point
      }
      const killed = runs.filter((r) => r.signal === 'SIGKILL').length;
      assert.ok(killed >= 8, `at least 8 runs killed mid-batch, got ${killed}`);
      const failedBeforeFinal = [...failedLinesPerJob(runs).values()].reduce((a, b) => a + b, 0);

      await new Promise((r) => setTimeout(r, CONFIRM_WITHIN_S * 1000 + 500));
      const final = await sweepProcess(ns);
      assert.equal(final.code, 0, JSON.stringify(final.lines.filter((l) => l.level === 'error')));
      runs.push(final);
      const { duplicates, missing } = await assertFailedOnceEach(ns, names);
      const perJob = failedLinesPerJob(runs);
      const twice = [...perJob.entries()].filter(([, n]) => n > 1);
      const retried = final.lines.filter((l) => l.outcome === 'retried').length;
      const killedRuns = runs.slice(0, -1);
      const retriedByKilled = killedRuns.reduce((n, r) => n + r.lines.filter((l) => l.outcome === 'retried').length, 0);
      const audited = new Set(
        runs.flatMap((r) => r.lines.filter((l) => l.outcome === 'failed' || l.outcome === 'retried').map((l) => String(l.job))),
      );
      const eventsBackfilled = runs.reduce(
        (n, r) => n + r.lines.filter((l) => /wrote the missing FailJob Event/.test(String(l.message))).length,
        0,
      );
      console.log(
        `[kill -9] ${names.length} Jobs (100 podFailurePolicy), ${killed} runs killed with SIGKILL mid-batch, ` +
          `${failedBeforeFinal} Jobs audited failed and ${retriedByKilled} retried by the killed runs, ` +
          `${names.length - audited.size} failed without a decision line getting out (${eventsBackfilled} Events written by a later run); final sweep: ${final.lines.filter((l) => l.outcome === 'failed').length} failed, ` +
          `${retried} retried; Events missing ${missing}, duplicates ${duplicates}, Jobs failed twice ${twice.length}`,
      );
      assert.equal(missing, 0);
      assert.equal(duplicates, 0);
      assert.deepEqual(twice, []);

      // One more sweep settles and changes nothing that matters: no new Event.
      const again = await sweepProcess(ns);
      assert.equal(again.code, 0);
      assert.equal(again.lines.filter((l) => l.outcome === 'failed' || l.outcome === 'retried').length, 0);
      assert.equal((await assertFailedOnceEach(ns, names)).duplicates, 0);
    },
  );

  it('three sweepers started at once on 60 stuck Jobs: one Event per Job, each failed once, all exit 0', TIMEOUT, async () => {
    const ns = await env.namespace('race3');
    const names = await stuckJobs(ns, 60, 3);
    const runs = await Promise.all([sweepProcess(ns), sweepProcess(ns), sweepProcess(ns)]);
    assert.deepEqual(
      runs.map((r) => r.code),
      [0, 0, 0],
      JSON.stringify(runs.flatMap((r) => r.lines.filter((l) => l.level === 'error'))),
    );
    const perJob = failedLinesPerJob(runs);
    assert.equal(perJob.size, 60);
    assert.deepEqual(
      [...perJob.values()].filter((n) => n !== 1),
      [],
    );
    const { duplicates, missing } = await assertFailedOnceEach(ns, names);
    const wins = runs.map((r) => r.lines.filter((l) => l.outcome === 'failed').length);
    console.log(
      `[3 sweepers] 60 Jobs (20 podFailurePolicy): failed per sweeper ${wins.join('/')}; Events missing ${missing}, duplicates ${duplicates}`,
    );
    assert.equal(missing, 0);
    assert.equal(duplicates, 0);
  });

  it(
    'SIGTERM mid-batch: writes in flight finish, none start after, exit 0; every Job untouched or failed with its Event',
    TIMEOUT,
    async () => {
      const ns = await env.namespace('sigterm');
      const names = await stuckJobs(ns, 80, 2);
      const run = await sweepProcess(ns, (failed) => (failed >= 2 ? 'SIGTERM' : undefined));
      assert.equal(run.code, 0);
      assert.equal(run.signal, null);
      const decisions = run.lines.filter((l) => l.message === 'decision');
      const failed = decisions.filter((l) => l.outcome === 'failed').map((l) => String(l.job));
      const deferred = decisions.filter((l) => l.outcome === 'deferred');
      assert.ok(
        run.lines.some((l) => l.message === 'summary'),
        'the summary is written',
      );
      assert.ok(deferred.length > 0, 'the stop came before the end of the batch');
      assert.ok(deferred.every((l) => /sweep stopped before acting/.test(String(l.detail))));
      assert.equal(failed.length + deferred.length, names.length);
      console.log(`[SIGTERM] 80 Jobs: ${failed.length} failed (writes in flight finished), ${deferred.length} deferred`);

      await waitAllFailed(ns, failed);
      const events = await failJobEvents(ns);
      for (const job of await listJobs(ns)) {
        const name = job.metadata!.name!;
        const annotated = job.metadata!.annotations?.['imagepull-sweeper/failed-at'] !== undefined;
        assert.equal(annotated, failed.includes(name), `${name}: annotated iff audited failed`);
        assert.equal(events.get(name)?.length ?? 0, annotated ? 1 : 0, `${name}: one Event iff failed`);
      }
    },
  );

  it(
    'a claim left by a crash (no FailureTarget: its pod never marked on the fallback): waits confirmWithin, then fails the Job by its own condition, audited retried',
    TIMEOUT,
    async () => {
      const ns = await env.namespace('orphan-claim');
      await createStuckJob(kc, ns, 'claimed', { stuckFor: 9999, spec: PFP });
      // What a sweep killed right after its claim leaves behind.
      const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
      const failedAt = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
      await kc.makeApiClient(BatchV1Api).patchNamespacedJob(
        {
          namespace: ns,
          name: 'claimed',
          body: {
            metadata: {
              labels: { 'imagepull-sweeper/pending': 'true' },
              annotations: {
                'imagepull-sweeper/failed-at': failedAt,
                'imagepull-sweeper/reason': 'ImagePullBackOff',
                'imagepull-sweeper/message':
                  'regular container main of pod x waited 3m on image registry.invalid/team/app:does-not-exist (class permanent, rule defaults, grace 2m): ImagePullBackOff: not found',
                'imagepull-sweeper/claim': 'crashed-sweep',
              },
            },
          },
        },
        merge,
      );
      const policy = policyFile('limits: { confirmWithin: 4s }\n');
      const early = await runSweep(kc, { namespaces: [ns], policy });
      assert.equal(early.exitCode, 0);
      assert.equal(early.lines.length, 1);
      assert.equal(early.lines[0]!.outcome, 'skipped');
      assert.match(early.lines[0]!.detail, /waiting for the Job controller/);
      assert.equal(early.summary!.awaitingFailed, 1);

      await new Promise((r) => setTimeout(r, 4500));
      const late = await runSweep(kc, { namespaces: [ns], policy });
      assert.equal(late.exitCode, 0);
      assert.equal(late.lines[0]!.outcome, 'retried');
      assert.match(
        late.lines[0]!.detail,
        /not finished after confirmWithin 4s: failing it again by its own condition; found 1 pod\(s\) Pending \(ImagePullBackOff\)/,
      );
      const job = await waitForJobFailed(kc, ns, 'claimed');
      assert.equal(trueCondition(job, 'Failed')?.reason, 'ImagePullStuck');
      assert.match(trueCondition(job, 'Failed')?.message ?? '', /^imagepull-sweeper: regular container main of pod x waited 3m /);
      assert.equal(job.spec?.activeDeadlineSeconds, undefined, 'no spec change');
      assert.equal((await failJobEvents(ns)).get('claimed')?.length, 1);

      // The next sweep sees it finished: the label goes, nothing else is written.
      const settle = await runSweep(kc, { namespaces: [ns], policy });
      assert.equal(settle.exitCode, 0);
      assert.equal((await readJob(kc, ns, 'claimed')).metadata!.labels?.['imagepull-sweeper/pending'], undefined);
      assert.equal((await failJobEvents(ns)).get('claimed')?.length, 1);
    },
  );

  it('a failing write that landed, its answer lost and every retry refused (not 409): completed, not orphaned', TIMEOUT, async () => {
    const ns = await env.namespace('lost-answer');
    await createStuckJob(kc, ns, 'deadline', { stuckFor: 9999 });
    await createStuckJob(kc, ns, 'pfp', { stuckFor: 9999, spec: PFP });
    const real = createGateway(kc);
    // The claim (with the FailureTarget) reaches the API server, but this client sees 503 on it and on every retry.
    const landedThenLost: KubeGateway = {
      ...real,
      patchJobStatus: async (namespace, name, patch) => {
        await real.patchJobStatus(namespace, name, patch).catch(() => undefined);
        throw new ApiException(503, 'Service Unavailable', { reason: 'ServiceUnavailable', message: 'injected' }, {});
      },
    };
    const gateway = withRetries(landedThenLost, { sleep: async () => undefined });
    const observation = await observeStuckContainers(gateway, { namespaces: [ns], pageSize: 100 });
    const attribution = await attributeToJobs(gateway, observation.stuck, { concurrency: 2, listConcurrency: 2, listThreshold: 10 });
    const input: JudgeInput = {
      stuck: observation.stuck,
      ownerOf: attribution.ownerOf,
      namespaceLabels: new Map(),
      policy: parsed(POLICY_YAML),
      now: new Date(),
    };
    const results = await act(gateway, judge(input).decisions, {
      concurrency: 2,
      now: input.now,
      instance: 'e2e',
      claim: 'lost-answer-claim',
      rejudge: (d, fresh, pod) => rejudgeJob(input, d, fresh, pod),
    });
    assert.deepEqual(
      results.map((r) => [r.decision.job, r.outcome, r.error]),
      [
        ['deadline', 'failed', undefined],
        ['pfp', 'failed', undefined],
      ],
    );
    for (const name of ['deadline', 'pfp'])
      assert.equal(trueCondition(await waitForJobFailed(kc, ns, name), 'Failed')?.reason, 'ImagePullStuck');
    const events = await failJobEvents(ns);
    assert.equal(events.get('deadline')?.length, 1);
    assert.equal(events.get('pfp')?.length, 1);
  });

  it('a Failed Job whose Event was never written gets it from the next sweep, once', TIMEOUT, async () => {
    const ns = await env.namespace('no-event');
    await createStuckJob(kc, ns, 'silent', { stuckFor: 9999 });
    const real = createGateway(kc);
    const noEvents: KubeGateway = {
      ...real,
      createEvent: () => Promise.reject(new ApiException(500, 'boom', { message: 'injected' }, {})),
    };
    const first = await runSweep(kc, { namespaces: [ns], policy: POLICY }, noEvents);
    assert.equal(first.exitCode, 1);
    assert.match(String(first.lines[0]!.error), /Event was not written/);
    await waitForJobFailed(kc, ns, 'silent');
    assert.equal((await failJobEvents(ns)).get('silent'), undefined);

    const second = await runSweep(kc, { namespaces: [ns], policy: POLICY });
    assert.equal(second.exitCode, 0);
    assert.ok(second.records.some((r) => /wrote the missing FailJob Event/.test(String(r.message))));
    assert.equal((await failJobEvents(ns)).get('silent')?.length, 1);
    await runSweep(kc, { namespaces: [ns], policy: POLICY });
    assert.equal((await failJobEvents(ns)).get('silent')?.length, 1);
  });
});

describe('pod preconditions (the podFailurePolicy fallback)', () => {
  it(
    'a pod written between observing and acting: the write fails its precondition, the Job is re-read and re-judged',
    TIMEOUT,
    async () => {
      const ns = await env.namespace('pod-rv');
      await refuseStatusWrites(env, ns);
      const changed = await createStuckJob(kc, ns, 'changed', { stuckFor: 9999, spec: PFP });
      const recovered = await createStuckJob(kc, ns, 'recovered', { stuckFor: 9999, spec: PFP });
      const gateway = withRetries(createGateway(kc));
      const observation = await observeStuckContainers(gateway, { namespaces: [ns], pageSize: 100 });
      const attribution = await attributeToJobs(gateway, observation.stuck, { concurrency: 2, listConcurrency: 2, listThreshold: 10 });
      const input: JudgeInput = {
        stuck: observation.stuck,
        ownerOf: attribution.ownerOf,
        namespaceLabels: new Map(),
        policy: parsed(POLICY_YAML),
        now: new Date(),
      };
      const decisions = judge(input).decisions;
      assert.deepEqual(
        decisions.map((d) => [d.mechanism, d.failJobCondition]),
        [
          ['condition', 'ImagePullStuck'],
          ['condition', 'ImagePullStuck'],
        ],
      );

      const core = kc.makeApiClient(CoreV1Api);
      // The kubelet writes both pods: one is still stuck (a new message), the other now runs.
      await setImagePullStuck(core, ns, changed.pod, {
        since: new Date(Date.now() - 9999_000),
        stuck: [{ container: 'main', reason: 'ErrImagePull', message: 'rpc error: not found' }],
      });
      await setPodRunning(core, ns, recovered.pod);

      let podRejudged = 0;
      const results = await act(gateway, decisions, {
        concurrency: 2,
        now: input.now,
        instance: 'e2e',
        claim: 'pod-rv-claim',
        rejudge: (d, fresh, pod) => {
          if (pod) podRejudged += 1;
          return rejudgeJob(input, d, fresh, pod);
        },
      });
      assert.equal(podRejudged, 2);
      const byJob = Object.fromEntries(results.map((r) => [r.decision.job, r]));
      assert.equal(byJob.changed!.outcome, 'failed');
      assert.equal(byJob.changed!.decision.mechanism, 'podFailurePolicy', 'the status write refused: the fallback');
      assert.equal(byJob.changed!.decision.reason, 'ErrImagePull');
      assert.equal(byJob.recovered!.outcome, 'skipped');
      assert.match(byJob.recovered!.decision.detail, /no longer stuck/);
      assert.equal(trueCondition(await waitForJobFailed(kc, ns, 'changed'), 'Failed')?.reason, 'PodFailurePolicy');

      // The recovered pod was neither marked nor deleted, and its Job's claim was released.
      const pod = await core.readNamespacedPod({ namespace: ns, name: recovered.pod });
      assert.equal(pod.metadata!.deletionTimestamp, undefined);
      assert.equal(
        pod.status!.conditions!.some((c) => c.type === 'ImagePullStuck'),
        false,
      );
      const job = await readJob(kc, ns, 'recovered');
      assert.deepEqual(
        Object.keys(job.metadata!.annotations ?? {}).filter((k) => k.startsWith('imagepull-sweeper/')),
        [],
      );
      assert.equal(job.metadata!.labels?.['imagepull-sweeper/pending'], undefined);
      assert.equal((await failJobEvents(ns)).get('recovered'), undefined);
    },
  );
});

describe('the fallback where the status write is refused', () => {
  it(
    'a podFailurePolicy whose earlier rule (onExitCodes In [137] Ignore) would swallow the deleted pod: failed by the deadline',
    TIMEOUT,
    async () => {
      const ns = await env.namespace('shadowed');
      await refuseStatusWrites(env, ns);
      const spec = {
        podFailurePolicy: {
          rules: [
            { action: 'Ignore', onExitCodes: { operator: 'In', values: [137] } },
            { action: 'FailJob', onPodConditions: [{ type: 'ImagePullStuck', status: 'True' }] },
          ],
        },
      };
      await createStuckJob(kc, ns, 'ignores-137', { stuckFor: 9999, spec });
      const run = await runSweep(kc, { namespaces: [ns], policy: POLICY });
      assert.equal(run.exitCode, 0);
      assert.equal(run.lines[0]!.outcome, 'failed');
      assert.match(
        run.lines[0]!.mechanism ?? '',
        /^activeDeadlineSeconds \(the status write was refused \(Forbidden: .*\); podFailurePolicy rule 1 \(Ignore on exit code In \[137\]\) would match the deleted pod before rule 2/,
      );
      assert.equal(trueCondition(await waitForJobFailed(kc, ns, 'ignores-137'), 'Failed')?.reason, 'DeadlineExceeded');
    },
  );
});

function parsed(yaml: string) {
  const r = parsePolicyYaml(yaml);
  if (!r.ok) throw new Error(`bad test policy: ${JSON.stringify(r.problems)}`);
  return r.policy;
}
