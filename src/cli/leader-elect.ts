// `run --leader-elect`: the flags (Kubernetes components' names) and the wiring to the Lease.
import { randomUUID } from 'node:crypto';
import type { Command } from 'commander';
import type winston from 'winston';
import type { ClientSettings, ResponseObserver } from '../kube/http.ts';
import type { Lease } from '../kube/leases.ts';
import type { ReflectorHandler } from '../watch/reflector.ts';
import { DEFAULT_LEASE_NAME, DEFAULT_TIMINGS, type ElectionTimings } from '../leader/defaults.ts';
import { durationFlagMs, retryFields, retryLine, shownDuration } from './connect.ts';
import { UsageError } from './errors.ts';
import { instanceName, ownNamespace } from './kube.ts';

export interface LeaderElectFlags {
  kubeconfig?: string;
  context?: string;
  leaderElect?: boolean;
  leaderElectNamespace?: string;
  leaderElectLeaseName?: string;
  leaderElectLeaseDuration?: string;
  leaderElectRenewDeadline?: string;
  leaderElectRetryPeriod?: string;
}

export function withLeaderElectOptions(cmd: Command): Command {
  return cmd
    .option('--leader-elect', 'sweep only while holding a Lease, so that one of several replicas sweeps')
    .option(
      '--leader-elect-namespace <ns>',
      "the Lease's namespace (default: the pod's own; outside a cluster the kubeconfig context's, else default)",
    )
    .option('--leader-elect-lease-name <name>', "the Lease's name", DEFAULT_LEASE_NAME)
    .option(
      '--leader-elect-lease-duration <duration>',
      'how long followers wait after the last renewal they saw before taking over',
      shownDuration(DEFAULT_TIMINGS.leaseDurationMs),
    )
    .option(
      '--leader-elect-renew-deadline <duration>',
      'how long the leader retries renewing before it stops sweeping',
      shownDuration(DEFAULT_TIMINGS.renewDeadlineMs),
    )
    .option('--leader-elect-retry-period <duration>', 'between attempts to acquire or renew', shownDuration(DEFAULT_TIMINGS.retryPeriodMs));
}

export interface LeaderObservers {
  onLeading?: (leading: boolean) => void;
  onResponse?: ResponseObserver;
  /** The Lease lost: told before `lead` is stopped (the requests in flight are abandoned). */
  onLost?: () => void;
  /** The elector's health, for /healthz. */
  onHealth?: (health: () => { ok: true } | { ok: false; why: string }) => void;
  /** The Lease requests' Date headers (the watch's clock), never the sweep's rate limit or fence. */
  settings?: Pick<ClientSettings, 'onServerDate' | 'onWarning'>;
}

/**
 * Runs `lead` once this process holds the Lease, until `stop` (then the Lease is released:
 * `released`) or until the Lease is lost (`lost`: the caller exits non-zero).
 * `observers`: `run`'s metrics (the leader gauge, the Lease requests), the fence and /healthz.
 */
export async function runAsLeader(
  flags: LeaderElectFlags,
  logger: winston.Logger,
  lead: (signal: AbortSignal) => Promise<void>,
  stop: AbortSignal,
  observers: LeaderObservers = {},
): Promise<'released' | 'lost'> {
  const timings: ElectionTimings = {
    leaseDurationMs: durationFlagMs('--leader-elect-lease-duration', flags.leaderElectLeaseDuration, DEFAULT_TIMINGS.leaseDurationMs),
    renewDeadlineMs: durationFlagMs('--leader-elect-renew-deadline', flags.leaderElectRenewDeadline, DEFAULT_TIMINGS.renewDeadlineMs),
    retryPeriodMs: durationFlagMs('--leader-elect-retry-period', flags.leaderElectRetryPeriod, DEFAULT_TIMINGS.retryPeriodMs),
  };
  const [
    { LeaderElector, timingProblem },
    { loadKubeConfig },
    { createLeaseGateway, createLeaseStore },
    { withLeaseRetries, hedgeAfterMs },
    { abortableSleep },
    { createWatchGateway, leaseCollection },
    { reflect },
  ] = await Promise.all([
    import('../leader/elector.ts'),
    import('./kube-config.ts'),
    import('../kube/leases.ts'),
    import('../kube/retrying.ts'),
    import('../run/scheduler.ts'),
    import('../kube/watch.ts'),
    import('../watch/reflector.ts'),
  ]);
  const problem = timingProblem(timings);
  if (problem) throw new UsageError(`--leader-elect timings: ${problem}`);
  const kubeConfig = loadKubeConfig(flags);
  const name = flags.leaderElectLeaseName ?? DEFAULT_LEASE_NAME;
  const gateway = withLeaseRetries(
    createLeaseGateway(kubeConfig, { timeoutMs: timings.renewDeadlineMs, onResponse: observers.onResponse, settings: observers.settings }),
    {
      onRetry: (n) => logger.warn(retryLine(n), retryFields(n)),
      hedgeAfterMs: hedgeAfterMs(timings.renewDeadlineMs),
    },
  );
  const store = createLeaseStore(gateway, leaseNamespace(flags.leaderElectNamespace, kubeConfig), name);
  const elector = new LeaderElector({
    store,
    // Unique per process, as client-go's hostname_uuid: a restarted pod is a new candidate.
    identity: `${instanceName()}_${randomUUID()}`,
    timings,
    monotonicMs: () => performance.now(),
    wallClock: () => new Date(),
    sleep: abortableSleep,
    logger,
    onLeading: observers.onLeading,
  });
  observers.onHealth?.(() => elector.health());
  // The Lease watched besides its reads: a follower sees each renewal as it is written.
  const watching = new AbortController();
  const lease = `${store.namespace}/${store.name}`;
  let watched = false;
  let refused = false;
  const watchedLease: ReflectorHandler<Lease> = {
    listStarted: () => undefined,
    listed: (lease) => elector.observed(lease),
    listEnded: () => undefined,
    event: (type, lease) => elector.observed(type === 'DELETED' ? undefined : lease),
  };
  const watch = reflect(
    createWatchGateway(kubeConfig, { timeoutMs: timings.renewDeadlineMs, onResponse: observers.onResponse, settings: observers.settings }),
    leaseCollection(store.namespace, store.name),
    watchedLease,
    {
      sleep: abortableSleep,
      onConnected: (up) => {
        if (up && !watched) logger.info('watching the lease', { lease });
        watched ||= up;
      },
      onRestart: (_scope, reason, error) => {
        // Refused (RBAC without the Lease's list/watch): followers still read it every retry period.
        const forbidden = /forbidden/i.test(error ?? '');
        if (forbidden && !refused) logger.warn('cannot watch the lease: following it by reads every retry period', { lease, error });
        else logger.debug('lease watch restarted', { reason, error });
        refused ||= forbidden;
      },
    },
    watching.signal,
  ).catch((error: unknown) => logger.debug('lease watch stopped', { error: (error as Error).message }));
  try {
    return await elector.run(lead, stop, observers.onLost);
  } finally {
    watching.abort();
    await watch;
  }
}

/** --leader-elect-namespace; in a pod its own namespace; else the kubeconfig context's, else default. */
export function leaseNamespace(
  flag: string | undefined,
  kubeConfig: { getCurrentContext(): string; getContextObject(name: string): { namespace?: string } | null },
): string {
  if (flag) return flag;
  const context = kubeConfig.getCurrentContext();
  if (context === 'inClusterContext') return ownNamespace();
  return kubeConfig.getContextObject(context)?.namespace || 'default';
}
