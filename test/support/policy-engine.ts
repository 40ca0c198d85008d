// A policy engine (Kyverno, Gatekeeper...) that refuses the sweeper's FailureTarget status write in
// some namespaces, as a ValidatingAdmissionPolicy the API server itself enforces: where it refuses,
// the sweeper falls back to the deadline (or the Job's podFailurePolicy) and says so. Everyone's
// other writes, and the Job controller's own, pass.
import { AdmissionregistrationV1Api, ApiException, BatchV1Api, type KubeConfig } from '@kubernetes/client-node';
import { describeApiError } from '../../src/kube/errors.ts';
import { createGateway } from '../../src/kube/gateway.ts';
import { jobManifest } from './fixtures.ts';
import type { ClusterHooks } from './hooks.ts';
import { waitFor } from './kubelet.ts';

export const REFUSAL = 'a policy engine refuses Job status writes that add a FailureTarget';
/** With `onlyLabelled`, the refusal applies to the Jobs carrying this label ("true") only. */
export const REFUSED_LABEL = 'imagepull-sweeper-test/refuse-status';

/**
 * Refuses (403) every status write adding a FailureTarget with reason ImagePullStuck to a Job of
 * `ns` (or, `onlyLabelled`, to those labelled REFUSED_LABEL), until the file ends.
 */
export async function refuseStatusWrites(
  hooks: Pick<ClusterHooks, 'kc' | 'onCleanup'>,
  ns: string,
  o: { onlyLabelled?: boolean } = {},
): Promise<void> {
  const admission = hooks.kc.makeApiClient(AdmissionregistrationV1Api);
  const name = `ips-test-refuse-status-${ns}`.slice(0, 63);
  await admission.createValidatingAdmissionPolicy({
    body: {
      metadata: { name },
      spec: {
        failurePolicy: 'Fail',
        matchConstraints: {
          resourceRules: [{ apiGroups: ['batch'], apiVersions: ['v1'], operations: ['UPDATE'], resources: ['jobs/status'] }],
          namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': ns } },
          ...(o.onlyLabelled ? { objectSelector: { matchLabels: { [REFUSED_LABEL]: 'true' } } } : {}),
        },
        validations: [
          {
            expression:
              "!has(object.status.conditions) || !object.status.conditions.exists(c, c.type == 'FailureTarget' && c.reason == 'ImagePullStuck')",
            message: REFUSAL,
            reason: 'Forbidden',
          },
        ],
      },
    },
  });
  await admission.createValidatingAdmissionPolicyBinding({
    body: { metadata: { name }, spec: { policyName: name, validationActions: ['Deny'] } },
  });
  hooks.onCleanup(async () => {
    await admission.deleteValidatingAdmissionPolicyBinding({ name }).catch(() => undefined);
    await admission.deleteValidatingAdmissionPolicy({ name }).catch(() => undefined);
  });
  await refusalEnforced(hooks.kc, ns);
}

/** The API server loads a new policy asynchronously: wait until a server-dry-run FailureTarget on a suspended probe Job is refused. */
async function refusalEnforced(kc: KubeConfig, ns: string): Promise<void> {
  const body = jobManifest('refusal-probe', 'registry.invalid/app:1', { suspend: true });
  body.metadata = { ...body.metadata, labels: { [REFUSED_LABEL]: 'true' } };
  const probe = await kc.makeApiClient(BatchV1Api).createNamespacedJob({ namespace: ns, body });
  const dryRun = createGateway(kc).serverDryRun();
  const condition = { type: 'FailureTarget', status: 'True', reason: 'ImagePullStuck', message: 'probe' };
  await waitFor(
    () =>
      dryRun.patchJobStatus(ns, probe.metadata!.name!, { status: { conditions: [condition] } }).then(
        () => false,
        (error: unknown) => {
          const failure = describeApiError(error);
          return failure.status === 403 && failure.message.includes(REFUSAL);
        },
      ),
    30_000,
    `the refusal of FailureTarget writes enforced in ${ns}`,
  );
  const batch = kc.makeApiClient(BatchV1Api);
  await batch.deleteNamespacedJob({ namespace: ns, name: probe.metadata!.name!, propagationPolicy: 'Background' });
  await waitFor(
    () =>
      batch.readNamespacedJob({ namespace: ns, name: probe.metadata!.name! }).then(
        () => false,
        (error: unknown) => error instanceof ApiException && error.code === 404,
      ),
    30_000,
    'the refusal probe Job gone',
  );
}
