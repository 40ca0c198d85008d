// The admission guard (manifests/guard.yaml) as the e2e tests meet it: its refusals, and waiting
// until the API server enforces a newly applied policy.
import assert from 'node:assert/strict';
import { ApiException, CoreV1Api, PatchStrategy, setHeaderOptions, type KubeConfig } from '@kubernetes/client-node';
import type { ClusterHooks } from './hooks.ts';
import { waitFor } from './kubelet.ts';
import { applyManifests, INSTALL_NS, serviceAccountKubeconfig } from './manifests.ts';

export const GUARD = 'imagepull-sweeper guard: ';

/** Rejects with the guard's message naming `rule` (and nothing else refused it). */
export async function assertGuardDenies(what: string, rule: string, call: () => Promise<unknown>): Promise<void> {
  await assert.rejects(call, (error: unknown) => {
    assert.ok(error instanceof ApiException, `${what}: expected an ApiException, got ${String(error)}`);
    const body: unknown = typeof error.body === 'string' ? JSON.parse(error.body) : error.body;
    const message = String((body as { message?: string } | undefined)?.message ?? error.body);
    assert.equal(error.code, 403, `${what}: expected 403, got ${error.code}: ${message}`);
    assert.ok(message.includes(`${GUARD}${rule}`), `${what}: expected the guard's "${rule}" rule, got: ${message}`);
    return true;
  });
}

/** The API server loads a new policy asynchronously: wait until the guard refuses a probe (a bare pod `probe` it creates). */
export async function guardEnforced(admin: KubeConfig, sweeper: KubeConfig, ns: string): Promise<void> {
  await admin.makeApiClient(CoreV1Api).createNamespacedPod({
    namespace: ns,
    body: { metadata: { name: 'probe' }, spec: { containers: [{ name: 'main', image: 'registry.invalid/app:1' }] } },
  });
  const saCore = sweeper.makeApiClient(CoreV1Api);
  await waitFor(
    async () => {
      try {
        await saCore.patchNamespacedPodStatus(
          { namespace: ns, name: 'probe', body: { status: { conditions: [{ type: 'Probe', status: 'True' }] } } },
          setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch),
        );
        return false;
      } catch (error) {
        return error instanceof ApiException && error.code === 403 && String(error.body).includes(GUARD);
      }
    },
    30_000,
    'the guard to be enforced',
  );
}

/**
 * Applies the shipped manifests (the guard among them) and returns a kubeconfig with the shipped
 * ServiceAccount's token; the policy ConfigMap they create is deleted after the file, for the
 * other files on the shared cluster.
 */
export async function installGuardedSweeper(hooks: ClusterHooks): Promise<KubeConfig> {
  await applyManifests(hooks.kc);
  const core = hooks.kc.makeApiClient(CoreV1Api);
  hooks.onCleanup(() => core.deleteNamespacedConfigMap({ namespace: INSTALL_NS, name: 'imagepull-sweeper-policy' }));
  const sa = await serviceAccountKubeconfig(hooks.kc);
  hooks.onCleanup(async () => sa.remove());
  return sa.kc;
}
