// Lean observation: list Pending pods, and Running pods (a container restarted in place that
// waits on its image), as server-side Table rows (name + STATUS column, a few dozen bytes a pod),
// keep as candidates only the pods whose STATUS does not rule out a stuck container (a rule per
// phase: candidates.ts), then read each candidate in full and classify that full read. A cluster
// of many namespaces is listed at once, its rows carrying their metadata for the namespace (never
// one request per namespace); a few namespaces are listed one by one, without it.
import { findStuckContainers } from '../classify/index.ts';
import type { V1Pod } from '@kubernetes/client-node';
import type { StuckContainer } from '../model.ts';
import { limited, mapBounded } from '../concurrency.ts';
import { compareByPod } from '../order.ts';
import { describeApiError } from '../kube/errors.ts';
import type { KubeGateway, PodRow } from '../kube/gateway.ts';
import { listFromStart, type RestartOptions } from '../kube/paging.ts';
import { podCapacity, type PodCapacity } from './pod-requests.ts';
import { isCandidateStatus, isRunningCandidateStatus } from './candidates.ts';
import { lacksSandboxCondition, sandboxNotReadySince } from './kubelet-conditions.ts';
import { SharedValues } from './shared-values.ts';

export const PENDING_PODS = 'status.phase=Pending';
/**
 * Running pods whose regular containers the kubelet restarts in place after a failure: a Job's
 * pods are `Never` (nothing restarts in place but sidecars, which never hold a Running pod up) or
 * `OnFailure`; `Always` pods belong to controllers that recreate pods, never acted on. The API
 * server filters them, so the rows of a cluster's Deployments never travel (docs/performance.md).
 */
export const RUNNING_PODS = 'status.phase=Running,spec.restartPolicy=OnFailure';

/** The phases listed: the field selector of each, and which STATUS values make a candidate. */
interface Listed {
  phase: 'Pending' | 'Running';
  fieldSelector: string;
  isCandidate: (status: string) => boolean;
}
const PHASES: readonly Listed[] = [
  { phase: 'Pending', fieldSelector: PENDING_PODS, isCandidate: isCandidateStatus },
  { phase: 'Running', fieldSelector: RUNNING_PODS, isCandidate: isRunningCandidateStatus },
];
/** Up to this many namespaces, one list each is cheaper than one list for all (docs/performance.md). */
export const WALK_NAMESPACES_UP_TO = 64;

/**
 * Full pods a page at most (a page of rows holds `pageSize`): with two such lists in flight, the
 * pages in memory at once hold 500 pods, a few MB of JSON and its parse.
 */
export const FULL_PAGE_SIZE = 250;

export interface ObserveOptions {
  /** Namespaces to sweep; empty means all. */
  namespaces: readonly string[];
  /** The phases listed (default both; `run --watch`'s backstop lists the Running ones, its cache holds the Pending). */
  phases?: readonly Listed['phase'][];
  pageSize: number;
  /** Lists of a namespace's rows in flight at once (default 8: a page of rows is a few dozen KB). */
  listConcurrency?: number;
  /** Full-object lists of candidates in flight at once (default 2: a page of full pods is MBs). */
  fullListConcurrency?: number;
  /** Candidate reads in flight at once (default 8). */
  readConcurrency?: number;
  /**
   * From this many candidates of a phase in a namespace on, when they are at least a quarter of
   * its pods of that phase, one paged LIST of those pods replaces the GETs (default 10).
   */
  listThreshold?: number;
  /**
   * Without namespaces: up to this many namespaces in the cluster, one Table list per namespace;
   * above, one cluster-wide list (default WALK_NAMESPACES_UP_TO; 0: always cluster-wide).
   */
  walkNamespacesUpTo?: number;
  /** How many times a list may start over after its continue token expired (410 Gone). */
  maxRestarts?: number;
  onRestart?: (namespace: string | undefined, restart: number) => void;
}

export interface Observation {
  stuck: StuckContainer[];
  /** Pending pods listed. */
  podsScanned: number;
  /** Running pods listed (absent where nothing listed them: the watch's cache). */
  runningPodsScanned?: number;
  /** Pods read in full because their STATUS could mean a stuck container. */
  candidates: number;
  /** List requests: namespace names, pages of rows, and of full pods where a namespace LIST replaced the candidates' GETs. */
  pages: number;
  /** Nodes of candidates whose kubelet writes no PodReadyToStartContainers (see lacksSandboxCondition). */
  nodesWithoutSandboxCondition: Set<string>;
  /** Candidates waiting for their sandbox (see sandboxNotReadySince). */
  sandboxWaits: { namespace: string; pod: string; node: string; since: Date }[];
  /** The requests each pod with a stuck container holds, by pod uid. */
  podCapacity: Map<string, PodCapacity>;
}

/**
 * Memory grows with the number of candidates, not the size of the cluster: a page of rows is
 * reduced to its candidates before the next one is asked for. Without namespaces, one paged list
 * of every namespace's pods of each phase: its cost grows with those pods, not with namespaces.
 */
export async function observeStuckContainers(gateway: KubeGateway, options: ObserveOptions): Promise<Observation> {
  const result: Observation = {
    stuck: [],
    podsScanned: 0,
    runningPodsScanned: 0,
    candidates: 0,
    pages: 0,
    nodesWithoutSandboxCondition: new Set(),
    sandboxWaits: [],
    podCapacity: new Map(),
  };
  const shared = new SharedValues();
  // A pod that changed phase between the two lists is judged once.
  const seen = new Set<string>();
  const judged = (pod: V1Pod): StuckContainer[] => {
    const uid = pod.metadata?.uid;
    if (uid) {
      if (seen.has(uid)) return [];
      seen.add(uid);
    }
    if (lacksSandboxCondition(pod)) result.nodesWithoutSandboxCondition.add(pod.spec?.nodeName ?? '');
    const since = sandboxNotReadySince(pod);
    if (since)
      result.sandboxWaits.push({
        namespace: pod.metadata?.namespace ?? '',
        pod: pod.metadata?.name ?? '',
        node: pod.spec?.nodeName ?? '',
        since,
      });
    const stuck = findStuckContainers(pod).map(shared.container);
    if (stuck.length > 0) result.podCapacity.set(stuck[0]!.podUid, shared.capacity(podCapacity(pod)));
    return stuck;
  };
  const note = (listed: Listed, scoped: Scoped) => {
    if (listed.phase === 'Pending') result.podsScanned += scoped.podsScanned;
    else result.runningPodsScanned = (result.runningPodsScanned ?? 0) + scoped.podsScanned;
    result.pages += scoped.pages;
    result.candidates += scoped.candidates.length;
  };
  const fullLists = limited(options.fullListConcurrency ?? 2);
  const reads = limited(options.readConcurrency ?? 8);
  const listThreshold = options.listThreshold ?? 10;
  // A namespace's candidates are read as soon as its rows are in, not once every namespace's are.
  const readCandidates = async (listed: Listed, namespace: string, scoped: Scoped): Promise<void> => {
    const many = scoped.candidates.length >= listThreshold && scoped.candidates.length * 4 >= scoped.podsScanned;
    if (many) {
      const names = new Set(scoped.candidates.map((row) => row.name));
      const read = await fullLists(() => readCandidatesByList(gateway, listed, namespace, names, judged, options));
      result.pages += read.pages;
      result.stuck.push(...read.stuck);
      return;
    }
    const read = await Promise.all(scoped.candidates.map((row) => reads(() => readCandidate(gateway, listed, row, judged))));
    for (const containers of read) result.stuck.push(...containers);
  };
  const named = options.namespaces.length > 0 ? [...new Set(options.namespaces)] : await fewNamespaces(gateway, options, result);
  const phases = options.phases ? PHASES.filter((p) => options.phases!.includes(p.phase)) : PHASES;
  const pairs = named ? named.flatMap((namespace) => phases.map((listed) => ({ namespace, listed }))) : [];
  if (named) {
    await mapBounded(pairs, options.listConcurrency ?? 8, async ({ namespace, listed }) => {
      const scoped = await listNamespace(gateway, listed, namespace, options);
      note(listed, scoped);
      await readCandidates(listed, namespace, scoped);
    });
  } else {
    await Promise.all(
      phases.map(async (listed) => {
        const everywhere = await listEverywhere(gateway, listed, options);
        result.pages += everywhere.pages;
        for (const scoped of everywhere.byNamespace.values()) note(listed, { ...scoped, pages: 0 });
        await Promise.all([...everywhere.byNamespace].map(([namespace, scoped]) => readCandidates(listed, namespace, scoped)));
      }),
    );
  }
  // Reads finish in any order; the result does not depend on it.
  result.stuck.sort(compareByPod);
  return result;
}

/** A candidate judged on its full read; a pod that is gone or in another phase since the list has none. */
async function readCandidate(
  gateway: KubeGateway,
  listed: Listed,
  row: PodRow,
  judged: (pod: V1Pod) => StuckContainer[],
): Promise<StuckContainer[]> {
  try {
    const pod = await gateway.readPod(row.namespace, row.name);
    return pod.status?.phase === listed.phase ? judged(pod) : [];
  } catch (error) {
    if (describeApiError(error).status === 404) return [];
    throw error;
  }
}

/**
 * The cluster's namespaces when they are few enough to list one by one (bare rows take less time
 * than rows with their metadata, docs/performance.md); undefined when more: one list for all.
 */
async function fewNamespaces(gateway: KubeGateway, options: ObserveOptions, result: Observation): Promise<string[] | undefined> {
  const walkUpTo = options.walkNamespacesUpTo ?? WALK_NAMESPACES_UP_TO;
  if (walkUpTo <= 0) return undefined;
  const page = await gateway.listNamespaceNames({ limit: walkUpTo + 1 });
  result.pages += 1;
  return page.items.length <= walkUpTo && !page.continueToken ? page.items : undefined;
}

interface Scoped {
  candidates: PodRow[];
  podsScanned: number;
  pages: number;
}

async function listNamespace(gateway: KubeGateway, listed: Listed, namespace: string, options: ObserveOptions): Promise<Scoped> {
  const listPage = (continueToken: string | undefined) =>
    gateway.listPodRows({ namespace, fieldSelector: listed.fieldSelector, limit: options.pageSize, continueToken });
  const candidatesOf = (acc: Scoped, rows: PodRow[]) => {
    acc.pages += 1;
    acc.podsScanned += rows.length;
    for (const row of rows) if (listed.isCandidate(row.status)) acc.candidates.push(row);
  };
  return listFromStart(
    listPage,
    (): Scoped => ({ candidates: [], podsScanned: 0, pages: 0 }),
    candidatesOf,
    restartOptions(namespace, options),
  );
}

/** Every namespace's pods of one phase in one paged list, grouped by namespace (only those with such pods). */
async function listEverywhere(
  gateway: KubeGateway,
  listed: Listed,
  options: ObserveOptions,
): Promise<{ byNamespace: Map<string, Scoped>; pages: number }> {
  const listPage = (continueToken: string | undefined) =>
    gateway.listAllPodRows({ fieldSelector: listed.fieldSelector, limit: options.pageSize, continueToken });
  const fresh = () => ({ byNamespace: new Map<string, Scoped>(), pages: 0 });
  const onPage = (acc: ReturnType<typeof fresh>, rows: PodRow[]) => {
    acc.pages += 1;
    for (const row of rows) {
      let scoped = acc.byNamespace.get(row.namespace);
      if (!scoped) acc.byNamespace.set(row.namespace, (scoped = { candidates: [], podsScanned: 0, pages: 0 }));
      scoped.podsScanned += 1;
      if (listed.isCandidate(row.status)) scoped.candidates.push(row);
    }
  };
  const onRestart = (restart: number) => options.onRestart?.(undefined, restart);
  return listFromStart(listPage, fresh, onPage, {
    ...(options.maxRestarts !== undefined ? { maxRestarts: options.maxRestarts } : {}),
    onRestart,
  });
}

/**
 * The candidates judged on one paged LIST of the namespace's pods of that phase (a candidate
 * missing from it is gone or in another phase); each page is reduced to stuck containers before the next.
 */
async function readCandidatesByList(
  gateway: KubeGateway,
  listed: Listed,
  namespace: string,
  candidates: ReadonlySet<string>,
  judged: (pod: V1Pod) => StuckContainer[],
  options: ObserveOptions,
): Promise<{ stuck: StuckContainer[]; pages: number }> {
  const listPage = (continueToken: string | undefined) =>
    gateway.listPods({ namespace, fieldSelector: listed.fieldSelector, limit: Math.min(options.pageSize, FULL_PAGE_SIZE), continueToken });
  const fresh = () => ({ stuck: [] as StuckContainer[], pages: 0 });
  const onPage = (acc: { stuck: StuckContainer[]; pages: number }, pods: V1Pod[]) => {
    acc.pages += 1;
    for (const pod of pods) if (candidates.has(pod.metadata?.name ?? '')) acc.stuck.push(...judged(pod));
  };
  return listFromStart(listPage, fresh, onPage, restartOptions(namespace, options));
}

function restartOptions(namespace: string, options: ObserveOptions): RestartOptions {
  const onRestart = (restart: number) => options.onRestart?.(namespace, restart);
  return { ...(options.maxRestarts !== undefined ? { maxRestarts: options.maxRestarts } : {}), onRestart };
}
