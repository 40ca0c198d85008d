import { findStuckContainers } from '../classify/index.ts';
import type { StuckContainer } from '../model.ts';
import { describeApiError } from '../kube/errors.ts';
import type { KubeGateway } from '../kube/gateway.ts';
import { forEachPage } from '../kube/paging.ts';

export const PENDING_PODS = 'status.phase=Pending';

export interface ObserveOptions {
  /** Namespaces to sweep; empty means all. */
  namespaces: readonly string[];
  pageSize: number;
  /** How many times a list may start over after its continue token expired (410 Gone). */
  maxRestarts?: number;
  onRestart?: (namespace: string | undefined, restart: number) => void;
}

export interface Observation {
  stuck: StuckContainer[];
  podsScanned: number;
  pages: number;
}

/**
 * Lists Pending pods page by page and keeps only the stuck containers, so memory grows with the
 * number of stuck pods, not the size of the cluster. Pure classification happens per page.
 */
export async function observeStuckContainers(gateway: KubeGateway, options: ObserveOptions): Promise<Observation> {
  const scopes: (string | undefined)[] = options.namespaces.length > 0 ? [...new Set(options.namespaces)] : [undefined];
  const result: Observation = { stuck: [], podsScanned: 0, pages: 0 };
  for (const namespace of scopes) {
    const scoped = await listScope(gateway, namespace, options);
    result.stuck.push(...scoped.stuck);
    result.podsScanned += scoped.podsScanned;
    result.pages += scoped.pages;
  }
  return result;
}

async function listScope(gateway: KubeGateway, namespace: string | undefined, options: ObserveOptions): Promise<Observation> {
  const maxRestarts = options.maxRestarts ?? 3;
  for (let restart = 0; ; restart += 1) {
    const acc: Observation = { stuck: [], podsScanned: 0, pages: 0 };
    try {
      const listPage = (continueToken: string | undefined) =>
        gateway.listPods({ namespace, fieldSelector: PENDING_PODS, limit: options.pageSize, continueToken });
      await forEachPage(listPage, (pods) => {
        acc.pages += 1;
        acc.podsScanned += pods.length;
        for (const pod of pods) acc.stuck.push(...findStuckContainers(pod));
      });
      return acc;
    } catch (error) {
      if (describeApiError(error).status !== 410 || restart >= maxRestarts) throw error;
      options.onRestart?.(namespace, restart + 1);
    }
  }
}
