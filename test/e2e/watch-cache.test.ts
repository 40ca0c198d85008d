// The reflector of `run --watch` (src/watch/reflector.ts) against the real API server with its
// watch cache on, as every production cluster runs it: the cacher's bookmarks move a quiet watch's
// resourceVersion on, and a watch resumed from a resourceVersion the cache no longer holds gets the
// cacher's own 410 ("too old resource version") and lists again, missing nothing. A private control
// plane, so that no other file's pods fill or grow the cache's history.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { readFileSync } from 'node:fs';
import {
  CoreV1Api,
  KubernetesObjectApi,
  PatchStrategy,
  setHeaderOptions,
  type KubernetesObject,
  type V1Pod,
} from '@kubernetes/client-node';
import { parse } from 'yaml';
import { createWatchGateway, podCollection, type WatchGateway } from '../../src/kube/watch.ts';
import { PENDING_PODS } from '../../src/observe/pods.ts';
import { abortableSleep } from '../../src/run/scheduler.ts';
import { reflect, type ReflectorHandler, type RestartReason } from '../../src/watch/reflector.ts';
import { startCluster, type Cluster } from '../support/cluster.ts';
import { createNamespace } from '../support/fixtures.ts';
import { waitFor } from '../support/kubelet.ts';

let cluster: Cluster;
before(async () => {
  cluster = await startCluster();
});
after(async () => {
  await cluster?.stop();
});

const pod = (name: string): V1Pod => ({
  metadata: { name },
  spec: { containers: [{ name: 'main', image: 'registry.invalid/app:1' }] },
});

/** The names the reflector holds, and how its watches went. */
function recorder() {
  const names = new Set<string>();
  const restarts: { reason: RestartReason; error?: string }[] = [];
  const watchedFrom: string[] = [];
  let listPasses = 0;
  const handler: ReflectorHandler<V1Pod> = {
    listStarted: () => (listPasses += 1),
    listed: (p) => names.add(p.metadata!.name!),
    listEnded: () => undefined,
    event: (type, p) => (type === 'DELETED' ? names.delete(p.metadata!.name!) : names.add(p.metadata!.name!)),
  };
  return {
    names,
    restarts,
    watchedFrom,
    handler,
    lists: () => listPasses,
    options: {
      sleep: abortableSleep,
      onRestart: (_scope: string, reason: RestartReason, error?: string) => restarts.push({ reason, error }),
      onWatch: (rv: string) => watchedFrom.push(rv),
    },
  };
}

describe('the FlowSchema of docs/deployment.md', () => {
  it('is one the API server accepts, at the leader-election priority level', { timeout: 60_000 }, async () => {
    const doc = readFileSync(new URL('../../docs/deployment.md', import.meta.url), 'utf8');
    const yaml = /```yaml\n(apiVersion: flowcontrol[\s\S]*?)```/.exec(doc)?.[1];
    assert.ok(yaml, 'the FlowSchema is in docs/deployment.md');
    const flowSchema = parse(yaml) as { metadata: { name: string } };
    const api = KubernetesObjectApi.makeApiClient(cluster.kubeConfig);
    await api.create(flowSchema as KubernetesObject);
    const read = (await api.read({ apiVersion: 'flowcontrol.apiserver.k8s.io/v1', kind: 'FlowSchema', metadata: flowSchema.metadata })) as {
      spec?: { priorityLevelConfiguration?: { name?: string } };
    };
    assert.equal(read.spec?.priorityLevelConfiguration?.name, 'leader-election');
  });
});

describe('run --watch against the watch cache', () => {
  it("resumes a quiet watch from the cacher's bookmark, not from the list", { timeout: 120_000 }, async () => {
    const kc = cluster.kubeConfig;
    const core = kc.makeApiClient(CoreV1Api);
    const quiet = (await createNamespace(kc, 'watch-bookmark')).name;
    const busy = (await createNamespace(kc, 'watch-bookmark-busy')).name;
    const r = recorder();
    const stop = new AbortController();
    // The server ends each watch after 10-12 s; the cacher sends its bookmark 2 s before.
    const running = reflect(
      createWatchGateway(kc),
      podCollection(quiet, PENDING_PODS),
      r.handler,
      { ...r.options, watchTimeoutSeconds: 10 },
      stop.signal,
    );
    try {
      await waitFor(() => r.watchedFrom.length >= 1, 30_000, 'the first watch');
      // Pods change elsewhere: the pods' resourceVersion moves on, while the watched namespace stays quiet.
      for (let i = 0; i < 3; i += 1) await core.createNamespacedPod({ namespace: busy, body: pod(`elsewhere-${i}`) });
      await waitFor(() => r.watchedFrom.length >= 2, 60_000, 'the watch resumed after the server ended it');
      assert.equal(r.lists(), 1, 'resumed, not listed again');
      assert.deepEqual(
        r.restarts.map((x) => x.reason),
        ['timeout'],
      );
      assert.notEqual(r.watchedFrom[1], r.watchedFrom[0], 'the bookmark moved the resourceVersion past the list');
      assert.ok(Number(r.watchedFrom[1]) > Number(r.watchedFrom[0]), `${r.watchedFrom[1]} after ${r.watchedFrom[0]}`);
    } finally {
      stop.abort();
      await running;
    }
  });

  it(
    "lists again on the cacher's 410 for a resourceVersion its history no longer holds, and misses nothing",
    { timeout: 240_000 },
    async () => {
      const kc = cluster.kubeConfig;
      const core = kc.makeApiClient(CoreV1Api);
      const ns = (await createNamespace(kc, 'watch-expired')).name;
      const churn = (await createNamespace(kc, 'watch-expired-churn')).name;
      await core.createNamespacedPod({ namespace: ns, body: pod('before') });
      const real = createWatchGateway(kc);
      // The watch is held back (a connection that is down) until the cache's history has moved past its resourceVersion.
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      let first = true;
      const gateway: WatchGateway = {
        ...real,
        list: (c, o) => real.list(c, o),
        async watch(c, o, e) {
          if (first) {
            first = false;
            await held;
          }
          return real.watch(c, o, e);
        },
      };
      const r = recorder();
      const stop = new AbortController();
      const running = reflect(gateway, podCollection(ns, PENDING_PODS), r.handler, r.options, stop.signal);
      try {
        await waitFor(() => r.names.has('before'), 30_000, 'the first list');
        await core.createNamespacedPod({ namespace: ns, body: pod('while-down') });
        // The history keeps at least 75 s of events (eventFreshDuration) and grows only while its
        // oldest event is younger: after that, a few hundred pod events push the old ones out.
        await new Promise((resolve) => setTimeout(resolve, 80_000));
        await core.createNamespacedPod({ namespace: churn, body: pod('churn') });
        for (let i = 0; i < 300; i += 1) {
          await core.patchNamespacedPod(
            { namespace: churn, name: 'churn', body: { metadata: { labels: { n: String(i) } } } },
            setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
          );
        }
        release();
        await waitFor(() => r.restarts.some((x) => x.reason === 'expired'), 30_000, "the cacher's 410");
        const expired = r.restarts.find((x) => x.reason === 'expired')!;
        assert.match(expired.error ?? '', /410|expired/);
        await waitFor(() => r.names.has('while-down'), 30_000, 'the pod created while the watch was down, from the new list');
        assert.equal(r.lists(), 2);
      } finally {
        stop.abort();
        release();
        await running;
      }
    },
  );
});
