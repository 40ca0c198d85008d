// The real JobSet controller (sigs.k8s.io/jobset v0.12.0, test/tools/jobset/, built by
// test/tools/build.sh) against the test control plane, started by the first test that needs it:
//   - its CRD, from the same module version, created with server-side apply (824 kB: too big for
//     the last-applied annotation of a client-side apply);
//   - its webhooks served on a free loopback port with a serving certificate made here (openssl;
//     internal certificate management off: there is no Service to route to), and its mutating
//     and validating webhook configurations pointing at https://127.0.0.1:PORT with that CA;
//   - the admin kubeconfig; no leader election; metrics off; the readiness probe on loopback.
// stop() removes its webhook configurations and stops it; it dies with the test process anyway.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  AdmissionregistrationV1Api,
  ApiextensionsV1Api,
  CustomObjectsApi,
  type KubeConfig,
  KubernetesObjectApi,
  PatchStrategy,
  type KubernetesObject,
} from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { REPO } from './cli.ts';
import { toolBinary } from './tools.ts';
import { freePort } from './cluster.ts';
import { makeCertificates } from './fault-proxy.ts';
import { waitFor } from './kubelet.ts';

const TOOL_DIR = path.join(REPO, 'test', 'tools', 'jobset');
const MODULE = 'sigs.k8s.io/jobset';
const CRD_FILE = 'config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml';
const WEBHOOKS_FILE = 'config/components/webhook/manifests.yaml';
const FIELD_MANAGER = 'imagepull-sweeper-test';
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
  const m = /^\s*sigs\.k8s\.io\/jobset (v\S+)/m.exec(fs.readFileSync(path.join(TOOL_DIR, 'go.mod'), 'utf8'));
  if (!m) throw new Error(`${TOOL_DIR}/go.mod does not require ${MODULE}`);
  return m[1]!;
}

/** The module's source directory in Go's module cache (downloaded if it is not there). */
function moduleDir(version: string): string {
  const out = execFileSync('go', ['mod', 'download', '-json', `${MODULE}@${version}`], { cwd: TOOL_DIR, encoding: 'utf8' });
  const dir = (JSON.parse(out) as { Dir?: string }).Dir;
  if (!dir || !fs.existsSync(path.join(dir, CRD_FILE))) throw new Error(`go mod download ${MODULE}@${version} gave no ${CRD_FILE}`);
  return dir;
}

function controllerBinary(): Promise<string> {
  return toolBinary('jobset', 'jobset-controller');
}

function objectsOf(file: string): KubernetesObject[] {
  return parseAllDocuments(fs.readFileSync(file, 'utf8'))
    .map((d) => d.toJS() as KubernetesObject | null)
    .filter((o): o is KubernetesObject => o !== null);
}

interface Webhook {
  name: string;
  clientConfig: { service?: { path?: string }; url?: string; caBundle?: string };
  objectSelector?: unknown;
  rules: { resources: string[] }[];
}

/** Upstream's webhook configurations, pointed at the controller on loopback and renamed for the tests. */
function webhookConfigurations(dir: string, port: number, caPem: string): KubernetesObject[] {
  return objectsOf(path.join(dir, WEBHOOKS_FILE)).map((o) => {
    const config = structuredClone(o) as KubernetesObject & { webhooks: Webhook[] };
    const kind = config.kind === 'MutatingWebhookConfiguration' ? 'mutating' : 'validating';
    config.metadata = { name: WEBHOOK_CONFIGURATIONS[kind] };
    for (const hook of config.webhooks) {
      hook.clientConfig = {
        url: `https://127.0.0.1:${port}${hook.clientConfig.service?.path ?? ''}`,
        caBundle: Buffer.from(caPem).toString('base64'),
      };
      if (hook.rules.some((r) => r.resources.includes('pods'))) hook.objectSelector = JOBSET_POD_SELECTOR;
    }
    return config;
  });
}

async function apply(kc: KubeConfig, objects: KubernetesObject[]): Promise<void> {
  const api = KubernetesObjectApi.makeApiClient(kc);
  for (const o of objects) await api.patch(o, undefined, undefined, FIELD_MANAGER, true, PatchStrategy.ServerSideApply);
}

type Schema = {
  type?: string;
  items?: Schema;
  properties?: Record<string, Schema>;
  'x-kubernetes-validations'?: { rule: string }[];
};

/**
 * The CRD without its transition rules (`oldSelf`) inside list items, which Kubernetes 1.37
 * refuses ("oldSelf cannot be used on the uncorrelatable portion of the schema"): v0.12.0 has one,
 * immutability of `replicatedJobs[].dependsOn`, a field the tests never set.
 */
function correlatableRulesOnly(crd: KubernetesObject): KubernetesObject {
  const strip = (schema: Schema | undefined, uncorrelatable: boolean): void => {
    if (!schema) return;
    if (uncorrelatable && schema['x-kubernetes-validations']) {
      schema['x-kubernetes-validations'] = schema['x-kubernetes-validations'].filter((v) => !v.rule.includes('oldSelf'));
      if (schema['x-kubernetes-validations'].length === 0) delete schema['x-kubernetes-validations'];
    }
    for (const child of Object.values(schema.properties ?? {})) strip(child, uncorrelatable);
    strip(schema.items, true);
  };
  const copy = structuredClone(crd) as KubernetesObject & { spec: { versions: { schema?: { openAPIV3Schema?: Schema } }[] } };
  for (const version of copy.spec.versions) strip(version.schema?.openAPIV3Schema, false);
  return copy;
}

let started: Promise<JobSetController> | undefined;

/** The JobSet controller for this test process, started on first use (its build: minutes cold, instant warm). */
export function jobSetController(kc: KubeConfig, kubeconfigPath: string): Promise<JobSetController> {
  return (started ??= start(kc, kubeconfigPath));
}

async function start(kc: KubeConfig, kubeconfigPath: string): Promise<JobSetController> {
  const version = jobSetVersion();
  const [bin, dir] = [await controllerBinary(), moduleDir(version)];
  const runDir = fs.mkdtempSync(path.join(os.tmpdir(), 'ips-jobset-'));
  const certDir = path.join(runDir, 'certs');
  fs.mkdirSync(certDir);
  const { caPem, certPem, keyPem } = makeCertificates(runDir, ['IP:127.0.0.1'], '127.0.0.1');
  fs.writeFileSync(path.join(certDir, 'tls.crt'), certPem);
  fs.writeFileSync(path.join(certDir, 'tls.key'), keyPem, { mode: 0o600 });
  const [webhookPort, probePort] = [await freePort(), await freePort()];
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

  await apply(kc, objectsOf(path.join(dir, CRD_FILE)).map(correlatableRulesOnly));
  const crds = kc.makeApiClient(ApiextensionsV1Api);
  await waitFor(
    async () =>
      (await crds.readCustomResourceDefinition({ name: 'jobsets.jobset.x-k8s.io' })).status?.conditions?.some(
        (c) => c.type === 'Established' && c.status === 'True',
      ),
    30_000,
    'the JobSet CRD Established',
  );

  const logFile = path.join(runDir, 'jobset-controller.log');
  const fd = fs.openSync(logFile, 'a');
  const child: ChildProcess = spawn(bin, [`--config=${configFile}`, `--kubeconfig=${kubeconfigPath}`, '--zap-log-level=info'], {
    detached: true,
    stdio: ['ignore', fd, fd],
  });
  fs.closeSync(fd);
  let exited: string | undefined;
  child.on('exit', (code, signal) => (exited = `jobset-controller exited (code ${code}, signal ${signal}); log ${logFile}`));
  const admission = kc.makeApiClient(AdmissionregistrationV1Api);
  const kill = (): void => {
    if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) process.kill(-child.pid, 'SIGKILL');
  };
  process.on('exit', kill);
  await waitFor(
    async () => {
      if (exited) throw new Error(exited);
      const answer = await fetch(`http://127.0.0.1:${probePort}/readyz`).catch(() => undefined);
      return answer?.status === 200;
    },
    60_000,
    `the JobSet controller ready (log ${logFile})`,
  );
  await apply(kc, webhookConfigurations(dir, webhookPort, caPem));
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
      await admission.deleteMutatingWebhookConfiguration({ name: WEBHOOK_CONFIGURATIONS.mutating }).catch(() => undefined);
      await admission.deleteValidatingWebhookConfiguration({ name: WEBHOOK_CONFIGURATIONS.validating }).catch(() => undefined);
      kill();
      started = undefined;
    },
  };
}
