// Every runtime's recording (test/fixtures/real-node-statuses*.json, `npm run
// record:node-statuses`): each failed pull the real kubelet wrote is classed as its case says, and
// each stalled pod (the waiting state named after its reason) is found stuck with class stalled.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { classifyPullFailure, findStuckContainers } from '../../src/classify/index.ts';
import type { StuckReason } from '../../src/model.ts';
import { REAL_NODES, recordedMessage, recordedPod } from './real-node.ts';

it('there is a recording per runtime, each naming its runtime and version', () => {
  assert.ok(REAL_NODES.length >= 2, REAL_NODES.map((f) => f.file).join(', '));
  const runtimes = REAL_NODES.map((f) => f.runtime);
  assert.equal(new Set(runtimes).size, runtimes.length, `one recording per runtime: ${runtimes.join(', ')}`);
  for (const f of REAL_NODES) {
    assert.match(f.containerRuntime, /^[a-z-]+:\/\/\S+$/, f.file);
    assert.match(f.kubelet, /^v1\.\d+\.\d+$/, f.file);
  }
});

for (const f of REAL_NODES) {
  describe(`${f.file} (${f.runtime}, ${f.containerRuntime})`, () => {
    for (const c of f.cases) {
      for (const reason of Object.keys(c.pods)) {
        it(`${c.expectedClass}: ${c.title} (${reason})`, () => {
          assert.equal(classifyPullFailure(reason as StuckReason, recordedMessage(c.id, reason, f), c.image), c.expectedClass);
          const [s, ...more] = findStuckContainers(recordedPod(c.id, reason, f));
          assert.equal(more.length, 0);
          assert.deepEqual(
            [s!.container, s!.containerKind, s!.reason, s!.pullClass],
            [c.container, c.containerKind, reason, c.expectedClass],
          );
        });
      }
    }
    for (const c of f.stalled) {
      // The state named after a waiting reason is the stalled one; the others are earlier states.
      for (const state of Object.keys(c.pods).filter((s) => /^[A-Z]/.test(s))) {
        it(`stalled: ${c.title} (${state})`, () => {
          const stuck = findStuckContainers(recordedPod(c.id, state, f)).find((s) => s.container === c.container);
          assert.ok(stuck, `${c.id} ${state}: ${c.container} is stuck`);
          assert.deepEqual([stuck.containerKind, stuck.reason, stuck.pullClass], [c.containerKind, state, 'stalled']);
        });
      }
    }
  });
}
