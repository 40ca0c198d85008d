// The pod cache of `run --watch` (src/watch/pod-cache.ts) fed the real kubelet's recorded pods: a
// status the kubelet rewrites in back-off is no change for the timers, a new class is; the stuck
// pods are indexed by Job; a relist forgets what it no longer holds.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { assessOutage } from '../../src/judge/outage.ts';
import { ANNOTATIONS } from '../../src/policy/annotations.ts';
import { DEFAULT_LIMITS } from '../../src/policy/defaults.ts';
import { PodCache } from '../../src/watch/pod-cache.ts';
import { REAL_NODE } from './real-node.ts';

const recorded = (id: string, reason: 'ErrImagePull' | 'ImagePullBackOff') => REAL_NODE.cases.find((c) => c.id === id)!.pods[reason]!;

function ofJob(pod: V1Pod, job: string, name = `${job}-pod`): V1Pod {
  const p = structuredClone(pod);
  p.metadata = {
    ...p.metadata,
    name,
    namespace: 'ci',
    uid: `uid-${name}`,
    ownerReferences: [{ apiVersion: 'batch/v1', kind: 'Job', name: job, uid: `job-${job}`, controller: true }],
  };
  return p;
}

describe('the pod cache', () => {
  it('reports a Job only when what its timer depends on changed, not the kubelet rewriting its back-off', () => {
    const changed: string[] = [];
    const cache = new PodCache((key) => changed.push(key));
    const h = cache.handler('*');
    h.listStarted();
    h.listed(ofJob(recorded('repo-missing', 'ErrImagePull'), 'a'));
    h.listEnded();
    assert.deepEqual(changed, ['job-a']);
    h.event('MODIFIED', ofJob(recorded('repo-missing', 'ImagePullBackOff'), 'a'));
    assert.deepEqual(changed, ['job-a'], 'ErrImagePull -> ImagePullBackOff, same class and time: no change');
    assert.equal(cache.podsOf('job-a')[0]!.stuck[0]!.reason, 'ImagePullBackOff', 'the newest words are kept');
    h.event('MODIFIED', ofJob(recorded('service-unavailable', 'ImagePullBackOff'), 'a'));
    assert.deepEqual(changed, ['job-a', 'job-a'], 'another class: a change');
    const graced = ofJob(recorded('service-unavailable', 'ImagePullBackOff'), 'a');
    graced.metadata!.annotations = { ...graced.metadata!.annotations, [ANNOTATIONS.grace]: '5m' };
    h.event('MODIFIED', graced);
    assert.deepEqual(changed, ['job-a', 'job-a', 'job-a'], "the pod's own grace: a change");
    h.event('MODIFIED', structuredClone(graced));
    assert.deepEqual(changed, ['job-a', 'job-a', 'job-a'], 'the same annotations again: no change');
    h.event('DELETED', graced);
    assert.deepEqual(changed, ['job-a', 'job-a', 'job-a', 'job-a']);
    assert.equal(cache.stuckKeys, 0);
  });

  it('keys the stuck pods by Job, observes some Jobs or all, and forgets on a relist what the list no longer holds', () => {
    const cache = new PodCache(() => undefined);
    const h = cache.handler('*');
    h.listStarted();
    h.listed(ofJob(recorded('repo-missing', 'ImagePullBackOff'), 'a', 'a-1'));
    h.listed(ofJob(recorded('repo-missing', 'ImagePullBackOff'), 'a', 'a-2'));
    h.listed(ofJob(recorded('tag-missing', 'ImagePullBackOff'), 'b'));
    h.listEnded();
    assert.deepEqual([...cache.keys()].sort(), ['job-a', 'job-b']);
    assert.equal(cache.podsOf('job-a').length, 2);
    assert.deepEqual(
      cache.observation(new Set(['job-b'])).stuck.map((c) => c.pod),
      ['b-pod'],
    );
    assert.equal(cache.observation().stuck.length, 3);
    assert.equal(cache.outage(DEFAULT_LIMITS.outage).trips.length, 0);
    h.listStarted();
    h.listed(ofJob(recorded('tag-missing', 'ImagePullBackOff'), 'b'));
    h.listEnded();
    assert.deepEqual([...cache.keys()], ['job-b']);
    assert.equal(cache.observation().podsScanned, 1);
  });

  it("keeps the outage breaker's verdict through the kubelet's back-off rewrites, and judges it again when the picture changes", () => {
    const cache = new PodCache(() => undefined);
    const h = cache.handler('*');
    const pod = (i: number, id: string, reason: 'ErrImagePull' | 'ImagePullBackOff') => {
      const p = ofJob(recorded(id, reason), `j${i}`);
      for (const c of [...(p.spec?.containers ?? []), ...(p.status?.containerStatuses ?? [])])
        c.image = `registry.example/team/app-${i % 6}:1`;
      return p;
    };
    h.listStarted();
    for (let i = 0; i < 30; i++) h.listed(pod(i, 'service-unavailable', 'ErrImagePull'));
    h.listEnded();
    const held = cache.outage(DEFAULT_LIMITS.outage);
    assert.deepEqual(
      held.trips.map((t) => `${t.host}:${t.pullClass}`),
      ['undefined:transient', 'registry.example:transient'],
    );
    for (let i = 0; i < 30; i++) h.event('MODIFIED', pod(i, 'service-unavailable', 'ImagePullBackOff'));
    assert.equal(cache.outage(DEFAULT_LIMITS.outage), held, 'the same verdict, not judged again');
    assert.equal(cache.outage({ ...DEFAULT_LIMITS.outage }), held, 'the same limits read again from the policy');
    assert.notEqual(cache.outage({ ...DEFAULT_LIMITS.outage, minStuckPods: 40 }), held, 'other limits: judged again');
    assert.deepEqual(held, assessOutage(cache.observation().stuck, DEFAULT_LIMITS.outage), 'and still the true one');
    for (let i = 0; i < 15; i++) h.event('MODIFIED', pod(i, 'repo-missing', 'ErrImagePull'));
    const after = cache.outage(DEFAULT_LIMITS.outage);
    assert.deepEqual(after, assessOutage(cache.observation().stuck, DEFAULT_LIMITS.outage));
    assert.equal(after.transientPods, 15);
    assert.deepEqual(after.trips, [], 'half transient, half not-found on too few pods: nothing held');
  });

  it('judges the outage breaker over the pods it holds and the Running ones a backstop lists, each pod once', () => {
    const cache = new PodCache(() => undefined);
    const h = cache.handler('*');
    const pod = (i: number) => {
      const p = ofJob(recorded('service-unavailable', 'ImagePullBackOff'), `j${i}`);
      for (const c of [...(p.spec?.containers ?? []), ...(p.status?.containerStatuses ?? [])])
        c.image = `registry.example/team/app-${i % 6}:1`;
      return p;
    };
    h.listStarted();
    for (let i = 0; i < 15; i++) h.listed(pod(i));
    h.listEnded();
    const held = cache.observation().stuck;
    assert.deepEqual(cache.outage(DEFAULT_LIMITS.outage).trips, [], '15 pods: too few to hold anything');
    // The Running pods of 15 more Jobs on the same registry, and one the cache already holds.
    const others = Array.from({ length: 15 }, (_, i) => ({ ...held[0]!, pod: `r${i}`, podUid: `uid-r${i}` }));
    assert.deepEqual(assessOutage(others, DEFAULT_LIMITS.outage).trips, [], 'nor the Running ones alone');
    const beside = cache.outageBeside([...others, held[1]!], DEFAULT_LIMITS.outage);
    assert.deepEqual(beside, assessOutage([...held, ...others], DEFAULT_LIMITS.outage), 'a held pod listed again counts once');
    assert.ok(beside.tripped, 'together: 30 pods, held');
    assert.equal(
      cache.outageBeside([held[1]!], DEFAULT_LIMITS.outage),
      cache.outage(DEFAULT_LIMITS.outage),
      'nothing beside: the cache verdict',
    );
  });

  it("keeps a Job's pods as they come and go, one pod or several", () => {
    const changed: string[] = [];
    const cache = new PodCache((key) => changed.push(key));
    const h = cache.handler('*');
    h.listStarted();
    h.listEnded();
    const pod = (name: string) => ofJob(recorded('repo-missing', 'ImagePullBackOff'), 'a', name);
    const names = () =>
      cache
        .podsOf('job-a')
        .map((p) => p.name)
        .sort();
    h.event('ADDED', pod('a-1'));
    assert.deepEqual(names(), ['a-1']);
    h.event('MODIFIED', pod('a-1'));
    assert.deepEqual(names(), ['a-1'], 'the same pod again: still one');
    h.event('ADDED', pod('a-2'));
    h.event('ADDED', pod('a-3'));
    assert.deepEqual(names(), ['a-1', 'a-2', 'a-3']);
    h.event('DELETED', pod('a-1'));
    h.event('DELETED', pod('a-3'));
    assert.deepEqual(names(), ['a-2']);
    h.event('ADDED', pod('a-4'));
    assert.deepEqual(names(), ['a-2', 'a-4'], 'from one pod to two again');
    h.event('DELETED', pod('a-2'));
    h.event('DELETED', pod('a-4'));
    assert.deepEqual(names(), []);
    assert.equal(cache.stuckKeys, 0);
    assert.deepEqual([...cache.keys()], []);
    assert.equal(changed.length, 8, 'each pod that came or went, not the same pod read again');
  });

  it('keeps one copy of the texts, times and requests that stuck pods repeat', () => {
    const cache = new PodCache(() => undefined);
    const h = cache.handler('*');
    h.listStarted();
    // Two reads of the same recorded status are two parses: equal values, separate objects.
    h.listed(ofJob(recorded('repo-missing', 'ImagePullBackOff'), 'a'));
    h.listed(ofJob(recorded('repo-missing', 'ImagePullBackOff'), 'b'));
    h.listEnded();
    const [a, b] = [cache.podsOf('job-a')[0]!, cache.podsOf('job-b')[0]!];
    assert.notEqual(a.stuck[0], b.stuck[0]);
    assert.equal(a.stuck[0]!.stuckSince, b.stuck[0]!.stuckSince, 'one Date for the same second');
    assert.ok(a.capacity);
    assert.equal(a.capacity, b.capacity, 'one capacity for the same requests since the same time');
    const later = ofJob(recorded('repo-missing', 'ImagePullBackOff'), 'c');
    const minuteLater = (t: Date | string) => new Date(Date.parse(String(t)) + 60_000);
    for (const c of later.status!.conditions ?? []) if (c.lastTransitionTime) c.lastTransitionTime = minuteLater(c.lastTransitionTime);
    later.status!.startTime = minuteLater(later.status!.startTime!);
    h.event('ADDED', later);
    const c = cache.podsOf('job-c')[0]!;
    assert.equal(c.stuck[0]!.stuckSince.getTime(), a.stuck[0]!.stuckSince.getTime() + 60_000, 'its own time, not a shared one');
  });
});
