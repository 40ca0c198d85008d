import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { formatClaimMessage, parseClaimMessage } from '../../src/judge/claim-message.ts';
import { judge } from '../../src/judge/judge.ts';
import type { Decision } from '../../src/judge/types.ts';
import { parsePolicyYaml } from '../../src/policy/parse.ts';
import { job, NOW, ownersFor, secondsAgo, stuckIn } from './judge-fixtures.ts';

function decision(over: Partial<Decision> = {}): Decision {
  const j = job('build');
  const stuck = [stuckIn(j, { pod: 'build-x7', stuckSince: secondsAgo(600) })];
  const parsed = parsePolicyYaml('{}');
  assert.ok(parsed.ok);
  return {
    ...judge({ stuck, ownerOf: ownersFor(stuck, [j]), namespaceLabels: new Map(), policy: parsed.policy, now: NOW }).decisions[0]!,
    ...over,
  };
}

describe('the claim message', () => {
  it('reads back what it was written from', () => {
    for (const d of [
      decision(),
      decision({ containerKind: 'init', container: 'fetch', stuckPods: 3, pullClass: 'stalled', rule: 'ci-batch' }),
      decision({
        containerKind: 'sidecar',
        image: 'registry.example:5000/team/app@sha256:abc',
        graceSeconds: undefined,
        graceSource: undefined,
      }),
      decision({
        capacity: { pods: 2, requests: { 'nvidia.com/gpu': 4, cpu: 8 }, resourceSeconds: { 'nvidia.com/gpu': 46080 }, heldSeconds: 11520 },
      }),
      decision({
        graceSeconds: undefined,
        graceSource: undefined,
        capacity: { pods: 1, requests: { cpu: 0.5 }, resourceSeconds: { cpu: 30 }, heldSeconds: 60 },
      }),
    ]) {
      const text = formatClaimMessage(d);
      assert.deepEqual(
        parseClaimMessage(text),
        {
          containerKind: d.containerKind,
          container: d.container,
          pod: d.pod,
          image: d.image,
          pullClass: d.pullClass,
          rule: d.rule,
        },
        text,
      );
    }
  });

  it("says what an operator reads in the annotation: the cause, a hint of what to do, then the kubelet's words", () => {
    assert.equal(
      formatClaimMessage(decision()),
      'regular container main of pod build-x7 waited 10m on image registry.example/app:missing (class permanent, rule defaults, grace 2m from defaults): ' +
        'the image or tag does not exist in that repository, or the repository does not exist: check the reference, or push the image first. ' +
        'ImagePullBackOff: Back-off pulling image "registry.example/app:missing": ErrImagePull: not found',
    );
  });

  it("says when the Job was failed by a fallback, and why, before the kubelet's words", () => {
    const text = formatClaimMessage(
      decision({ mechanism: 'activeDeadlineSeconds', fallback: 'the status write was refused (Forbidden: no jobs/status)' }),
    );
    assert.match(
      text,
      /push the image first\. Failed by its deadline \(activeDeadlineSeconds\), not by its own condition: the status write was refused \(Forbidden: no jobs\/status\)\. ImagePullBackOff: /,
    );
    assert.equal(parseClaimMessage(text)?.image, 'registry.example/app:missing');
  });

  it('a message it did not write parses to nothing; an unknown class reads as unknown', () => {
    assert.equal(parseClaimMessage('edited by hand'), undefined);
    const text = formatClaimMessage(decision()).replace('class permanent', 'class sideways');
    assert.equal(parseClaimMessage(text)?.pullClass, 'unknown');
  });
});
