// The watch on the Pending pods (docs/how-it-works.md "Event-driven mode"): list the Table rows
// once, then watch them from the list's resourceVersion. As the observation does, it keeps nothing
// of a pod whose STATUS rules out a stuck container, and reads a candidate in full (one GET) only
// when its row shows a new version. What it keeps of a candidate is what a sweep's observation
// holds: its stuck containers, requests and sandbox facts. A dropped or timed-out watch resumes
// from the last resourceVersion it saw (bookmarks move it on); an expired one (410) lists again.
import type { V1Pod } from '@kubernetes/client-node';
import { findStuckContainers } from '../classify/index.ts';
import { limited } from '../concurrency.ts';
import { describeApiError } from '../kube/errors.ts';
import type { KubeGateway } from '../kube/gateway.ts';
import { WatchExpiredError, type PodRowEvent, type PodRowVersion, type WatchGateway } from '../kube/watch.ts';
import type { StuckContainer } from '../model.ts';
import { compareText } from '../order.ts';
import { isCandidateStatus } from '../observe/candidates.ts';
import { lacksSandboxCondition, sandboxNotReadySince } from '../observe/kubelet-conditions.ts';
import { podCapacity, type PodCapacity } from '../observe/pod-requests.ts';
import { PENDING_PODS, type Observation } from '../observe/pods.ts';
import { jobOwner } from '../attribute/job-view.ts';

export interface CachedPod {
  uid: string;
  namespace: string;
  name: string;
  node: string;
  /** The version read in full. */
  resourceVersion: string;
  stuck: StuckContainer[];
  capacity: PodCapacity | undefined;
  lacksSandboxCondition: boolean;
  sandboxNotReadySince: Date | undefined;
  /** Its Job's uid when a Job controls it, else its own: the key of its timer. */
  key: string;
}

export interface PodCacheOptions {
  namespaces: readonly string[];
  pageSize: number;
  /** Seconds after which the API server ends one watch request (then resumed); jittered up to +20%. */
  watchTimeoutSeconds?: number;
  readConcurrency?: number;
  random?: () => number;
  sleep: (ms: number, signal: AbortSignal) => Promise<void>;
  /** A pod read in full, or gone: its stuck containers may have changed. */
  onChange: (pod: CachedPod | undefined, uid: string) => void;
  /** A watch ended and was resumed (`timeout`: the server ended it; `dropped`: it failed), or listed again (`expired`). */
  onRestart: (scope: string, reason: 'timeout' | 'dropped' | 'expired', error?: string) => void;
  /** A namespace's (or every namespace's) first list and its candidates' reads are done. */
  onSynced?: () => void;
}

export class PodCache {
  private readonly pods = new Map<string, CachedPod>();
  /** uid → the row version last seen for a candidate (read in full, or being read). */
  private readonly seen = new Map<string, { namespace: string; name: string; resourceVersion: string }>();
  private readonly reads: <T>(work: () => Promise<T>) => Promise<T>;
  private readonly inFlight = new Map<string, Promise<void>>();
  private readonly pendingByScope = new Map<string, number>();

  constructor(
    private readonly watchGateway: WatchGateway,
    private readonly gateway: KubeGateway,
    private readonly options: PodCacheOptions,
  ) {
    this.reads = limited(options.readConcurrency ?? 8);
  }

  /** Lists and watches every scope (each --namespace, or all) until `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    const scopes: (string | undefined)[] = this.options.namespaces.length > 0 ? [...new Set(this.options.namespaces)] : [undefined];
    let synced = 0;
    await Promise.all(
      scopes.map((namespace) =>
        this.watchScope(namespace, signal, () => {
          synced += 1;
          if (synced === scopes.length) this.options.onSynced?.();
        }),
      ),
    );
  }

  /** What a sweep's observation holds, from the cache. */
  observation(): Observation {
    const stuck: StuckContainer[] = [];
    const podCapacity = new Map<string, PodCapacity>();
    const nodesWithoutSandboxCondition = new Set<string>();
    const sandboxWaits: Observation['sandboxWaits'] = [];
    for (const pod of this.pods.values()) {
      if (pod.lacksSandboxCondition) nodesWithoutSandboxCondition.add(pod.node);
      if (pod.sandboxNotReadySince)
        sandboxWaits.push({ namespace: pod.namespace, pod: pod.name, node: pod.node, since: pod.sandboxNotReadySince });
      if (pod.stuck.length === 0) continue;
      stuck.push(...pod.stuck);
      if (pod.capacity) podCapacity.set(pod.uid, pod.capacity);
    }
    stuck.sort((a, b) => compareText(a.namespace, b.namespace) || compareText(a.pod, b.pod));
    let podsScanned = 0;
    for (const n of this.pendingByScope.values()) podsScanned += n;
    return { stuck, podsScanned, candidates: this.seen.size, pages: 0, nodesWithoutSandboxCondition, sandboxWaits, podCapacity };
  }

  /** The cached pod, by uid. */
  pod(uid: string): CachedPod | undefined {
    return this.pods.get(uid);
  }

  /** Candidate reads not yet answered: an observation taken now may miss what they bring. */
  get reading(): number {
    return this.inFlight.size;
  }

  private async watchScope(namespace: string | undefined, signal: AbortSignal, onFirstSync: () => void): Promise<void> {
    const scope = namespace ?? '*';
    let resourceVersion: string | undefined;
    let failures = 0;
    let firstSync = true;
    while (!signal.aborted) {
      try {
        if (resourceVersion === undefined) {
          resourceVersion = await this.list(namespace);
          await Promise.all(this.inFlight.values());
          if (firstSync) onFirstSync();
          firstSync = false;
        }
        const timeoutSeconds = Math.round((this.options.watchTimeoutSeconds ?? 300) * (1 + 0.2 * (this.options.random ?? Math.random)()));
        const onEvent = (e: PodRowEvent) => {
          resourceVersion = e.resourceVersion || resourceVersion;
          failures = 0;
          if (e.type !== 'BOOKMARK') this.apply(namespace, e.type, e.row);
        };
        await this.watchGateway.watchPodRows(
          { namespace, fieldSelector: PENDING_PODS, resourceVersion, timeoutSeconds, idleTimeoutMs: (timeoutSeconds + 30) * 1000, signal },
          onEvent,
        );
        if (!signal.aborted) this.options.onRestart(scope, 'timeout');
      } catch (error) {
        if (signal.aborted) break;
        if (error instanceof WatchExpiredError || describeApiError(error).status === 410) {
          this.options.onRestart(scope, 'expired', (error as Error).message);
          resourceVersion = undefined;
          continue;
        }
        failures += 1;
        this.options.onRestart(scope, 'dropped', describeApiError(error).message);
        // Back off on repeated failures (the API server restarting), 0.5 s doubling to 30 s.
        await this.options.sleep(Math.min(30_000, 500 * 2 ** (failures - 1)), signal);
      }
    }
  }

  /** A full list of the scope's rows; forgets the pods it no longer holds. Returns the list's resourceVersion. */
  private async list(namespace: string | undefined): Promise<string> {
    const listed = new Set<string>();
    let continueToken: string | undefined;
    let resourceVersion = '';
    let count = 0;
    do {
      const page = await this.watchGateway.listPodRows({
        namespace,
        fieldSelector: PENDING_PODS,
        limit: this.options.pageSize,
        continueToken,
      });
      if (!continueToken) resourceVersion = page.resourceVersion;
      count += page.rows.length;
      for (const row of page.rows) {
        listed.add(row.uid);
        this.apply(namespace, 'MODIFIED', row);
      }
      continueToken = page.continueToken;
    } while (continueToken);
    this.pendingByScope.set(namespace ?? '*', count);
    for (const [uid, seen] of this.seen) {
      if ((namespace === undefined || seen.namespace === namespace) && !listed.has(uid)) this.forget(uid);
    }
    return resourceVersion;
  }

  private apply(namespace: string | undefined, type: 'ADDED' | 'MODIFIED' | 'DELETED', row: PodRowVersion): void {
    const scope = namespace ?? '*';
    if (type === 'ADDED') this.pendingByScope.set(scope, (this.pendingByScope.get(scope) ?? 0) + 1);
    if (type === 'DELETED') this.pendingByScope.set(scope, Math.max(0, (this.pendingByScope.get(scope) ?? 0) - 1));
    if (type === 'DELETED' || !isCandidateStatus(row.status)) return this.forget(row.uid);
    const seen = this.seen.get(row.uid);
    if (seen?.resourceVersion === row.resourceVersion) return;
    this.seen.set(row.uid, { namespace: row.namespace || namespace || '', name: row.name, resourceVersion: row.resourceVersion });
    this.read(row.uid);
  }

  private forget(uid: string): void {
    this.seen.delete(uid);
    if (this.pods.delete(uid)) this.options.onChange(undefined, uid);
  }

  /** Reads the pod in full; a newer row seen meanwhile is read again after. */
  private read(uid: string): void {
    if (this.inFlight.has(uid)) return;
    const work = this.reads(async () => {
      for (let version = this.seen.get(uid); version;) {
        const pod = await this.readPod(version.namespace, version.name);
        const now = this.seen.get(uid);
        if (now === undefined) return; // forgotten meanwhile
        if (pod === 'error') {
          // Read again at its next version or the next list; the backstop sweep covers it meanwhile.
          now.resourceVersion = '';
          return;
        }
        if (pod?.metadata?.uid === uid && pod.status?.phase === 'Pending') {
          this.keep(pod);
          // The read may be newer than the row: its own version is what the next row is compared with.
          if (now === version) now.resourceVersion = pod.metadata.resourceVersion ?? now.resourceVersion;
        } else if (this.pods.delete(uid)) this.options.onChange(undefined, uid);
        version =
          now.resourceVersion !== version.resourceVersion && now.resourceVersion !== pod?.metadata?.resourceVersion ? now : undefined;
      }
    }).finally(() => this.inFlight.delete(uid));
    this.inFlight.set(uid, work);
  }

  /** The pod; undefined when it is gone; `error` when it could not be read. */
  private async readPod(namespace: string, name: string): Promise<V1Pod | undefined | 'error'> {
    try {
      return await this.gateway.readPod(namespace, name);
    } catch (error) {
      return describeApiError(error).status === 404 ? undefined : 'error';
    }
  }

  private keep(pod: V1Pod): void {
    const stuck = findStuckContainers(pod);
    const uid = pod.metadata?.uid ?? '';
    const controller = stuck[0]?.controller;
    const job = jobOwner(controller);
    const cached: CachedPod = {
      uid,
      namespace: pod.metadata?.namespace ?? '',
      name: pod.metadata?.name ?? '',
      node: pod.spec?.nodeName ?? '',
      resourceVersion: pod.metadata?.resourceVersion ?? '',
      stuck,
      capacity: stuck.length > 0 ? podCapacity(pod) : undefined,
      lacksSandboxCondition: lacksSandboxCondition(pod),
      sandboxNotReadySince: sandboxNotReadySince(pod),
      key: job && controller ? controller.uid : uid,
    };
    this.pods.set(uid, cached);
    this.options.onChange(cached, uid);
  }
}
