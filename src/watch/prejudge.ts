// When a pod newly waits on its image (or waits differently), its Job's due time is found the way
// a sweep would judge it: the same attribution (its Job read, for the `grace` annotation), the same
// namespace labels and the same pure judge, on that Job's stuck containers only. Nothing is written
// and nothing is logged: this only sets a timer; the sweep it triggers decides again.
import type { V1Namespace } from '@kubernetes/client-node';
import { attributeToJobs, LIST_JOBS_THRESHOLD } from '../attribute/attribute.ts';
import { judge } from '../judge/judge.ts';
import type { Decision, OutageAssessment } from '../judge/types.ts';
import type { KubeGateway } from '../kube/gateway.ts';
import type { PodOwner, StuckContainer } from '../model.ts';
import { readNamespaceLabels } from '../observe/namespace-labels.ts';
import type { Policy } from '../policy/types.ts';

const CONCURRENT_READS = 8;

/** `outage`: the breaker over everything the watch holds, not only these Jobs. */
export async function prejudge(
  gateway: KubeGateway,
  stuck: StuckContainer[],
  policy: Policy,
  { now, outage }: { now: () => Date; outage?: OutageAssessment },
): Promise<Decision[]> {
  if (stuck.length === 0) return [];
  const [attribution, namespaceLabels] = await Promise.all([
    attributeToJobs(gateway, stuck, { concurrency: CONCURRENT_READS, listConcurrency: 2, listThreshold: LIST_JOBS_THRESHOLD }),
    readNamespaceLabels(gateway, policy, stuck, CONCURRENT_READS),
  ]);
  const namespaceOf = new Map(stuck.map((c) => [c.podUid, c.namespace]));
  const ownerOf = (podUid: string): PodOwner => {
    const owner = attribution.ownerOf(podUid);
    if (namespaceLabels.unreadable.has(namespaceOf.get(podUid) ?? ''))
      return { kind: 'unreadable', owner: undefined, detail: 'namespace labels unreadable' };
    return owner;
  };
  return judge({ stuck, ownerOf, namespaceLabels: namespaceLabels.labels, policy, now: now(), ...(outage ? { outage } : {}) }).decisions;
}

/** The gateway with one read per namespace while it is used: Jobs pre-judged apart share their namespace's labels. */
export function sharingNamespaceReads(gateway: KubeGateway): KubeGateway {
  const reads = new Map<string, Promise<V1Namespace>>();
  return {
    ...gateway,
    readNamespace: (name) => {
      const read = reads.get(name) ?? gateway.readNamespace(name);
      reads.set(name, read);
      return read;
    },
  };
}
