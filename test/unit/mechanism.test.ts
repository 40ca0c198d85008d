import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Job, V1PodFailurePolicy } from '@kubernetes/client-node';
import { toJobView } from '../../src/attribute/job-view.ts';
import { chooseMechanism } from '../../src/judge/mechanism.ts';

function choose(policy: V1PodFailurePolicy | undefined, containers = ['main'], init: string[] = []) {
  const job: V1Job = {
    metadata: { name: 'j', namespace: 'ns', uid: 'u' },
    spec: {
      template: { spec: { containers: containers.map((name) => ({ name })), initContainers: init.map((name) => ({ name })) } },
      podFailurePolicy: policy,
    },
  };
  return chooseMechanism(toJobView(job));
}

const FAIL_ON_STUCK = { action: 'FailJob', onPodConditions: [{ type: 'ImagePullStuck', status: 'True' }] };

describe('chooseMechanism: the first rule that matches the pod the kubelet leaves must be FailJob on the added condition', () => {
  it('takes the podFailurePolicy path for a lone FailJob rule on a condition (status defaults to True)', () => {
    assert.equal(choose({ rules: [FAIL_ON_STUCK] }).conditionType, 'ImagePullStuck');
    assert.equal(choose({ rules: [{ action: 'FailJob', onPodConditions: [{ type: 'X' } as never] }] }).conditionType, 'X');
  });

  it('uses the deadline without a podFailurePolicy, or without a FailJob rule on a True condition', () => {
    assert.equal(choose(undefined).mechanism, 'activeDeadlineSeconds');
    assert.equal(
      choose({ rules: [{ action: 'FailJob', onPodConditions: [{ type: 'X', status: 'False' }] }] }).mechanism,
      'activeDeadlineSeconds',
    );
    assert.equal(
      choose({ rules: [{ action: 'Count', onPodConditions: [{ type: 'X', status: 'True' }] }] }).mechanism,
      'activeDeadlineSeconds',
    );
  });

  it('an earlier onExitCodes In [137] rule (any action) shadows it: deadline', () => {
    for (const action of ['Ignore', 'Count', 'FailIndex']) {
      const c = choose({ rules: [{ action, onExitCodes: { operator: 'In', values: [1, 137] } }, FAIL_ON_STUCK] });
      assert.equal(c.mechanism, 'activeDeadlineSeconds', action);
      assert.match(c.why, new RegExp(`rule 1 \\(${action} on exit code In \\[1, 137\\]\\)`));
    }
  });

  it('an earlier onExitCodes rule that does not match 137 does not shadow it', () => {
    assert.equal(
      choose({ rules: [{ action: 'Ignore', onExitCodes: { operator: 'In', values: [1, 2] } }, FAIL_ON_STUCK] }).mechanism,
      'podFailurePolicy',
    );
    assert.equal(
      choose({ rules: [{ action: 'Ignore', onExitCodes: { operator: 'NotIn', values: [137] } }, FAIL_ON_STUCK] }).mechanism,
      'podFailurePolicy',
    );
  });

  it('NotIn without 137 matches 137: shadowed', () => {
    assert.equal(
      choose({ rules: [{ action: 'Count', onExitCodes: { operator: 'NotIn', values: [0, 1] } }, FAIL_ON_STUCK] }).mechanism,
      'activeDeadlineSeconds',
    );
  });

  it('containerName narrows onExitCodes to that container, init containers included', () => {
    const rule = (containerName: string) => ({ action: 'Ignore', onExitCodes: { containerName, operator: 'In', values: [137] } });
    assert.equal(choose({ rules: [rule('other'), FAIL_ON_STUCK] }).mechanism, 'podFailurePolicy');
    assert.equal(choose({ rules: [rule('main'), FAIL_ON_STUCK] }).mechanism, 'activeDeadlineSeconds');
    assert.equal(choose({ rules: [rule('fetch'), FAIL_ON_STUCK] }, ['main'], ['fetch']).mechanism, 'activeDeadlineSeconds');
  });

  it('an earlier rule on the same condition, or on a condition the left pod has, shadows it', () => {
    const on = (type: string, status: string) => ({ action: 'Ignore', onPodConditions: [{ type, status }] });
    assert.equal(choose({ rules: [on('ImagePullStuck', 'True'), FAIL_ON_STUCK] }).mechanism, 'activeDeadlineSeconds');
    assert.equal(choose({ rules: [on('Ready', 'False'), FAIL_ON_STUCK] }).mechanism, 'activeDeadlineSeconds');
    assert.equal(choose({ rules: [on('PodScheduled', 'True'), FAIL_ON_STUCK] }).mechanism, 'activeDeadlineSeconds');
    // Might be there (pod GC marks some deleted pods DisruptionTarget): not worth the risk.
    assert.equal(choose({ rules: [on('DisruptionTarget', 'True'), FAIL_ON_STUCK] }).mechanism, 'activeDeadlineSeconds');
    // Certainly not there: no shadow.
    assert.equal(choose({ rules: [on('Ready', 'True'), FAIL_ON_STUCK] }).mechanism, 'podFailurePolicy');
    assert.equal(choose({ rules: [on('SomethingElse', 'True'), FAIL_ON_STUCK] }).mechanism, 'podFailurePolicy');
  });

  it('later rules do not matter; a second FailJob candidate is used when the first is shadowed', () => {
    assert.equal(
      choose({ rules: [FAIL_ON_STUCK, { action: 'Ignore', onExitCodes: { operator: 'In', values: [137] } }] }).mechanism,
      'podFailurePolicy',
    );
    const c = choose({
      rules: [
        { action: 'Ignore', onPodConditions: [{ type: 'A', status: 'True' }] },
        {
          action: 'FailJob',
          onPodConditions: [
            { type: 'A', status: 'True' },
            { type: 'B', status: 'True' },
          ],
        },
      ],
    });
    assert.equal(c.conditionType, 'B');
  });

  it('never adds a condition type the kubelet owns', () => {
    assert.equal(
      choose({ rules: [{ action: 'FailJob', onPodConditions: [{ type: 'Ready', status: 'True' }] }] }).mechanism,
      'activeDeadlineSeconds',
    );
  });
});
