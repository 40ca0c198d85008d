// Object creation for bench/scale.bench.ts: many pods quickly (raw keep-alive POSTs, 32 in
// flight), stuck Jobs through the real Job controller, pod status through test/support/kubelet.ts.
import * as https from 'node:https';
import { BatchV1Api, CoreV1Api, type KubeConfig, type V1Pod } from '@kubernetes/client-node';
import { mapBounded } from '../src/concurrency.ts';
import { jobManifest } from '../test/support/fixtures.ts';
import { setImagePullStuck, setPodRunning, waitForJobPods } from '../test/support/kubelet.ts';
import { MISSING_IMAGE, NOT_FOUND_MESSAGE } from '../test/support/sweeper.ts';

export interface Raw {
  request(method: string, path: string, body?: unknown, contentType?: string): Promise<{ status: number; body: string }>;
  close(): void;
}

/** A plain keep-alive client with the admin token, for setup and metrics only. */
export function rawClient(kc: KubeConfig): Raw {
  const cluster = kc.getCurrentCluster()!;
  const user = kc.getCurrentUser()!;
  const ca = Buffer.from(cluster.caData ?? '', 'base64');
  const agent = new https.Agent({ keepAlive: true, maxSockets: 32, ca });
  const request: Raw['request'] = (method, path, body, contentType = 'application/json') => {
    const data = body === undefined ? undefined : JSON.stringify(body);
    return new Promise((resolve, reject) => {
      const req = https.request(
        new URL(cluster.server + path),
        {
          method,
          agent,
          headers: {
            Authorization: `Bearer ${user.token}`,
            Accept: 'application/json',
            ...(data ? { 'Content-Type': contentType, 'Content-Length': Buffer.byteLength(data) } : {}),
          },
        },
        (res) => {
          let text = '';
          res.setEncoding('utf8');
          res.on('data', (d: string) => (text += d));
          res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text }));
        },
      );
      // A kept-alive socket the server closed while idle: send once more on a fresh one.
      req.on('error', (error: NodeJS.ErrnoException) => {
        if (req.reusedSocket && error.code === 'ECONNRESET') request(method, path, body, contentType).then(resolve, reject);
        else reject(error);
      });
      req.end(data);
    });
  };
  return { request, close: () => agent.destroy() };
}

/** A pod as the Job controller would make it (labels, one container with resources), not owned by anything. */
function plainPod(name: string, i: number, restartPolicy: string): V1Pod {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name,
      labels: { app: 'bench', 'batch.kubernetes.io/job-name': name, 'job-name': name, shard: String(i % 16) },
      annotations: { 'bench/owner': 'scale-bench' },
    },
    spec: {
      restartPolicy,
      containers: [
        {
          name: 'main',
          image: `registry.example/batch/worker:${i % 40}`,
          command: ['/bin/worker', '--task', String(i)],
          env: [
            { name: 'TASK_ID', value: String(i) },
            { name: 'QUEUE', value: 'default' },
          ],
          resources: { requests: { cpu: '100m', memory: '64Mi' }, limits: { memory: '128Mi' } },
        },
      ],
    },
  };
}

/** Creates `count` plain Pending pods spread over `namespaces`; returns their names by namespace. */
export async function createPods(
  raw: Raw,
  namespaces: string[],
  count: number,
  prefix: string,
  restartPolicy = 'Never',
): Promise<{ namespace: string; name: string }[]> {
  const items = Array.from({ length: count }, (_, i) => ({ namespace: namespaces[i % namespaces.length]!, name: `${prefix}-${i}`, i }));
  await mapBounded(items, 32, async ({ namespace, name, i }) => {
    for (let attempt = 0; ; attempt++) {
      const res = await raw.request('POST', `/api/v1/namespaces/${namespace}/pods`, plainPod(name, i, restartPolicy));
      if (res.status === 201 || res.status === 409) return;
      if (attempt < 5 && (res.status === 429 || res.status >= 500)) continue;
      throw new Error(`create pod ${namespace}/${name}: HTTP ${res.status} ${res.body.slice(0, 200)}`);
    }
  });
  return items.map(({ namespace, name }) => ({ namespace, name }));
}

/** Marks pods Running the way a kubelet reports it. */
export async function markRunning(kc: KubeConfig, pods: { namespace: string; name: string }[]): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  await mapBounded(pods, 16, ({ namespace, name }) => setPodRunning(core, namespace, name, { since: new Date(Date.now() - 600_000) }));
}

/**
 * Creates `count` Jobs (one pod each, through the Job controller) and puts each pod in
 * ImagePullBackOff (image not found) since an hour ago. Returns the Jobs.
 */
export async function createStuckJobs(
  kc: KubeConfig,
  namespaces: string[],
  count: number,
  prefix: string,
): Promise<{ namespace: string; name: string }[]> {
  const core = kc.makeApiClient(CoreV1Api);
  const batch = kc.makeApiClient(BatchV1Api);
  const jobs = Array.from({ length: count }, (_, i) => ({ namespace: namespaces[i % namespaces.length]!, name: `${prefix}-${i}` }));
  await mapBounded(jobs, 16, ({ namespace, name }) => batch.createNamespacedJob({ namespace, body: jobManifest(name, MISSING_IMAGE) }));
  await mapBounded(jobs, 16, async ({ namespace, name }) => {
    const [pod] = await waitForJobPods(core, namespace, name, { timeoutMs: 600_000 });
    await setImagePullStuck(core, namespace, pod!.metadata!.name!, {
      since: new Date(Date.now() - 3600_000),
      stuck: [{ container: 'main', reason: 'ImagePullBackOff', message: NOT_FOUND_MESSAGE }],
    });
  });
  return jobs;
}
