import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { judge } from '../../src/judge/judge.ts';
import { registryHost } from '../../src/classify/reference.ts';
import { assessOutage, describeTrip, tripFor } from '../../src/judge/outage.ts';
import { classifyPullFailure } from '../../src/classify/index.ts';
import { isStuckReason, type JobView, type PullClass, type StuckContainer } from '../../src/model.ts';
import { parsePolicyYaml } from '../../src/policy/parse.ts';
import type { Policy } from '../../src/policy/types.ts';
import { NOW, job, ownersFor, secondsAgo, stuckIn } from './judge-fixtures.ts';
import { recordedMessage } from './real-node.ts';

const LIMITS = { minStuckPods: 4, minImages: 2, transientFraction: 0.5, authFraction: 0.5 };

function policy(yaml: string): Policy {
  const parsed = parsePolicyYaml(yaml);
  if (!parsed.ok) throw new Error(JSON.stringify(parsed.problems));
  return parsed.policy;
}

const P = policy(
  'limits: { maxJobsPerNamespace: 100, outage: { minStuckPods: 4, minImages: 2, transientFraction: 0.5, authFraction: 0.5 } }',
);

type Failure = PullClass | 'invalid-name';

/**
 * What the kubelet writes for each kind of failure. permanent (not found): containerd 2.x
 * core/remotes/docker/resolver.go (`REF: not found`, also what a mirror's 404 gives, issue 16);
 * the others were recorded on the test node (test/fixtures/real-node-statuses.json).
 */
function failure(kind: Failure, image: string): Pick<StuckContainer, 'reason' | 'message'> {
  switch (kind) {
    case 'permanent':
      return {
        reason: 'ErrImagePull',
        message: `rpc error: code = NotFound desc = failed to pull and unpack image "${image}": failed to resolve reference "${image}": ${image}: not found`,
      };
    case 'invalid-name':
      return { reason: 'InvalidImageName', message: recordedMessage('invalid-name', 'InvalidImageName') };
    case 'transient':
      return { reason: 'ErrImagePull', message: recordedMessage('too-many-requests', 'ErrImagePull') };
    case 'auth':
      return { reason: 'ErrImagePull', message: recordedMessage('auth-no-secret', 'ErrImagePull') };
    case 'stalled':
      return { reason: 'ContainerCreating', message: '' };
    case 'unknown':
      throw new Error('no recorded unknown failure');
  }
}

/** `count` Jobs, each with one stuck pod failing with `pullClass` on `host`, over `images` repositories. */
function fleet(
  prefix: string,
  count: number,
  o: { host: string; pullClass: Failure; images?: number; tag?: (i: number) => string },
): { jobs: JobView[]; stuck: StuckContainer[] } {
  const jobs = Array.from({ length: count }, (_, i) => job(`${prefix}${i}`));
  const stuck = jobs.map((j, i) => {
    const image = `${o.host}/${prefix}/app-${i % (o.images ?? count)}:${o.tag?.(i) ?? '1'}`;
    const { reason, message } = failure(o.pullClass, image);
    // The class the classifier gives that message, so the fixture cannot drift from it.
    const pullClass = isStuckReason(reason) ? classifyPullFailure(reason, message, image) : 'stalled';
    assert.equal(pullClass, o.pullClass === 'invalid-name' ? 'permanent' : o.pullClass);
    return stuckIn(j, { image, reason, message, pullClass, stuckSince: secondsAgo(99_999) });
  });
  return { jobs, stuck };
}

function plans(parts: { jobs: JobView[]; stuck: StuckContainer[] }[], p = P) {
  const jobs = parts.flatMap((x) => x.jobs);
  const stuck = parts.flatMap((x) => x.stuck);
  const judgement = judge({ stuck, ownerOf: ownersFor(stuck, jobs), namespaceLabels: new Map(), policy: p, now: NOW });
  return { judgement, byJob: Object.fromEntries(judgement.decisions.map((d) => [d.job, d])) };
}

describe('registryHost', () => {
  for (const [image, host] of [
    ['nginx', 'docker.io'],
    ['nginx:1.27', 'docker.io'],
    ['library/nginx@sha256:abc', 'docker.io'],
    ['acme/app:1', 'docker.io'],
    ['docker.io/acme/app:1', 'docker.io'],
    ['index.docker.io/acme/app', 'docker.io'],
    ['quay.io/acme/app:1', 'quay.io'],
    ['Quay.IO/acme/app:1', 'quay.io'],
    ['localhost/app', 'localhost'],
    ['localhost:5000/app:1', 'localhost:5000'],
    ['127.0.0.1:5001/team/app:1', '127.0.0.1:5001'],
    ['registry.example:443/a/b/c:1', 'registry.example:443'],
    ['', 'docker.io'],
  ] as const) {
    it(`${JSON.stringify(image)} → ${host}`, () => assert.equal(registryHost(image), host));
  }
});

describe('assessOutage', () => {
  it('trips for auth with authFraction, like transient with transientFraction', () => {
    const { stuck } = fleet('a', 4, { host: 'quay.io', pullClass: 'auth', images: 2 });
    const outage = assessOutage(stuck, LIMITS);
    assert.equal(outage.tripped, true);
    assert.equal(outage.authPods, 4);
    assert.equal(outage.authFraction, 1);
    assert.deepEqual(
      outage.trips.map((t) => [t.scope, t.pullClass]),
      [
        ['the whole sweep', 'auth'],
        ['registry quay.io', 'auth'],
      ],
    );
  });

  it('stays closed below authFraction', () => {
    const auth = fleet('a', 1, { host: 'quay.io', pullClass: 'auth' });
    const other = fleet('p', 3, { host: 'quay.io', pullClass: 'permanent' });
    assert.equal(assessOutage([...auth.stuck, ...other.stuck], LIMITS).tripped, false);
  });

  it('evaluates each registry on its own: one registry down trips although the sweep as a whole does not', () => {
    const down = fleet('q', 4, { host: 'quay.io', pullClass: 'transient', images: 4 });
    const healthy = fleet('d', 20, { host: 'docker.io', pullClass: 'invalid-name' });
    const outage = assessOutage([...down.stuck, ...healthy.stuck], LIMITS);
    assert.equal(outage.transientFraction, 4 / 24);
    assert.deepEqual(outage.trips, [
      { scope: 'registry quay.io', host: 'quay.io', pullClass: 'transient', stuckPods: 4, images: 4, fraction: 1 },
    ]);
    assert.equal(describeTrip(outage.trips[0]!), 'registry quay.io: 4 of 4 stuck pods (100%) across 4 images are transient');
  });

  it('a registry needs minStuckPods and minImages of its own', () => {
    const down = fleet('q', 3, { host: 'quay.io', pullClass: 'transient', images: 3 });
    const oneImage = fleet('g', 6, { host: 'ghcr.io', pullClass: 'transient', images: 1 });
    const healthy = fleet('d', 20, { host: 'docker.io', pullClass: 'invalid-name' });
    assert.deepEqual(assessOutage([...down.stuck, ...oneImage.stuck, ...healthy.stuck], LIMITS).trips, []);
  });

  it('counts a pod once per scope, in each registry it pulls from', () => {
    const j = job('two-hosts');
    const stuck = [
      stuckIn(j, { pod: 'p', podUid: 'p', container: 'a', image: 'quay.io/x/a:1', pullClass: 'transient' }),
      stuckIn(j, { pod: 'p', podUid: 'p', container: 'b', image: 'ghcr.io/x/b:1', pullClass: 'auth' }),
    ];
    const outage = assessOutage(stuck, { ...LIMITS, minStuckPods: 1, minImages: 1 });
    assert.equal(outage.stuckPods, 1);
    assert.deepEqual(
      outage.trips.map((t) => `${t.scope}:${t.pullClass}:${t.stuckPods}`),
      ['the whole sweep:transient:1', 'the whole sweep:auth:1', 'registry ghcr.io:auth:1', 'registry quay.io:transient:1'],
    );
  });

  it('tripFor prefers the registry scope and matches class and host', () => {
    const down = fleet('q', 4, { host: 'quay.io', pullClass: 'transient', images: 4 });
    const outage = assessOutage(down.stuck, LIMITS);
    assert.equal(tripFor(outage, { image: 'quay.io/x/y:1', pullClass: 'transient' })?.scope, 'registry quay.io');
    assert.equal(tripFor(outage, { image: 'ghcr.io/x/y:1', pullClass: 'transient' })?.scope, 'the whole sweep');
    assert.equal(tripFor(outage, { image: 'quay.io/x/y:1', pullClass: 'auth' }), undefined);
    assert.equal(tripFor(outage, { image: 'quay.io/x/y:1', pullClass: 'stalled' }), undefined);
  });
});

describe('judge under the outage breaker', () => {
  it('auth-class Jobs are reported, not failed, when the token service is down; other classes still fail', () => {
    const auth = fleet('a', 4, { host: 'registry.corp', pullClass: 'auth', images: 2 });
    const missing = fleet('m', 2, { host: 'registry.corp', pullClass: 'permanent' });
    const { byJob } = plans([auth, missing]);
    for (const j of auth.jobs) {
      assert.equal(byJob[j.name]!.plan, 'report');
      assert.equal(byJob[j.name]!.action, 'report');
      assert.match(
        byJob[j.name]!.detail,
        /^outage breaker tripped \(registry registry\.corp: 4 of 6 stuck pods \(67%\) across 4 images are auth\): auth failures are reported, not failed, this sweep$/,
      );
    }
    for (const j of missing.jobs) assert.equal(byJob[j.name]!.plan, 'fail');
  });

  it('one registry down: its transient Jobs are reported; a transient Job on a healthy registry is failed', () => {
    const down = fleet('q', 4, { host: 'quay.io', pullClass: 'transient', images: 4 });
    const healthy = fleet('d', 20, { host: 'docker.io', pullClass: 'invalid-name' });
    const flaky = fleet('f', 1, { host: 'docker.io', pullClass: 'transient' });
    const { judgement, byJob } = plans([down, healthy, flaky]);
    assert.equal(judgement.outage.tripped, true);
    for (const j of down.jobs) assert.match(byJob[j.name]!.detail, /registry quay\.io/);
    for (const j of down.jobs) assert.equal(byJob[j.name]!.plan, 'report');
    assert.equal(byJob.f0!.plan, 'fail');
    assert.equal(byJob.d0!.plan, 'fail');
  });

  it('stalled Jobs are never held back by the breaker', () => {
    const stalled = fleet('s', 6, { host: 'quay.io', pullClass: 'stalled', images: 3 });
    const { byJob } = plans(
      [stalled],
      policy('limits: { outage: { minStuckPods: 1, minImages: 1, transientFraction: 0.01, authFraction: 0.01 } }'),
    );
    for (const j of stalled.jobs) assert.equal(byJob[j.name]!.plan, 'fail');
  });
});

describe('the breaker holds a burst of not-found on one registry host', () => {
  it('trips for permanent on that host: enough pods across enough distinct repositories', () => {
    const mirror = fleet('m', 4, { host: 'docker.io', pullClass: 'permanent', images: 2 });
    const outage = assessOutage(mirror.stuck, LIMITS);
    assert.deepEqual(outage.trips, [
      { scope: 'registry docker.io', host: 'docker.io', pullClass: 'permanent', stuckPods: 4, images: 2, fraction: 1, repositories: 2 },
    ]);
    assert.equal(describeTrip(outage.trips[0]!), 'registry docker.io: 4 of 4 stuck pods (100%) across 2 repositories are not found');
  });

  it('counts repositories, not tags: many tags of one repository are one typo wave, not an outage', () => {
    const oneRepo = fleet('t', 6, { host: 'docker.io', pullClass: 'permanent', images: 1, tag: (i) => `v${i}` });
    assert.equal(new Set(oneRepo.stuck.map((c) => c.image)).size, 6);
    assert.deepEqual(assessOutage(oneRepo.stuck, LIMITS).trips, []);
  });

  it('needs minStuckPods not-found pods on the one host, and never trips for the whole sweep', () => {
    const few = fleet('f', 3, { host: 'quay.io', pullClass: 'permanent' });
    const spread = [
      ...fleet('a', 2, { host: 'a.example', pullClass: 'permanent' }).stuck,
      ...fleet('b', 2, { host: 'b.example', pullClass: 'permanent' }).stuck,
    ];
    assert.deepEqual(assessOutage(few.stuck, LIMITS).trips, []);
    assert.deepEqual(assessOutage(spread, LIMITS).trips, []);
  });

  it('permanent failures that are not not-found do not count towards the burst', () => {
    const invalid = fleet('i', 6, { host: 'docker.io', pullClass: 'invalid-name' });
    const missing = fleet('m', 3, { host: 'docker.io', pullClass: 'permanent' });
    const outage = assessOutage([...invalid.stuck, ...missing.stuck], LIMITS);
    assert.deepEqual(outage.trips, []);
  });

  it("judge: that host's permanent-class Jobs are reported, not failed; another host's are failed", () => {
    const mirror = fleet('m', 5, { host: 'docker.io', pullClass: 'permanent', images: 5 });
    const typo = fleet('x', 1, { host: 'docker.io', pullClass: 'invalid-name' });
    const elsewhere = fleet('q', 2, { host: 'quay.io', pullClass: 'permanent' });
    const flaky = fleet('f', 1, { host: 'docker.io', pullClass: 'transient' });
    const { byJob } = plans([mirror, typo, elsewhere, flaky]);
    for (const j of [...mirror.jobs, ...typo.jobs]) {
      assert.equal(byJob[j.name]!.plan, 'report', j.name);
      assert.equal(byJob[j.name]!.action, 'report');
      assert.equal(
        byJob[j.name]!.detail,
        'outage breaker tripped (registry docker.io: 5 of 7 stuck pods (71%) across 5 repositories are not found): permanent failures are reported, not failed, this sweep',
      );
    }
    for (const j of elsewhere.jobs) assert.equal(byJob[j.name]!.plan, 'fail');
    assert.equal(byJob.f0!.plan, 'fail');
  });

  it('holds with the default limits (20 pods across 5 repositories)', () => {
    const defaults = policy('{}');
    const below = fleet('b', 19, { host: 'docker.io', pullClass: 'permanent', images: 5 });
    assert.ok(plans([below], defaults).judgement.decisions.every((d) => d.plan === 'fail'));
    const burst = fleet('m', 20, { host: 'docker.io', pullClass: 'permanent', images: 5 });
    assert.ok(plans([burst], defaults).judgement.decisions.every((d) => d.plan === 'report'));
  });
});
