import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Job } from '@kubernetes/client-node';
import { jobOwner, toJobView } from '../../src/attribute/job-view.ts';

function v1job(over: Partial<V1Job> = {}): V1Job {
  return {
    metadata: { name: 'j', namespace: 'ns', uid: 'u1', resourceVersion: '7', annotations: { a: 'b' } },
    spec: { template: { spec: { containers: [] } } },
    status: { startTime: new Date('2026-11-29T10:00:00Z') },
    ...over,
  };
}

describe('toJobView', () => {
  it('copies identity, annotations and start time', () => {
    const v = toJobView(v1job());
    assert.equal(v.name, 'j');
    assert.equal(v.namespace, 'ns');
    assert.equal(v.uid, 'u1');
    assert.equal(v.resourceVersion, '7');
    assert.deepEqual(v.annotations, { a: 'b' });
    assert.equal(v.startTime?.toISOString(), '2026-11-29T10:00:00.000Z');
    assert.equal(v.finished, false);
    assert.equal(v.deleting, false);
    assert.equal(v.cronJob, undefined);
  });

  for (const type of ['Complete', 'Failed', 'FailureTarget', 'SuccessCriteriaMet']) {
    it(`counts a True ${type} condition as finished`, () => {
      const v = toJobView(v1job({ status: { conditions: [{ type, status: 'True' }] } }));
      assert.equal(v.finished, true);
    });
  }

  it('a Job at FailureTarget is failing until Failed (the Job controller waits for its pods)', () => {
    const at = (...types: string[]) => toJobView(v1job({ status: { conditions: types.map((type) => ({ type, status: 'True' })) } }));
    assert.equal(at('FailureTarget').failing, true);
    assert.equal(at('FailureTarget', 'Failed').failing, false);
    assert.equal(at('Failed').failing, false);
    assert.equal(at('SuccessCriteriaMet').failing, false);
    assert.equal(at().failing, false);
  });

  it('does not count a False Failed condition as finished', () => {
    assert.equal(toJobView(v1job({ status: { conditions: [{ type: 'Failed', status: 'False' }] } })).finished, false);
  });

  it('sees deletion, suspension, managedBy and the owning CronJob', () => {
    const v = toJobView(
      v1job({
        metadata: {
          name: 'j',
          deletionTimestamp: new Date(),
          ownerReferences: [{ apiVersion: 'batch/v1', kind: 'CronJob', name: 'nightly', uid: 'c', controller: true }],
        },
        spec: { suspend: true, managedBy: 'example.com/other', template: {} },
      }),
    );
    assert.equal(v.deleting, true);
    assert.equal(v.suspended, true);
    assert.equal(v.managedBy, 'example.com/other');
    assert.equal(v.cronJob, 'nightly');
  });
});

describe('jobOwner', () => {
  it('accepts batch Jobs only', () => {
    const ref = { apiVersion: 'batch/v1', kind: 'Job', name: 'j', uid: 'u', controller: true };
    assert.equal(jobOwner(ref), ref);
    assert.equal(jobOwner({ ...ref, apiVersion: 'example.com/v1' }), undefined);
    assert.equal(jobOwner({ ...ref, kind: 'ReplicaSet', apiVersion: 'apps/v1' }), undefined);
    assert.equal(jobOwner(undefined), undefined);
  });
});
