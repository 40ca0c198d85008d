// The capacity a failed Job's stuck pods held (their requests, summed per Job) and how it reads.
import { addInto, jobOwner, type PodCapacity, type ResourceAmounts, type StuckContainer } from '../model.ts';
import { formatDuration } from '../policy/duration.ts';
import { compareText } from '../order.ts';

/** The stuck pods of one Job, summed. */
export interface StuckCapacity {
  pods: number;
  requests: ResourceAmounts;
  /** Request × seconds held, per resource. */
  resourceSeconds: ResourceAmounts;
  /** The pods' held times added up. */
  heldSeconds: number;
}

/**
 * The stuck pods of each Job (keyed by the Job's uid, from the pods' controller reference),
 * each counted once however many of its containers are stuck, held until `now`.
 */
export function capacityByJob(
  stuck: readonly Pick<StuckContainer, 'podUid' | 'controller'>[],
  pods: ReadonlyMap<string, PodCapacity>,
  now: Date,
): Map<string, StuckCapacity> {
  const seen = new Set<string>();
  const out = new Map<string, StuckCapacity>();
  for (const c of stuck) {
    const job = jobOwner(c.controller);
    if (!job || seen.has(c.podUid)) continue;
    seen.add(c.podUid);
    const pod = pods.get(c.podUid);
    if (!pod) continue;
    const held = pod.heldSince ? Math.max(0, (now.getTime() - pod.heldSince.getTime()) / 1000) : 0;
    const total = out.get(job.uid) ?? { pods: 0, requests: {}, resourceSeconds: {}, heldSeconds: 0 };
    total.pods += 1;
    total.heldSeconds += held;
    addInto(total.requests, pod.requests);
    addInto(total.resourceSeconds, pod.requests, held);
    out.set(job.uid, total);
  }
  return out;
}

/** Several Jobs' capacity added up (the sweep summary). */
export function sumCapacity(parts: readonly StuckCapacity[]): StuckCapacity {
  const total: StuckCapacity = { pods: 0, requests: {}, resourceSeconds: {}, heldSeconds: 0 };
  for (const p of parts) {
    total.pods += p.pods;
    total.heldSeconds += p.heldSeconds;
    addInto(total.requests, p.requests);
    addInto(total.resourceSeconds, p.resourceSeconds);
  }
  return total;
}

const BYTE_RESOURCES = /^(memory|ephemeral-storage|hugepages-.+)$/;

function trimmed(value: number, digits: number): string {
  return String(Number(value.toFixed(digits)));
}

/** An amount the way a manifest would say it: "500m" or "2" cpu, "1.5Gi" memory, "4" GPUs. */
export function formatAmount(resource: string, value: number): string {
  if (BYTE_RESOURCES.test(resource)) {
    for (const [suffix, size] of [
      ['Ti', 2 ** 40],
      ['Gi', 2 ** 30],
      ['Mi', 2 ** 20],
      ['Ki', 2 ** 10],
    ] as const) {
      if (value >= size) return `${trimmed(value / size, 2)}${suffix}`;
    }
    return trimmed(value, 0);
  }
  if (resource === 'cpu' && value < 1) return `${trimmed(value * 1000, 0)}m`;
  return trimmed(value, 3);
}

/** Extended resources (GPUs) first: they are what an operator misses most; then cpu, memory, the rest. */
function resourceOrder(a: string, b: string): number {
  const rank = (r: string) => (r.includes('/') ? 0 : r === 'cpu' ? 1 : r === 'memory' ? 2 : 3);
  return rank(a) - rank(b) || compareText(a, b);
}

/** "4 nvidia.com/gpu, 8 cpu, 32Gi memory"; empty when nothing was requested. */
export function formatRequests(requests: ResourceAmounts): string {
  return Object.keys(requests)
    .filter((r) => requests[r]! > 0)
    .sort(resourceOrder)
    .map((r) => `${formatAmount(r, requests[r]!)} ${r}`)
    .join(', ');
}

/** "4 nvidia.com/gpu, 8 cpu held 3h12m in total" (whole seconds); undefined when no pod requested anything. */
export function describeCapacity(c: StuckCapacity | undefined): string | undefined {
  if (!c || c.pods === 0) return undefined;
  const requests = formatRequests(c.requests);
  if (!requests) return undefined;
  const held = formatDuration(Math.floor(c.heldSeconds));
  return `${requests} held ${held}${c.pods > 1 ? ` in total by ${c.pods} pods` : ''}`;
}

/** Each Job's decision with what its stuck pods hold. */
export function withCapacity<T extends { jobView?: { uid: string } | undefined; capacity?: StuckCapacity }>(
  decisions: readonly T[],
  byJob: ReadonlyMap<string, StuckCapacity>,
): T[] {
  return decisions.map((d) => {
    const capacity = d.jobView ? byJob.get(d.jobView.uid) : undefined;
    return capacity ? { ...d, capacity } : d;
  });
}
