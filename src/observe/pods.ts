// Lean observation: list Pending pods as server-side Table rows (name + STATUS column, a few
// dozen bytes a pod), keep as candidates only the pods whose STATUS does not rule out a stuck
// container, then read each candidate in full and classify that full read.
import { findStuckContainers } from '../classify/index.ts';
import type { StuckContainer } from '../model.ts';
import { mapBounded } from '../concurrency.ts';
import { describeApiError } from '../kube/errors.ts';
import type { KubeGateway, PodRow } from '../kube/gateway.ts';
import { forEachPage, listFromStart } from '../kube/paging.ts';
import { isCandidateStatus } from './candidates.ts';

export const PENDING_PODS = 'status.phase=Pending';

export interface ObserveOptions {
  /** Namespaces to sweep; empty means all. */
  namespaces: readonly string[];
  pageSize: number;
  /** Namespace lists in flight at once (default 4). */
  listConcurrency?: number;
  /** Candidate reads in flight at once (default 8). */
  readConcurrency?: number;
  /** How many times a list may start over after its continue token expired (410 Gone). */
  maxRestarts?: number;
  onRestart?: (namespace: string | undefined, restart: number) => void;
}

export interface Observation {
  stuck: StuckContainer[];
  /** Pending pods listed. */
  podsScanned: number;
  /** Pods read in full because their STATUS could mean a stuck container. */
  candidates: number;
  pages: number;
}

/**
 * Memory grows with the number of candidates, not the size of the cluster: a page of rows is
 * reduced to its candidates before the next one is asked for.
 */
export async function observeStuckContainers(gateway: KubeGateway, options: ObserveOptions): Promise<Observation> {
  const result: Observation = { stuck: [], podsScanned: 0, candidates: 0, pages: 0 };
  const namespaces = options.namespaces.length > 0 ? [...new Set(options.namespaces)] : await allNamespaces(gateway, options, result);
  const candidates: PodRow[] = [];
  await mapBounded(namespaces, options.listConcurrency ?? 4, async (namespace) => {
    const scoped = await listNamespace(gateway, namespace, options);
    candidates.push(...scoped.candidates);
    result.podsScanned += scoped.podsScanned;
    result.pages += scoped.pages;
  });
  result.candidates = candidates.length;
  const read = await mapBounded(candidates, options.readConcurrency ?? 8, async (row) => {
    try {
      const pod = await gateway.readPod(row.namespace, row.name);
      // Judged on the full read: a pod that moved on since the list is no longer Pending.
      return pod.status?.phase === 'Pending' ? findStuckContainers(pod) : [];
    } catch (error) {
      if (describeApiError(error).status === 404) return []; // gone since the list
      throw error;
    }
  });
  for (const containers of read) result.stuck.push(...containers);
  return result;
}

async function allNamespaces(gateway: KubeGateway, options: ObserveOptions, result: Observation): Promise<string[]> {
  const names: string[] = [];
  await forEachPage(
    (continueToken) => gateway.listNamespaceNames({ limit: options.pageSize, continueToken }),
    (page) => {
      result.pages += 1;
      names.push(...page);
    },
  );
  return names;
}

interface Scoped {
  candidates: PodRow[];
  podsScanned: number;
  pages: number;
}

async function listNamespace(gateway: KubeGateway, namespace: string, options: ObserveOptions): Promise<Scoped> {
  const listPage = (continueToken: string | undefined) =>
    gateway.listPodRows({ namespace, fieldSelector: PENDING_PODS, limit: options.pageSize, continueToken });
  const fresh = (): Scoped => ({ candidates: [], podsScanned: 0, pages: 0 });
  const onPage = (acc: Scoped, rows: PodRow[]) => {
    acc.pages += 1;
    acc.podsScanned += rows.length;
    for (const row of rows) if (isCandidateStatus(row.status)) acc.candidates.push(row);
  };
  const onRestart = (restart: number) => options.onRestart?.(namespace, restart);
  return listFromStart(listPage, fresh, onPage, { ...(options.maxRestarts !== undefined ? { maxRestarts: options.maxRestarts } : {}), onRestart });
}
