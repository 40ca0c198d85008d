// The real Kueue (sigs.k8s.io/kueue v0.17.0, test/tools/kueue/, built by test/tools/build.sh)
// against the test control plane, started by the first test that needs it, as JobSet's is
// (test/support/jobset.ts):
//   - its CRDs from the same module version (server-side apply), their conversion webhook at Kueue
//     on loopback;
//   - its webhooks served on a free loopback port with a serving certificate made here (its own
//     certificate management off: there is no Service to route to). Only those of Kueue's own
//     kinds and of batch/v1 Jobs are installed, the Job ones for Jobs labelled with a queue only:
//     every other Job, pod and JobSet on the shared cluster never meets them;
//   - its Configuration: waitForPodsReady with a short timeout and requeuing back-off, batch/v1
//     Jobs only, no leader election, metrics off, the readiness probe on loopback. The same
//     Configuration is kept in a ConfigMap as Kueue's manifests keep it, in kueue-system but under
//     a name of the tests' own (KUEUE_CONFIG), for the sweeper to read its timeout from with
//     --kueue-config: the other files' sweeps on the shared cluster read the default name, and
//     find no Kueue;
//   - Kueue v0.17 reads its metrics certificate from /etc/kueue/metrics/certs whenever its own
//     certificate management is off (cmd/kueue/main.go), even with metrics off: it runs in a
//     private mount namespace whose /etc is an overlay holding that certificate (root), so the
//     host's /etc is never written.
// stop() removes its webhook configurations and stops it; it dies with the test process anyway.
import * as fs from 'node:fs';
import * as path from 'node:path';
import { BatchV1Api, CoreV1Api, CustomObjectsApi, type KubeConfig, type KubernetesObject, type V1Job } from '@kubernetes/client-node';
import { REPO } from './cli.ts';
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
import { toolBinary } from './tools.ts';

const TOOL_DIR = path.join(REPO, 'test', 'tools', 'kueue');
const MODULE = 'sigs.k8s.io/kueue';
const CRD_DIR = 'config/components/crd/bases';
const CONVERSION_PATCHES = 'config/components/crd/patches';
const WEBHOOKS_FILE = 'config/components/webhook/manifests.yaml';
export const KUEUE_GROUP = 'kueue.x-k8s.io';
export const KUEUE_VERSION = 'v1beta2';
export const QUEUE_LABEL = 'kueue.x-k8s.io/queue-name';
export const WEBHOOK_CONFIGURATIONS = {
  mutating: 'imagepull-sweeper-test-kueue-mutating',
  validating: 'imagepull-sweeper-test-kueue-validating',
} as const;
/** Where the tests keep Kueue's Configuration for the sweeper (its `--kueue-config`): the key as Kueue's manifests have it. */
export const KUEUE_CONFIG = {
  namespace: 'kueue-system',
  name: 'imagepull-sweeper-e2e-kueue-config',
  key: 'controller_manager_config.yaml',
};

/** The waitForPodsReady settings the tests run Kueue with. */
export const PODS_READY = {
  /** Seconds an admitted Job's pods have to become ready before Kueue evicts it. */
  timeoutSeconds: 20,
  /** The requeuing back-off: about base × 2^(n-1) seconds after the n-th eviction, at most max. */
  backoffBaseSeconds: 15,
  backoffMaxSeconds: 30,
};

export interface Kueue {
  version: string;
  logFile: string;
  /** Removes the webhook configurations (they would refuse every queued Job once it is gone), then stops it. */
  stop(): Promise<void>;
}

/** The module version test/tools/kueue/go.mod pins. */
export function kueueVersion(): string {
  return pinnedVersion(TOOL_DIR, MODULE);
}

/** Why Kueue cannot run here, or undefined: it needs a private mount of /etc (root), and unshare. */
export function kueueUnavailable(): string | undefined {
  if (process.getuid?.() !== 0) return 'Kueue v0.17 reads a certificate from /etc/kueue/metrics/certs: its private /etc needs root';
  return fs.existsSync('/usr/bin/unshare') ? undefined : 'Kueue runs in a private mount namespace: unshare (util-linux) is missing';
}

let started: Promise<Kueue> | undefined;

/** Kueue for this test process, started on first use (its build: minutes cold, instant warm). */
export function kueue(kc: KubeConfig, kubeconfigPath: string): Promise<Kueue> {
  return (started ??= start(kc, kubeconfigPath));
}

/** Kueue's Configuration, as the tests run it and as the sweeper reads it. */
export function kueueConfiguration(webhook?: { port: number; certDir: string }, probePort?: number): string {
  return [
    'apiVersion: config.kueue.x-k8s.io/v1beta2',
    'kind: Configuration',
    `namespace: ${KUEUE_CONFIG.namespace}`,
    'leaderElection: { leaderElect: false }',
    'internalCertManagement: { enable: false }',
    ...(webhook ? [`webhook: { host: 127.0.0.1, port: ${webhook.port}, certDir: ${JSON.stringify(webhook.certDir)} }`] : []),
    'metrics: { bindAddress: "0" }',
    ...(probePort ? [`health: { healthProbeBindAddress: "127.0.0.1:${probePort}" }`] : []),
    'waitForPodsReady:',
    `  timeout: ${PODS_READY.timeoutSeconds}s`,
    `  requeuingStrategy: { timestamp: Eviction, backoffBaseSeconds: ${PODS_READY.backoffBaseSeconds}, backoffMaxSeconds: ${PODS_READY.backoffMaxSeconds} }`,
    'manageJobsWithoutQueueName: false',
    'integrations: { frameworks: ["batch/job"] }',
    '',
  ].join('\n');
}

/** Kueue's own kinds, and batch/v1 Jobs labelled with a queue: no other object on the shared cluster meets these webhooks. */
function kueueWebhooks(dir: string, port: number, caPem: string): KubernetesObject[] {
  const queued = { matchExpressions: [{ key: QUEUE_LABEL, operator: 'Exists' }] };
  return loopbackWebhooks(path.join(dir, WEBHOOKS_FILE), WEBHOOK_CONFIGURATIONS, port, caPem, (hook) => {
    const to = hook.clientConfig.service?.path ?? '';
    if (/-kueue-x-k8s-io-/.test(to)) return hook;
    if (/-batch-v1-job$/.test(to)) return { ...hook, objectSelector: queued };
    return undefined;
  });
}

/** The CRDs, their conversion webhook (where upstream has one) at Kueue on loopback. */
function kueueCrds(dir: string, port: number, caPem: string): KubernetesObject[] {
  const converted = new Set(
    fs
      .readdirSync(path.join(dir, CONVERSION_PATCHES))
      .filter((f) => f.startsWith('webhook_in_'))
      .flatMap((f) => objectsOf(path.join(dir, CONVERSION_PATCHES, f)).map((o) => o.metadata?.name)),
  );
  return fs
    .readdirSync(path.join(dir, CRD_DIR))
    .flatMap((f) => objectsOf(path.join(dir, CRD_DIR, f)))
    .map((crd) => {
      const out = correlatableRulesOnly(crd) as KubernetesObject & { spec: Record<string, unknown> };
      if (converted.has(crd.metadata?.name)) {
        out.spec.conversion = {
          strategy: 'Webhook',
          webhook: {
            clientConfig: { url: `https://127.0.0.1:${port}/convert`, caBundle: Buffer.from(caPem).toString('base64') },
            conversionReviewVersions: ['v1'],
          },
        };
      }
      return out;
    });
}

async function start(kc: KubeConfig, kubeconfigPath: string): Promise<Kueue> {
  const version = kueueVersion();
  const [bin, dir] = [await toolBinary('kueue', 'kueue'), moduleDir(TOOL_DIR, MODULE, version, WEBHOOKS_FILE)];
  const { runDir, certDir, caPem, webhookPort, probePort } = await loopbackServing('kueue');
  const configFile = path.join(runDir, 'config.yaml');
  fs.writeFileSync(configFile, kueueConfiguration({ port: webhookPort, certDir }, probePort));

  await applyCrds(kc, kueueCrds(dir, webhookPort, caPem));
  const core = kc.makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: KUEUE_CONFIG.namespace } } }).catch(alreadyThere);
  await apply(kc, [
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: { name: KUEUE_CONFIG.name, namespace: KUEUE_CONFIG.namespace },
      data: { [KUEUE_CONFIG.key]: kueueConfiguration() },
    } as KubernetesObject,
  ]);

  // The private /etc: an overlay over the host's, with the certificate where Kueue looks for it.
  const [upper, work] = [path.join(runDir, 'etc-upper'), path.join(runDir, 'etc-work')];
  fs.mkdirSync(path.join(upper, 'kueue', 'metrics', 'certs'), { recursive: true });
  fs.mkdirSync(work);
  for (const f of ['tls.crt', 'tls.key']) fs.copyFileSync(path.join(certDir, f), path.join(upper, 'kueue', 'metrics', 'certs', f));
  const manager = [
    bin,
    `--config=${configFile}`,
    `--kubeconfig=${kubeconfigPath}`,
    '--zap-log-level=info',
    '--feature-gates=VisibilityOnDemand=false',
  ];
  const script = `mount -t overlay overlay -o lowerdir=/etc,upperdir=${upper},workdir=${work} /etc && exec "$@"`;
  const logFile = path.join(runDir, 'kueue.log');
  const controller = await startController(
    'kueue',
    'unshare',
    ['--mount', '--propagation', 'private', '--', 'sh', '-c', script, 'kueue', ...manager],
    {
      logFile,
      probePort,
    },
  );
  await apply(kc, kueueWebhooks(dir, webhookPort, caPem));
  // The API server picks up webhook configurations asynchronously: wait until a dry-run Job with a
  // queue comes back suspended by Kueue's mutating webhook.
  const batch = kc.makeApiClient(BatchV1Api);
  const probe: V1Job = {
    metadata: { name: 'kueue-webhook-probe', labels: { [QUEUE_LABEL]: 'probe' } },
    spec: { template: { spec: { restartPolicy: 'Never', containers: [{ name: 'p', image: 'p' }] } } },
  };
  await waitFor(
    async () => (await batch.createNamespacedJob({ namespace: 'default', body: probe, dryRun: 'All' })).spec?.suspend === true,
    30_000,
    `Kueue's webhooks called by the API server (log ${logFile})`,
  );
  return {
    version,
    logFile,
    async stop() {
      await stopController(kc, WEBHOOK_CONFIGURATIONS, controller);
      started = undefined;
    },
  };
}

function alreadyThere(error: unknown): void {
  if ((error as { code?: number }).code !== 409) throw error;
}

/** A flavor, a ClusterQueue admitting from namespace `ns` only, and its LocalQueue `name` there. */
export async function createQueues(kc: KubeConfig, ns: string, name = 'lq'): Promise<string> {
  const custom = kc.makeApiClient(CustomObjectsApi);
  const create = (plural: string, body: object, namespace?: string) =>
    (namespace
      ? custom.createNamespacedCustomObject({ group: KUEUE_GROUP, version: KUEUE_VERSION, plural, namespace, body })
      : custom.createClusterCustomObject({ group: KUEUE_GROUP, version: KUEUE_VERSION, plural, body })
    ).catch(alreadyThere);
  await create('resourceflavors', {
    apiVersion: `${KUEUE_GROUP}/${KUEUE_VERSION}`,
    kind: 'ResourceFlavor',
    metadata: { name: 'default-flavor' },
  });
  const clusterQueue = `cq-${ns}`;
  await create('clusterqueues', {
    apiVersion: `${KUEUE_GROUP}/${KUEUE_VERSION}`,
    kind: 'ClusterQueue',
    metadata: { name: clusterQueue },
    spec: {
      namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': ns } },
      resourceGroups: [
        {
          coveredResources: ['cpu', 'memory'],
          flavors: [
            {
              name: 'default-flavor',
              resources: [
                { name: 'cpu', nominalQuota: '10' },
                { name: 'memory', nominalQuota: '10Gi' },
              ],
            },
          ],
        },
      ],
    },
  });
  await create(
    'localqueues',
    { apiVersion: `${KUEUE_GROUP}/${KUEUE_VERSION}`, kind: 'LocalQueue', metadata: { name, namespace: ns }, spec: { clusterQueue } },
    ns,
  );
  return name;
}

/** A Workload as the tests read it. */
export interface Workload {
  metadata?: { name?: string; uid?: string };
  status?: {
    conditions?: { type: string; status: string; reason?: string; message?: string; lastTransitionTime?: string }[];
    requeueState?: { count?: number };
  };
}

/** The Workload Kueue made for Job `uid` (label kueue.x-k8s.io/job-uid). */
export async function workloadOf(kc: KubeConfig, ns: string, jobUid: string): Promise<Workload | undefined> {
  const list = (await kc.makeApiClient(CustomObjectsApi).listNamespacedCustomObject({
    group: KUEUE_GROUP,
    version: KUEUE_VERSION,
    plural: 'workloads',
    namespace: ns,
    labelSelector: `kueue.x-k8s.io/job-uid=${jobUid}`,
  })) as { items?: Workload[] };
  return list.items?.[0];
}

export function workloadCondition(w: Workload | undefined, type: string) {
  return w?.status?.conditions?.find((c) => c.type === type && c.status === 'True');
}
