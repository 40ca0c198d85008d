import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { inChunks } from '../../src/judge/chunks.ts';
import { assessOutage } from '../../src/judge/outage.ts';
import type { StuckContainer } from '../../src/model.ts';
import { job, secondsAgo, stuckIn } from './judge-fixtures.ts';

const LIMITS = { minStuckPods: 4, minImages: 2, transientFraction: 0.5, authFraction: 0.5 };

/** A Job's one stuck container: in `namespace`, stuck `age` seconds, on the registry that is down or another. */
function group(name: string, namespace: string, age: number, down: boolean): { key: string; containers: StuckContainer[] } {
  const image = down ? `down.example/app-${name.length % 2}:1` : 'up.example/tool:missing';
  const container = stuckIn(job(name, { namespace }), {
    namespace,
    image,
    pullClass: down ? 'transient' : 'permanent',
    stuckSince: secondsAgo(age),
  });
  return { key: name, containers: [container] };
}

describe('a sweep in parts (inChunks)', () => {
  it('cuts the groups into parts of the size, longest stuck first, without a breaker', () => {
    const groups = [group('c', 'ns', 100, false), group('a', 'ns', 300, false), group('b', 'ns', 200, false)];
    assert.deepEqual(inChunks(groups, undefined, 2), [['a', 'b'], ['c']]);
    assert.deepEqual(inChunks(groups, undefined, 3), [['a', 'b', 'c']]);
  });

  it('puts the Jobs the breaker holds last, in parts of their own, namespace by namespace, each oldest first', () => {
    const groups = [
      group('held-z-old', 'z', 900, true),
      group('held-a-new', 'a', 100, true),
      group('free-new', 'm', 50, false),
      group('held-z-new', 'z', 200, true),
      group('held-a-old', 'a', 800, true),
      group('free-old', 'q', 60, false),
    ];
    const outage = assessOutage(
      groups.flatMap((g) => g.containers),
      LIMITS,
    );
    assert.ok(outage.tripped, 'the registry down.example trips');
    assert.deepEqual(inChunks(groups, outage, 4), [
      ['free-old', 'free-new'],
      ['held-a-old', 'held-a-new', 'held-z-old', 'held-z-new'],
    ]);
    assert.deepEqual(inChunks(groups, outage, 3), [['free-old', 'free-new'], ['held-a-old', 'held-a-new', 'held-z-old'], ['held-z-new']]);
  });

  it('holds a Job only when the breaker covers every stuck container of it', () => {
    const mixed = group('mixed', 'a', 10, true);
    mixed.containers.push(group('x', 'a', 10, false).containers[0]!);
    const groups = [group('h1', 'a', 500, true), group('h2', 'a', 400, true), group('h3', 'b', 300, true), mixed];
    const outage = assessOutage(
      groups.flatMap((g) => g.containers),
      LIMITS,
    );
    assert.deepEqual(inChunks(groups, outage, 10), [['mixed'], ['h1', 'h2', 'h3']]);
  });

  it('gives one empty part for nothing stuck: a sweep of nothing still settles', () => {
    assert.deepEqual(inChunks([], undefined), [[]]);
  });
});
