// The shipped CronJob, run as users run it, on the real node: the image assembled from the
// Dockerfile's contents (test/support/sweeper-image.ts) pushed to the node's registry, manifests/
// applied through the overlay test/fixtures/kustomize-node (rendered by test/support/kustomize.ts,
// applied server-side), a run scheduled by the real cronjob controller with the mounted
// ServiceAccount token, then a run created from the CronJob the way
// `kubectl create job --from=cronjob/...` does.
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as tls from 'node:tls';
import { before, describe, it } from 'node:test';
import {
  BatchV1Api,
  CoreV1Api,
  KubernetesObjectApi,
  PatchStrategy,
  setHeaderOptions,
  type KubernetesObject,
  type V1CronJob,
  type V1Job,
  type V1Pod,
} from '@kubernetes/client-node';
import { REPO } from '../support/cli.ts';
import { jobManifest } from '../support/fixtures.ts';
import { useTestCluster } from '../support/hooks.ts';
import { waitFor, waitForJobPods } from '../support/kubelet.ts';
import { renderChartWithOverlay } from '../support/helm.ts';
import { renderKustomization } from '../support/kustomize.ts';
import { nodeSkipReason, testNode, type TestNodeHandle } from '../support/node.ts';
import { nodePodSpec, observeReasons } from '../support/node-cases.ts';
import { assertFailedBySweeper, readJob, sweeperEvents, trueCondition, waitForJobFailed } from '../support/sweeper.ts';
import { pushSweeperImage, sweeperImage } from '../support/sweeper-image.ts';

const skip = nodeSkipReason();
const env = useTestCluster();
const TIMEOUT = { timeout: 600_000, skip };
const OVERLAY = path.join(REPO, 'test', 'fixtures', 'kustomize-node');
// test/e2e/node-helm-cronjob.test.ts runs this file on the chart's render instead of manifests/.
const FROM_HELM = process.env.IMAGEPULL_SWEEPER_NODE_CRONJOB_SOURCE === 'helm';
const INSTALL_NS = 'imagepull-sweeper';
const CRONJOB = 'imagepull-sweeper';
const FIELD_MANAGER = 'imagepull-sweeper-node-e2e';
const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const log = (line: string): void => {
  process.stderr.write(`[node-cronjob] ${line}\n`);
};

/** What was seen of the sweeper's process while it ran (from its cgroup and /proc). */
interface Probe {
  uid?: string;
  rootMount?: string;
  memoryLimit?: number;
  memoryPeak?: number;
  samples: number;
}

/** The node's cgroup name (cleanup.sh's node.env). */
function nodeCgroup(node: TestNodeHandle): string {
  const cg = /cgname=(.*)/.exec(fs.readFileSync(path.join(node.runDir, 'node.env'), 'utf8'))?.[1];
  assert.ok(cg, 'node.env names the cgroup');
  return cg;
}

function findDir(root: string, name: string, depth = 4): string | undefined {
  if (depth < 0 || !fs.existsSync(root)) return undefined;
  for (const e of fs.readdirSync(root, { withFileTypes: true })) {
    if (!e.isDirectory()) continue;
    if (e.name === name) return path.join(root, e.name);
    const found = findDir(path.join(root, e.name), name, depth - 1);
    if (found) return found;
  }
  return undefined;
}

const readOr = (file: string): string | undefined => {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return undefined;
  }
};

/**
 * Samples the sweeper container of pod `uid` every 20 ms until `done()`: its process's uid and
 * root mount, its memory cgroup's limit and peak (cgroup v1 or v2).
 */
async function probeSweeper(node: TestNodeHandle, uid: string, done: () => boolean): Promise<Probe> {
  const v1 = fs.existsSync('/sys/fs/cgroup/memory/cgroup.procs');
  const root = path.join(v1 ? '/sys/fs/cgroup/memory' : '/sys/fs/cgroup', nodeCgroup(node));
  const probe: Probe = { samples: 0 };
  while (!done()) {
    const pod = findDir(root, `pod${uid}`);
    for (const c of pod ? fs.readdirSync(pod, { withFileTypes: true }).filter((e) => e.isDirectory()) : []) {
      const dir = path.join(pod!, c.name);
      for (const pid of (readOr(path.join(dir, 'cgroup.procs')) ?? '').split('\n').filter(Boolean)) {
        if (!(readOr(`/proc/${pid}/cmdline`) ?? '').includes('/app/dist/src/cli/main.js')) continue;
        probe.samples++;
        probe.uid = /^Uid:\s+(.*)$/m.exec(readOr(`/proc/${pid}/status`) ?? '')?.[1]?.trim() ?? probe.uid;
        const rootLine = (readOr(`/proc/${pid}/mountinfo`) ?? '').split('\n').find((l) => l.split(' ')[4] === '/');
        probe.rootMount = rootLine?.split(' ')[5] ?? probe.rootMount;
        const limit = Number(readOr(path.join(dir, v1 ? 'memory.limit_in_bytes' : 'memory.max')));
        const peak = Number(readOr(path.join(dir, v1 ? 'memory.max_usage_in_bytes' : 'memory.peak')));
        if (limit > 0) probe.memoryLimit = limit;
        if (peak > 0) probe.memoryPeak = Math.max(probe.memoryPeak ?? 0, peak);
      }
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  return probe;
}

/** The JSON lines the sweeper container wrote (the kubelet's CRI log file on the node). */
function containerLog(node: TestNodeHandle, pod: V1Pod): Record<string, unknown>[] {
  const dir = path.join(
    node.runDir,
    'pod-logs',
    `${pod.metadata!.namespace}_${pod.metadata!.name}_${pod.metadata!.uid}`,
    'imagepull-sweeper',
  );
  const text = fs
    .readdirSync(dir)
    .sort()
    .map((f) => fs.readFileSync(path.join(dir, f), 'utf8'))
    .join('');
  // CRI format: `<time> <stream> <P|F> <text>`; the audit log is complete lines on stdout.
  return text
    .split('\n')
    .map((l) => /^\S+ stdout F (\{.*\})$/.exec(l)?.[1])
    .filter((l): l is string => Boolean(l))
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

/** Waits for the sweeper Job to finish; returns its one pod (Succeeded) and the Job. */
async function finished(node: TestNodeHandle, name: string, onPod: (pod: V1Pod) => void): Promise<{ job: V1Job; pod: V1Pod }> {
  const core = env.kc.makeApiClient(CoreV1Api);
  const [pod] = await waitForJobPods(core, INSTALL_NS, name);
  onPod(pod!);
  const job = await waitFor(
    async () => {
      const j = await readJob(env.kc, INSTALL_NS, name);
      return trueCondition(j, 'Complete') || trueCondition(j, 'Failed') ? j : undefined;
    },
    180_000,
    `sweeper Job ${INSTALL_NS}/${name} finished`,
    250,
  );
  const done = await core.readNamespacedPod({ namespace: INSTALL_NS, name: pod!.metadata!.name! });
  const term = done.status?.containerStatuses?.[0]?.state?.terminated;
  const output = JSON.stringify(containerLog(node, done)).slice(0, 4000);
  assert.ok(trueCondition(job, 'Complete'), `sweeper Job ${name} Complete: ${JSON.stringify(job.status?.conditions)}\n${output}`);
  assert.equal(term?.exitCode, 0, `exit code ${term?.exitCode} (${term?.reason})\n${output}`);
  return { job, pod: done };
}

describe(`the shipped CronJob${FROM_HELM ? ' (installed from the Helm chart)' : ''} on the real node`, () => {
  let node: TestNodeHandle;
  let imageRef: string;
  let objects: KubernetesObject[];
  let ns: string;
  let cronJobUid: string;
  let probe: Promise<Probe>;

  before(async () => {
    if (skip) return;
    node = await testNode(env.cluster.kubeconfigPath);
    const image = await sweeperImage(log);
    const t0 = Date.now();
    imageRef = await pushSweeperImage(image, node.registry);
    log(`image ${image.hash} ${image.built ? 'assembled' : 'cached'} (${image.ms} ms), pushed in ${Date.now() - t0} ms`);
    const api = new URL(env.cluster.server);
    const vars = { REGISTRY: node.registry, TAG: imageRef.split(':').pop()!, NODE: node.name, API_HOST: api.hostname, API_PORT: api.port };
    objects = FROM_HELM
      ? await renderChartWithOverlay(OVERLAY, vars, [`image.repository=${vars.REGISTRY}/imagepull-sweeper`, `image.tag=${vars.TAG}`])
      : renderKustomization(OVERLAY, vars);
    const core = env.kc.makeApiClient(CoreV1Api);
    const batch = env.kc.makeApiClient(BatchV1Api);
    env.onCleanup(async () => {
      await batch.deleteNamespacedCronJob({ namespace: INSTALL_NS, name: CRONJOB, propagationPolicy: 'Background' }).catch(() => undefined);
      const jobs = await batch.listNamespacedJob({ namespace: INSTALL_NS });
      for (const j of jobs.items) {
        await batch
          .deleteNamespacedJob({ namespace: INSTALL_NS, name: j.metadata!.name!, propagationPolicy: 'Background' })
          .catch(() => undefined);
      }
      await core.deleteNamespacedConfigMap({ namespace: INSTALL_NS, name: 'imagepull-sweeper-policy' }).catch(() => undefined);
      // Back to the shipped Pod Security level for the other test files.
      await core.patchNamespace(
        { name: INSTALL_NS, body: { metadata: { labels: { 'pod-security.kubernetes.io/enforce': 'restricted' } } } },
        mergePatch,
      );
    });
    const objApi = KubernetesObjectApi.makeApiClient(env.kc);
    for (const obj of objects) {
      const body = structuredClone(obj);
      // Applied paused: the test says when the cronjob controller may schedule it.
      if (body.kind === 'CronJob') (body as V1CronJob).spec!.suspend = true;
      const applied = await objApi.patch(body, undefined, undefined, FIELD_MANAGER, true, PatchStrategy.ServerSideApply);
      if (applied.kind === 'CronJob') cronJobUid = applied.metadata!.uid!;
    }
  });

  it('the overlay changes only the image, the node, the host network and the API server address', TIMEOUT, () => {
    const cron = objects.find((o) => o.kind === 'CronJob') as V1CronJob;
    const pod = cron.spec!.jobTemplate.spec!.template.spec!;
    assert.equal(pod.containers[0]!.image, imageRef);
    assert.equal(pod.hostNetwork, true);
    assert.equal(pod.nodeName, node.name);
    const envNames = pod.containers[0]!.env!.map((e) => e.name);
    assert.deepEqual(envNames.slice(-2), ['KUBERNETES_SERVICE_HOST', 'KUBERNETES_SERVICE_PORT']);
    // Everything that makes the pod hardened is as shipped.
    assert.equal(pod.containers[0]!.securityContext!.readOnlyRootFilesystem, true);
    assert.equal(pod.securityContext!.runAsUser, 65532);
    assert.equal(pod.containers[0]!.resources!.limits!.memory, '256Mi');
    assert.equal(pod.automountServiceAccountToken, true);
  });

  it(
    'the API server is trusted in-cluster: kube-root-ca.crt holds the CA that signed its cert, which names 127.0.0.1',
    TIMEOUT,
    async () => {
      const core = env.kc.makeApiClient(CoreV1Api);
      const cm = await waitFor(
        () => core.readNamespacedConfigMap({ namespace: INSTALL_NS, name: 'kube-root-ca.crt' }),
        30_000,
        'kube-root-ca.crt published',
      );
      const bundle = cm.data!['ca.crt']!;
      const certs = bundle
        .split(/(?<=-----END CERTIFICATE-----)\s*/)
        .filter((c) => c.includes('BEGIN'))
        .map((c) => new X509Certificate(c));
      const api = new URL(env.cluster.server);
      const served = await new Promise<X509Certificate>((resolve, reject) => {
        const s = tls.connect({ host: api.hostname, port: Number(api.port), rejectUnauthorized: false }, () => {
          const raw = s.getPeerX509Certificate();
          s.end();
          if (raw) resolve(raw);
          else reject(new Error('no peer certificate'));
        });
        s.on('error', reject);
      });
      assert.equal(served.checkIP('127.0.0.1'), '127.0.0.1', `serving cert SANs: ${served.subjectAltName}`);
      const signer = certs.find((c) => c.ca && served.checkIssued(c) && served.verify(c.publicKey));
      assert.ok(
        signer,
        `a CA in kube-root-ca.crt signed the serving cert (issuer ${served.issuer}); bundle: ${certs.map((c) => c.subject).join(' | ')}`,
      );
    },
  );

  it(
    'a scheduled run fails a stuck Job (Event, annotations) in-cluster, as non-root, read-only, under its memory limit; a second run changes nothing',
    TIMEOUT,
    async () => {
      const core = env.kc.makeApiClient(CoreV1Api);
      const batch = env.kc.makeApiClient(BatchV1Api);
      ns = await env.namespace('node-cronjob');
      const stuckImage = `${node.registry}/team/missing:1`;
      const stuck = jobManifest('nightly', stuckImage);
      stuck.metadata!.annotations = { 'imagepull-sweeper/grace': '5s' };
      stuck.spec!.template.spec = nodePodSpec(node, [{ name: 'main', image: stuckImage }]);
      await batch.createNamespacedJob({ namespace: ns, body: stuck });
      const [stuckPod] = await waitForJobPods(core, ns, 'nightly');
      await observeReasons(env.kc, ns, stuckPod!.metadata!.name!, {
        container: 'main',
        containerKind: 'regular',
        reasons: ['ErrImagePull'],
      });
      await new Promise((r) => setTimeout(r, 6_000)); // past the Job's 5s grace

      // Run 1: scheduled by the cronjob controller (every minute for the test; shipped: */2).
      const tSchedule = Date.now();
      await batch.patchNamespacedCronJob(
        { namespace: INSTALL_NS, name: CRONJOB, body: { spec: { schedule: '* * * * *', suspend: false } } },
        mergePatch,
      );
      const scheduled = await waitFor(
        async () =>
          (await batch.listNamespacedJob({ namespace: INSTALL_NS })).items.find(
            (j) => j.metadata?.ownerReferences?.[0]?.uid === cronJobUid,
          ),
        135_000, // the next minute boundary, and one more if the controller saw the unsuspend just after it
        'a Job scheduled by the cronjob controller',
        250,
      );
      await batch.patchNamespacedCronJob({ namespace: INSTALL_NS, name: CRONJOB, body: { spec: { suspend: true } } }, mergePatch);
      const tStart = Date.now();
      assert.ok(
        scheduled.metadata!.annotations?.['batch.kubernetes.io/cronjob-scheduled-timestamp'],
        'created by the controller on schedule',
      );
      let stopProbe = false;
      const run1 = await finished(node, scheduled.metadata!.name!, (pod) => {
        probe = probeSweeper(node, pod.metadata!.uid!, () => stopProbe);
      });
      stopProbe = true;
      const seen = await probe;
      log(
        `run 1: scheduled ${tStart - tSchedule} ms after unsuspending; Job Complete ${Date.now() - tStart} ms after creation; ` +
          `memory peak ${((seen.memoryPeak ?? 0) / 2 ** 20).toFixed(1)} MiB of ${((seen.memoryLimit ?? 0) / 2 ** 20).toFixed(0)} MiB; ${seen.samples} samples`,
      );

      const pod = run1.pod;
      assert.equal(pod.spec!.serviceAccountName, 'imagepull-sweeper');
      assert.ok(
        pod.spec!.volumes?.some((v) => v.projected?.sources?.some((s) => s.serviceAccountToken)),
        'the ServiceAccount token is mounted',
      );
      assert.ok(seen.samples > 0, 'the sweeper process was seen running');
      assert.match(seen.uid ?? '', /^65532\s+65532\s+65532\s+65532$/, 'runs as uid 65532');
      assert.match(seen.rootMount ?? '', /^ro(,|$)/, `root filesystem mounted read-only (${seen.rootMount})`);
      assert.equal(seen.memoryLimit, 256 * 2 ** 20, 'the manifest memory limit is the cgroup limit');
      assert.ok((seen.memoryPeak ?? 0) > 0 && seen.memoryPeak! < seen.memoryLimit!, `peak ${seen.memoryPeak} under the limit`);

      const records = containerLog(node, pod);
      const mine = records.filter((r) => r.message === 'decision' && r.namespace === ns);
      assert.equal(mine.length, 1, JSON.stringify(records));
      assert.equal(mine[0]!.job, 'nightly');
      assert.equal(mine[0]!.outcome, 'failed');
      assert.equal(mine[0]!.graceSeconds, 5);
      assert.equal(mine[0]!.graceSource, 'annotation');
      const summary = records.find((r) => r.message === 'summary');
      assert.equal(summary?.policy, `ConfigMap ${INSTALL_NS}/imagepull-sweeper-policy`);

      const failed = await waitForJobFailed(env.kc, ns, 'nightly');
      assertFailedBySweeper(failed);
      const a = failed.metadata!.annotations!;
      assert.ok(a['imagepull-sweeper/failed-at']);
      assert.match(a['imagepull-sweeper/reason'] ?? '', /^(ErrImagePull|ImagePullBackOff)$/);
      assert.match(a['imagepull-sweeper/message'] ?? '', /team\/missing:1/);
      const events = await sweeperEvents(env.kc, ns);
      assert.equal(events.length, 1);
      assert.equal(events[0]!.reason, 'ImagePullStuck');
      assert.equal(events[0]!.action, 'FailJob');
      assert.equal(events[0]!.reportingInstance, pod.metadata!.name, 'POD_NAME from the downward API');

      // Run 2: `kubectl create job --from=cronjob/imagepull-sweeper sweep-now`. It sees the Job
      // finished and only takes its pending label off.
      const before2 = await readJob(env.kc, ns, 'nightly');
      assert.equal(before2.metadata!.labels?.['imagepull-sweeper/pending'], 'true');
      const cron = await batch.readNamespacedCronJob({ namespace: INSTALL_NS, name: CRONJOB });
      await batch.createNamespacedJob({
        namespace: INSTALL_NS,
        body: {
          metadata: {
            name: 'sweep-now',
            annotations: { 'cronjob.kubernetes.io/instantiate': 'manual' },
            labels: cron.spec!.jobTemplate.metadata?.labels,
            ownerReferences: [{ apiVersion: 'batch/v1', kind: 'CronJob', name: CRONJOB, uid: cronJobUid, controller: true }],
          },
          spec: cron.spec!.jobTemplate.spec,
        },
      });
      const run2 = await finished(node, 'sweep-now', () => undefined);
      const records2 = containerLog(node, run2.pod);
      assert.deepEqual(
        records2.filter((r) => r.message === 'decision' && r.namespace === ns && !String(r.outcome).startsWith('skip')),
        [],
        'nothing to do in the namespace',
      );
      assert.ok(
        records2.some((r) => r.message === 'summary'),
        JSON.stringify(records2),
      );
      const after2 = await readJob(env.kc, ns, 'nightly');
      const { 'imagepull-sweeper/pending': _dropped, ...otherLabels } = before2.metadata!.labels ?? {};
      assert.deepEqual(after2.metadata!.labels ?? {}, otherLabels, 'the second run took the pending label off');
      assert.deepEqual(after2.metadata!.annotations, before2.metadata!.annotations, 'and changed no annotation');
      assert.deepEqual(after2.spec, before2.spec, 'nor the spec');
      assert.equal((await sweeperEvents(env.kc, ns)).length, 1);
    },
  );
});
