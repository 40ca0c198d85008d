// Every container in the shipped manifests keeps its hardening: non-root, read-only root
// filesystem, no privilege escalation, no capabilities, RuntimeDefault seccomp; and no pod
// shares the host's namespaces or mounts its filesystem.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { KubernetesObject, V1PodSpec, V1PodTemplateSpec } from '@kubernetes/client-node';
import { join } from 'node:path';
import { renderKustomization } from '../support/kustomize.ts';
import { allObjects, MANIFESTS } from '../support/manifests.ts';

/** The pod spec inside any workload kind (Pod, Job, CronJob, Deployment, DaemonSet, ...). */
function podSpecs(obj: KubernetesObject): V1PodSpec[] {
  const o = obj as KubernetesObject & {
    spec?: { template?: V1PodTemplateSpec; jobTemplate?: { spec?: { template?: V1PodTemplateSpec } } };
  };
  if (obj.kind === 'Pod') return [(obj as unknown as { spec: V1PodSpec }).spec];
  const template = o.spec?.jobTemplate?.spec?.template ?? o.spec?.template;
  return template?.spec ? [template.spec] : [];
}

/** What is missing from a pod spec's hardening, one line per problem, naming the container. */
function hardeningProblems(pod: V1PodSpec): string[] {
  const problems: string[] = [];
  const podSc = pod.securityContext ?? {};
  for (const key of ['hostNetwork', 'hostPID', 'hostIPC'] as const) if (pod[key]) problems.push(`pod: ${key}`);
  for (const v of pod.volumes ?? []) if (v.hostPath) problems.push(`pod: hostPath volume ${v.name}`);
  const containers = [
    ...(pod.initContainers ?? []).map((c) => ({ kind: 'init container', c })),
    ...pod.containers.map((c) => ({ kind: 'container', c })),
    ...(pod.ephemeralContainers ?? []).map((c) => ({ kind: 'ephemeral container', c })),
  ];
  for (const { kind, c } of containers) {
    const at = `${kind} ${c.name}`;
    const sc = c.securityContext ?? {};
    if ((sc.runAsNonRoot ?? podSc.runAsNonRoot) !== true) problems.push(`${at}: runAsNonRoot is not true`);
    if ((sc.runAsUser ?? podSc.runAsUser) === 0) problems.push(`${at}: runAsUser 0`);
    if (sc.readOnlyRootFilesystem !== true) problems.push(`${at}: readOnlyRootFilesystem is not true`);
    if (sc.allowPrivilegeEscalation !== false) problems.push(`${at}: allowPrivilegeEscalation is not false`);
    if (sc.privileged) problems.push(`${at}: privileged`);
    if (!sc.capabilities?.drop?.includes('ALL')) problems.push(`${at}: capabilities do not drop ALL`);
    if (sc.capabilities?.add?.length) problems.push(`${at}: adds capabilities ${sc.capabilities.add.join(', ')}`);
    if ((sc.seccompProfile ?? podSc.seccompProfile)?.type !== 'RuntimeDefault')
      problems.push(`${at}: seccompProfile is not RuntimeDefault`);
  }
  return problems;
}

describe('hardening of the shipped manifests', () => {
  // manifests/ (the CronJob mode) and with the Component manifests/deployment/ (the Deployment mode).
  const deploymentMode = renderKustomization(join(MANIFESTS, '..', 'test', 'fixtures', 'kustomize-deployment')).map((obj) => ({
    file: 'deployment/',
    obj,
  }));
  const workloads = [...allObjects(), ...deploymentMode].flatMap(({ file, obj }) =>
    podSpecs(obj).map((spec) => ({ where: `${file}: ${obj.kind} ${obj.metadata?.name}`, spec })),
  );

  it('finds the pods to check (the CronJob and the Deployment)', () => {
    assert.ok(
      workloads.some((w) => w.where.includes('CronJob imagepull-sweeper')),
      workloads.map((w) => w.where).join(', '),
    );
    assert.ok(
      workloads.some((w) => w.where === 'deployment/: Deployment imagepull-sweeper'),
      workloads.map((w) => w.where).join(', '),
    );
    assert.ok(!deploymentMode.some(({ obj }) => obj.kind === 'CronJob'), 'the Deployment mode has no CronJob');
  });

  it("the Deployment has the CronJob pod's hardening exactly: security contexts, token, volumes, resources", () => {
    const cronJob = workloads.find((w) => w.where.includes('CronJob imagepull-sweeper'))!.spec;
    const deployment = workloads.find((w) => w.where === 'deployment/: Deployment imagepull-sweeper')!.spec;
    for (const key of ['securityContext', 'automountServiceAccountToken', 'enableServiceLinks', 'serviceAccountName', 'volumes'] as const) {
      assert.deepEqual(deployment[key], cronJob[key], key);
    }
    for (const key of ['securityContext', 'resources', 'volumeMounts', 'image'] as const) {
      assert.deepEqual(deployment.containers[0]![key], cronJob.containers[0]![key], `container ${key}`);
    }
    const probes = deployment.containers[0]!;
    assert.equal(probes.livenessProbe?.httpGet?.path, '/healthz');
    assert.equal(probes.readinessProbe?.httpGet?.path, '/healthz');
    assert.ok(probes.args?.includes('--leader-elect'));
  });

  it('every container: non-root, read-only root, no escalation, no capabilities, RuntimeDefault seccomp', () => {
    for (const { where, spec } of workloads) {
      assert.ok(spec.containers.length > 0, `${where}: no containers`);
      assert.deepEqual(hardeningProblems(spec), [], where);
    }
  });

  it('the check itself notices each weakening', () => {
    const base = workloads[0]!.spec;
    const weakened: [string, (s: V1PodSpec) => void][] = [
      [
        'runAsNonRoot',
        (s) => {
          delete s.securityContext!.runAsNonRoot;
          delete s.containers[0]!.securityContext!.runAsNonRoot;
        },
      ],
      [
        'readOnlyRootFilesystem',
        (s) => {
          s.containers[0]!.securityContext!.readOnlyRootFilesystem = false;
        },
      ],
      [
        'allowPrivilegeEscalation',
        (s) => {
          delete s.containers[0]!.securityContext!.allowPrivilegeEscalation;
        },
      ],
      [
        'drop ALL',
        (s) => {
          s.containers[0]!.securityContext!.capabilities = { drop: ['NET_RAW'] };
        },
      ],
      [
        'adds capabilities',
        (s) => {
          s.containers[0]!.securityContext!.capabilities!.add = ['NET_ADMIN'];
        },
      ],
      [
        'seccompProfile',
        (s) => {
          delete s.securityContext!.seccompProfile;
          s.containers[0]!.securityContext!.seccompProfile = { type: 'Unconfined' };
        },
      ],
      [
        'privileged',
        (s) => {
          s.containers[0]!.securityContext!.privileged = true;
        },
      ],
      [
        'hostNetwork',
        (s) => {
          s.hostNetwork = true;
        },
      ],
      [
        'hostPath',
        (s) => {
          s.volumes = [{ name: 'root', hostPath: { path: '/' } }];
        },
      ],
      [
        'init container',
        (s) => {
          s.initContainers = [{ name: 'setup', image: 'x' }];
        },
      ],
    ];
    for (const [what, weaken] of weakened) {
      const spec = structuredClone(base);
      weaken(spec);
      assert.notDeepEqual(hardeningProblems(spec), [], `${what}: not noticed`);
    }
  });
});
