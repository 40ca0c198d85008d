// The outage breaker (SPEC "Outage breaker"): many pods stuck across many images, mostly on one
// class that a registry or token-service outage produces, means "do not fail these, report them".
// Evaluated for the whole sweep and for each registry host on its own.
import type { PullClass, StuckContainer } from '../model.ts';
import type { Limits } from '../policy/types.ts';
import type { OutageAssessment, OutageScope, OutageTrip } from './types.ts';

/** The classes the breaker protects, with the limit that sets each one's fraction. */
export const BREAKER_CLASSES = ['transient', 'auth'] as const satisfies readonly PullClass[];
export type BreakerClass = (typeof BREAKER_CLASSES)[number];

const FRACTION_KEY = { transient: 'transientFraction', auth: 'authFraction' } as const;

/**
 * The registry host of an image reference, as the container runtime resolves it: the first path
 * component when it looks like a host (has a `.` or `:`, or is `localhost`), else `docker.io`.
 */
export function registryHost(image: string): string {
  const ref = image.trim().replace(/^[a-z][a-z0-9+.-]*:\/\//i, '');
  const slash = ref.indexOf('/');
  const first = slash === -1 ? '' : ref.slice(0, slash).toLowerCase();
  if (first === '' || !(first.includes('.') || first.includes(':') || first === 'localhost')) return 'docker.io';
  return first === 'index.docker.io' || first === 'registry-1.docker.io' ? 'docker.io' : first;
}

interface Tally {
  images: Set<string>;
  /** Per pod: which breaker classes any of its stuck containers (in this scope) has. */
  pods: Map<string, Set<PullClass>>;
}

function tally(into: Map<string, Tally>, key: string, c: StuckContainer): void {
  let t = into.get(key);
  if (!t) into.set(key, (t = { images: new Set(), pods: new Map() }));
  t.images.add(c.image);
  let classes = t.pods.get(c.podUid);
  if (!classes) t.pods.set(c.podUid, (classes = new Set()));
  classes.add(c.pullClass);
}

function scopeOf(name: string, host: string | undefined, t: Tally | undefined, limits: Limits['outage']): OutageScope {
  const stuckPods = t?.pods.size ?? 0;
  const count = (cls: PullClass) => [...(t?.pods.values() ?? [])].filter((classes) => classes.has(cls)).length;
  const transientPods = count('transient');
  const authPods = count('auth');
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
    tripped: [],
  };
  const bigEnough = scope.stuckPods >= limits.minStuckPods && scope.images >= limits.minImages;
  if (bigEnough) {
    for (const cls of BREAKER_CLASSES) if (scope[FRACTION_KEY[cls]] >= limits[FRACTION_KEY[cls]]) scope.tripped.push(cls);
  }
  return scope;
}

/**
 * Pure. A pod counts once per scope, and as transient (or auth) when any of its stuck containers
 * in that scope is; a pod pulling from two registries counts in both.
 */
export function assessOutage(stuck: readonly StuckContainer[], limits: Limits['outage']): OutageAssessment {
  const whole = new Map<string, Tally>();
  const byHost = new Map<string, Tally>();
  for (const c of stuck) {
    tally(whole, '', c);
    tally(byHost, registryHost(c.image), c);
  }
  const sweepScope = scopeOf('the whole sweep', undefined, whole.get(''), limits);
  const trips: OutageTrip[] = sweepScope.tripped.map((cls) => tripOf(sweepScope, cls));
  for (const [host, t] of [...byHost].sort(([a], [b]) => a.localeCompare(b))) {
    const scope = scopeOf(`registry ${host}`, host, t, limits);
    for (const cls of scope.tripped) trips.push(tripOf(scope, cls));
  }
  const { scope: _scope, host: _host, tripped: _tripped, ...figures } = sweepScope;
  return { ...figures, tripped: trips.length > 0, trips };
}

function tripOf(scope: OutageScope, pullClass: BreakerClass): OutageTrip {
  return {
    scope: scope.scope,
    host: scope.host,
    pullClass,
    stuckPods: scope.stuckPods,
    images: scope.images,
    fraction: scope[FRACTION_KEY[pullClass]],
  };
}

/** The trip that covers this container (its class, its registry or the whole sweep), if any. */
export function tripFor(outage: OutageAssessment, c: Pick<StuckContainer, 'image' | 'pullClass'>): OutageTrip | undefined {
  const host = registryHost(c.image);
  const mine = outage.trips.filter((t) => t.pullClass === c.pullClass && (t.host === undefined || t.host === host));
  return mine.find((t) => t.host !== undefined) ?? mine[0];
}

/** `registry quay.io: 23 of 25 stuck pods (92%) across 6 images are auth`. */
export function describeTrip(t: OutageTrip): string {
  const pods = Math.round(t.fraction * t.stuckPods);
  return `${t.scope}: ${pods} of ${t.stuckPods} stuck pods (${Math.round(t.fraction * 100)}%) across ${t.images} images are ${t.pullClass}`;
}
