// The Pending pods as `run --watch` keeps them (docs/how-it-works.md "Event-driven mode"): each
// pod the watch brings is reduced at once to what judging needs (its stuck containers, requests
// and sandbox facts), and nothing is kept of a pod with none. The texts, times and requests that
// stuck containers repeat are shared, as the listing path shares them. The stuck pods are indexed
// by their timer's key (the Job's uid, or the pod's own without a Job), and a change is reported
// only when what the timer depends on changed: a kubelet that rewrites a back-off status every
// few minutes is no change.
import type { V1Pod } from '@kubernetes/client-node';
import { findStuckContainers } from '../classify/index.ts';
import { isNotFoundFailure } from '../classify/pull-class.ts';
import { jobOwner } from '../attribute/job-view.ts';
import { assessOutage } from '../judge/outage.ts';
import type { OutageAssessment } from '../judge/types.ts';
import type { StuckContainer } from '../model.ts';
import { compareByPod } from '../order.ts';
import { lacksSandboxCondition, sandboxNotReadySince } from '../observe/kubelet-conditions.ts';
import { podCapacity, type PodCapacity } from '../observe/pod-requests.ts';
import type { Observation } from '../observe/pods.ts';
import { SharedValues } from '../observe/shared-values.ts';
import type { Limits } from '../policy/types.ts';
import type { ReflectorHandler } from './reflector.ts';

export interface CachedPod {
  uid: string;
  namespace: string;
  name: string;
  node: string;
  stuck: StuckContainer[];
  capacity: PodCapacity | undefined;
  lacksSandboxCondition: boolean;
  sandboxNotReadySince: Date | undefined;
  /** Its Job's uid when a Job controls it, else its own: the key of its timer. */
  key: string;
}

/** Told of a key whose stuck pods changed (a pod came, went, or waits differently). */
export type KeyChange = (key: string) => void;

/** Shared values a cache may keep beyond twice its pods before it starts a new set. */
const SHARED_SLACK = 4096;

export class PodCache {
  private readonly pods = new Map<string, CachedPod>();
  /** key → its stuck pods' uids: one uid as it is, a Set only for a Job with several (a Set costs 0.15 KB). */
  private readonly byKey = new Map<string, string | Set<string>>();
  private readonly pendingByScope = new Map<string, number>();
  private shared = new SharedValues();
  /** Bumped on every change of the stuck containers (for the outage assessment's memo). */
  private version = 0;
  private outageMemo: { version: number; limits: Limits['outage']; outage: OutageAssessment } | undefined;

  constructor(private readonly onChange: KeyChange) {}

  /** The reflector's handler for one scope (a namespace, or `*`). */
  handler(scope: string): ReflectorHandler<V1Pod> {
    let listed: Set<string> | undefined;
    let count = 0;
    return {
      listStarted: () => {
        listed = new Set();
        count = 0;
        // A new pass: values no pod uses any more are let go.
        if (scope === '*' || this.pendingByScope.size <= 1) this.shared = new SharedValues();
      },
      listed: (pod) => {
        count += 1;
        const uid = pod.metadata?.uid ?? '';
        listed?.add(uid);
        this.apply(pod);
      },
      listEnded: () => {
        this.pendingByScope.set(scope, count);
        for (const [uid, cached] of this.pods) {
          if ((scope === '*' || cached.namespace === scope) && !listed?.has(uid)) this.forget(uid);
        }
        listed = undefined;
      },
      event: (type, pod) => {
        const known = this.pendingByScope.get(scope) ?? 0;
        if (type === 'ADDED') this.pendingByScope.set(scope, known + 1);
        if (type === 'DELETED') this.pendingByScope.set(scope, Math.max(0, known - 1));
        if (type === 'DELETED') this.forget(pod.metadata?.uid ?? '');
        else this.apply(pod);
      },
    };
  }

  /** The cached pod, by uid. */
  pod(uid: string): CachedPod | undefined {
    return this.pods.get(uid);
  }

  /** The stuck pods of a key. */
  podsOf(key: string): CachedPod[] {
    const uids = this.byKey.get(key);
    const out: CachedPod[] = [];
    for (const uid of typeof uids === 'string' ? [uids] : (uids ?? [])) {
      const pod = this.pods.get(uid);
      if (pod) out.push(pod);
    }
    return out;
  }

  /** Keys with stuck pods. */
  keys(): IterableIterator<string> {
    return this.byKey.keys();
  }

  get stuckKeys(): number {
    return this.byKey.size;
  }

  /** Replaces a pod by a fresh read (the pods of Jobs about to be failed are read again first). */
  refresh(uid: string, pod: V1Pod | undefined): void {
    if (!pod || pod.metadata?.uid !== uid) this.forget(uid);
    else this.apply(pod);
  }

  /**
   * What a sweep's observation holds, from the cache: every stuck pod, or only the keys given
   * (then without the sandbox facts, which the whole sweeps report).
   */
  observation(keys?: ReadonlySet<string>): Observation {
    const stuck: StuckContainer[] = [];
    const podCapacityByUid = new Map<string, PodCapacity>();
    const nodesWithoutSandboxCondition = new Set<string>();
    const sandboxWaits: Observation['sandboxWaits'] = [];
    const take = (pod: CachedPod) => {
      if (pod.stuck.length === 0) return;
      stuck.push(...pod.stuck);
      if (pod.capacity) podCapacityByUid.set(pod.uid, pod.capacity);
    };
    if (keys) {
      for (const key of keys) for (const pod of this.podsOf(key)) take(pod);
    } else {
      for (const pod of this.pods.values()) {
        if (pod.lacksSandboxCondition) nodesWithoutSandboxCondition.add(pod.node);
        if (pod.sandboxNotReadySince)
          sandboxWaits.push({ namespace: pod.namespace, pod: pod.name, node: pod.node, since: pod.sandboxNotReadySince });
        take(pod);
      }
    }
    stuck.sort(compareByPod);
    let podsScanned = 0;
    for (const n of this.pendingByScope.values()) podsScanned += n;
    return {
      stuck,
      podsScanned,
      candidates: this.pods.size,
      pages: 0,
      nodesWithoutSandboxCondition,
      sandboxWaits,
      podCapacity: podCapacityByUid,
    };
  }

  /** The outage breaker over every stuck container the cache holds (a batch of a few Jobs still judges the whole picture). */
  outage(limits: Limits['outage']): OutageAssessment {
    const memo = this.outageMemo;
    if (memo && memo.version === this.version && sameLimits(memo.limits, limits)) return memo.outage;
    const outage = assessOutage(this.allStuck(), limits);
    this.outageMemo = { version: this.version, limits, outage };
    return outage;
  }

  /** The outage breaker over the cache's stuck containers and those of `others` it does not hold (the Running pods a backstop lists). */
  outageBeside(others: readonly StuckContainer[], limits: Limits['outage']): OutageAssessment {
    const beside = others.filter((c) => !this.pods.has(c.podUid));
    return beside.length === 0 ? this.outage(limits) : assessOutage([...this.allStuck(), ...beside], limits);
  }

  private allStuck(): StuckContainer[] {
    const all: StuckContainer[] = [];
    for (const pod of this.pods.values()) for (const c of pod.stuck) all.push(c);
    return all;
  }

  private apply(pod: V1Pod): void {
    const uid = pod.metadata?.uid ?? '';
    if (pod.status?.phase !== 'Pending' || pod.metadata?.deletionTimestamp) return this.forget(uid);
    // Between lists the shared values would only grow: past a bound, new pods start a new set.
    if (this.shared.size > 2 * this.pods.size + SHARED_SLACK) this.shared = new SharedValues();
    const stuck = findStuckContainers(pod).map(this.shared.container);
    const lacks = lacksSandboxCondition(pod);
    const since = this.shared.time(sandboxNotReadySince(pod));
    if (stuck.length === 0 && !lacks && !since) return this.forget(uid);
    const controller = stuck[0]?.controller;
    const key = jobOwner(controller) && controller ? controller.uid : uid;
    const cached: CachedPod = {
      uid,
      namespace: stuck[0]?.namespace ?? pod.metadata?.namespace ?? '',
      name: pod.metadata?.name ?? '',
      node: pod.spec?.nodeName ?? '',
      stuck,
      capacity: stuck.length > 0 ? this.shared.capacity(podCapacity(pod)) : undefined,
      lacksSandboxCondition: lacks,
      sandboxNotReadySince: since,
      key,
    };
    const previous = this.pods.get(uid);
    this.pods.set(uid, cached);
    if (previous && previous.stuck.length > 0 && previous.key !== key) this.unindex(previous);
    if (stuck.length > 0) {
      const uids = this.byKey.get(key);
      if (uids === undefined || uids === uid) this.byKey.set(key, uid);
      else if (typeof uids === 'string') this.byKey.set(key, new Set([uids, uid]));
      else uids.add(uid);
    } else if (previous && previous.stuck.length > 0) this.unindex(previous);
    if (!previous || !sameFacts(previous.stuck, stuck) || previous.key !== key) {
      this.version += 1;
      if (previous && previous.key !== key && previous.stuck.length > 0) this.onChange(previous.key);
      if (stuck.length > 0 || (previous && previous.stuck.length > 0)) this.onChange(key);
    } else if (previous.stuck.length > 0) {
      // Same facts: the messages are the newest, the timer stays, and the breaker's picture
      // changes only if a message now reads not-found where it did not (or the reverse).
      this.version += stuck.some((c, i) => isNotFoundFailure(c) !== isNotFoundFailure(previous.stuck[i]!)) ? 1 : 0;
    }
  }

  private forget(uid: string): void {
    const previous = this.pods.get(uid);
    if (!previous) return;
    this.pods.delete(uid);
    if (previous.stuck.length > 0) {
      this.unindex(previous);
      this.version += 1;
      this.onChange(previous.key);
    }
  }

  private unindex(pod: CachedPod): void {
    const uids = this.byKey.get(pod.key);
    if (uids === pod.uid) this.byKey.delete(pod.key);
    else if (typeof uids === 'object') {
      uids.delete(pod.uid);
      if (uids.size === 1) this.byKey.set(pod.key, uids.values().next().value!);
    }
  }
}

/**
 * Whether two reads of a pod agree on what its Job's due time depends on (not the kubelet's
 * back-off words). Compared field by field: a key string kept per pod cost about 0.5 KB each.
 */
function sameFacts(a: readonly StuckContainer[], b: readonly StuckContainer[]): boolean {
  return (
    a.length === b.length &&
    a.every((c, i) => {
      const d = b[i]!;
      return (
        c.container === d.container &&
        c.pullClass === d.pullClass &&
        c.stuckSince.getTime() === d.stuckSince.getTime() &&
        c.image === d.image &&
        c.volume === d.volume &&
        sameAnnotations(c.podAnnotations, d.podAnnotations)
      );
    })
  );
}

function sameAnnotations(a: Record<string, string> | undefined, b: Record<string, string> | undefined): boolean {
  if (!a || !b) return a === b;
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => a[k] === b[k]);
}

/** The backstop reads the policy again each period: the same limits in a new object are the same breaker. */
function sameLimits(a: Limits['outage'], b: Limits['outage']): boolean {
  return (
    a.minStuckPods === b.minStuckPods &&
    a.minImages === b.minImages &&
    a.transientFraction === b.transientFraction &&
    a.authFraction === b.authFraction
  );
}
