// One copy of each value stuck pods repeat (src/observe/shared-values.ts): equal values come back
// as the first copy, different ones as themselves, and nothing is changed but the references.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { StuckContainer } from '../../src/model.ts';
import { SharedValues } from '../../src/observe/shared-values.ts';

const container = (image: string, since: string): StuckContainer => ({
  namespace: ['c', 'i'].join(''),
  pod: `p-${image}`,
  podUid: `uid-${image}`,
  podResourceVersion: '1',
  container: 'main',
  containerKind: 'regular',
  image: `registry.example/${image}`,
  reason: 'ImagePullBackOff',
  message: `Back-off pulling image "registry.example/${image}"`,
  pullClass: 'transient',
  stuckSince: new Date(since),
  controller: { apiVersion: 'batch/v1', kind: 'Job', name: `job-${image}`, uid: `job-uid-${image}`, controller: true },
});

describe('shared values', () => {
  it('hands back the first copy of an equal text or time, and each different one as it is', () => {
    const shared = new SharedValues();
    const first = shared.container(container('app', '2026-12-01T10:00:00Z'));
    const again = shared.container(container('app', '2026-12-01T10:00:00Z'));
    const other = shared.container(container('db', '2026-12-01T10:00:01Z'));
    assert.equal(again.stuckSince, first.stuckSince);
    assert.notEqual(other.stuckSince, first.stuckSince);
    assert.equal(other.stuckSince.toISOString(), '2026-12-01T10:00:01.000Z');
    assert.equal(again.image, first.image);
    assert.equal(again.message, first.message);
    assert.equal(again.namespace, 'ci');
    assert.equal(other.image, 'registry.example/db');
    assert.equal(again.controller?.uid, 'job-uid-app', 'what is its own stays');
    assert.equal(shared.time(undefined), undefined);
    // ci, the two images, the reason, the two messages, batch/v1, Job; the two times.
    assert.equal(shared.size, 10);
  });

  it('shares a capacity only with the same requests held since the same time', () => {
    const shared = new SharedValues();
    const at = (s: string) => new Date(`2026-12-01T10:00:0${s}Z`);
    const a = shared.capacity({ requests: { cpu: 0.5, memory: 2 ** 30 }, heldSince: at('0') });
    assert.equal(shared.capacity({ requests: { cpu: 0.5, memory: 2 ** 30 }, heldSince: at('0') }), a);
    assert.notEqual(shared.capacity({ requests: { cpu: 0.5, memory: 2 ** 30 }, heldSince: at('1') }), a);
    assert.notEqual(shared.capacity({ requests: { cpu: 1, memory: 2 ** 30 }, heldSince: at('0') }), a);
    assert.notEqual(shared.capacity({ requests: { cpu: 0.5 }, heldSince: at('0') }), a);
    const unbound = shared.capacity({ requests: { cpu: 0.5, memory: 2 ** 30 }, heldSince: undefined });
    assert.notEqual(unbound, a);
    assert.equal(shared.capacity({ requests: { cpu: 0.5, memory: 2 ** 30 }, heldSince: undefined }), unbound);
    assert.deepEqual(a, { requests: { cpu: 0.5, memory: 2 ** 30 }, heldSince: at('0') });
  });
});
