import { Counter, Histogram, type Registry } from 'prom-client';
import type { DueReason } from './due.ts';

export type WatchTrigger = 'start' | 'timer' | 'policy' | 'schedule';
/** What a watch of `run --watch` follows: the Pending pods, the policy, the ServiceAccounts (healing on). */
export type WatchedKind = 'pods' | 'policy' | 'serviceaccounts';

/** The metrics of `run --watch`, beside the sweep's (docs/how-it-works.md "Event-driven mode"). */
export class WatchMetrics {
  private readonly reaction: Histogram<'reason'>;
  private readonly restarts: Counter<'watch' | 'reason'>;
  private readonly relists: Counter<'watch'>;
  private readonly sweeps: Counter<'trigger'>;

  constructor(registry: Registry) {
    this.reaction = new Histogram({
      name: 'imagepull_sweeper_watch_reaction_seconds',
      help: "From a timed rule's time (grace expiry, forceDeleteAfter, confirmWithin; heal: a ServiceAccount given a pull secret) to the sweep's first write for that Job, on the API server's clock, by rule.",
      labelNames: ['reason'],
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120],
      registers: [registry],
    });
    this.restarts = new Counter({
      name: 'imagepull_sweeper_watch_restarts_total',
      help: 'Watch requests ended and started again, by watch (pods, policy, serviceaccounts) and reason (timeout: the server ended it; dropped: it failed; expired: 410 Gone, listed again).',
      labelNames: ['watch', 'reason'],
      registers: [registry],
    });
    this.relists = new Counter({
      name: 'imagepull_sweeper_watch_lists_total',
      help: 'Full lists a watch started from, by watch (pods, policy, serviceaccounts): the first one, and one after each expired resourceVersion.',
      labelNames: ['watch'],
      registers: [registry],
    });
    this.sweeps = new Counter({
      name: 'imagepull_sweeper_watch_sweeps_total',
      help: 'Sweeps of run --watch by trigger: start (after the first list, or on taking the Lease), timer (a timed rule fell due), policy (the policy ConfigMap or file changed), schedule (the backstop).',
      labelNames: ['trigger'],
      registers: [registry],
    });
    for (const trigger of ['start', 'timer', 'policy', 'schedule']) this.sweeps.inc({ trigger }, 0);
    for (const watch of ['pods', 'policy', 'serviceaccounts']) {
      this.relists.inc({ watch }, 0);
      for (const reason of ['timeout', 'dropped', 'expired']) this.restarts.inc({ watch, reason }, 0);
    }
  }

  reacted(reason: DueReason, seconds: number): void {
    this.reaction.observe({ reason }, Math.max(0, seconds));
  }

  restarted(watch: WatchedKind, reason: 'timeout' | 'dropped' | 'expired'): void {
    this.restarts.inc({ watch, reason });
    if (reason === 'expired') this.relists.inc({ watch });
  }

  listed(watch: WatchedKind): void {
    this.relists.inc({ watch });
  }

  swept(trigger: WatchTrigger): void {
    this.sweeps.inc({ trigger });
  }
}
