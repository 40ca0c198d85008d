// The Jobs the sweeper claimed and has not yet seen finish, and the Jobs Kueue queues whose time
// stuck it keeps (docs/kueue.md), found by their label on the server: one list for both.
import { toJobView } from '../attribute/job-view.ts';
import type { KubeGateway } from '../kube/gateway.ts';
import { listFromStart } from '../kube/paging.ts';
import type { JobView } from '../model.ts';
import { LABELS, PENDING } from '../policy/annotations.ts';

/** Both values of the pending label. */
export const PENDING_SELECTOR = `${LABELS.pending} in (${PENDING.claimed},${PENDING.queued})`;

/** Empty `namespaces`: every namespace, in one list. */
export async function listPendingJobs(
  gateway: KubeGateway,
  namespaces: readonly string[],
  onRestart: (namespace: string | undefined, restart: number) => void,
  wait?: (ms: number) => Promise<unknown>,
): Promise<JobView[]> {
  const scopes: (string | undefined)[] = namespaces.length > 0 ? [...new Set(namespaces)] : [undefined];
  const jobs: JobView[] = [];
  for (const namespace of scopes) {
    const listPage = (continueToken: string | undefined) =>
      gateway.listJobs({ namespace, labelSelector: PENDING_SELECTOR, limit: 500, continueToken });
    const views = await listFromStart(
      listPage,
      (): JobView[] => [],
      (acc, page) => acc.push(...page.map(toJobView)),
      {
        onRestart: (restart) => onRestart(namespace, restart),
        ...(wait ? { wait } : {}),
      },
    );
    jobs.push(...views);
  }
  return jobs;
}
