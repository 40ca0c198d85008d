// The real JobSet controller (sigs.k8s.io/jobset v0.12.0, test/tools/jobset/, built by
// test/tools/build.sh) against the test control plane, started by the first test that needs it:
//   - its CRD, from the same module version, created with server-side apply (824 kB: too big for
//     the last-applied annotation of a client-side apply);
//   - its webhooks served on a free loopback port with a serving certificate made here (openssl;
//     internal certificate management off: there is no Service to route to), and its mutating
//     and validating webhook configurations pointing at https://127.0.0.1:PORT with that CA;
//   - the admin kubeconfig; no leader election; metrics off; the readiness probe on loopback.
// stop() removes its webhook configurations and stops it; it dies with the test process anyway.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { REPO } from './cli.ts';
import { toolBinary } from './tools.ts';
import {
  apply,
  applyCrds,
  correlatableRulesOnly,
  loopbackWebhooks,
  moduleDir,
  objectsOf,
  pinnedVersion,
  loopbackServing,
  startController,
  stopController,
} from './controllers.ts';
import { waitFor } from './kubelet.ts';

const TOOL_DIR = path.join(REPO, 'test', 'tools', 'jobset');
const MODULE = 'sigs.k8s.io/jobset';
const CRD_FILE = 'config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml';
const WEBHOOKS_FILE = 'config/components/webhook/manifests.yaml';
/** The JobSet labels its pods carry: the pod webhooks see only those (upstream's own kustomize patch). */
const JOBSET_POD_SELECTOR = { matchExpressions: [{ key: 'jobset.sigs.k8s.io/jobset-name', operator: 'Exists' }] };
export const WEBHOOK_CONFIGURATIONS = {
  mutating: 'imagepull-sweeper-test-jobset-mutating',
  validating: 'imagepull-sweeper-test-jobset-validating',
} as const;

export interface JobSetController {
  /** The controller's log. */
  logFile: string;
  version: string;
  /** Removes the webhook configurations (they would refuse every JobSet once it is gone), then stops it. */
  stop(): Promise<void>;
}

/** The module version test/tools/jobset/go.mod pins. */
export function jobSetVersion(): string {
  return pinnedVersion(TOOL_DIR, MODULE);
}

let started: Promise<JobSetController> | undefined;

/** The JobSet controller for this test process, started on first use (its build: minutes cold, instant warm). */
export function jobSetController(kc: KubeConfig, kubeconfigPath: string): Promise<JobSetController> {
  return (started ??= start(kc, kubeconfigPath));
}

async function start(kc: KubeConfig, kubeconfigPath: string): Promise<JobSetController> {
  const version = jobSetVersion();
  const [bin, dir] = [await toolBinary('jobset', 'jobset-controller'), moduleDir(TOOL_DIR, MODULE, version, CRD_FILE)];
  const { runDir, certDir, caPem, webhookPort, probePort } = await loopbackServing('jobset');
  const configFile = path.join(runDir, 'config.yaml');
  fs.writeFileSync(
    configFile,
    [
      'apiVersion: config.jobset.x-k8s.io/v1alpha1',
      'kind: Configuration',
      'leaderElection: { leaderElect: false }',
      'internalCertManagement: { enable: false }',
      `webhook: { host: 127.0.0.1, port: ${webhookPort}, certDir: ${JSON.stringify(certDir)} }`,
      'metrics: { bindAddress: "0" }',
      `health: { healthProbeBindAddress: "127.0.0.1:${probePort}" }`,
      '',
    ].join('\n'),
  );

  await applyCrds(kc, objectsOf(path.join(dir, CRD_FILE)).map(correlatableRulesOnly));
  const logFile = path.join(runDir, 'jobset-controller.log');
  const controller = await startController(
    'jobset-controller',
    bin,
    [`--config=${configFile}`, `--kubeconfig=${kubeconfigPath}`, '--zap-log-level=info'],
    { logFile, probePort },
  );
  await apply(
    kc,
    loopbackWebhooks(path.join(dir, WEBHOOKS_FILE), WEBHOOK_CONFIGURATIONS, webhookPort, caPem, (hook) =>
      hook.rules.some((r) => r.resources.includes('pods')) ? { ...hook, objectSelector: JOBSET_POD_SELECTOR } : hook,
    ),
  );
  // The API server picks up webhook configurations asynchronously: wait until a dry-run JobSet comes
  // back defaulted by the controller's mutating webhook (enableDNSHostnames has no schema default).
  const probe = {
    apiVersion: 'jobset.x-k8s.io/v1alpha2',
    kind: 'JobSet',
    metadata: { name: 'webhook-probe' },
    spec: { replicatedJobs: [{ name: 'p', template: { spec: { template: { spec: { containers: [{ name: 'p', image: 'p' }] } } } } }] },
  };
  const custom = kc.makeApiClient(CustomObjectsApi);
  await waitFor(
    async () => {
      const created = (await custom.createNamespacedCustomObject({
        group: 'jobset.x-k8s.io',
        version: 'v1alpha2',
        plural: 'jobsets',
        namespace: 'default',
        body: probe,
        dryRun: 'All',
      })) as { spec?: { network?: { enableDNSHostnames?: boolean } } };
      return created.spec?.network?.enableDNSHostnames === true;
    },
    30_000,
    'the JobSet webhooks called by the API server',
  );
  return {
    logFile,
    version,
    async stop() {
      await stopController(kc, WEBHOOK_CONFIGURATIONS, controller);
      started = undefined;
    },
  };
}
