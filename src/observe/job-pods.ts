// The pods of the pending Jobs due for force-delete (docs/contract.md "How a Job is failed", step 4), read in full: their deletion
// metadata and every container status. One paged list per Job, by its controller-uid label.
import type { V1Pod } from '@kubernetes/client-node';
import { jobPodsSelector } from '../attribute/job-view.ts';
import { mapBounded } from '../concurrency.ts';
import { describeApiError } from '../kube/errors.ts';
import type { KubeGateway } from '../kube/gateway.ts';
import { listFromStart } from '../kube/paging.ts';
import type { JobView } from '../model.ts';

/** By Job uid: its pods, or why they could not be listed. */
export async function readJobPods(
  gateway: KubeGateway,
  jobs: readonly Pick<JobView, 'namespace' | 'uid'>[],
  concurrency: number,
): Promise<Map<string, V1Pod[] | string>> {
  const byJob = new Map<string, V1Pod[] | string>();
  await mapBounded(jobs, concurrency, async (job) => {
    const listPage = (continueToken: string | undefined) =>
      gateway.listPods({
        namespace: job.namespace,
        labelSelector: jobPodsSelector(job.uid),
        limit: 500,
        continueToken,
      });
    try {
      byJob.set(
        job.uid,
        await listFromStart(
          listPage,
          (): V1Pod[] => [],
          (acc, page) => acc.push(...page),
        ),
      );
    } catch (error) {
      const failure = describeApiError(error);
      byJob.set(job.uid, `${failure.reason}: ${failure.message}`);
    }
  });
  return byJob;
}
