// Small builders for e2e objects: a fresh namespace per test, a Job whose pod pulls an image.
import { CoreV1Api, type KubeConfig, type V1Job } from '@kubernetes/client-node';
import { waitFor } from './kubelet.ts';

/**
 * Creates a namespace named `${prefix}-<random>` and waits for its `default` ServiceAccount
 * (made by the serviceaccount controller; the ServiceAccount admission plugin rejects pods until
 * it exists). Returns the name and a `remove()` that deletes the namespace (not waiting).
 */
export async function createNamespace(
  kc: KubeConfig,
  prefix: string,
  labels: Record<string, string> = {},
): Promise<{ name: string; remove: () => Promise<void> }> {
  const core = kc.makeApiClient(CoreV1Api);
  const ns = await core.createNamespace({ body: { metadata: { generateName: `${prefix}-`, labels } } });
  const name = ns.metadata?.name;
  if (!name) throw new Error('created namespace has no name');
  await waitFor(() => core.readNamespacedServiceAccount({ name: 'default', namespace: name }), 30_000, `ServiceAccount ${name}/default`);
  return {
    name,
    remove: async () => {
      await core.deleteNamespace({ name }).catch(() => undefined);
    },
  };
}

/** A one-pod Job (restartPolicy Never, backoffLimit 0) whose container runs `image`. */
export function jobManifest(name: string, image: string, extra: Partial<NonNullable<V1Job['spec']>> = {}): V1Job {
  return {
    apiVersion: 'batch/v1',
    kind: 'Job',
    metadata: { name },
    spec: {
      backoffLimit: 0,
      template: {
        spec: {
          restartPolicy: 'Never',
          containers: [{ name: 'main', image, command: ['true'] }],
        },
      },
      ...extra,
    },
  };
}
