// Jobs read by a pre-judgement or a sweep, kept briefly for the sweep their timers start: a Job to
// be failed whose grace runs out within FRESH_MS of its read is judged from that read, so its first
// write (the claim, conditional on the resourceVersion read) waits on no read. A Job changed since
// answers 409: the act stage reads it again and judges it afresh (act/act.ts). Each read serves
// once; older ones are dropped.
import type { V1Job } from '@kubernetes/client-node';
import type { KubeGateway } from '../kube/gateway.ts';

/** A read of a Job serves a timer's sweep this long after it was sent. */
export const FRESH_MS = 30_000;

export class JobReads {
  private readonly reads = new Map<string, { job: V1Job; atMs: number }>();

  /** A gateway that records each Job it reads into `into` (by namespace/name). */
  static recording(gateway: KubeGateway, into: Map<string, V1Job>): KubeGateway {
    return {
      ...gateway,
      readJob: async (namespace, name) => {
        const job = await gateway.readJob(namespace, name);
        into.set(`${namespace}/${name}`, job);
        return job;
      },
    };
  }

  keep(job: V1Job, atMs: number): void {
    const { namespace, name } = job.metadata ?? {};
    if (namespace && name) this.reads.set(`${namespace}/${name}`, { job, atMs });
  }

  /**
   * A gateway whose readJob answers, once, from a read kept for one of the Jobs `uids` (no older
   * than FRESH_MS at `nowMs`); every other call, and every later read, goes to the API server.
   */
  serving(gateway: KubeGateway, uids: ReadonlySet<string>, nowMs: number): KubeGateway {
    this.prune(nowMs);
    return {
      ...gateway,
      readJob: (namespace, name) => {
        const key = `${namespace}/${name}`;
        const kept = this.reads.get(key);
        if (!kept || !uids.has(kept.job.metadata?.uid ?? '')) return gateway.readJob(namespace, name);
        this.reads.delete(key);
        return Promise.resolve(kept.job);
      },
    };
  }

  /** Drops the reads too old to serve at `nowMs`. */
  prune(nowMs: number): void {
    for (const [key, kept] of this.reads) if (kept.atMs < nowMs - FRESH_MS) this.reads.delete(key);
  }
}
