// Lean observation against the real API server: the Table rows' STATUS column picks the pods to
// read in full, and what it finds is exactly what classifying every full Pending pod finds.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CoreV1Api, type KubeConfig, type V1Container, type V1Pod } from '@kubernetes/client-node';
import { findStuckContainers } from '../../src/classify/index.ts';
import { createGateway } from '../../src/kube/gateway.ts';
import { withRetries } from '../../src/kube/retrying.ts';
import type { StuckContainer } from '../../src/model.ts';
import type { KubeGateway } from '../../src/kube/gateway.ts';
import { observeStuckContainers, RUNNING_PODS, WALK_NAMESPACES_UP_TO } from '../../src/observe/pods.ts';
import { mapBounded } from '../../src/concurrency.ts';
import { useTestCluster } from '../support/hooks.ts';
import { setImagePullStuck, setInitRunning, setPodRunning, type WaitingOnImage } from '../support/kubelet.ts';
import { createStuckJob, MISSING_IMAGE, NOT_FOUND_MESSAGE, policyFile, runSweep } from '../support/sweeper.ts';

const TIMEOUT = { timeout: 180_000 };
let kc: KubeConfig;
const env = useTestCluster((hooks) => {
  kc = hooks.kc;
});

const container = (name: string, extra: Partial<V1Container> = {}): V1Container => ({
  name,
  image: MISSING_IMAGE,
  command: ['true'],
  ...extra,
});
const NO_MESSAGE = new Set(['ContainerCreating', 'PodInitializing']);
const pull = (c: string, reason = 'ImagePullBackOff', init = false): WaitingOnImage => ({
  container: c,
  reason,
  message: NO_MESSAGE.has(reason) ? '' : NOT_FOUND_MESSAGE,
  init,
});

/**
 * Each pod: its spec and the kubelet-written state (none: unscheduled; running; init-running: its
 * first init container runs; or waiting containers, `PodInitializing` as the real node writes a
 * hung pull of an init container, a sidecar or, after init, a regular container).
 */
const PODS: {
  name: string;
  init?: V1Container[];
  containers: V1Container[];
  state: 'none' | 'running' | 'init-running' | WaitingOnImage[];
}[] = [
  { name: 'unscheduled', containers: [container('main')], state: 'none' },
  { name: 'running', containers: [container('main')], state: 'running' },
  { name: 'regular', containers: [container('main')], state: [pull('main')] },
  {
    name: 'second-behind-creating',
    containers: [container('a'), container('b')],
    state: [pull('a', 'ContainerCreating'), pull('b', 'ErrImagePull')],
  },
  { name: 'second-behind-running', containers: [container('a'), container('b')], state: [pull('b', 'ErrImagePull')] },
  { name: 'init', init: [container('setup')], containers: [container('main')], state: [pull('setup', 'ErrImagePull', true)] },
  {
    name: 'sidecar',
    init: [container('proxy', { restartPolicy: 'Always' })],
    containers: [container('main')],
    state: [pull('proxy', 'ImagePullBackOff', true)],
  },
  { name: 'creating', containers: [container('main')], state: [pull('main', 'ContainerCreating')] },
  { name: 'invalid-name', containers: [container('main')], state: [pull('main', 'InvalidImageName')] },
  { name: 'init-running', init: [container('setup'), container('more')], containers: [container('main')], state: 'init-running' },
  { name: 'init-stalled', init: [container('setup')], containers: [container('main')], state: [pull('setup', 'PodInitializing', true)] },
  {
    name: 'sidecar-stalled',
    init: [container('proxy', { restartPolicy: 'Always' })],
    containers: [container('main')],
    state: [pull('proxy', 'PodInitializing', true)],
  },
  { name: 'after-init-stalled', init: [container('setup')], containers: [container('main')], state: [pull('main', 'PodInitializing')] },
];

function key(c: StuckContainer): string {
  return JSON.stringify([
    c.namespace,
    c.pod,
    c.container,
    c.containerKind,
    c.reason,
    c.pullClass,
    c.stuckSince.getTime(),
    c.podUid,
    c.image,
    c.message,
  ]);
}

describe('lean observation (Table rows, then full reads of the candidates)', () => {
  it('finds exactly what classifying every full Pending pod finds, and reads only candidates', TIMEOUT, async () => {
    const ns = await env.namespace('observe');
    const core = kc.makeApiClient(CoreV1Api);
    const since = new Date(Date.now() - 3600_000);
    for (const p of PODS) {
      const body: V1Pod = {
        metadata: { name: p.name },
        spec: { restartPolicy: 'Never', containers: p.containers, ...(p.init ? { initContainers: p.init } : {}) },
      };
      await core.createNamespacedPod({ namespace: ns, body });
      if (p.state === 'running') await setPodRunning(core, ns, p.name);
      else if (p.state === 'init-running') await setInitRunning(core, ns, p.name, { since });
      else if (p.state !== 'none') await setImagePullStuck(core, ns, p.name, { since, stuck: p.state });
    }

    const full = await core.listNamespacedPod({ namespace: ns, fieldSelector: 'status.phase=Pending' });
    const expected = full.items
      .flatMap((pod) => findStuckContainers(pod))
      .map(key)
      .sort();
    assert.ok(expected.length >= 6, `the fixtures hold stuck containers (found ${expected.length})`);

    const gateway = withRetries(createGateway(kc));
    const reads: string[] = [];
    const counting = { ...gateway, readPod: (n: string, name: string) => (reads.push(name), gateway.readPod(n, name)) };
    // One GET per candidate (the namespace LIST is kept for when candidates are many).
    const scoped = await observeStuckContainers(counting, { namespaces: [ns], pageSize: 3, listThreshold: Number.POSITIVE_INFINITY });
    assert.deepEqual(scoped.stuck.map(key).sort(), expected);
    const stalled = scoped.stuck.filter((c) => c.pullClass === 'stalled').map((c) => [c.pod, c.container, c.containerKind, c.reason]);
    assert.deepEqual(stalled.sort(), [
      ['after-init-stalled', 'main', 'regular', 'PodInitializing'],
      ['creating', 'main', 'regular', 'ContainerCreating'],
      ['init-stalled', 'setup', 'init', 'PodInitializing'],
      ['second-behind-creating', 'a', 'regular', 'ContainerCreating'],
      ['sidecar-stalled', 'proxy', 'sidecar', 'PodInitializing'],
    ]);
    assert.equal(scoped.podsScanned, PODS.length - 1, 'every Pending pod listed');
    assert.deepEqual(
      reads.sort(),
      PODS.filter((p) => p.state !== 'none' && p.state !== 'running')
        .map((p) => p.name)
        .sort(),
      'only candidates read',
    );

    // The same candidates judged on one paged LIST of the namespace's Pending pods instead.
    const lists: string[] = [];
    const listing = {
      ...gateway,
      readPod: counting.readPod,
      listPods: (o: Parameters<typeof gateway.listPods>[0]) => (lists.push(o.namespace), gateway.listPods(o)),
    };
    reads.length = 0;
    const listed = await observeStuckContainers(listing, { namespaces: [ns], pageSize: 3, listThreshold: 1 });
    assert.deepEqual(listed.stuck.map(key).sort(), expected);
    assert.deepEqual(reads, [], 'no GET when the namespace LIST is used');
    assert.equal(lists.length, Math.ceil((PODS.length - 1) / 3), 'one LIST, paged 3 a page');

    const everywhere = await observeStuckContainers(gateway, { namespaces: [], pageSize: 500 });
    assert.deepEqual(
      everywhere.stuck
        .filter((c) => c.namespace === ns)
        .map(key)
        .sort(),
      expected,
    );
  });

  // A cluster of many namespaces, most of them empty: one cluster-wide list of rows (never a
  // request per namespace), and Namespace labels read only where something is stuck.
  it('across 200 namespaces: the same result from one cluster-wide list; labels read only where stuck', { timeout: 600_000 }, async () => {
    const core = kc.makeApiClient(CoreV1Api);
    const namespaces = await mapBounded(
      Array.from({ length: 200 }, (_, i) => i),
      16,
      (i) => env.namespace(`many-${i < 3 ? 'busy' : 'idle'}`, i < 2 ? { team: 'batch' } : {}),
    );
    const [batchA, batchB, other] = namespaces as [string, string, string];
    const since = new Date(Date.now() - 3600_000);
    for (const ns of [batchA, batchB, other]) {
      await createStuckJob(kc, ns, 'stuck', { stuckFor: 3600 });
      for (const p of PODS) {
        const body: V1Pod = {
          metadata: { name: p.name },
          spec: { restartPolicy: 'Never', containers: p.containers, ...(p.init ? { initContainers: p.init } : {}) },
        };
        await core.createNamespacedPod({ namespace: ns, body });
        if (p.state === 'running') await setPodRunning(core, ns, p.name);
        else if (p.state === 'init-running') await setInitRunning(core, ns, p.name, { since });
        else if (p.state !== 'none') await setImagePullStuck(core, ns, p.name, { since, stuck: p.state });
      }
    }
    const ours = new Set(namespaces);
    const full = await core.listPodForAllNamespaces({ fieldSelector: 'status.phase=Pending' });
    const expected = full.items
      .flatMap((pod) => findStuckContainers(pod))
      .filter((c) => ours.has(c.namespace))
      .map(key)
      .sort();
    assert.ok(expected.length >= 21, `the fixtures hold stuck containers (found ${expected.length})`);

    const calls: string[] = [];
    const gateway = withRetries(createGateway(kc));
    const counting: KubeGateway = {
      ...gateway,
      listNamespaceNames: (o) => (calls.push('namespaces'), gateway.listNamespaceNames(o)),
      listPodRows: (o) => (calls.push(`rows ${o.namespace}`), gateway.listPodRows(o)),
      listAllPodRows: (o) => (calls.push(o.fieldSelector === RUNNING_PODS ? 'running rows *' : 'rows *'), gateway.listAllPodRows(o)),
      readPod: (n, name) => (calls.push(`read ${n}`), gateway.readPod(n, name)),
      listPods: (o) => (calls.push(`list ${o.namespace}`), gateway.listPods(o)),
    };
    const everywhere = await observeStuckContainers(counting, { namespaces: [], pageSize: 50, listThreshold: Number.POSITIVE_INFINITY });
    assert.deepEqual(
      everywhere.stuck
        .filter((c) => ours.has(c.namespace))
        .map(key)
        .sort(),
      expected,
    );
    const rowPages = calls.filter((c) => c === 'rows *').length;
    assert.equal(calls.filter((c) => c === 'namespaces').length, 1, 'one page of namespace names, to learn they are many');
    assert.equal(calls.filter((c) => c.startsWith('rows ') && c !== 'rows *').length, 0, 'no list per namespace');
    assert.equal(rowPages, Math.ceil(everywhere.podsScanned / 50) || 1, 'the pages of one cluster-wide list');
    const runningPages = calls.filter((c) => c === 'running rows *').length;
    assert.equal(runningPages, Math.ceil((everywhere.runningPodsScanned ?? 0) / 50) || 1, 'and of one cluster-wide list of Running pods');
    const reads = calls.filter((c) => c.startsWith('read ') && ours.has(c.slice(5)));
    const candidatesPerNs = PODS.filter((p) => p.state !== 'none' && p.state !== 'running').length + 1;
    assert.equal(reads.length, 3 * candidatesPerNs, 'only candidates read, in their namespace');
    assert.ok(WALK_NAMESPACES_UP_TO < 200);

    // The same with namespaces walked one by one (the path of a cluster with few namespaces).
    const walked = await observeStuckContainers(gateway, { namespaces: [], pageSize: 50, walkNamespacesUpTo: 100_000 });
    assert.deepEqual(
      walked.stuck
        .filter((c) => ours.has(c.namespace))
        .map(key)
        .sort(),
      expected,
    );

    // A dry-run sweep with a namespaceSelector rule: labels are read only for namespaces with a stuck container.
    const labelReads: string[] = [];
    const plain = createGateway(kc);
    const policy = policyFile(
      'rules:\n  - name: batch\n    namespaceSelector: { matchLabels: { team: batch } }\n    grace: { permanent: 30s }\n',
    );
    const run = await runSweep(
      kc,
      { namespaces: [], policy, dryRun: true },
      { ...plain, readNamespace: (name) => (labelReads.push(name), plain.readNamespace(name)) },
    );
    const stuckNamespaces = new Set([...run.lines.map((l) => l.namespace), ...everywhere.stuck.map((c) => c.namespace)]);
    assert.deepEqual(
      labelReads.filter((n) => ours.has(n)).sort(),
      [batchA, batchB, other].sort(),
      'the three namespaces with stuck containers, nothing else of ours',
    );
    assert.ok(
      labelReads.every((n) => stuckNamespaces.has(n)),
      `labels read only where something is stuck: ${labelReads.join(', ')}`,
    );
    const stuckJob = (ns: string) => run.lines.find((l) => l.namespace === ns && l.job === 'stuck');
    assert.equal(stuckJob(batchA)?.rule, 'batch');
    assert.equal(stuckJob(batchB)?.rule, 'batch');
    assert.notEqual(stuckJob(other)?.rule, 'batch');
  });

  // The price of reading `Init:<i>/<n>` pods. Two namespaces of N Pending pods, one unscheduled
  // (STATUS Pending: listed, never read), one with an init container running (STATUS Init:0/1:
  // listed and read, by a GET each or, as a sweep does when they are many, one namespace LIST).
  it('measures the cost of reading Init:<i>/<n> pods', TIMEOUT, async () => {
    const N = 100;
    const core = kc.makeApiClient(CoreV1Api);
    const gateway = withRetries(createGateway(kc));
    const idle = await env.namespace('observe-idle');
    const init = await env.namespace('observe-init');
    const body = (name: string, withInit: boolean): V1Pod => ({
      metadata: { name },
      spec: { restartPolicy: 'Never', containers: [container('main')], ...(withInit ? { initContainers: [container('setup')] } : {}) },
    });
    const names = Array.from({ length: N }, (_, i) => `p${i}`);
    for (let i = 0; i < N; i += 20) {
      await Promise.all(
        names.slice(i, i + 20).map(async (n) => {
          await core.createNamespacedPod({ namespace: idle, body: body(n, false) });
          await core.createNamespacedPod({ namespace: init, body: body(n, true) });
          await setInitRunning(core, init, n);
        }),
      );
    }
    const timed = async (ns: string, listThreshold?: number): Promise<{ ms: number; candidates: number; stuck: number }> => {
      const runs: number[] = [];
      let last = { candidates: 0, stuck: 0 };
      for (let r = 0; r < 5; r++) {
        const t0 = performance.now();
        const o = await observeStuckContainers(gateway, { namespaces: [ns], pageSize: 500, listThreshold });
        runs.push(performance.now() - t0);
        last = { candidates: o.candidates, stuck: o.stuck.length };
      }
      return { ms: runs.sort((a, b) => a - b)[2]!, ...last };
    };
    const a = await timed(idle);
    const b = await timed(init, Number.POSITIVE_INFINITY);
    const c = await timed(init);
    process.stderr.write(
      `[observe] ${N} Pending pods, median of 5: unscheduled ${a.ms.toFixed(1)} ms (${a.candidates} read); ` +
        `init running, a GET each ${b.ms.toFixed(1)} ms (${b.candidates} read): ${((b.ms - a.ms) / N).toFixed(2)} ms a pod in Init:<i>/<n>; ` +
        `init running, one namespace LIST ${c.ms.toFixed(1)} ms\n`,
    );
    assert.equal(c.candidates, N);
    assert.equal(c.stuck, 0);
    assert.equal(a.candidates, 0);
    assert.equal(b.candidates, N);
    assert.equal(b.stuck, 0, 'a running init container is never stuck');
  });
});
