// "Within grace", once: the judge leaves a Job alone by it, and the metrics count the Jobs it left.
import type { Decision } from './types.ts';

/** A stuck container still within its grace: stuck for less than the grace of its class. */
export function stuckWithinGrace(stuckSeconds: number, graceSeconds: number): boolean {
  return stuckSeconds < graceSeconds;
}

/** A Job left alone this sweep only because its grace has not passed yet. */
export function isWithinGrace(d: Pick<Decision, 'plan' | 'jobView' | 'graceSeconds' | 'stuckSeconds'>): boolean {
  return d.plan === 'skip' && d.jobView !== undefined && d.graceSeconds !== undefined && stuckWithinGrace(d.stuckSeconds, d.graceSeconds);
}

/** The Jobs within grace as the metrics gauge them: stuck pods by namespace and class, requests by namespace and resource. */
export interface WithinGrace {
  pods: Map<string, Map<string, number>>;
  requests: Map<string, Map<string, number>>;
}

/** Adds the decisions within grace to `into` (a sweep in parts counts part by part, then lets the decisions go). */
export function countWithinGrace(
  decisions: Iterable<
    Pick<Decision, 'plan' | 'jobView' | 'graceSeconds' | 'stuckSeconds' | 'namespace' | 'pullClass' | 'stuckPods' | 'capacity'>
  >,
  into: WithinGrace = { pods: new Map(), requests: new Map() },
): WithinGrace {
  const add = (to: Map<string, Map<string, number>>, namespace: string, key: string, value: number) => {
    let inNamespace = to.get(namespace);
    if (!inNamespace) to.set(namespace, (inNamespace = new Map()));
    inNamespace.set(key, (inNamespace.get(key) ?? 0) + value);
  };
  for (const d of decisions) {
    if (!isWithinGrace(d)) continue;
    add(into.pods, d.namespace, d.pullClass, d.stuckPods);
    for (const [resource, value] of Object.entries(d.capacity?.requests ?? {})) add(into.requests, d.namespace, resource, value);
  }
  return into;
}
