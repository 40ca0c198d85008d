import { limited } from '../concurrency.ts';
import type { JobView, PodOwner, StuckContainer } from '../model.ts';
import { describeApiError } from '../kube/errors.ts';
import type { KubeGateway } from '../kube/gateway.ts';
import { listFromStart } from '../kube/paging.ts';
import { jobOwner, toJobView } from './job-view.ts';
import { readEachJobSetOnce, withJobSetMemory } from './jobset.ts';
import { extendOwnerChains } from './owner-chain.ts';

/**
 * Full Jobs a page of a namespace's Job list. Each answer is read, copied and parsed whole, up to
 * `listConcurrency` at once, so the page bounds the memory of namespaces of many Jobs (a Job's
 * JSON is 2–5 KB: two pages in flight are a few MB), and the page count is the requests they cost
 * (a registry outage's backstop sweep lists every such namespace: docs/performance.md).
 */
const JOB_PAGE_SIZE = 250;
/** From this many wanted Jobs in one namespace on, one paged LIST is cheaper than a GET each. */
export const LIST_JOBS_THRESHOLD = 10;

export interface AttributeOptions {
  /** Requests in flight at once. */
  concurrency: number;
  /**
   * Namespace Job lists in flight at once, within `concurrency`: each holds its answers' pages
   * until they are parsed, and fewer at once keep less of them alive (docs/performance.md).
   */
  listConcurrency: number;
  /** At or above this many Jobs wanted in one namespace, one paged LIST replaces the GETs. */
  listThreshold: number;
  /** A namespace's Job list started over after its continue token expired (410 Gone). */
  onRestart?: (namespace: string, restart: number) => void;
  /** Lists shared by the parts of one whole sweep (`run --watch`'s chunks): each namespace listed once. */
  shared?: SharedJobLists;
}

/**
 * The Job lists of one sweep made in parts: what every part will want (so a namespace is listed,
 * or read Job by Job, by the count of the whole), and the views a list found for the parts still
 * to come, each handed out once.
 */
export class SharedJobLists {
  private readonly listed = new Map<string, Promise<Map<string, JobView> | { error: string }>>();

  /** `wanted`: namespace → the names of every Job the sweep's parts will look up. */
  constructor(readonly wanted: ReadonlyMap<string, ReadonlySet<string>>) {}

  /** The namespace's list, made by the first part that asks (`list`), then handed out name by name. */
  async take(namespace: string, names: ReadonlySet<string>, list: () => Promise<Map<string, JobView>>): Promise<Map<string, JobView>> {
    let listing = this.listed.get(namespace);
    if (!listing) {
      listing = list().catch((error: unknown) => ({ error: describeApiError(error).message }));
      this.listed.set(namespace, listing);
    }
    const found = await listing;
    if ('error' in found) throw new Error(found.error);
    const taken = new Map<string, JobView>();
    for (const name of names) {
      const key = `${namespace}/${name}`;
      const view = found.get(key);
      if (view) taken.set(key, view);
      found.delete(key);
    }
    return taken;
  }
}

/** namespace → the names of the Jobs of these stuck containers: what the parts of one sweep will look up. */
export function jobNamesByNamespace(stuck: Iterable<Pick<StuckContainer, 'namespace' | 'controller'>>): Map<string, Set<string>> {
  const names = new Map<string, Set<string>>();
  for (const c of stuck) {
    const job = jobOwner(c.controller);
    if (!job) continue;
    let inNamespace = names.get(c.namespace);
    if (!inNamespace) names.set(c.namespace, (inNamespace = new Set()));
    inNamespace.add(job.name);
  }
  return names;
}

export interface Attribution {
  ownerOf: (podUid: string) => PodOwner;
  /** Lookups that failed for reasons other than the Job being gone. */
  errors: { namespace: string; job: string; message: string }[];
}

/** Maps each stuck pod to its Job (uid checked), fetching every Job at most once. */
export async function attributeToJobs(
  gateway: KubeGateway,
  stuck: readonly StuckContainer[],
  options: AttributeOptions,
): Promise<Attribution> {
  const wanted = new Map<string, Set<string>>(); // namespace → job names
  for (const c of stuck) {
    const owner = jobOwner(c.controller);
    if (!owner) continue;
    const names = wanted.get(c.namespace) ?? new Set<string>();
    names.add(owner.name);
    wanted.set(c.namespace, names);
  }

  const found = new Map<string, JobView>(); // namespace/name → Job
  const errors: Attribution['errors'] = [];
  // Namespace LISTs and single GETs go out together, `concurrency` at a time; of them at most
  // `listConcurrency` LISTs. A LIST takes its list slot first, so a waiting one holds no request slot.
  const requests = limited(options.concurrency);
  const lists = limited(options.listConcurrency);
  const lookups: Promise<void>[] = [];
  const { shared } = options;
  for (const [namespace, names] of wanted) {
    const listed = shared?.wanted.get(namespace) ?? names;
    if (listed.size >= options.listThreshold) {
      const listNamespace = async () => {
        try {
          const listPage = (continueToken: string | undefined) => gateway.listJobs({ namespace, limit: JOB_PAGE_SIZE, continueToken });
          const onRestart = (restart: number) => options.onRestart?.(namespace, restart);
          const list = () =>
            listFromStart(
              listPage,
              () => new Map<string, JobView>(),
              (acc, jobs) => {
                for (const job of jobs)
                  if (listed.has(job.metadata?.name ?? '')) acc.set(`${namespace}/${job.metadata!.name}`, toJobView(job));
              },
              { onRestart },
            );
          const views = shared ? await shared.take(namespace, names, list) : await list();
          for (const [key, view] of views) found.set(key, view);
        } catch (error) {
          const { message } = describeApiError(error);
          for (const name of names) errors.push({ namespace, job: name, message });
        }
      };
      lookups.push(lists(() => requests(listNamespace)));
    } else {
      for (const name of names) {
        const readOne = async () => {
          try {
            found.set(`${namespace}/${name}`, toJobView(await gateway.readJob(namespace, name)));
          } catch (error) {
            const failure = describeApiError(error);
            if (failure.status !== 404) errors.push({ namespace, job: name, message: failure.message });
          }
        };
        lookups.push(requests(readOne));
      }
    }
  }
  await Promise.all(lookups);
  // One GET per JobSet serves both: the owner chain above it, and what the sweeper remembers on it.
  const jobSets = readEachJobSetOnce(gateway);
  await extendOwnerChains(jobSets, found.values(), requests);
  const jobs = await withJobSetMemory(jobSets, found, requests);

  const failedLookups = new Set(errors.map((e) => `${e.namespace}/${e.job}`));
  const byPod = new Map<string, PodOwner>();
  for (const c of stuck) {
    if (byPod.has(c.podUid)) continue;
    const owner = jobOwner(c.controller);
    if (!owner) {
      byPod.set(c.podUid, { kind: 'not-a-job', owner: c.controller });
      continue;
    }
    const key = `${c.namespace}/${owner.name}`;
    const job = jobs.get(key);
    if (job && job.uid === owner.uid) byPod.set(c.podUid, { kind: 'job', job });
    else if (failedLookups.has(key)) byPod.set(c.podUid, { kind: 'unreadable', owner, detail: `could not read Job ${owner.name}` });
    else
      byPod.set(c.podUid, {
        kind: 'job-gone',
        owner,
        detail: job ? `Job ${owner.name} was replaced (uid differs): pod is orphaned` : `Job ${owner.name} no longer exists`,
      });
  }
  return {
    ownerOf: (podUid) => byPod.get(podUid) ?? { kind: 'not-a-job', owner: undefined },
    errors,
  };
}
