// What the owners e2e files share: a custom resource kind that owns pods (a CRD the test installs,
// standing for a SparkApplication or an Argo Workflow), and the policy that opts it in.
import { ApiextensionsV1Api, ApiException, CustomObjectsApi, type KubeConfig, type V1OwnerReference } from '@kubernetes/client-node';
import { waitFor } from '../support/kubelet.ts';
import { policyFile } from '../support/sweeper.ts';
import type { PolicyLocation } from '../../src/policy/load.ts';

export const OWNER_GROUP = 'owners.e2e.imagepull-sweeper.test';
export const OWNER_KIND = 'Batchlet';
const PLURAL = 'batchlets';

/** Installs the Batchlet CRD (once per cluster) and waits until it is served. */
export async function installOwnerCrd(kc: KubeConfig): Promise<void> {
  const ext = kc.makeApiClient(ApiextensionsV1Api);
  await ext
    .createCustomResourceDefinition({
      body: {
        metadata: { name: `${PLURAL}.${OWNER_GROUP}` },
        spec: {
          group: OWNER_GROUP,
          scope: 'Namespaced',
          names: { plural: PLURAL, singular: 'batchlet', kind: OWNER_KIND },
          versions: [
            {
              name: 'v1',
              served: true,
              storage: true,
              schema: { openAPIV3Schema: { type: 'object', x_kubernetes_preserve_unknown_fields: true } },
            },
          ],
        },
      },
    })
    .catch((e: unknown) => {
      if (!(e instanceof ApiException && e.code === 409)) throw e;
    });
  const custom = kc.makeApiClient(CustomObjectsApi);
  await waitFor(
    () =>
      custom.listClusterCustomObject({ group: OWNER_GROUP, version: 'v1', plural: PLURAL }).then(
        () => true,
        () => false,
      ),
    30_000,
    'the Batchlet CRD to be served',
  );
}

/** A Batchlet in `ns`, and the controller reference its pods carry. */
export async function createOwner(kc: KubeConfig, ns: string, name: string): Promise<V1OwnerReference> {
  const created = (await kc.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
    group: OWNER_GROUP,
    version: 'v1',
    namespace: ns,
    plural: PLURAL,
    body: { apiVersion: `${OWNER_GROUP}/v1`, kind: OWNER_KIND, metadata: { name } },
  })) as { metadata: { uid: string } };
  return { apiVersion: `${OWNER_GROUP}/v1`, kind: OWNER_KIND, name, uid: created.metadata.uid, controller: true };
}

/** Opts Batchlets' and bare pods' pods in, in these namespaces, failing them one second past a permanent failure. */
export function ownersPolicy(namespaces: string[]): PolicyLocation {
  return policyFile(
    `defaults: { grace: { permanent: 1s } }\nrules:\n  - name: batchlets\n    namespaces: ${JSON.stringify(namespaces)}\n` +
      `    owners: ["${OWNER_KIND}.${OWNER_GROUP}", "Pod"]\n    action: fail\n`,
  );
}
