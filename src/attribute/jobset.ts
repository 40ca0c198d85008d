// Jobs that belong to a JobSet (jobset.x-k8s.io): which JobSet and restart attempt a Job is of,
// and what the sweeper remembers on that JobSet (docs/jobset.md).
import type { V1ObjectMeta } from '@kubernetes/client-node';
import { describeApiError } from '../kube/errors.ts';
import type { KubeGateway } from '../kube/gateway.ts';
import type { JobSetMembership, JobView } from '../model.ts';
import { ANNOTATIONS } from '../policy/annotations.ts';

export const JOBSET_GROUP = 'jobset.x-k8s.io';
/** The JobSet controller's labels on the Jobs it creates. */
export const JOBSET_LABELS = {
  restartAttempt: 'jobset.sigs.k8s.io/restart-attempt',
  jobRestartAttempt: 'jobset.sigs.k8s.io/job-restart-attempt',
} as const;

/** Pure: the JobSet a Job's controller reference names, with the Job's restart labels. */
export function jobSetMembership(meta: V1ObjectMeta): JobSetMembership | undefined {
  const owner = (meta.ownerReferences ?? []).find(
    (o) => o.controller && o.kind === 'JobSet' && o.apiVersion.split('/')[0] === JOBSET_GROUP,
  );
  if (!owner) return undefined;
  const labels = meta.labels ?? {};
  return {
    name: owner.name,
    uid: owner.uid,
    restartAttempt: attempt(labels[JOBSET_LABELS.restartAttempt]),
    jobRestartAttempt: attempt(labels[JOBSET_LABELS.jobRestartAttempt]),
  };
}

function attempt(value: string | undefined): number | undefined {
  return value !== undefined && /^\d{1,9}$/.test(value) ? Number(value) : undefined;
}

/** A gateway whose readJobSet asks the API server once per JobSet; later calls share the answer. */
export function readEachJobSetOnce(gateway: Pick<KubeGateway, 'readJobSet'>): Pick<KubeGateway, 'readJobSet'> {
  const reads = new Map<string, ReturnType<KubeGateway['readJobSet']>>();
  return {
    readJobSet(namespace, name) {
      const key = `${namespace}/${name}`;
      const read = reads.get(key) ?? gateway.readJobSet(namespace, name);
      reads.set(key, read);
      return read;
    },
  };
}

/**
 * Reads each JobSet owning one of `jobs` once (`run` bounds the requests in flight) and returns
 * the Jobs with what the sweeper remembers on it. A JobSet that is gone, replaced or unreadable
 * remembers nothing: its Jobs get their full grace, as if it were not there.
 */
export async function withJobSetMemory(
  gateway: Pick<KubeGateway, 'readJobSet'>,
  jobs: ReadonlyMap<string, JobView>,
  run: <T>(task: () => Promise<T>) => Promise<T>,
): Promise<Map<string, JobView>> {
  const reads = new Map<string, Promise<Pick<JobSetMembership, 'remembered' | 'unreadable'> & { uid?: string }>>();
  for (const job of jobs.values()) {
    if (!job.jobSet) continue;
    const key = `${job.namespace}/${job.jobSet.name}`;
    if (reads.has(key)) continue;
    const { name } = job.jobSet;
    const read = async () => {
      try {
        const meta = (await gateway.readJobSet(job.namespace, name)).metadata ?? {};
        return { uid: meta.uid, remembered: meta.annotations?.[ANNOTATIONS.jobSetSpent] };
      } catch (error) {
        const failure = describeApiError(error);
        return failure.status === 404 ? {} : { unreadable: `could not read JobSet ${name}: ${failure.message}` };
      }
    };
    reads.set(key, run(read));
  }
  const out = new Map<string, JobView>();
  for (const [key, job] of jobs) {
    const member = job.jobSet;
    if (!member) {
      out.set(key, job);
      continue;
    }
    const read = await reads.get(`${job.namespace}/${member.name}`)!;
    const same = read.uid === member.uid;
    const memory = same && read.remembered !== undefined ? { remembered: read.remembered } : {};
    out.set(key, { ...job, jobSet: { ...member, ...memory, ...(read.unreadable ? { unreadable: read.unreadable } : {}) } });
  }
  return out;
}
