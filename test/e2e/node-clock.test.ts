// "Now" is the API server's clock (docs/clock.md), proven with the built CLI run under libfaketime
// (Debian's faketime, installed by test/node/setup.sh): with the sweeper's clock 15 minutes ahead
// a Job stuck a few seconds under a 2-minute grace is not failed; 15 minutes behind, a Job stuck
// past its grace is failed, its failed-at and Event on the server's clock; `run` judges each
// scheduled sweep on the server's clock. Answers without a Date header change nothing. The pulls
// fail for real on the real node.
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import { BatchV1Api, CoreV1Api } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { ANNOTATIONS } from '../../src/policy/annotations.ts';
import type { AuditLine, SweepSummary } from '../../src/report/audit.ts';
import { CLI, ensureBuilt, exec, jsonLines, startCli, type Exec } from '../support/cli.ts';
import { startFaultProxy } from '../support/fault-proxy.ts';
import { jobManifest } from '../support/fixtures.ts';
import { useTestCluster } from '../support/hooks.ts';
import { waitFor, waitForJobPods } from '../support/kubelet.ts';
import { nodeSkipReason, testNode, type TestNodeHandle } from '../support/node.ts';
import { nodePodSpec, observeReasons } from '../support/node-cases.ts';
import {
  assertFailedBySweeper,
  policyFile,
  readJob,
  runSweep,
  sweeperEvents,
  trueCondition,
  waitForJobFailed,
} from '../support/sweeper.ts';

const skip = nodeSkipReason();
const env = useTestCluster(() => ensureBuilt());
const TIMEOUT = { timeout: 120_000, skip };
const SKEW_MS = 15 * 60_000;
const CLASSES = ['permanent', 'auth', 'transient', 'unknown', 'stalled'];
const grace = (d: string): string => {
  const location = policyFile(`defaults: { grace: { ${CLASSES.map((c) => `${c}: ${d}`).join(', ')} } }\n`);
  return location.kind === 'file' ? location.path : '';
};
const TWO_MINUTES = grace('2m');
const ONE_SECOND = grace('1s');
/** Debian's libfaketime, the thread-safe build (Node has threads), e.g. /usr/lib/x86_64-linux-gnu/faketime/. */
const LIBFAKETIME = ['/usr/lib', ...(existsSync('/usr/lib') ? readdirSync('/usr/lib') : []).map((d) => join('/usr/lib', d))]
  .map((dir) => join(dir, 'faketime', 'libfaketimeMT.so.1'))
  .find((path) => existsSync(path));
/** The wall clock moved by `offset` (e.g. +15m); the monotonic clock left alone, as on a real node. */
const skewed = (offset: string): Record<string, string> => ({
  LD_PRELOAD: LIBFAKETIME ?? '',
  FAKETIME: offset,
  FAKETIME_DONT_FAKE_MONOTONIC: '1',
});

describe('"now" is the API server\'s clock, whatever the sweeper\'s says', () => {
  let node: TestNodeHandle;
  before(async () => {
    if (skip) return;
    // setup.sh installs faketime with the node's packages: its absence is a failure, not a skip.
    assert.ok(LIBFAKETIME, 'libfaketime is missing: run test/node/setup.sh');
    node = await testNode(env.cluster.kubeconfigPath);
  });

  /** A Job on the real node whose pull of a missing image has failed once (a real ErrImagePull). */
  async function stuckJob(ns: string, name: string): Promise<void> {
    const image = `${node.registry}/team/missing:1`;
    const job = jobManifest(name, image);
    job.spec!.template.spec = nodePodSpec(node, [{ name: 'main', image }]);
    await env.kc.makeApiClient(BatchV1Api).createNamespacedJob({ namespace: ns, body: job });
    const [pod] = await waitForJobPods(env.kc.makeApiClient(CoreV1Api), ns, name);
    await observeReasons(env.kc, ns, pod!.metadata!.name!, { container: 'main', containerKind: 'regular', reasons: ['ErrImagePull'] });
  }

  /** One sweep of the built CLI with its wall clock moved by `offset` (e.g. +15m). */
  async function sweepSkewed(offset: string, ns: string, policy: string, kubeconfig = env.cluster.kubeconfigPath) {
    const args = ['sweep', '--kubeconfig', kubeconfig, '--policy-file', policy, '--namespace', ns, '--output', 'json'];
    const before = Date.now();
    const run: Exec = await exec(process.execPath, [CLI, ...args], { env: { ...process.env, ...skewed(offset) }, timeoutMs: 60_000 });
    const after = Date.now();
    const records = jsonLines(run.stdout);
    return {
      run,
      before,
      after,
      records,
      lines: records.filter((r) => r.message === 'decision') as unknown as AuditLine[],
      summary: records.find((r) => r.message === 'summary') as unknown as SweepSummary | undefined,
      /** How far the CLI's own clock was from the real one: its log timestamps are local. */
      skewMs: Date.parse(String(records.at(-1)?.timestamp)) - (before + after) / 2,
    };
  }

  const within = (t: number, from: number, to: number, what: string) =>
    assert.ok(
      t >= from && t <= to,
      `${what} ${new Date(t).toISOString()} not in ${new Date(from).toISOString()} .. ${new Date(to).toISOString()}`,
    );

  it('15 minutes ahead: a Job stuck seconds under a 2-minute grace is not failed', TIMEOUT, async () => {
    const ns = await env.namespace('clock-ahead');
    await stuckJob(ns, 'build');
    const s = await sweepSkewed('+15m', ns, TWO_MINUTES);
    assert.equal(s.run.code, 0, s.run.stdout + s.run.stderr);
    assert.ok(s.skewMs > SKEW_MS - 60_000, `the sweeper's clock ran ${s.skewMs} ms ahead`);
    assert.equal(s.lines.length, 1);
    assert.equal(s.lines[0]!.outcome, 'skipped', s.lines[0]!.detail);
    assert.ok(s.lines[0]!.stuckSeconds < 60, `stuck ${s.lines[0]!.stuckSeconds} s`);
    within(Date.parse(s.summary!.startedAt), s.before - 2_000, s.after, 'summary startedAt');
    const job = await readJob(env.kc, ns, 'build');
    assert.equal(job.metadata?.annotations?.[ANNOTATIONS.failedAt], undefined);
    assert.equal(job.spec?.activeDeadlineSeconds, undefined);
    assert.equal(trueCondition(job, 'Failed'), undefined);
    assert.equal(trueCondition(job, 'FailureTarget'), undefined);
    assert.deepEqual(await sweeperEvents(env.kc, ns), []);
  });

  it("15 minutes behind: a Job stuck past its grace is failed, failed-at and Event on the server's clock", TIMEOUT, async () => {
    const ns = await env.namespace('clock-behind');
    await stuckJob(ns, 'build');
    await new Promise((r) => setTimeout(r, 2_000)); // past the 1 s grace
    const s = await sweepSkewed('-15m', ns, ONE_SECOND);
    assert.equal(s.run.code, 0, s.run.stdout + s.run.stderr);
    assert.ok(s.skewMs < -(SKEW_MS - 60_000), `the sweeper's clock ran ${-s.skewMs} ms behind`);
    assert.equal(s.lines[0]!.outcome, 'failed', s.lines[0]!.detail);
    assert.ok(s.lines[0]!.stuckSeconds >= 1 && s.lines[0]!.stuckSeconds < 60, `stuck ${s.lines[0]!.stuckSeconds} s`);
    const job = await waitForJobFailed(env.kc, ns, 'build');
    assertFailedBySweeper(job);
    // failed-at has whole seconds.
    within(Date.parse(job.metadata!.annotations![ANNOTATIONS.failedAt]!), s.before - 1_000, s.after, 'failed-at');
    const events = await sweeperEvents(env.kc, ns);
    assert.equal(events.length, 1);
    within(new Date(events[0]!.eventTime as unknown as string).getTime(), s.before - 1_000, s.after, 'Event eventTime');
  });

  it("`run` 15 minutes ahead: every scheduled sweep judges on the server's clock", TIMEOUT, async () => {
    const ns = await env.namespace('clock-run');
    await stuckJob(ns, 'build');
    const args = [
      'run',
      '--schedule',
      '*/2 * * * * *',
      '--kubeconfig',
      env.cluster.kubeconfigPath,
      '--policy-file',
      TWO_MINUTES,
      '--namespace',
      ns,
      '--output',
      'json',
    ];
    const { child, output, exited } = startCli(args, skewed('+15m'));
    try {
      await waitFor(() => jsonLines(output()).filter((r) => r.message === 'summary').length >= 3, 30_000, 'three scheduled sweeps', 200);
    } finally {
      child.kill('SIGTERM');
    }
    assert.equal(await exited, 0, output());
    const lines = jsonLines(output()).filter((r) => r.message === 'decision') as unknown as AuditLine[];
    assert.ok(lines.length >= 3);
    for (const line of lines) assert.equal(line.outcome, 'skipped', `${line.detail}: stuck ${line.stuckSeconds} s`);
    assert.ok(Math.max(...lines.map((l) => l.stuckSeconds)) < 60);
    assert.equal((await readJob(env.kc, ns, 'build')).metadata?.annotations?.[ANNOTATIONS.failedAt], undefined);
  });

  it('answers without a Date header: nothing is judged or changed, exit 3', TIMEOUT, async () => {
    const ns = await env.namespace('clock-nodate');
    await stuckJob(ns, 'build');
    await new Promise((r) => setTimeout(r, 2_000));
    const admin = env.cluster.kubeconfigPath;
    const cfg = parse(readFileSync(admin, 'utf8')) as { clusters: { cluster: Record<string, string> }[] };
    const upstreamCa = Buffer.from(cfg.clusters[0]!.cluster['certificate-authority-data']!, 'base64').toString('utf8');
    const proxy = await startFaultProxy({ upstream: env.cluster.server, upstreamCa, seed: 1, faultRate: 0, stripDate: true });
    try {
      // Even a clock that would fail the Job is not fallen back on.
      const s = await sweepSkewed('+15m', ns, ONE_SECOND, proxy.writeKubeconfig(admin));
      assert.equal(s.run.code, 3, s.run.stdout + s.run.stderr);
      assert.ok(
        s.records.some((r) => r.level === 'error' && /Date header.*nothing was changed/.test(String(r.message))),
        s.run.stdout,
      );
      assert.deepEqual(s.lines, []);
      assert.equal(s.summary, undefined);
    } finally {
      await proxy.close();
    }
    const job = await readJob(env.kc, ns, 'build');
    assert.equal(job.metadata?.annotations?.[ANNOTATIONS.failedAt], undefined);
    assert.deepEqual(await sweeperEvents(env.kc, ns), []);
    // The same sweep with the API server's answers whole fails it: it was failable all along.
    const direct = await runSweep(env.kc, { namespaces: [ns], policy: { kind: 'file', path: ONE_SECOND } });
    assert.equal(direct.lines[0]?.outcome, 'failed');
  });
});
