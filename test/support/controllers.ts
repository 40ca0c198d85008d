// What the e2e tests need to run an upstream controller built from its Go module (JobSet,
// Kueue) against the test control plane: its manifests read from Go's module cache, its CRDs
// applied and established, its webhooks pointed at it on loopback, and the process itself.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  AdmissionregistrationV1Api,
  ApiextensionsV1Api,
  type KubeConfig,
  KubernetesObjectApi,
  PatchStrategy,
  type KubernetesObject,
} from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { createKubeHttp } from '../../src/kube/http.ts';
import { freePort } from './cluster.ts';
import { makeCertificates } from './fault-proxy.ts';
import { waitFor } from './kubelet.ts';

const FIELD_MANAGER = 'imagepull-sweeper-test';

/** The module version a test tool's go.mod (test/tools/<tool>/go.mod) pins. */
export function pinnedVersion(toolDir: string, module: string): string {
  const escaped = module.replaceAll('.', '\\.').replaceAll('/', '\\/');
  const m = new RegExp(`^\\s*${escaped} (v\\S+)`, 'm').exec(fs.readFileSync(path.join(toolDir, 'go.mod'), 'utf8'));
  if (!m) throw new Error(`${toolDir}/go.mod does not require ${module}`);
  return m[1]!;
}

/** The module's source directory in Go's module cache (downloaded if it is not there), checked to hold `file`. */
export function moduleDir(toolDir: string, module: string, version: string, file: string): string {
  const out = execFileSync('go', ['mod', 'download', '-json', `${module}@${version}`], { cwd: toolDir, encoding: 'utf8' });
  const dir = (JSON.parse(out) as { Dir?: string }).Dir;
  if (!dir || !fs.existsSync(path.join(dir, file))) throw new Error(`go mod download ${module}@${version} gave no ${file}`);
  return dir;
}

export function objectsOf(file: string): KubernetesObject[] {
  return parseAllDocuments(fs.readFileSync(file, 'utf8'))
    .map((d) => d.toJS() as KubernetesObject | null)
    .filter((o): o is KubernetesObject => o !== null);
}

/** Server-side apply: CRDs of hundreds of kB are too big for the last-applied annotation of a client-side apply. */
export async function apply(kc: KubeConfig, objects: KubernetesObject[]): Promise<void> {
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
 * refuses ("oldSelf cannot be used on the uncorrelatable portion of the schema"): JobSet v0.12.0
 * has one, immutability of `replicatedJobs[].dependsOn`, a field the tests never set.
 */
export function correlatableRulesOnly(crd: KubernetesObject): KubernetesObject {
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

/**
 * Applies the CRDs as they are written (server-side apply of the JSON itself: client-node's typed
 * serializer drops the schema's `x-kubernetes-*` keys, e.g. `x-kubernetes-int-or-string`, which
 * the API server then refuses) and waits until the API server serves each.
 */
export async function applyCrds(kc: KubeConfig, crds: KubernetesObject[]): Promise<void> {
  const http = createKubeHttp(kc, 60_000);
  for (const crd of crds) {
    await http.send('PATCH', `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${crd.metadata!.name!}`, {
      body: crd,
      contentType: 'application/apply-patch+yaml',
      query: { fieldManager: FIELD_MANAGER, force: 'true' },
    });
  }
  const api = kc.makeApiClient(ApiextensionsV1Api);
  for (const crd of crds) {
    const name = crd.metadata!.name!;
    await waitFor(
      async () =>
        (await api.readCustomResourceDefinition({ name })).status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True'),
      30_000,
      `the CRD ${name} Established`,
    );
  }
}

export interface ControllerProcess {
  logFile: string;
  kill(): void;
}

/**
 * Starts a controller in its own process group, logging to `logFile`, killed when the test
 * process exits; resolves once its readiness probe on loopback answers 200.
 */
export async function startController(
  name: string,
  command: string,
  args: string[],
  o: { logFile: string; probePort: number; env?: NodeJS.ProcessEnv },
): Promise<ControllerProcess> {
  const fd = fs.openSync(o.logFile, 'a');
  const child: ChildProcess = spawn(command, args, { detached: true, stdio: ['ignore', fd, fd], env: o.env ?? process.env });
  fs.closeSync(fd);
  let exited: string | undefined;
  child.on('exit', (code, signal) => (exited = `${name} exited (code ${code}, signal ${signal}); log ${o.logFile}`));
  const kill = (): void => {
    if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) process.kill(-child.pid, 'SIGKILL');
  };
  process.on('exit', kill);
  await waitFor(
    async () => {
      if (exited) throw new Error(exited);
      const answer = await fetch(`http://127.0.0.1:${o.probePort}/readyz`).catch(() => undefined);
      return answer?.status === 200;
    },
    60_000,
    `${name} ready (log ${o.logFile})`,
  );
  return { logFile: o.logFile, kill };
}

/** A webhook of an upstream configuration, as far as it is re-pointed here. */
export interface Webhook {
  name: string;
  clientConfig: { service?: { path?: string }; url?: string; caBundle?: string };
  objectSelector?: unknown;
  rules: { resources: string[] }[];
}

/** Upstream's webhook configurations, renamed and pointed at the controller on loopback with this CA; `keep` chooses the webhooks. */
export function loopbackWebhooks(
  file: string,
  names: { mutating: string; validating: string },
  port: number,
  caPem: string,
  keep: (hook: Webhook) => Webhook | undefined = (hook) => hook,
): KubernetesObject[] {
  return objectsOf(file).map((o) => {
    const config = structuredClone(o) as KubernetesObject & { webhooks: Webhook[] };
    const kind = config.kind === 'MutatingWebhookConfiguration' ? 'mutating' : 'validating';
    config.metadata = { name: names[kind] };
    config.webhooks = config.webhooks.flatMap((hook) => {
      const kept = keep(hook);
      if (!kept) return [];
      kept.clientConfig = {
        url: `https://127.0.0.1:${port}${hook.clientConfig.service?.path ?? ''}`,
        caBundle: Buffer.from(caPem).toString('base64'),
      };
      return [kept];
    });
    return config;
  });
}

/** Where a controller runs: a run directory, a serving certificate for 127.0.0.1 and its CA, two free loopback ports. */
export interface LoopbackServing {
  runDir: string;
  /** Holds tls.crt and tls.key (the names controller-runtime's webhook server reads). */
  certDir: string;
  caPem: string;
  webhookPort: number;
  probePort: number;
}

export async function loopbackServing(name: string): Promise<LoopbackServing> {
  const runDir = fs.mkdtempSync(path.join(os.tmpdir(), `ips-${name}-`));
  const certDir = path.join(runDir, 'certs');
  fs.mkdirSync(certDir);
  const { caPem, certPem, keyPem } = makeCertificates(runDir, ['IP:127.0.0.1'], '127.0.0.1');
  fs.writeFileSync(path.join(certDir, 'tls.crt'), certPem);
  fs.writeFileSync(path.join(certDir, 'tls.key'), keyPem, { mode: 0o600 });
  return { runDir, certDir, caPem, webhookPort: await freePort(), probePort: await freePort() };
}

/** Removes the controller's webhook configurations (they would refuse what they match once it is gone), then kills it. */
export async function stopController(
  kc: KubeConfig,
  webhooks: { mutating: string; validating: string },
  controller: ControllerProcess,
): Promise<void> {
  const admission = kc.makeApiClient(AdmissionregistrationV1Api);
  await admission.deleteMutatingWebhookConfiguration({ name: webhooks.mutating }).catch(() => undefined);
  await admission.deleteValidatingWebhookConfiguration({ name: webhooks.validating }).catch(() => undefined);
  controller.kill();
}
