// The objects a sweep keeps one of per stuck Job share V8 hidden classes: a literal that opens with
// a spread and adds a field gives each object a class of its own (hundreds of bytes a Job,
// docs/performance.md).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setFlagsFromString } from 'node:v8';
import type { V1Job } from '@kubernetes/client-node';
import { toJobView } from '../../src/attribute/job-view.ts';
import { withCapacity } from '../../src/judge/capacity.ts';
import { judge } from '../../src/judge/judge.ts';
import { parsePolicyYaml } from '../../src/policy/parse.ts';
import { NOW, job, ownersFor, secondsAgo, stuckIn } from './judge-fixtures.ts';

setFlagsFromString('--allow-natives-syntax');
const haveSameMap = new Function('a', 'b', 'return %HaveSameMap(a, b)') as (a: object, b: object) => boolean;

/** How many hidden classes `objects` use between them. */
function hiddenClasses(objects: readonly object[]): number {
  const seen: object[] = [];
  for (const o of objects) if (!seen.some((s) => haveSameMap(s, o))) seen.push(o);
  return seen.length;
}

const COUNT = 300;

describe('hidden classes of what a sweep keeps per Job', () => {
  it('the Job views of a page of Jobs share a few', () => {
    const page = JSON.parse(
      JSON.stringify(
        Array.from({ length: COUNT }, (_, i) => ({
          metadata: { name: `j-${i}`, namespace: 'ns', uid: `uid-${i}`, resourceVersion: `${i}`, annotations: { a: 'b' } },
          spec: { backoffLimit: 6, template: { spec: { containers: [{ name: 'main', image: 'x' }] } } },
          status: { startTime: '2026-11-29T10:00:00Z' },
        })),
      ),
    ) as V1Job[];
    assert.ok(hiddenClasses(page.map(toJobView)) <= 3);
  });

  it('decisions given their capacity share a few', () => {
    const jobs = Array.from({ length: COUNT }, (_, i) => job(`j-${i}`));
    const stuck = jobs.map((j) => stuckIn(j, { stuckSince: secondsAgo(60) }));
    const parsed = parsePolicyYaml('{}');
    assert.ok(parsed.ok);
    const { decisions } = judge({ stuck, ownerOf: ownersFor(stuck, jobs), namespaceLabels: new Map(), policy: parsed.policy, now: NOW });
    const capacity = new Map(jobs.map((j) => [j.uid, { pods: 1, requests: {}, resourceSeconds: {}, heldSeconds: 60 }]));
    const withIt = withCapacity(decisions, capacity);
    assert.ok(withIt.every((d) => d.capacity !== undefined));
    assert.ok(hiddenClasses(withIt) <= 3);
  });
});
