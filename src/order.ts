/**
 * Orders strings by code point: the same on every machine, whatever its locale, and without the
 * ICU collator that the first localeCompare call builds (a cost at start-up: docs/performance.md).
 * Kubernetes names are lowercase ASCII, where this is alphabetical order.
 */
export function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** Orders stuck containers by namespace, then pod: the order a sweep reads and reports them in. */
export function compareByPod(a: { namespace: string; pod: string }, b: { namespace: string; pod: string }): number {
  return compareText(a.namespace, b.namespace) || compareText(a.pod, b.pod);
}
