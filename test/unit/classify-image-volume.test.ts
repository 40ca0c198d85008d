// An image volume whose pull failed: the kubelet pulls every image volume of a pod through the same
// EnsureImageExists as a container's image, and a container mounting a volume whose pull failed
// waits with that pull's reason and message (kubernetes pkg/kubelet/kuberuntime/kuberuntime_manager.go
// v1.37.2: getImageVolumes, toKubeContainerImageVolumes; pkg/kubelet/images/image_manager.go: the
// messages). So each recorded pull failure of a container image below (real kubelet v1.37.2 on
// containerd 1.6, containerd 2.x and CRI-O) is exactly what a container mounting a volume of that
// reference shows; the container's own image here is the node's pause image, which exists.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { failingReference, findStuckContainers, registryHost } from '../../src/classify/index.ts';
import { formatClaimMessage } from '../../src/judge/claim-message.ts';
import { judge } from '../../src/judge/judge.ts';
import { assessOutage, tripFor } from '../../src/judge/outage.ts';
import { parsePolicyYaml } from '../../src/policy/parse.ts';
import { auditLine, summarize } from '../../src/report/audit.ts';
import { SweepMetrics } from '../../src/run/metrics.ts';
import { REAL_NODES, recordedCase, recordedPod, type RealNodeFixture } from './real-node.ts';

const OWN_IMAGE = 'registry.internal:5000/team/runner:1';

/** The recorded pod of `id`, re-cast as a container (own image OWN_IMAGE) mounting volume `data` of the failing reference. */
function volumePod(id: string, reason: string, fixture: RealNodeFixture, over: { ownImage?: string } = {}): V1Pod {
  const c = recordedCase(id, fixture);
  const pod = recordedPod(id, reason, fixture);
  const own = over.ownImage ?? OWN_IMAGE;
  const spec = pod.spec!.containers.find((x) => x.name === c.container)!;
  spec.image = own;
  spec.volumeMounts = [{ name: 'data', mountPath: '/data' }];
  pod.spec!.volumes = [{ name: 'data', image: { reference: c.image, pullPolicy: 'IfNotPresent' } }];
  for (const s of pod.status!.containerStatuses ?? []) if (s.name === c.container) s.image = own;
  return pod;
}

describe('a container stuck on an image volume names the volume and its reference', () => {
  for (const fixture of REAL_NODES) {
    for (const reason of ['ErrImagePull', 'ImagePullBackOff']) {
      it(`${fixture.runtime}: repository missing, ${reason}`, () => {
        const missing = recordedCase('repo-missing', fixture).image;
        const [stuck] = findStuckContainers(volumePod('repo-missing', reason, fixture));
        assert.ok(stuck);
        assert.equal(stuck.image, missing);
        assert.equal(stuck.volume, 'data');
        assert.equal(stuck.pullClass, 'permanent');
      });
    }
  }

  it('a container that mounts no image volume keeps its own image', () => {
    const pod = volumePod('repo-missing', 'ImagePullBackOff', REAL_NODES[0]!);
    pod.spec!.containers[0]!.volumeMounts = [];
    const [stuck] = findStuckContainers(pod);
    assert.equal(stuck!.image, OWN_IMAGE);
    assert.equal(stuck!.volume, undefined);
  });

  it("the container's own failing image stays its own when it also mounts a healthy volume", () => {
    // Recorded: the container's own image missing; the volume is the pause image (which pulls).
    const fixture = REAL_NODES[0]!;
    const pod = recordedPod('repo-missing', 'ImagePullBackOff', fixture);
    const own = recordedCase('repo-missing', fixture).image;
    pod.spec!.containers[0]!.volumeMounts = [{ name: 'tools', mountPath: '/tools' }];
    pod.spec!.volumes = [{ name: 'tools', image: { reference: 'registry.internal:5000/tools:2' } }];
    const [stuck] = findStuckContainers(pod);
    assert.equal(stuck!.image, own);
    assert.equal(stuck!.volume, undefined);
  });

  it('of two volumes, the one whose reference the message names', () => {
    const fixture = REAL_NODES.find((f) => f.runtime === 'crio')!;
    const pod = volumePod('tag-missing', 'ErrImagePull', fixture);
    pod.spec!.volumes!.unshift({ name: 'model', image: { reference: 'quay.example/models/llm:7' } });
    pod.spec!.containers[0]!.volumeMounts!.unshift({ name: 'model', mountPath: '/model' });
    const [stuck] = findStuckContainers(pod);
    // CRI-O prints `reading manifest TAG in REPO`, not the reference whole.
    assert.equal(stuck!.volume, 'data');
    assert.equal(stuck!.image, recordedCase('tag-missing', fixture).image);
  });

  it('the kubelet quote decides between references of one repository', () => {
    const message = 'Back-off pulling image "r.example/app:data": ErrImagePull: not found';
    const pod: V1Pod = {
      spec: {
        containers: [{ name: 'main', image: 'r.example/app:code', volumeMounts: [{ name: 'v', mountPath: '/v' }] }],
        volumes: [{ name: 'v', image: { reference: 'r.example/app:data' } }],
      },
    };
    assert.deepEqual(failingReference(pod, pod.spec!.containers[0]!, 'r.example/app:code', message), {
      image: 'r.example/app:data',
      volume: 'v',
    });
    const own = 'Back-off pulling image "r.example/app:code": ErrImagePull: not found';
    assert.deepEqual(failingReference(pod, pod.spec!.containers[0]!, 'r.example/app:code', own), {
      image: 'r.example/app:code',
      volume: undefined,
    });
  });
});

describe("the volume's reference is what the line, the Event, the breaker and the metrics name", () => {
  const fixture = REAL_NODES.find((f) => f.runtime === 'containerd2')!;
  const policy = (() => {
    const parsed = parsePolicyYaml('{}');
    assert.ok(parsed.ok);
    return parsed.policy;
  })();
  const now = new Date('2026-12-01T00:00:00Z');
  const missing = recordedCase('repo-missing', fixture).image;

  it('audit line, claim message and metrics label', async () => {
    const stuck = findStuckContainers(volumePod('repo-missing', 'ImagePullBackOff', fixture));
    const { decisions } = judge({
      stuck,
      ownerOf: () => ({ kind: 'not-a-job', owner: undefined }),
      namespaceLabels: new Map(),
      policy,
      now,
    });
    const d = decisions[0]!;
    const result = { decision: d, outcome: 'skipped' as const, error: undefined };
    const line = auditLine('s', result, false);
    assert.equal(line.image, missing);
    assert.equal(line.volume, 'data');
    assert.match(formatClaimMessage(d), new RegExp(`on image ${missing.replace(/[.]/g, '\\.')} of volume data \\(class permanent`));
    const metrics = new SweepMetrics();
    const summary = summarize({
      sweepId: 's',
      dryRun: false,
      policy: 'p',
      namespaces: [],
      startedAt: now,
      finishedAt: now,
      podsScanned: 1,
      stuckContainers: 1,
      outage: assessOutage(stuck, policy.limits.outage),
      results: [result],
    });
    metrics.record({ status: 'done', summary, results: [result] }, 1, now);
    const details = (await metrics.registry.getMetricsAsJSON()).find((m) => m.name === 'imagepull_sweeper_decision_details_total');
    assert.deepEqual(
      details?.values.map((v) => v.labels.registry),
      [registryHost(missing)],
    );
    assert.notEqual(registryHost(missing), registryHost(OWN_IMAGE));
  });

  it("the outage breaker counts the volume's registry host", () => {
    const { minStuckPods, minImages } = policy.limits.outage;
    const stuck = Array.from({ length: minStuckPods }, (_, i) => {
      const pod = volumePod('repo-missing', 'ErrImagePull', fixture);
      pod.metadata = { ...pod.metadata, name: `p${i}`, uid: `u${i}` };
      // Distinct repositories of the volume's host, each not found (a mirror's burst of 404s).
      const ref = missing.replace('no-such-repo', `no-such-repo-${i % minImages}`);
      pod.spec!.volumes![0]!.image!.reference = ref;
      const status = pod.status!.containerStatuses![0]!;
      status.state!.waiting!.message = status.state!.waiting!.message!.replaceAll(missing, ref);
      return findStuckContainers(pod)[0]!;
    });
    const outage = assessOutage(stuck, policy.limits.outage);
    const trip = tripFor(outage, stuck[0]!);
    assert.equal(trip?.host, registryHost(missing));
    assert.ok(!outage.trips.some((t) => t.host === registryHost(OWN_IMAGE)));
  });
});
