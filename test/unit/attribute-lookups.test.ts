// The attribute stage's own control flow: which Jobs are listed and which read, and how many
// requests are in flight. What the API server returns is proven in test/e2e; here it is scripted.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Job } from '@kubernetes/client-node';
import { attributeToJobs, SharedJobLists } from '../../src/attribute/attribute.ts';
import type { StuckContainer } from '../../src/model.ts';
import { scriptedGateway } from '../support/scripted-gateway.ts';

const job = (namespace: string, name: string): V1Job => ({
  metadata: { namespace, name, uid: `uid-${namespace}-${name}`, resourceVersion: '1' },
  spec: { template: { spec: { containers: [{ name: 'main' }] } } },
});

const stuckOf = (namespace: string, name: string): StuckContainer => ({
  namespace,
  pod: `${name}-pod`,
  podUid: `pod-${namespace}-${name}`,
  podResourceVersion: '1',
  container: 'main',
  containerKind: 'regular',
  image: 'x:1',
  reason: 'ImagePullBackOff',
  message: 'not found',
  pullClass: 'permanent',
  stuckSince: new Date('2026-11-29T10:00:00Z'),
  controller: { apiVersion: 'batch/v1', kind: 'Job', name, uid: `uid-${namespace}-${name}`, controller: true },
});

/** Jobs `per` a namespace, answered a tick later, two pages a list; counts what is in flight. */
function scripted(namespaces: Record<string, number>) {
  const jobs = new Map(Object.entries(namespaces).map(([ns, n]) => [ns, Array.from({ length: n }, (_, i) => job(ns, `j${i}`))]));
  const seen = { lists: 0, requests: 0, maxLists: 0, maxRequests: 0, listed: [] as string[], read: [] as string[] };
  const answer = async <T>(isList: boolean, value: () => T): Promise<T> => {
    seen.requests += 1;
    if (isList) seen.lists += 1;
    seen.maxRequests = Math.max(seen.maxRequests, seen.requests);
    seen.maxLists = Math.max(seen.maxLists, seen.lists);
    await new Promise((resolve) => setTimeout(resolve, 2));
    seen.requests -= 1;
    if (isList) seen.lists -= 1;
    return value();
  };
  const { gateway } = scriptedGateway(
    {
      listJobs: [
        (opts: { namespace: string; continueToken?: string }) =>
          answer(true, () => {
            const all = jobs.get(opts.namespace) ?? [];
            const half = Math.ceil(all.length / 2);
            if (opts.continueToken === undefined) seen.listed.push(opts.namespace);
            return opts.continueToken === undefined
              ? { items: all.slice(0, half), continueToken: 'next' }
              : { items: all.slice(half), continueToken: undefined };
          }),
      ],
      readJob: [
        (namespace: string, name: string) =>
          answer(false, () => {
            seen.read.push(`${namespace}/${name}`);
            return job(namespace, name);
          }),
      ],
    },
    { repeatLast: true },
  );
  const stuck = [...jobs].flatMap(([ns, list]) => list.map((j) => stuckOf(ns, j.metadata!.name!)));
  return { gateway, seen, stuck };
}

describe('attributeToJobs', () => {
  it('lists namespaces of many Jobs at most listConcurrency at a time while single reads go on beside them', async () => {
    const { gateway, seen, stuck } = scripted({ a: 12, b: 12, c: 12, d: 12, e: 2, f: 2, g: 2 });
    const attribution = await attributeToJobs(gateway, stuck, { concurrency: 4, listConcurrency: 2, listThreshold: 10 });
    assert.deepEqual([...seen.listed].sort(), ['a', 'b', 'c', 'd']);
    assert.equal(seen.read.length, 6);
    assert.equal(seen.maxLists, 2);
    assert.equal(seen.maxRequests, 4);
    assert.deepEqual(attribution.errors, []);
    for (const c of stuck) {
      const owner = attribution.ownerOf(c.podUid);
      assert.equal(owner.kind, 'job', `${c.namespace}/${c.pod}`);
      if (owner.kind === 'job') assert.equal(owner.job.name, c.controller!.name);
    }
  });

  it('never has more requests in flight than concurrency, even when it is below listConcurrency', async () => {
    const { gateway, seen, stuck } = scripted({ a: 10, b: 10, c: 10, d: 1, e: 1 });
    await attributeToJobs(gateway, stuck, { concurrency: 1, listConcurrency: 2, listThreshold: 10 });
    assert.equal(seen.maxRequests, 1);
    assert.deepEqual([...seen.listed].sort(), ['a', 'b', 'c']);
    assert.deepEqual(seen.read.sort(), ['d/j0', 'e/j0']);
  });

  it('a sweep in parts lists each namespace once, by what the whole wants, and hands each part its own Jobs', async () => {
    const { gateway, seen, stuck } = scripted({ a: 12, b: 4 });
    // Two parts, each with 6 of a's Jobs and 2 of b's: below the threshold in a part, above it (a) in the whole.
    const parts = [stuck.filter((_, i) => i % 2 === 0), stuck.filter((_, i) => i % 2 === 1)];
    const wanted = new Map<string, Set<string>>();
    for (const c of stuck) wanted.set(c.namespace, (wanted.get(c.namespace) ?? new Set()).add(c.controller!.name));
    const shared = new SharedJobLists(wanted);
    const options = { concurrency: 4, listConcurrency: 2, listThreshold: 10, shared };
    for (const part of parts) {
      const attribution = await attributeToJobs(gateway, part, options);
      assert.deepEqual(attribution.errors, []);
      for (const c of part) assert.equal(attribution.ownerOf(c.podUid).kind, 'job', `${c.namespace}/${c.pod}`);
    }
    assert.deepEqual(seen.listed, ['a'], "a listed once, by the first part; b's Jobs read");
    assert.deepEqual(seen.read.sort(), ['b/j0', 'b/j1', 'b/j2', 'b/j3']);
  });

  it('a list that failed fails every part that wants it, without listing again', async () => {
    const { gateway, seen, stuck } = scripted({ a: 12 });
    let lists = 0;
    const failing = {
      ...gateway,
      listJobs: () => (lists++, Promise.reject(Object.assign(new Error('connection reset'), { code: 'ECONNRESET' }))),
    };
    const shared = new SharedJobLists(new Map([['a', new Set(stuck.map((c) => c.controller!.name))]]));
    const options = { concurrency: 4, listConcurrency: 2, listThreshold: 10, shared };
    const first = await attributeToJobs(failing, stuck.slice(0, 6), options);
    const byFirst = lists;
    const second = await attributeToJobs(failing, stuck.slice(6), options);
    assert.ok(byFirst >= 1);
    assert.equal(lists, byFirst, 'the second part asks nothing');
    assert.equal(first.errors.length, 6);
    assert.equal(second.errors.length, 6);
    assert.match(second.errors[0]!.message, /connection reset/);
    assert.equal(seen.read.length, 0);
  });
});
