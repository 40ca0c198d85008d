// The outage breaker (docs/contract.md, "Outage breaker"): many pods stuck across many images, mostly on one
// class that a registry or token-service outage produces, means "do not fail these, report them".
// Evaluated for the whole sweep and for each registry host on its own. On one host, a burst of
// not-found across many repositories is held the same way: a mirror answering 404 for an upstream
// that is down looks exactly like that.
import { isNotFoundFailure } from '../classify/pull-class.ts';
import { registryHost, repositoryOf } from '../classify/reference.ts';
import type { PullClass, StuckContainer } from '../model.ts';
import type { Limits } from '../policy/types.ts';
import type { OutageAssessment, OutageScope, OutageTrip } from './types.ts';
import { compareText } from '../order.ts';

/** The classes the breaker protects by fraction, with the limit that sets each one's fraction. */
export const BREAKER_CLASSES = ['transient', 'auth'] as const satisfies readonly PullClass[];
export type BreakerClass = (typeof BREAKER_CLASSES)[number];

const FRACTION_KEY = { transient: 'transientFraction', auth: 'authFraction' } as const;

interface Tally {
  images: Set<string>;
  /** Per pod: which classes any of its stuck containers (in this scope) has. */
  pods: Map<string, Set<PullClass>>;
  /** Pods with a not-found failure in this scope, and the repositories those failures name. */
  notFoundPods: Set<string>;
  notFoundRepositories: Set<string>;
}

function tally(into: Map<string, Tally>, key: string, c: StuckContainer, notFound: boolean): void {
  let t = into.get(key);
  if (!t) into.set(key, (t = { images: new Set(), pods: new Map(), notFoundPods: new Set(), notFoundRepositories: new Set() }));
  t.images.add(c.image);
  let classes = t.pods.get(c.podUid);
  if (!classes) t.pods.set(c.podUid, (classes = new Set()));
  classes.add(c.pullClass);
  if (notFound) {
    t.notFoundPods.add(c.podUid);
    t.notFoundRepositories.add(repositoryOf(c.image));
  }
}

function scopeOf(name: string, host: string | undefined, t: Tally | undefined, limits: Limits['outage']): OutageScope {
  const stuckPods = t?.pods.size ?? 0;
  let transientPods = 0;
  let authPods = 0;
  for (const classes of t?.pods.values() ?? []) {
    if (classes.has('transient')) transientPods += 1;
    if (classes.has('auth')) authPods += 1;
  }
  const fraction = (n: number) => (stuckPods === 0 ? 0 : n / stuckPods);
  const scope: OutageScope = {
    scope: name,
    host,
    stuckPods,
    images: t?.images.size ?? 0,
    transientPods,
    transientFraction: fraction(transientPods),
    authPods,
    authFraction: fraction(authPods),
    notFoundPods: t?.notFoundPods.size ?? 0,
    notFoundRepositories: t?.notFoundRepositories.size ?? 0,
    tripped: [],
  };
  const bigEnough = scope.stuckPods >= limits.minStuckPods && scope.images >= limits.minImages;
  if (bigEnough) {
    for (const cls of BREAKER_CLASSES) if (scope[FRACTION_KEY[cls]] >= limits[FRACTION_KEY[cls]]) scope.tripped.push(cls);
  }
  // Per host only: a burst of not-found across the whole sweep is many registries, not one outage.
  if (host !== undefined && scope.notFoundPods >= limits.minStuckPods && scope.notFoundRepositories >= limits.minImages) {
    scope.tripped.push('permanent');
  }
  return scope;
}

/**
 * Pure. A pod counts once per scope, and as transient (or auth, or not-found) when any of its
 * stuck containers in that scope is; a pod pulling from two registries counts in both.
 */
export function assessOutage(stuck: readonly StuckContainer[], limits: Limits['outage']): OutageAssessment {
  const whole = new Map<string, Tally>();
  const byHost = new Map<string, Tally>();
  // Thousands of stuck pods share a few dozen images: each is parsed once.
  const hosts = new Map<string, string>();
  for (const c of stuck) {
    const notFound = isNotFoundFailure(c);
    tally(whole, '', c, notFound);
    let host = hosts.get(c.image);
    if (host === undefined) hosts.set(c.image, (host = registryHost(c.image)));
    tally(byHost, host, c, notFound);
  }
  const sweepScope = scopeOf('the whole sweep', undefined, whole.get(''), limits);
  const trips: OutageTrip[] = sweepScope.tripped.map((cls) => tripOf(sweepScope, cls));
  for (const [host, t] of [...byHost].sort(([a], [b]) => compareText(a, b))) {
    const scope = scopeOf(`registry ${host}`, host, t, limits);
    for (const cls of scope.tripped) trips.push(tripOf(scope, cls));
  }
  const { scope: _scope, host: _host, tripped: _tripped, notFoundPods: _nfp, notFoundRepositories: _nfr, ...figures } = sweepScope;
  return { ...figures, tripped: trips.length > 0, trips };
}

function tripOf(scope: OutageScope, pullClass: OutageTrip['pullClass']): OutageTrip {
  const base = { scope: scope.scope, host: scope.host, pullClass, stuckPods: scope.stuckPods, images: scope.images };
  if (pullClass === 'permanent') {
    const fraction = scope.stuckPods === 0 ? 0 : scope.notFoundPods / scope.stuckPods;
    return { ...base, fraction, repositories: scope.notFoundRepositories };
  }
  return { ...base, fraction: scope[FRACTION_KEY[pullClass]] };
}

/** The trip that covers this container (its class, its registry or the whole sweep), if any. */
export function tripFor(outage: OutageAssessment, c: Pick<StuckContainer, 'image' | 'pullClass'>): OutageTrip | undefined {
  const host = registryHost(c.image);
  const mine = outage.trips.filter((t) => t.pullClass === c.pullClass && (t.host === undefined || t.host === host));
  return mine.find((t) => t.host !== undefined) ?? mine[0];
}

/**
 * `registry quay.io: 23 of 25 stuck pods (92%) across 6 images are auth`, or for a not-found burst
 * `registry docker.io: 21 of 21 stuck pods (100%) across 6 repositories are not found`.
 */
export function describeTrip(t: OutageTrip): string {
  const pods = Math.round(t.fraction * t.stuckPods);
  const share = `${pods} of ${t.stuckPods} stuck pods (${Math.round(t.fraction * 100)}%)`;
  if (t.pullClass === 'permanent') return `${t.scope}: ${share} across ${t.repositories ?? 0} repositories are not found`;
  return `${t.scope}: ${share} across ${t.images} images are ${t.pullClass}`;
}
