// `run --watch` on the real control plane (and the real node): a Job is failed when its grace
// runs out, not at a schedule slot (the backstop here is once a year), and a policy edit, a
// deletion and a re-creation of the policy ConfigMap, or of a --policy-file, apply at once.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import { BatchV1Api, CoreV1Api, type V1Job } from '@kubernetes/client-node';
import { findStuckContainers } from '../../src/classify/index.ts';
import { ensureBuilt, jsonLines, startCli } from '../support/cli.ts';
import { freePort } from '../support/cluster.ts';
import { jobManifest } from '../support/fixtures.ts';
import { useTestCluster } from '../support/hooks.ts';
import { waitFor, waitForJobPods } from '../support/kubelet.ts';
import { nodePodSpec, observeReasons } from '../support/node-cases.ts';
import { nodeSkipReason, testNode, type TestNodeHandle } from '../support/node.ts';
import { assertFailedBySweeper, createStuckJob, readJob, sweeperEvents, waitForJobFailed } from '../support/sweeper.ts';

const NEVER = '0 0 1 1 *';
const dir = mkdtempSync(join(tmpdir(), 'ips-watch-'));
const env = useTestCluster(() => ensureBuilt());
const skip = nodeSkipReason();

function file(name: string, text: string): string {
  const path = join(dir, name);
  writeFileSync(path, text);
  return path;
}

/** `run --watch` on `ns` with a backstop that never comes; stopped (SIGTERM, exit 0) after `body`. */
async function watching(args: string[], body: (proc: ReturnType<typeof startCli>) => Promise<void>): Promise<Record<string, unknown>[]> {
  const proc = startCli(['run', '--watch', '--schedule', NEVER, '--output', 'json', '--kubeconfig', env.cluster.kubeconfigPath, ...args]);
  try {
    await waitFor(() => jsonLines(proc.output()).some((l) => l.message === 'summary'), 60_000, 'the first sweep of the watch');
    await body(proc);
  } finally {
    proc.child.kill('SIGTERM');
  }
  assert.equal(await proc.exited, 0, proc.output());
  return jsonLines(proc.output());
}

const decisions = (lines: Record<string, unknown>[], job: string) => lines.filter((l) => l.message === 'decision' && l.job === job);
const seconds = (text: string | Date | undefined) => new Date(text ?? NaN).getTime() / 1000;

describe('run --watch on the real node', () => {
  let node: TestNodeHandle;
  before(async () => {
    if (!skip) node = await testNode(env.cluster.kubeconfigPath);
  });

  it(
    'fails a Job with a missing image and a 10 s grace within 10 s + 3 s of its container becoming stuck',
    { timeout: 180_000, skip },
    async () => {
      const ns = await env.namespace('watch-node');
      const image = `${node.registry}/team/missing:1`;
      const job: V1Job = jobManifest('build', image);
      job.metadata = { ...job.metadata, annotations: { 'imagepull-sweeper/grace': '10s' } };
      job.spec!.template.spec = nodePodSpec(node, [{ name: 'main', image }]);
      let stuckSince: Date | undefined;
      let metrics = '';
      const port = await freePort();
      const args = ['--namespace', ns, '--policy-file', file('node.yaml', '{}\n'), '--listen', `127.0.0.1:${port}`];
      const lines = await watching(args, async () => {
        await env.kc.makeApiClient(BatchV1Api).createNamespacedJob({ namespace: ns, body: job });
        const [pod] = await waitForJobPods(env.kc.makeApiClient(CoreV1Api), ns, 'build');
        const seen = await observeReasons(env.kc, ns, pod!.metadata!.name!, {
          container: 'main',
          containerKind: 'regular',
          reasons: ['ErrImagePull'],
        });
        // The stuck clock the sweeper uses, from the kubelet's own condition times (never before the first ErrImagePull).
        stuckSince = findStuckContainers(seen.get('ErrImagePull')!)[0]!.stuckSince;
        await waitForJobFailed(env.kc, ns, 'build', 60_000);
        metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      });
      const read = await readJob(env.kc, ns, 'build');
      assertFailedBySweeper(read);
      // The first write as the API server stamped it, under the sweeper's field manager: within 1 s
      // of the grace (plus the second both times are truncated to), never before.
      const written = read.metadata?.managedFields?.find((m) => m.manager === 'imagepull-sweeper' && m.operation === 'Update');
      assert.ok(
        written,
        `no managedFields entry of imagepull-sweeper: ${JSON.stringify(read.metadata?.managedFields?.map((m) => m.manager))}`,
      );
      const reaction = seconds(written.time) - seconds(stuckSince);
      process.stderr.write(`[watch] the Job was first written ${reaction} s after its container became stuck (grace 10 s)
`);
      assert.ok(reaction >= 10 && reaction <= 12, `first written ${reaction} s after the stuck clock started`);
      const mine = decisions(lines, 'build');
      assert.deepEqual(
        mine.filter((l) => l.outcome === 'failed').map((l) => [l.graceSeconds, l.graceSource]),
        [[10, 'annotation']],
      );
      assert.equal((await sweeperEvents(env.kc, ns)).length, 1);
      // The timer's sweep, and one reaction measured from grace expiry to the claim.
      assert.match(metrics, /imagepull_sweeper_watch_sweeps_total\{trigger="timer"\} [1-9]/);
      assert.match(metrics, /imagepull_sweeper_watch_reaction_seconds_count\{reason="grace"\} 1\b/);
      assert.match(metrics, /imagepull_sweeper_watch_lists_total\{watch="pods"\} 1\b/);
    },
  );
});

describe('run --watch: the policy ConfigMap', () => {
  it('applies an edit, a deletion and a re-creation of the policy within 5 s', { timeout: 180_000 }, async () => {
    const ns = await env.namespace('watch-policy');
    const core = env.kc.makeApiClient(CoreV1Api);
    const policy = (yaml: string) => ({ metadata: { name: 'policy' }, data: { 'policy.yaml': yaml } });
    await core.createNamespacedConfigMap({ namespace: ns, body: policy('defaults: { grace: { permanent: 1h } }\n') });
    await createStuckJob(env.kc, ns, 'edited', { stuckFor: 120 });
    // Kept out of the edit by its own 1h grace, so only the re-created policy (overrides off) fails
    // it, and no change to its pod sets a timer that could fail it instead.
    await createStuckJob(env.kc, ns, 'recreated', { stuckFor: 120, annotations: { 'imagepull-sweeper/grace': '1h' } });
    let editedAt = 0;
    let recreatedAt = 0;
    const lines = await watching(['--namespace', ns, '--policy-configmap', `${ns}/policy`], async (proc) => {
      assert.equal(decisions(jsonLines(proc.output()), 'edited')[0]?.outcome, 'skipped');
      const edited = await core.replaceNamespacedConfigMap({
        name: 'policy',
        namespace: ns,
        body: policy('defaults: { grace: { permanent: 30s } }\n'),
      });
      editedAt = seconds(edited.metadata?.managedFields?.at(-1)?.time);
      await waitForJobFailed(env.kc, ns, 'edited', 30_000);

      await core.deleteNamespacedConfigMap({ name: 'policy', namespace: ns });
      await waitFor(() => jsonLines(proc.output()).some((l) => /invalid/.test(String(l.message))), 30_000, 'the deleted policy reported');
      // Judged by the first sweep and by the edit's, left alone by both: an unchanged `skipped` is logged once.
      const waited = decisions(jsonLines(proc.output()), 'recreated');
      assert.ok(waited.length === 1 && waited[0]!.outcome === 'skipped', JSON.stringify(waited));
      assert.ok(jsonLines(proc.output()).filter((l) => l.message === 'summary').length >= 2, 'the first sweep and the edit sweep');
      const recreated = await core.createNamespacedConfigMap({
        namespace: ns,
        body: policy('defaults: { grace: { permanent: 30s }, jobOverrides: { allowed: false } }\n'),
      });
      recreatedAt = seconds(recreated.metadata?.creationTimestamp);
      await waitForJobFailed(env.kc, ns, 'recreated', 30_000);
    });
    for (const [name, changedAt] of [
      ['edited', editedAt],
      ['recreated', recreatedAt],
    ] as const) {
      const job = await readJob(env.kc, ns, name);
      const failedAt = seconds(job.metadata?.annotations?.['imagepull-sweeper/failed-at']);
      process.stderr.write(`[watch] ${name}: failed ${failedAt - changedAt} s after the policy change\n`);
      assert.ok(failedAt - changedAt <= 5, `${name}: failed-at ${failedAt - changedAt} s after the change`);
      assert.equal(decisions(lines, name).filter((l) => l.outcome === 'failed').length, 1);
    }
    assert.equal((await sweeperEvents(env.kc, ns)).filter((e) => e.reason === 'ImagePullStuck').length, 2);
  });
});

describe('run --watch: the policy file', () => {
  it(
    'applies a mounted ConfigMap update, a deletion and an editor re-creating the --policy-file within 5 s',
    { timeout: 180_000 },
    async () => {
      const ns = await env.namespace('watch-policy-file');
      // A ConfigMap volume as the kubelet lays it out: policy.yaml -> ..data/policy.yaml, ..data -> ..<version>/.
      const mount = join(dir, 'mount');
      const version = (name: string, yaml: string) => {
        mkdirSync(join(mount, name), { recursive: true });
        writeFileSync(join(mount, name, 'policy.yaml'), yaml);
      };
      version('..v1', 'defaults: { action: ignore }\n');
      symlinkSync('..v1', join(mount, '..data'));
      const path = join(mount, 'policy.yaml');
      symlinkSync('..data/policy.yaml', path);
      await createStuckJob(env.kc, ns, 'swapped', { stuckFor: 120 });
      // Kept out of the first change by its own 1h grace, so only the re-created file (overrides off) fails it,
      // and no change to its pod sets a timer that could fail it instead.
      await createStuckJob(env.kc, ns, 'recreated', { stuckFor: 120, annotations: { 'imagepull-sweeper/grace': '1h' } });
      const changedAt = { swapped: 0, recreated: 0 };
      const lines = await watching(['--namespace', ns, '--policy-file', path], async (proc) => {
        assert.equal(decisions(jsonLines(proc.output()), 'swapped')[0]?.outcome, 'skipped');
        // The kubelet's update: the new version beside the old, a new ..data symlink renamed over the old one.
        version('..v2', 'defaults: { grace: { permanent: 30s } }\n');
        symlinkSync('..v2', join(mount, '..data_tmp'));
        changedAt.swapped = Date.now();
        renameSync(join(mount, '..data_tmp'), join(mount, '..data'));
        rmSync(join(mount, '..v1'), { recursive: true });
        await waitForJobFailed(env.kc, ns, 'swapped', 30_000);

        unlinkSync(path);
        await waitFor(
          () => jsonLines(proc.output()).some((l) => /cannot read policy file/.test(String(l.message))),
          30_000,
          'the deleted policy reported',
        );
        const waited = decisions(jsonLines(proc.output()), 'recreated');
        assert.ok(waited.length >= 2 && waited.every((l) => l.outcome === 'skipped'), JSON.stringify(waited));
        // An editor's save: a temporary file renamed into place.
        writeFileSync(join(mount, '.policy.yaml.tmp'), 'defaults: { grace: { permanent: 30s }, jobOverrides: { allowed: false } }\n');
        changedAt.recreated = Date.now();
        renameSync(join(mount, '.policy.yaml.tmp'), path);
        await waitForJobFailed(env.kc, ns, 'recreated', 30_000);
      });
      for (const name of ['swapped', 'recreated'] as const) {
        const failed = decisions(lines, name).filter((l) => l.outcome === 'failed');
        assert.equal(failed.length, 1, name);
        // The decision is logged once the Job is failed; both times are this machine's clock.
        const delay = (Date.parse(String(failed[0]!.timestamp)) - changedAt[name]) / 1000;
        process.stderr.write(`[watch] ${name}: failed ${delay} s after the policy file changed\n`);
        assert.ok(delay > 0 && delay <= 5, `${name}: failed ${delay} s after the change`);
      }
      assert.equal((await sweeperEvents(env.kc, ns)).filter((e) => e.reason === 'ImagePullStuck').length, 2);
    },
  );
});
