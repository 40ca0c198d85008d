// Prints figures; asserts nothing. `npm run bench`.
// 1. judge(): time to plan N stuck Jobs.
// 2. observe: peak heap while paging through a large cluster's Pending pods (Table rows, then
//    full reads of the candidates), as a function of cluster size and of stuck pods (pages are
//    generated on demand, so the figure is the sweeper's own memory); then a cluster that is
//    mostly Running pods, a few of them restarted in place and stuck on their image.
import type { V1Pod } from '@kubernetes/client-node';
import { judge } from '../src/judge/judge.ts';
import type { KubeGateway } from '../src/kube/gateway.ts';
import type { JobView, StuckContainer } from '../src/model.ts';
import { observeStuckContainers } from '../src/observe/pods.ts';
import { parsePolicyYaml } from '../src/policy/parse.ts';
import { NOW, job, secondsAgo, stuckIn } from '../test/unit/judge-fixtures.ts';

function stuckJob(i: number): { job: JobView; stuck: StuckContainer } {
  const j = job(`job-${i}`, { namespace: `ns-${i % 50}`, uid: `job-uid-${i}` });
  const stuck = stuckIn(j, {
    pod: `pod-${i}`,
    podUid: `pod-uid-${i}`,
    image: `registry.example/img-${i % 40}:1`,
    pullClass: i % 3 === 0 ? 'transient' : 'permanent',
    stuckSince: secondsAgo(60 + (i % 5000)),
  });
  return { job: j, stuck };
}

function benchJudge(n: number): void {
  const parsed = parsePolicyYaml('rules:\n  - name: ci\n    namespaces: ["ns-1*"]\n    grace: { permanent: 30s }\n');
  if (!parsed.ok) throw new Error('policy');
  const pairs = Array.from({ length: n }, (_, i) => stuckJob(i));
  const stuck = pairs.map((p) => p.stuck);
  const jobs = new Map(pairs.map((p) => [p.stuck.podUid, p.job]));
  const started = process.hrtime.bigint();
  const plan = judge({
    stuck,
    ownerOf: (uid) => ({ kind: 'job', job: jobs.get(uid)! }),
    namespaceLabels: new Map(),
    policy: parsed.policy,
    now: NOW,
  });
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  const fail = plan.decisions.filter((d) => d.plan === 'fail').length;
  console.log(`judge: ${n} stuck Jobs planned in ${ms.toFixed(1)} ms (${fail} to fail, ${plan.decisions.length - fail} other)`);
}

function pod(i: number, stuck: boolean, phase = 'Pending'): V1Pod {
  const restarted = phase === 'Running' ? { restartCount: 0, lastState: { terminated: { exitCode: 1, finishedAt: NOW } } } : {};
  return {
    metadata: {
      name: `pod-${i}`,
      namespace: `ns-${i % 50}`,
      uid: `${phase}-uid-${i}`,
      creationTimestamp: NOW,
      ownerReferences: [{ apiVersion: 'batch/v1', kind: 'Job', name: `job-${i}`, uid: `job-uid-${i}`, controller: true }],
      labels: { app: 'bench', 'batch.kubernetes.io/job-name': `job-${i}` },
    },
    spec: { containers: [{ name: 'main', image: `registry.example/img-${i % 40}:1` }] },
    status: {
      phase,
      startTime: NOW,
      conditions: [
        { type: 'PodReadyToStartContainers', status: 'True', lastTransitionTime: NOW },
        { type: 'Initialized', status: 'True', lastTransitionTime: NOW },
      ],
      containerStatuses: [
        {
          name: 'main',
          image: `registry.example/img-${i % 40}:1`,
          imageID: '',
          ready: false,
          restartCount: 0,
          ...restarted,
          state: stuck
            ? {
                waiting: {
                  reason: 'ImagePullBackOff',
                  message: `Back-off pulling image "registry.example/img-${i % 40}:1": ErrImagePull: not found`,
                },
              }
            : { waiting: { reason: 'ContainerCreating' } },
        },
      ],
    },
  };
}

interface Phase {
  /** Pods of this phase, over 50 namespaces. */
  total: number;
  /** Every stuckEvery-th is stuck (STATUS ImagePullBackOff) and can be read in full. */
  stuckEvery: number;
  /** STATUS of the others. */
  status: string;
  prefix: string;
}

/**
 * Serves `pending` Pending pods and `running` Running pods (by the list's field selector) over 50
 * namespaces as Table rows, in pages built on demand.
 */
function pagedGateway(pending: number, stuckEvery: number, running = 0, runningStuckEvery = 1000): KubeGateway {
  const notUsed = (): never => {
    throw new Error('not used by observe');
  };
  const namespaces = Array.from({ length: 50 }, (_, n) => `ns-${n}`);
  const phases: Record<string, Phase> = {
    Pending: { total: pending, stuckEvery, status: 'Pending', prefix: 'pod' },
    Running: { total: running, stuckEvery: runningStuckEvery, status: 'Running', prefix: 'run' },
  };
  const phaseOf = (fieldSelector: string | undefined): Phase => (fieldSelector?.includes('Running') ? phases.Running! : phases.Pending!);
  const rowOf = (p: Phase, namespace: string, i: number) => ({
    namespace,
    name: `${p.prefix}-${i}`,
    status: i % p.stuckEvery === 0 ? 'ImagePullBackOff' : p.status,
  });
  return {
    async listNamespaceNames() {
      return { items: namespaces, continueToken: undefined };
    },
    async listPodRows({ namespace, fieldSelector, limit, continueToken }) {
      const p = phaseOf(fieldSelector);
      const n = Number(namespace.slice(3));
      const perNamespace = Math.max(0, Math.ceil((p.total - n) / 50));
      const start = Number(continueToken ?? 0);
      const end = Math.min(perNamespace, start + limit);
      const rows = Array.from({ length: end - start }, (_, k) => rowOf(p, namespace, (start + k) * 50 + n));
      return { items: rows, continueToken: end < perNamespace ? String(end) : undefined };
    },
    async listAllPodRows({ fieldSelector, limit, continueToken }) {
      const p = phaseOf(fieldSelector);
      const start = Number(continueToken ?? 0);
      const end = Math.min(p.total, start + limit);
      const rows = Array.from({ length: end - start }, (_, k) => rowOf(p, `ns-${(start + k) % 50}`, start + k));
      return { items: rows, continueToken: end < p.total ? String(end) : undefined };
    },
    async readPod(_namespace, name) {
      const [prefix, number] = name.split('-');
      const i = Number(number);
      const p = prefix === 'run' ? phases.Running! : phases.Pending!;
      return pod(i, i % p.stuckEvery === 0, prefix === 'run' ? 'Running' : 'Pending');
    },
    // The full LIST a namespace's candidates are read by when they are many (observe/pods.ts).
    async listPods({ namespace, fieldSelector, limit, continueToken }) {
      const p = phaseOf(fieldSelector);
      const n = Number(namespace!.slice(3));
      const perNamespace = Math.max(0, Math.ceil((p.total - n) / 50));
      const start = Number(continueToken ?? 0);
      const end = Math.min(perNamespace, start + (limit ?? perNamespace));
      const items = Array.from({ length: end - start }, (_, k) => {
        const i = (start + k) * 50 + n;
        return pod(i, i % p.stuckEvery === 0, p === phases.Running ? 'Running' : 'Pending');
      });
      return { items, continueToken: end < perNamespace ? String(end) : undefined };
    },
    listJobs: notUsed,
    readJob: notUsed,
    jsonPatchJob: notUsed,
    readNamespace: notUsed,
    readConfigMap: notUsed,
    mergePatchJob: notUsed,
    patchPodStatus: notUsed,
    patchJobStatus: notUsed,
    deletePod: notUsed,
    evictPod: notUsed,
    readServiceAccount: notUsed,
    readSecretMetadata: notUsed,
    createEvent: notUsed,
    readCronJob: notUsed,
    mergePatchCronJob: notUsed,
    readJobSet: notUsed,
    mergePatchJobSet: notUsed,
    mergePatchPod: notUsed,
    lastServerDate: notUsed,
    readServerVersion: notUsed,
    serverDryRun: notUsed,
  };
}

async function benchObserve(total: number, stuckEvery: number, walkNamespacesUpTo?: number, running = 0): Promise<void> {
  global.gc?.();
  const base = process.memoryUsage().heapUsed;
  let peak = base;
  const sampler = setInterval(() => (peak = Math.max(peak, process.memoryUsage().heapUsed)), 5);
  const started = process.hrtime.bigint();
  const result = await observeStuckContainers(pagedGateway(total, stuckEvery, running), {
    namespaces: [],
    pageSize: 500,
    walkNamespacesUpTo,
  });
  peak = Math.max(peak, process.memoryUsage().heapUsed);
  clearInterval(sampler);
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  console.log(
    `observe${walkNamespacesUpTo === 0 ? ' (cluster-wide)' : ' (by namespace)'}: ${total} pending pods${running ? ` and ${running} running` : ''} ` +
      `(${result.candidates} candidates, ${result.stuck.length} stuck) in ${result.pages} pages: ${ms.toFixed(0)} ms, ` +
      `${Math.round((total + running) / (ms / 1000))} pods/s, peak heap +${((peak - base) / 1048576).toFixed(1)} MiB`,
  );
}

console.log(`node ${process.version}, ${new Date().toISOString()}`);
for (const n of [1_000, 10_000, 50_000]) benchJudge(n);
for (const [total, every] of [
  [20_000, 100],
  [100_000, 100],
  [200_000, 100],
  [200_000, 10],
] as const) {
  await benchObserve(total, every);
  await benchObserve(total, every, 0);
}
// Mostly Running: 150,000 pods, 135,000 of them Running (every 1,000th restarted in place and stuck).
await benchObserve(15_000, 100, undefined, 135_000);
await benchObserve(15_000, 100, 0, 135_000);
