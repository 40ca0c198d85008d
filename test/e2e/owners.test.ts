// Owners rules on the real API server, as the shipped ServiceAccount under the admission guard:
// a sweep fails a stuck bare pod and a pod of a custom resource (a CRD this file installs) by
// lowering their own activeDeadlineSeconds, with annotations and Events; and the guard refuses
// every other pod patch. The pods' statuses come from the status stand-in (test/support/kubelet.ts,
// the recorded kubelet messages); that the real kubelet then fails such pods (DeadlineExceeded) is
// test/e2e/owners-node.test.ts.
import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { ApiException, CoreV1Api, PatchStrategy, setHeaderOptions, type KubeConfig, type V1OwnerReference } from '@kubernetes/client-node';
import { assertGuardDenies, guardEnforced, installGuardedSweeper } from '../support/guard.ts';
import { useTestCluster } from '../support/hooks.ts';
import { setImagePullStuck, setPodRunning } from '../support/kubelet.ts';
import { createStuckJob, MISSING_IMAGE, NOT_FOUND_MESSAGE, runSweep, sweeperEvents } from '../support/sweeper.ts';
import { createOwner, installOwnerCrd, OWNER_KIND, ownersPolicy } from './owners-support.ts';

const TIMEOUT = { timeout: 180_000 };
const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const POD_RULE = 'pods: only a pod without a Job';

let kc: KubeConfig;
let saKc: KubeConfig;
const env = useTestCluster(async (hooks) => {
  kc = hooks.kc;
  saKc = await installGuardedSweeper(hooks);
  await installOwnerCrd(kc);
});

/** A pod (of `owner`, or bare) whose container `main` cannot pull, as the kubelet reports it, stuck for `stuckFor` s. */
async function stuckPod(ns: string, name: string, owner?: V1OwnerReference, extra: { annotations?: Record<string, string> } = {}) {
  const core = kc.makeApiClient(CoreV1Api);
  await core.createNamespacedPod({
    namespace: ns,
    body: {
      metadata: { name, ...(owner ? { ownerReferences: [owner] } : {}), ...(extra.annotations ? { annotations: extra.annotations } : {}) },
      spec: { restartPolicy: 'Never', containers: [{ name: 'main', image: MISSING_IMAGE }] },
    },
  });
  await setImagePullStuck(core, ns, name, {
    since: new Date(Date.now() - 600_000),
    stuck: [{ container: 'main', reason: 'ImagePullBackOff', message: NOT_FOUND_MESSAGE }],
  });
}

describe('owners rules under the admission guard', () => {
  let ns: string;
  before(async () => {
    ns = await env.namespace('owners-guard');
    await guardEnforced(kc, saKc, ns);
  });

  it('fails a stuck bare pod and a pod of a custom resource by their own deadline; reports the rest', TIMEOUT, async () => {
    const work = await env.namespace('owners');
    const batchlet = await createOwner(kc, work, 'etl');
    await stuckPod(work, 'bare');
    await stuckPod(work, 'etl-driver', batchlet);
    const other: V1OwnerReference = { apiVersion: 'example.com/v1', kind: 'Other', name: 'o', uid: 'uid-other', controller: true };
    await stuckPod(work, 'other-pod', other);

    const policy = ownersPolicy([work]);
    const run = await runSweep(saKc, { namespaces: [work], policy });
    const detail = JSON.stringify(run.records, null, 1);
    assert.equal(run.exitCode, 0, detail);
    const byPod = new Map(run.lines.map((l) => [l.pod, l]));
    assert.equal(byPod.get('bare')?.outcome, 'failed', detail);
    assert.equal(byPod.get('etl-driver')?.outcome, 'failed', detail);
    assert.equal(byPod.get('other-pod')?.outcome, 'skipped', detail);
    assert.deepEqual(byPod.get('etl-driver')?.owners, [`${OWNER_KIND}/etl`]);
    assert.equal(byPod.get('etl-driver')?.mechanism, 'podActiveDeadlineSeconds');
    assert.equal(byPod.get('etl-driver')?.rule, 'batchlets');

    const core = kc.makeApiClient(CoreV1Api);
    for (const name of ['bare', 'etl-driver']) {
      const pod = await core.readNamespacedPod({ namespace: work, name });
      const deadline = pod.spec?.activeDeadlineSeconds;
      const started = pod.status?.startTime ? new Date(pod.status.startTime).getTime() : Date.now();
      assert.ok(deadline !== undefined && deadline * 1000 <= Date.now() - started + 1000, `${name}: deadline ${deadline} has passed`);
      const annotations = pod.metadata?.annotations ?? {};
      for (const key of ['failed-at', 'reason', 'message']) assert.ok(annotations[`imagepull-sweeper/${key}`], `${name}: ${key}`);
      assert.equal(pod.spec?.containers[0]?.image, MISSING_IMAGE);
    }
    assert.equal((await core.readNamespacedPod({ namespace: work, name: 'other-pod' })).spec?.activeDeadlineSeconds, undefined);
    const events = await sweeperEvents(kc, work);
    assert.deepEqual(events.map((e) => `${e.regarding?.kind}/${e.regarding?.name} ${e.action}`).sort(), [
      'Pod/bare FailPod',
      'Pod/etl-driver FailPod',
    ]);

    // A second sweep changes nothing.
    const again = await runSweep(saKc, { namespaces: [work], policy });
    assert.equal(again.exitCode, 0, JSON.stringify(again.records, null, 1));
    for (const name of ['bare', 'etl-driver']) {
      const line = again.lines.find((l) => l.pod === name);
      assert.equal(line?.outcome, 'skipped');
      assert.match(String(line?.detail), /already failed/);
    }
    assert.equal((await sweeperEvents(kc, work)).length, 2);
  });

  it('refuses every pod patch but lowering the deadline of a never-started pod waiting on its image', TIMEOUT, async () => {
    const saCore = saKc.makeApiClient(CoreV1Api);
    const core = kc.makeApiClient(CoreV1Api);
    const patch = (name: string, body: object) => () => saCore.patchNamespacedPod({ namespace: ns, name, body }, mergePatch);
    const fail = {
      spec: { activeDeadlineSeconds: 1 },
      metadata: { annotations: { 'imagepull-sweeper/failed-at': '2026-12-04T00:00:00Z' } },
    };

    // A pod whose container has run.
    await core.createNamespacedPod({
      namespace: ns,
      body: { metadata: { name: 'ran' }, spec: { restartPolicy: 'Never', containers: [{ name: 'main', image: MISSING_IMAGE }] } },
    });
    await setPodRunning(core, ns, 'ran');
    await assertGuardDenies('a pod whose container ran', POD_RULE, patch('ran', fail));
    // A Job's pod: its Job is failed instead.
    const { pod: jobPod } = await createStuckJob(kc, ns, 'build', { stuckFor: 9999 });
    await assertGuardDenies("a Job's pod", POD_RULE, patch(jobPod, fail));
    // A pod its owner told the sweeper to leave alone.
    await stuckPod(ns, 'ignored', undefined, { annotations: { 'imagepull-sweeper/ignore': 'true' } });
    await assertGuardDenies('an ignored pod', POD_RULE, patch('ignored', fail));
    // A pod waiting on something other than its image.
    await core.createNamespacedPod({
      namespace: ns,
      body: { metadata: { name: 'config' }, spec: { restartPolicy: 'Never', containers: [{ name: 'main', image: MISSING_IMAGE }] } },
    });
    await setImagePullStuck(core, ns, 'config', {
      since: new Date(),
      stuck: [{ container: 'main', reason: 'CreateContainerConfigError', message: 'secret "x" not found' }],
    });
    await assertGuardDenies('a pod not waiting on an image', POD_RULE, patch('config', fail));

    // The stuck bare pod: nothing but the deadline and the sweeper's annotations.
    await stuckPod(ns, 'stuck');
    await assertGuardDenies('its image (mutable on a live pod)', POD_RULE, () =>
      saCore.patchNamespacedPod(
        { namespace: ns, name: 'stuck', body: [{ op: 'replace', path: '/spec/containers/0/image', value: 'evil:1' }] },
        setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
      ),
    );
    await assertGuardDenies('its labels', POD_RULE, patch('stuck', { metadata: { labels: { a: 'b' } } }));
    await assertGuardDenies('another annotation', POD_RULE, patch('stuck', { metadata: { annotations: { 'owner/x': 'y' } } }));
    await assertGuardDenies(
      "the owner's grace",
      POD_RULE,
      patch('stuck', { metadata: { annotations: { 'imagepull-sweeper/grace': '1h' } } }),
    );
    await assertGuardDenies('another toleration (mutable on a live pod)', POD_RULE, () =>
      saCore.patchNamespacedPod(
        { namespace: ns, name: 'stuck', body: [{ op: 'add', path: '/spec/tolerations/-', value: { operator: 'Exists' } }] },
        setHeaderOptions('Content-Type', PatchStrategy.JsonPatch),
      ),
    );
    await patch('stuck', { spec: { activeDeadlineSeconds: 100 } })();
    // Raising it back is refused (by the API server's own validation before the guard).
    await assert.rejects(
      patch('stuck', { spec: { activeDeadlineSeconds: 200 } }),
      (e: unknown) => e instanceof ApiException && e.code >= 400,
    );
    await patch('stuck', fail)();
    const pod = await core.readNamespacedPod({ namespace: ns, name: 'stuck' });
    assert.equal(pod.spec?.activeDeadlineSeconds, 1);
    assert.equal(pod.spec?.containers[0]?.image, MISSING_IMAGE);
    assert.deepEqual(Object.keys(pod.metadata?.labels ?? {}), []);
  });
});
