// ErrImageNeverPull under "ensure secret pulled images" (KubeletEnsureSecretPulledImages, on by
// default since Kubernetes 1.35): the kubelet v1.37.2 words an image present but pulled with
// credentials the pod lacks exactly as an absent one (pkg/kubelet/images/image_manager.go,
// imageNotPresentOnNeverPolicyError: "We don't want to reveal the presence of an image if it
// cannot be accessed"). The messages below were recorded on the real node (never-pull case).
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { stuckJobEvent } from '../../src/act/events.ts';
import { findStuckContainers, NEVER_PULL_AMBIGUOUS, NEVER_PULL_CREDENTIALS, reasonNote } from '../../src/classify/index.ts';
import { formatClaimMessage } from '../../src/judge/claim-message.ts';
import { judge } from '../../src/judge/judge.ts';
import { parsePolicyYaml } from '../../src/policy/parse.ts';
import { job, NOW, ownersFor } from './judge-fixtures.ts';
import { REAL_NODES, recordedMessage, recordedPod } from './real-node.ts';

describe('ErrImageNeverPull says what it may mean', () => {
  for (const fixture of REAL_NODES) {
    it(`${fixture.runtime}: the recorded message gets the credentials reading beside "not present"`, () => {
      const message = recordedMessage('never-pull', 'ErrImageNeverPull', fixture);
      assert.match(message, /is not present with pull policy of Never/);
      assert.equal(reasonNote('ErrImageNeverPull', message), NEVER_PULL_AMBIGUOUS);
    });
  }

  it('a message that says the credentials are the problem is read that way, not as "not present"', () => {
    // Worded as the kubelet's own source comment puts the case (image_manager.go v1.37.2).
    const message = 'Container image "r.example/app:1" is present but cannot be accessed with the presented set of credentials';
    assert.equal(reasonNote('ErrImageNeverPull', message), NEVER_PULL_CREDENTIALS);
    assert.doesNotMatch(NEVER_PULL_CREDENTIALS, /not present|not on the node/);
  });

  it('other reasons get no note', () => {
    assert.equal(reasonNote('ErrImagePull', recordedMessage('never-pull', 'ErrImageNeverPull')), undefined);
  });

  it('the Job message and its Event carry the note before the kubelet message', () => {
    const pod = recordedPod('never-pull', 'ErrImageNeverPull');
    const j = job('never', { namespace: pod.metadata!.namespace!, uid: 'uid-never' });
    pod.metadata!.ownerReferences = [{ apiVersion: 'batch/v1', kind: 'Job', name: j.name, uid: j.uid, controller: true }];
    const stuck = findStuckContainers(pod);
    const parsed = parsePolicyYaml('{}');
    assert.ok(parsed.ok);
    const later = new Date(NOW.getTime() + 365 * 86_400_000);
    const d = judge({ stuck, ownerOf: ownersFor(stuck, [j]), namespaceLabels: new Map(), policy: parsed.policy, now: later }).decisions[0]!;
    assert.equal(d.pullClass, 'permanent');
    const text = formatClaimMessage(d);
    assert.ok(text.includes(`ErrImageNeverPull (${NEVER_PULL_AMBIGUOUS}): Container image`), text);
    const event = stuckJobEvent(d, 'FailJob', { instance: 'test', now: later });
    assert.match(event.note ?? '', /ensure secret pulled images/);
  });
});
