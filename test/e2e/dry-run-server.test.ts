// `sweep --dry-run=server` through the built CLI, on the real API server: every write is sent with
// dryRun=All, judged (RBAC, the admission guard of manifests/guard.yaml) and not kept; a write the
// API server refuses is an error, where a client dry run would only have said would-fail.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { before, describe, it } from 'node:test';
import { CoreV1Api, RbacAuthorizationV1Api, type KubeConfig } from '@kubernetes/client-node';
import { ensureBuilt, jsonLines, registerKubeconfigSecrets, runCli } from '../support/cli.ts';
import { guardEnforced } from '../support/guard.ts';
import { useTestCluster } from '../support/hooks.ts';
import { installShipped, SERVICE_ACCOUNT, serviceAccountKubeconfig } from '../support/manifests.ts';
import { createStuckJob, settledSnapshot, sweeperEvents } from '../support/sweeper.ts';

const TIMEOUT = { timeout: 180_000 };
const PFP_SPEC = {
  podFailurePolicy: { rules: [{ action: 'FailJob' as const, onPodConditions: [{ type: 'ImagePullStuck', status: 'True' }] }] },
};
const dir = mkdtempSync(join(tmpdir(), 'ips-dry-run-'));
// The built-in defaults: a missing tag (permanent) is failed after 2m; the Jobs are stuck far longer.
const POLICY = join(dir, 'policy.yaml');
writeFileSync(POLICY, '{}\n');

let kc: KubeConfig;
/** The shipped ServiceAccount's kubeconfig file: the guard judges its writes. */
let guarded: string;
const env = useTestCluster(async (hooks) => {
  ensureBuilt();
  kc = hooks.kc;
  const sa = await installShipped(hooks);
  registerKubeconfigSecrets(sa.path);
  guarded = sa.path;
  const probe = await hooks.namespace('dry-run-probe');
  await guardEnforced(kc, sa.kc, probe);
});

async function sweepCli(
  kubeconfig: string,
  ns: string,
  dryRun: string,
): Promise<{ code: number | null; lines: Record<string, unknown>[]; output: string }> {
  const r = await runCli(['sweep', dryRun, '-n', ns, '--policy-file', POLICY, '-o', 'json', '--kubeconfig', kubeconfig]);
  return { code: r.code, lines: jsonLines(r.stdout), output: `stdout:\n${r.stdout}\nstderr:\n${r.stderr}` };
}

const decisions = (lines: Record<string, unknown>[]) => lines.filter((l) => l.message === 'decision');

describe('sweep --dry-run=server', () => {
  it(
    'as the shipped ServiceAccount under the guard: would-fail, exit 0, and the Jobs, pods and Events are unchanged',
    TIMEOUT,
    async () => {
      const ns = await env.namespace('dry-run-server');
      await createStuckJob(kc, ns, 'deadline', { stuckFor: 9999 });
      await createStuckJob(kc, ns, 'pfp', { stuckFor: 9999, spec: PFP_SPEC });
      const before = await settledSnapshot(kc, ns);

      const run = await sweepCli(guarded, ns, '--dry-run=server');
      assert.equal(run.code, 0, run.output);
      const byJob = new Map(decisions(run.lines).map((l) => [l.job, l]));
      // Both by their own condition: the status write, sent with dryRun=All, judged by RBAC and the guard.
      for (const [job, mechanism] of [
        ['deadline', 'condition'],
        ['pfp', 'condition'],
      ]) {
        const line = byJob.get(job);
        assert.equal(line?.outcome, 'would-fail', run.output);
        assert.equal(line?.mechanism, mechanism, run.output);
        assert.equal(line?.dryRun, true, run.output);
        assert.notEqual(line?.level, 'error', run.output);
      }
      const summary = run.lines.find((l) => l.message === 'summary');
      assert.equal(summary?.actionErrors, 0, run.output);

      // Nothing kept: no annotation, label or deadline on the Jobs, no condition on the pods, no Event.
      assert.deepEqual(await settledSnapshot(kc, ns), before);
      assert.deepEqual(await sweeperEvents(kc, ns), []);
    },
  );

  describe('as a ServiceAccount RBAC lets read but not patch Jobs', () => {
    let ns: string;
    let readOnly: string;
    before(async () => {
      // Outside the shipped install (no guard for it): RBAC alone judges its writes.
      ns = await env.namespace('dry-run-refused');
      await kc.makeApiClient(CoreV1Api).createNamespacedServiceAccount({ namespace: ns, body: { metadata: { name: SERVICE_ACCOUNT } } });
      const rbac = kc.makeApiClient(RbacAuthorizationV1Api);
      await rbac.createNamespacedRole({
        namespace: ns,
        body: {
          metadata: { name: 'reader' },
          rules: [
            { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list'] },
            { apiGroups: ['batch'], resources: ['jobs'], verbs: ['get', 'list'] },
          ],
        },
      });
      await rbac.createNamespacedRoleBinding({
        namespace: ns,
        body: {
          metadata: { name: 'reader' },
          roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'reader' },
          subjects: [{ kind: 'ServiceAccount', name: SERVICE_ACCOUNT, namespace: ns }],
        },
      });
      const sa = await serviceAccountKubeconfig(kc, ns);
      env.onCleanup(async () => sa.remove());
      registerKubeconfigSecrets(sa.path);
      readOnly = sa.path;
      await createStuckJob(kc, ns, 'build', { stuckFor: 9999 });
    });

    it('a client dry run says would-fail (exit 0): it sends nothing to be refused', TIMEOUT, async () => {
      const run = await sweepCli(readOnly, ns, '--dry-run');
      assert.equal(run.code, 0, run.output);
      assert.deepEqual(
        decisions(run.lines).map((l) => [l.job, l.outcome]),
        [['build', 'would-fail']],
        run.output,
      );
    });

    it(
      'a server dry run: the refused claim (the status write, then its fallback) is an error, logged at error, exit 1; nothing changed',
      TIMEOUT,
      async () => {
        const before = await settledSnapshot(kc, ns);
        const run = await sweepCli(readOnly, ns, '--dry-run=server');
        assert.equal(run.code, 1, run.output);
        const [line, ...others] = decisions(run.lines);
        assert.deepEqual(others, [], run.output);
        assert.equal(line?.job, 'build', run.output);
        assert.equal(line?.outcome, 'error', run.output);
        assert.equal(line?.level, 'error', run.output);
        assert.match(String(line?.error), /forbidden/i, run.output);
        assert.equal(run.lines.find((l) => l.message === 'summary')?.actionErrors, 1, run.output);
        assert.deepEqual(await settledSnapshot(kc, ns), before);
      },
    );
  });
});
