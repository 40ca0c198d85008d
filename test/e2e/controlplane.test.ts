// The local control plane behaves like a real cluster for everything the sweeper relies on:
// the Job controller (pods, activeDeadlineSeconds, podFailurePolicy), podgc, the garbage
// collector, TokenRequest and RBAC, and a kubelet stand-in that writes pod status.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  ApiException,
  BatchV1Api,
  CoreV1Api,
  KubeConfig,
  PatchStrategy,
  RbacAuthorizationV1Api,
  setHeaderOptions,
  type V1Job,
  type V1Pod,
} from '@kubernetes/client-node';
import { jobManifest } from '../support/fixtures.ts';
import { useTestCluster } from '../support/hooks.ts';
import {
  addPodCondition,
  realPullMessage,
  SANDBOX_DELAY_MS,
  setImagePullStuck,
  setPodRunning,
  waitFor,
  waitForJobPods,
} from '../support/kubelet.ts';

// Controllers act within seconds; podgc (which fails deleted, never-scheduled pods) runs every
// 20 s, and some flows need it once. Bounded, generous.
const CONTROLLER_TIMEOUT = 90_000;
const TEST_TIMEOUT = 150_000;

const MISSING_IMAGE = 'registry.invalid/imagepull-sweeper/missing:1.0';
const BACKOFF_MESSAGE = realPullMessage('tag-missing', MISSING_IMAGE);

let core: CoreV1Api;
let batch: BatchV1Api;
let rbac: RbacAuthorizationV1Api;

const env = useTestCluster(({ cluster }) => {
  core = cluster.kubeConfig.makeApiClient(CoreV1Api);
  batch = cluster.kubeConfig.makeApiClient(BatchV1Api);
  rbac = cluster.kubeConfig.makeApiClient(RbacAuthorizationV1Api);
  console.log(
    `# control plane ${cluster.server}: startup-to-ready ${cluster.startupMs ?? 'n/a'} ms` +
      (cluster.shared ? ' (shared cluster started by run-e2e)' : ''),
  );
});
const namespace = (prefix: string): Promise<string> => env.namespace(prefix);

function jobCondition(job: V1Job, type: string): { reason?: string; message?: string } | undefined {
  return job.status?.conditions?.find((c) => c.type === type && c.status === 'True');
}

async function waitForJobCondition(ns: string, name: string, type: string): Promise<V1Job> {
  return waitFor(
    async () => {
      const job = await batch.readNamespacedJob({ name, namespace: ns });
      return jobCondition(job, type) ? job : undefined;
    },
    CONTROLLER_TIMEOUT,
    `Job ${ns}/${name} condition ${type}=True`,
    500,
  );
}

async function podGone(ns: string, name: string): Promise<boolean> {
  try {
    await core.readNamespacedPod({ name, namespace: ns });
    return false;
  } catch (e) {
    if (e instanceof ApiException && e.code === 404) return true;
    throw e;
  }
}

function podName(pod: V1Pod): string {
  const name = pod.metadata?.name;
  assert.ok(name, 'pod has a name');
  return name;
}

describe('Job controller and kubelet stand-in', { timeout: TEST_TIMEOUT }, () => {
  let ns: string;
  let pod: V1Pod;

  it('gives a Job created with client-node its pod', async () => {
    ns = await namespace('e2e-job');
    const job = await batch.createNamespacedJob({ namespace: ns, body: jobManifest('pull', MISSING_IMAGE) });
    const pods = await waitForJobPods(core, ns, 'pull');
    assert.equal(pods.length, 1);
    pod = pods[0]!;
    const owner = pod.metadata?.ownerReferences?.find((o) => o.controller);
    assert.equal(owner?.kind, 'Job');
    assert.equal(owner?.uid, job.metadata?.uid);
    assert.equal(pod.spec?.containers[0]?.image, MISSING_IMAGE);
    assert.equal(pod.status?.phase, 'Pending');
    assert.ok(pod.metadata?.finalizers?.includes('batch.kubernetes.io/job-tracking'), 'job-tracking finalizer');
    assert.equal(pod.spec?.serviceAccountName, 'default');
  });

  it('reports ImagePullBackOff on a regular container as a kubelet would', async () => {
    const since = new Date(Date.now() - 5 * 60_000);
    await setImagePullStuck(core, ns, podName(pod), {
      since,
      stuck: [{ container: 'main', reason: 'ImagePullBackOff', message: BACKOFF_MESSAGE }],
    });
    const read = await core.readNamespacedPod({ name: podName(pod), namespace: ns });
    assert.equal(read.status?.phase, 'Pending');
    const cs = read.status?.containerStatuses?.[0];
    assert.equal(cs?.name, 'main');
    assert.equal(cs?.state?.waiting?.reason, 'ImagePullBackOff');
    assert.equal(cs?.state?.waiting?.message, BACKOFF_MESSAGE);
    assert.equal(cs?.image, MISSING_IMAGE);
    assert.equal(cs?.imageID, '');
    assert.equal(cs?.ready, false);
    assert.equal(cs?.started, false);
    assert.equal(cs?.restartCount, 0);
    const cond = (t: string) => read.status?.conditions?.find((c) => c.type === t);
    // As the real node stamps them: the sandbox is ready (`since`) a sandbox delay after the pod
    // started, and Initialized (no init containers) is True from the start.
    const second = (d: Date): number => Math.floor(d.getTime() / 1000) * 1000;
    assert.equal(cond('PodReadyToStartContainers')?.status, 'True');
    assert.equal(cond('PodReadyToStartContainers')?.lastTransitionTime?.getTime(), second(since));
    assert.equal(cond('Initialized')?.status, 'True');
    assert.equal(cond('Initialized')?.lastTransitionTime?.getTime(), second(new Date(since.getTime() - SANDBOX_DELAY_MS)));
    assert.equal(read.status?.startTime?.getTime(), second(new Date(since.getTime() - SANDBOX_DELAY_MS)));
    assert.equal(cond('Ready')?.status, 'False');
    assert.equal(cond('ContainersReady')?.reason, 'ContainersNotReady');
    assert.equal(cond('PodScheduled')?.status, 'True');
    // The Job controller counts nothing: the pod is neither failed nor succeeded.
    const job = await batch.readNamespacedJob({ name: 'pull', namespace: ns });
    assert.equal(job.status?.failed ?? 0, 0);
    assert.equal(job.status?.active, 1);
  });

  it('reports an init container stuck on ErrImagePull with Initialized=False', async () => {
    await batch.createNamespacedJob({
      namespace: ns,
      body: jobManifest('init', 'busybox:1.36', {
        template: {
          spec: {
            restartPolicy: 'Never',
            initContainers: [{ name: 'fetch', image: MISSING_IMAGE }],
            containers: [{ name: 'main', image: 'busybox:1.36' }],
          },
        },
      }),
    });
    const [p] = await waitForJobPods(core, ns, 'init');
    const since = new Date(Date.now() - 60_000);
    const read = await setImagePullStuck(core, ns, podName(p!), {
      since,
      stuck: [{ container: 'fetch', init: true, reason: 'ErrImagePull', message: 'not found' }],
    });
    assert.equal(read.status?.initContainerStatuses?.[0]?.state?.waiting?.reason, 'ErrImagePull');
    assert.equal(read.status?.containerStatuses?.[0]?.state?.waiting?.reason, 'PodInitializing');
    const init = read.status?.conditions?.find((c) => c.type === 'Initialized');
    assert.equal(init?.status, 'False');
    assert.equal(init?.reason, 'ContainersNotInitialized');
    assert.equal(init?.message, 'containers with incomplete status: [fetch]');

    // And back to healthy.
    const running = await setPodRunning(core, ns, podName(p!));
    assert.equal(running.status?.phase, 'Running');
    assert.equal(running.status?.initContainerStatuses?.[0]?.state?.terminated?.reason, 'Completed');
    assert.equal(running.status?.containerStatuses?.[0]?.ready, true);
  });
});

describe('activeDeadlineSeconds', { timeout: TEST_TIMEOUT }, () => {
  it('fails the Job with DeadlineExceeded when merge-patched into the past', async (t) => {
    const ns = await namespace('e2e-deadline');
    await batch.createNamespacedJob({ namespace: ns, body: jobManifest('deadline', MISSING_IMAGE) });
    const [pod] = await waitForJobPods(core, ns, 'deadline');
    await setImagePullStuck(core, ns, podName(pod!), {
      since: new Date(Date.now() - 60_000),
      stuck: [{ container: 'main', reason: 'ImagePullBackOff', message: BACKOFF_MESSAGE }],
    });
    const started = await waitFor(
      async () => (await batch.readNamespacedJob({ name: 'deadline', namespace: ns })).status?.startTime,
      30_000,
      'Job status.startTime',
    );
    // Deadline = startTime + 1 s: make sure that is in the past (startTime has 1 s resolution).
    await waitFor(() => Date.now() > started.getTime() + 2_000, 5_000, 'startTime + 2s');

    const t0 = Date.now();
    const patched = await batch.patchNamespacedJob(
      { name: 'deadline', namespace: ns, body: { spec: { activeDeadlineSeconds: 1 } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    assert.equal(patched.spec?.activeDeadlineSeconds, 1);

    const failed = await waitForJobCondition(ns, 'deadline', 'Failed');
    t.diagnostic(`Failed/DeadlineExceeded after ${Date.now() - t0} ms`);
    assert.equal(jobCondition(failed, 'Failed')?.reason, 'DeadlineExceeded');
    await waitFor(() => podGone(ns, podName(pod!)), CONTROLLER_TIMEOUT, 'the Job pod to be removed');
  });
});

describe('podFailurePolicy', { timeout: TEST_TIMEOUT }, () => {
  it('fails the Job with PodFailurePolicy when a pod with the FailJob condition is deleted', async (t) => {
    const ns = await namespace('e2e-pfp');
    await batch.createNamespacedJob({
      namespace: ns,
      body: jobManifest('pfp', MISSING_IMAGE, {
        backoffLimit: 6,
        podFailurePolicy: {
          rules: [{ action: 'FailJob', onPodConditions: [{ type: 'ImagePullStuck', status: 'True' }] }],
        },
      }),
    });
    const [pod] = await waitForJobPods(core, ns, 'pfp');
    const name = podName(pod!);
    await setImagePullStuck(core, ns, name, {
      since: new Date(Date.now() - 60_000),
      stuck: [{ container: 'main', reason: 'ImagePullBackOff', message: BACKOFF_MESSAGE }],
    });

    const t0 = Date.now();
    const withCond = await addPodCondition(core, ns, name, {
      type: 'ImagePullStuck',
      status: 'True',
      reason: 'ImagePullBackOff',
      message: 'stuck pulling its image',
    });
    const types = withCond.status?.conditions?.map((c) => c.type) ?? [];
    assert.ok(types.includes('ImagePullStuck'), `custom condition kept next to ${types.join(',')}`);
    assert.ok(types.includes('Initialized'), 'kubelet conditions kept');
    await core.deleteNamespacedPod({ name, namespace: ns });

    // Nothing runs the pod, so nothing but podgc moves the deleted, unscheduled pod to Failed
    // (a kubelet would, for a scheduled pod). Watch for that phase on the way.
    let sawFailedPhase = false;
    const failed = await waitFor(
      async () => {
        const p = await core.readNamespacedPod({ name, namespace: ns }).catch(() => undefined);
        if (p?.status?.phase === 'Failed') sawFailedPhase = true;
        const job = await batch.readNamespacedJob({ name: 'pfp', namespace: ns });
        return jobCondition(job, 'Failed') ? job : undefined;
      },
      CONTROLLER_TIMEOUT,
      'Job pfp Failed',
      500,
    );
    t.diagnostic(`Failed/PodFailurePolicy after ${Date.now() - t0} ms (saw pod phase Failed: ${sawFailedPhase})`);
    const cond = jobCondition(failed, 'Failed');
    assert.equal(cond?.reason, 'PodFailurePolicy');
    assert.match(cond?.message ?? '', /ImagePullStuck/);
    assert.equal(failed.status?.failed, 1);
    await waitFor(() => podGone(ns, name), CONTROLLER_TIMEOUT, 'the failed pod to be removed');
    // No replacement pod: the Job failed instead of retrying (backoffLimit 6 notwithstanding).
    const left = await core.listNamespacedPod({ namespace: ns });
    assert.equal(left.items.length, 0);
  });
});

describe('TokenRequest and RBAC', { timeout: TEST_TIMEOUT }, () => {
  it('denies a ServiceAccount token without a binding and allows it with a ClusterRoleBinding', async () => {
    const ns = await namespace('e2e-rbac');
    await core.createNamespacedServiceAccount({ namespace: ns, body: { metadata: { name: 'sweeper' } } });
    const tr = await core.createNamespacedServiceAccountToken({
      name: 'sweeper',
      namespace: ns,
      body: { spec: { audiences: [], expirationSeconds: 3600 } },
    });
    const token = tr.status?.token;
    assert.ok(token, 'TokenRequest returned a token');

    const admin = env.kc.getCurrentCluster();
    assert.ok(admin);
    const kc = new KubeConfig();
    kc.loadFromClusterAndUser(admin, { name: 'sweeper', token });
    const saCore = kc.makeApiClient(CoreV1Api);

    const denied = await saCore.listPodForAllNamespaces().then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(denied instanceof ApiException, `expected an ApiException, got ${String(denied)}`);
    assert.equal(denied.code, 403);
    assert.match(String(denied.body), new RegExp(`system:serviceaccount:${ns}:sweeper`));

    const roleName = `${ns}-pod-reader`;
    await rbac.createClusterRole({
      body: {
        metadata: { name: roleName },
        rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch'] }],
      },
    });
    env.onCleanup(async () => {
      await rbac.deleteClusterRole({ name: roleName }).catch(() => undefined);
    });
    await rbac.createClusterRoleBinding({
      body: {
        metadata: { name: roleName },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: roleName },
        subjects: [{ kind: 'ServiceAccount', name: 'sweeper', namespace: ns }],
      },
    });
    env.onCleanup(async () => {
      await rbac.deleteClusterRoleBinding({ name: roleName }).catch(() => undefined);
    });

    // The RBAC authorizer reads bindings from an informer: allow it a moment.
    const list = await waitFor(() => saCore.listPodForAllNamespaces(), 10_000, 'list pods with the binding');
    assert.ok(Array.isArray(list.items));
    // Still only what the role grants.
    const notAllowed = await saCore.listNamespacedSecret({ namespace: ns }).then(
      () => undefined,
      (e: unknown) => e,
    );
    assert.ok(notAllowed instanceof ApiException && notAllowed.code === 403, 'secrets stay forbidden');
  });
});

describe('garbage collector', { timeout: TEST_TIMEOUT }, () => {
  it('removes the pods of a Job deleted with propagationPolicy Background', async () => {
    const ns = await namespace('e2e-gc');
    await batch.createNamespacedJob({ namespace: ns, body: jobManifest('gc', MISSING_IMAGE, { parallelism: 2 }) });
    const pods = await waitForJobPods(core, ns, 'gc', { count: 2 });
    assert.equal(pods.length, 2);
    await batch.deleteNamespacedJob({ name: 'gc', namespace: ns, propagationPolicy: 'Background' });
    await waitFor(
      async () => (await batch.listNamespacedJob({ namespace: ns })).items.length === 0,
      CONTROLLER_TIMEOUT,
      'the Job to be gone',
    );
    await waitFor(
      async () => (await core.listNamespacedPod({ namespace: ns })).items.length === 0,
      CONTROLLER_TIMEOUT,
      'the Job pods to be removed by the garbage collector',
    );
  });
});
