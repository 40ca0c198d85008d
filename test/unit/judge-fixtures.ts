import assert from 'node:assert/strict';
import { judge } from '../../src/judge/judge.ts';
import type { Decision } from '../../src/judge/types.ts';
import type { JobView, PodOwner, StuckContainer } from '../../src/model.ts';
import { parsePolicyYaml } from '../../src/policy/parse.ts';

export const NOW = new Date('2026-11-29T12:00:00Z');

export function secondsAgo(seconds: number): Date {
  return new Date(NOW.getTime() - seconds * 1000);
}

export function job(name: string, over: Partial<JobView> = {}): JobView {
  return {
    namespace: 'ci-a',
    name,
    uid: `uid-${name}`,
    resourceVersion: '100',
    annotations: {},
    finished: false,
    deleting: false,
    managedBy: undefined,
    suspended: false,
    failed: false,
    podFailureRules: [],
    containerNames: ['main'],
    cronJob: undefined,
    owners: [],
    startTime: secondsAgo(3600),
    ...over,
  };
}

let podCounter = 0;

export function stuckIn(j: JobView | undefined, over: Partial<StuckContainer> = {}): StuckContainer {
  podCounter += 1;
  const pod = over.pod ?? `${j?.name ?? 'bare'}-pod-${podCounter}`;
  return {
    namespace: j?.namespace ?? 'ci-a',
    pod,
    podUid: `uid-${pod}`,
    podResourceVersion: '1',
    container: 'main',
    containerKind: 'regular',
    image: 'registry.example/app:missing',
    reason: 'ImagePullBackOff',
    message: 'Back-off pulling image "registry.example/app:missing": ErrImagePull: not found',
    pullClass: 'permanent',
    stuckSince: secondsAgo(600),
    controller: j ? { apiVersion: 'batch/v1', kind: 'Job', name: j.name, uid: j.uid, controller: true } : undefined,
    ...over,
  };
}

/** ownerOf that resolves each stuck container to the Job it was built from. */
export function ownersFor(stuck: StuckContainer[], jobs: JobView[]): (podUid: string) => PodOwner {
  const byUid = new Map(jobs.map((j) => [j.uid, j]));
  const byPod = new Map(stuck.map((c) => [c.podUid, c]));
  return (podUid) => {
    const c = byPod.get(podUid);
    const j = c?.controller ? byUid.get(c.controller.uid) : undefined;
    if (j) return { kind: 'job', job: j };
    return { kind: 'not-a-job', owner: c?.controller };
  };
}

/** The default policy's decision on Job `name`, its one pod stuck `stuckSeconds`. */
export function defaultDecision(name: string, stuckSeconds: number, over: Partial<JobView> = {}): Decision {
  const j = job(name, over);
  const stuck = [stuckIn(j, { pod: `${name}-pod`, stuckSince: secondsAgo(stuckSeconds) })];
  const parsed = parsePolicyYaml('{}');
  assert.ok(parsed.ok);
  return judge({ stuck, ownerOf: ownersFor(stuck, [j]), namespaceLabels: new Map(), policy: parsed.policy, now: NOW }).decisions[0]!;
}
