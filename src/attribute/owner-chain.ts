// The owner chain above a Job (docs/contract.md "Jobs that belong to something bigger"): the
// Job's controller is on its view already; a JobSet's own controller (a Kubeflow TrainJob, say) is
// read from the JobSet's ownerReferences, one GET per JobSet however many of its Jobs are stuck.
import { controllerRefOf } from '../classify/index.ts';
import type { KubeGateway } from '../kube/gateway.ts';
import type { JobView } from '../model.ts';
import { isJobSet } from './job-view.ts';

/**
 * Appends to each Job's `owners` the controller of the JobSet that controls it. A JobSet that
 * cannot be read (gone, replaced, not readable) leaves the chain ending at the JobSet: the chain
 * names owners, it never decides whether a Job is failed.
 */
export async function extendOwnerChains(
  gateway: Pick<KubeGateway, 'readJobSet'>,
  jobs: Iterable<JobView>,
  requests: <T>(task: () => Promise<T>) => Promise<T>,
): Promise<void> {
  const byJobSet = new Map<string, JobView[]>();
  for (const job of jobs) {
    const nearest = job.owners[0];
    if (job.owners.length !== 1 || !nearest || !isJobSet(nearest)) continue;
    const key = `${job.namespace}/${nearest.name}`;
    byJobSet.set(key, [...(byJobSet.get(key) ?? []), job]);
  }
  await Promise.all(
    [...byJobSet.values()].map((children) =>
      requests(async () => {
        const jobSet = children[0]!.owners[0]!;
        const read = await gateway.readJobSet(children[0]!.namespace, jobSet.name).catch(() => undefined);
        if (read?.metadata?.uid !== jobSet.uid) return;
        const above = controllerRefOf(read.metadata);
        if (above) for (const job of children) job.owners = [...job.owners, above];
      }),
    ),
  );
}
