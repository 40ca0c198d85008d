// A pull the runtime cancelled for lack of progress is `stalled` end to end: the container waits in
// ErrImagePull / ImagePullBackOff, yet it is judged by grace.stalled, never held by the breaker.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { findStuckContainers } from '../../src/classify/index.ts';
import { judge } from '../../src/judge/judge.ts';
import { parsePolicyYaml } from '../../src/policy/parse.ts';
import type { Policy } from '../../src/policy/types.ts';
import { job } from './judge-fixtures.ts';
import { recordedPod } from './real-node.ts';

// containerd 1.7.5, kubernetes/kubernetes#131521: image_pull_progress_timeout cancelled the pull
// (pkg/cri/server/image_pull.go); the kubelet v1.32+ back-off wraps it (pkg/kubelet/images/image_manager.go).
const IMAGE = 'private_registery.mydomain/csg/idrac_to_kafka:20250429T0012';
const CANCELED = `rpc error: code = Canceled desc = failed to pull and unpack image "${IMAGE}": context canceled`;
const MESSAGES = { ErrImagePull: CANCELED, ImagePullBackOff: `Back-off pulling image "${IMAGE}": ErrImagePull: ${CANCELED}` };

function policy(yaml: string): Policy {
  const parsed = parsePolicyYaml(yaml);
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.problems));
  return parsed.policy;
}

/** The pod the real kubelet recorded for a missing tag, now waiting with the cancelled pull's message. */
function cancelledPod(reason: keyof typeof MESSAGES) {
  const pod = recordedPod('tag-missing', 'ErrImagePull');
  const status = pod.status!.containerStatuses![0]!;
  status.image = IMAGE;
  status.state = { waiting: { reason, message: MESSAGES[reason] } };
  return pod;
}

describe('a pull cancelled for lack of progress', () => {
  for (const reason of ['ErrImagePull', 'ImagePullBackOff'] as const) {
    it(`${reason}: is stuck with class stalled and judged by grace.stalled`, () => {
      const [c, ...rest] = findStuckContainers(cancelledPod(reason));
      assert.equal(rest.length, 0);
      assert.equal(c!.reason, reason);
      assert.equal(c!.pullClass, 'stalled');

      const j = job('big-image', { namespace: c!.namespace });
      const p = policy(
        'defaults: { grace: { permanent: 2m, transient: 5m, stalled: 30m } }\nlimits: { outage: { minStuckPods: 1, minImages: 1, transientFraction: 0.01 } }',
      );
      const at = (minutes: number) => new Date(c!.stuckSince.getTime() + minutes * 60_000);
      const decide = (now: Date) =>
        judge({ stuck: [c!], ownerOf: () => ({ kind: 'job', job: j }), namespaceLabels: new Map(), policy: p, now }).decisions[0]!;

      const early = decide(at(10));
      assert.equal(early.plan, 'skip');
      assert.equal(early.graceSeconds, 1800);
      assert.equal(early.detail, 'within grace (10m of 30m from defaults)');

      const late = decide(at(31));
      assert.equal(late.plan, 'fail', late.detail);
      assert.equal(late.pullClass, 'stalled');
      assert.equal(late.graceSeconds, 1800);
    });
  }
});
