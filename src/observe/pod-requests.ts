// What a pod reserves on its node: its effective resource requests (as the scheduler counts them)
// and since when. Pure: a V1Pod in, numbers out.
import type { V1Container, V1Pod } from '@kubernetes/client-node';
import { addInto, type PodCapacity, type ResourceAmounts } from '../model.ts';
import { toDate } from '../time.ts';

export type { PodCapacity } from '../model.ts';

const DECIMAL_SUFFIX: Record<string, number> = { n: 1e-9, u: 1e-6, m: 1e-3, '': 1, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18 };
const BINARY_SUFFIX: Record<string, number> = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60 };

/** A Kubernetes quantity ("500m", "1Gi", "2", "1e3", "1.5G") as a number; undefined if not one. */
export function parseQuantity(text: string | number | undefined): number | undefined {
  if (typeof text === 'number') return Number.isFinite(text) ? text : undefined;
  if (text === undefined) return undefined;
  const match = /^([+-]?(?:\d+\.?\d*|\.\d+))(?:([eE][+-]?\d+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$/.exec(text.trim());
  if (!match) return undefined;
  const value = Number(match[1]);
  if (match[2]) return value * 10 ** Number(match[2].slice(1));
  const suffix = match[3] ?? '';
  return value * (BINARY_SUFFIX[suffix] ?? DECIMAL_SUFFIX[suffix] ?? 1);
}

type QuantityMap = Record<string, string | number> | undefined;

/** A container's requests; a resource with a limit and no request is requested at its limit (API defaulting). */
function containerRequests(c: Pick<V1Container, 'resources'>): ResourceAmounts {
  const out: ResourceAmounts = {};
  const limits = c.resources?.limits as QuantityMap;
  const requests = c.resources?.requests as QuantityMap;
  for (const [name, q] of Object.entries(limits ?? {})) {
    const v = parseQuantity(q);
    if (v !== undefined) out[name] = v;
  }
  for (const [name, q] of Object.entries(requests ?? {})) {
    const v = parseQuantity(q);
    if (v !== undefined) out[name] = v;
  }
  return out;
}

function maxInto(target: ResourceAmounts, other: ResourceAmounts): void {
  for (const [name, v] of Object.entries(other)) target[name] = Math.max(target[name] ?? 0, v);
}

/**
 * The pod's effective requests, as the scheduler counts them: per resource, the larger of the
 * regular containers plus every restartable init (sidecar) container, and of each init container
 * plus the sidecars started before it; then pod-level requests where set, plus the pod overhead.
 */
export function podRequests(pod: V1Pod): ResourceAmounts {
  const sidecarsBefore: ResourceAmounts = {};
  const initPeak: ResourceAmounts = {};
  for (const c of pod.spec?.initContainers ?? []) {
    const own = containerRequests(c);
    if (c.restartPolicy === 'Always') {
      addInto(sidecarsBefore, own);
      maxInto(initPeak, sidecarsBefore);
    } else {
      const during: ResourceAmounts = { ...sidecarsBefore };
      addInto(during, own);
      maxInto(initPeak, during);
    }
  }
  const running: ResourceAmounts = { ...sidecarsBefore };
  for (const c of pod.spec?.containers ?? []) addInto(running, containerRequests(c));
  const effective: ResourceAmounts = { ...running };
  maxInto(effective, initPeak);
  const podLevel = (pod.spec as { resources?: V1Container['resources'] } | undefined)?.resources;
  if (podLevel) Object.assign(effective, containerRequests({ resources: podLevel }));
  const overhead: ResourceAmounts = {};
  for (const [name, q] of Object.entries((pod.spec?.overhead ?? {}) as QuantityMap & object)) {
    const v = parseQuantity(q);
    if (v !== undefined) overhead[name] = v;
  }
  addInto(effective, overhead);
  for (const [name, v] of Object.entries(effective)) if (v === 0) delete effective[name];
  return effective;
}

/** Capacity is reserved when the scheduler binds the pod; a pod waiting to be scheduled holds none. */
export function podHeldSince(pod: V1Pod): Date | undefined {
  const scheduled = pod.status?.conditions?.find((c) => c.type === 'PodScheduled' && c.status === 'True');
  return toDate(scheduled?.lastTransitionTime) ?? toDate(pod.metadata?.creationTimestamp);
}

export function podCapacity(pod: V1Pod): PodCapacity {
  return { requests: podRequests(pod), heldSince: podHeldSince(pod) };
}

/**
 * The stuck pods of each Job (keyed by the Job's uid, from the pods' controller reference),
 * each counted once however many of its containers are stuck, held until `now`.
 */
