// The shipped manifests (manifests/, `kubectl apply -k manifests/`) for the tests: reading them in
// the kustomization's order, applying them to the test cluster, and a kubeconfig holding a token
// of the shipped ServiceAccount.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  ApiException,
  CoreV1Api,
  KubeConfig,
  KubernetesObjectApi,
  PatchStrategy,
  type KubernetesObject,
  type V1CronJob,
} from '@kubernetes/client-node';
import { parseAllDocuments, parse as parseYaml } from 'yaml';
import { REPO } from './cli.ts';
import type { ClusterHooks } from './hooks.ts';

export const MANIFESTS = join(REPO, 'manifests');
export const INSTALL_NS = 'imagepull-sweeper';
export const SERVICE_ACCOUNT = 'imagepull-sweeper';
const FIELD_MANAGER = 'imagepull-sweeper-test';

export function kustomizationResources(): string[] {
  const k = parseYaml(readFileSync(join(MANIFESTS, 'kustomization.yaml'), 'utf8')) as { resources?: string[] };
  return k.resources ?? [];
}

export function loadManifest(file: string): KubernetesObject[] {
  const docs = parseAllDocuments(readFileSync(join(MANIFESTS, file), 'utf8'));
  if (!Array.isArray(docs)) throw new Error(`${file}: not a YAML stream`);
  const objects: KubernetesObject[] = [];
  for (const doc of docs) {
    assert.deepEqual(doc.errors, [], `${file}: YAML errors`);
    const obj = doc.toJS() as KubernetesObject | null;
    if (obj) objects.push(obj);
  }
  return objects;
}

/** Every object of every manifest, in the kustomization's order (Namespace first). */
export function allObjects(): { file: string; obj: KubernetesObject }[] {
  return kustomizationResources().flatMap((file) => loadManifest(file).map((obj) => ({ file, obj })));
}

export const objectKey = (o: KubernetesObject): string => `${o.kind} ${o.metadata?.namespace ?? ''}/${o.metadata?.name ?? ''}`;

/**
 * Server-side apply of every manifest; resolves to each object's resourceVersion. The CronJob is
 * applied suspended: with no nodes here its sweeper Jobs would only pile up pending pods.
 */
export async function applyManifests(kc: KubeConfig): Promise<Map<string, string>> {
  const api = KubernetesObjectApi.makeApiClient(kc);
  const versions = new Map<string, string>();
  for (const { file, obj } of allObjects()) {
    const body = structuredClone(obj);
    if (body.kind === 'CronJob') (body as V1CronJob).spec!.suspend = true;
    try {
      const applied = await api.patch(body, undefined, undefined, FIELD_MANAGER, true, PatchStrategy.ServerSideApply);
      versions.set(objectKey(obj), applied.metadata!.resourceVersion!);
    } catch (error) {
      const detail = error instanceof ApiException ? `${error.code}: ${JSON.stringify(error.body)}` : String(error);
      throw new Error(`${file}: ${objectKey(obj)} rejected by server-side apply: ${detail}`);
    }
  }
  return versions;
}

/**
 * A kubeconfig file with a TokenRequest token of the shipped ServiceAccount (which must exist),
 * for the admin kubeconfig's cluster. `remove()` deletes its directory.
 */
export async function serviceAccountKubeconfig(
  admin: KubeConfig,
  namespace = INSTALL_NS,
): Promise<{ path: string; dir: string; kc: KubeConfig; remove: () => void }> {
  const core = admin.makeApiClient(CoreV1Api);
  const request = await core.createNamespacedServiceAccountToken({
    namespace,
    name: SERVICE_ACCOUNT,
    body: { spec: { audiences: [], expirationSeconds: 3600 } },
  });
  const token = request.status?.token;
  assert.ok(token, 'TokenRequest returned a token');
  const cluster = admin.getCurrentCluster()!;
  const caData = cluster.caData ?? (cluster.caFile ? readFileSync(cluster.caFile).toString('base64') : undefined);
  assert.ok(caData, 'the admin kubeconfig has CA data');
  const dir = mkdtempSync(join(tmpdir(), 'ips-sa-'));
  const path = join(dir, 'kubeconfig');
  const config = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'test', cluster: { server: cluster.server, 'certificate-authority-data': caData } }],
    users: [{ name: SERVICE_ACCOUNT, user: { token } }],
    contexts: [{ name: SERVICE_ACCOUNT, context: { cluster: 'test', user: SERVICE_ACCOUNT } }],
    'current-context': SERVICE_ACCOUNT,
  };
  writeFileSync(path, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
  const kc = new KubeConfig();
  kc.loadFromFile(path);
  return { path, dir, kc, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

/**
 * The Component manifests/heal/ (healing's RBAC) applied for one file; removed after it, for
 * the other files on the shared cluster (manifests.test.ts proves the base role reads no Secret).
 */
export async function applyHealComponent(hooks: ClusterHooks): Promise<void> {
  const api = KubernetesObjectApi.makeApiClient(hooks.kc);
  const docs = parseAllDocuments(readFileSync(join(MANIFESTS, 'heal', 'heal-rbac.yaml'), 'utf8'));
  const objects = (Array.isArray(docs) ? docs : [docs]).map((d) => d.toJS() as KubernetesObject);
  for (const obj of objects) await api.patch(obj, undefined, undefined, FIELD_MANAGER, true, PatchStrategy.ServerSideApply);
  hooks.onCleanup(async () => {
    for (const obj of objects) await api.delete(obj).catch(() => undefined);
  });
}

/**
 * For a test file's setup: `manifests/` applied, and the shipped ServiceAccount's kubeconfig,
 * with the policy ConfigMap (the other files on the shared cluster expect none) and the
 * kubeconfig removed after the file's tests.
 */
export async function installShipped(hooks: ClusterHooks): Promise<Awaited<ReturnType<typeof serviceAccountKubeconfig>>> {
  await applyManifests(hooks.kc);
  const core = hooks.kc.makeApiClient(CoreV1Api);
  hooks.onCleanup(() => core.deleteNamespacedConfigMap({ namespace: INSTALL_NS, name: 'imagepull-sweeper-policy' }));
  const sa = await serviceAccountKubeconfig(hooks.kc);
  hooks.onCleanup(async () => sa.remove());
  return sa;
}
