// `run --leader-elect`: the flags (Kubernetes components' names) and the wiring to the Lease.
import { randomUUID } from 'node:crypto';
import type { Command } from 'commander';
import type winston from 'winston';
import { tryParseGoDuration } from '../policy/duration.ts';
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
    .option('--leader-elect-lease-name <name>', "the Lease's name", 'imagepull-sweeper')
    .option('--leader-elect-lease-duration <duration>', 'how long followers wait after the last renewal they saw before taking over', '15s')
    .option('--leader-elect-renew-deadline <duration>', 'how long the leader retries renewing before it stops sweeping', '10s')
    .option('--leader-elect-retry-period <duration>', 'between attempts to acquire or renew', '2s');
}

/** Runs `lead` whenever this process holds the Lease, until `stop`; releases the Lease on stop. */
export async function runAsLeader(
  flags: LeaderElectFlags,
  logger: winston.Logger,
  lead: (signal: AbortSignal) => Promise<void>,
  stop: AbortSignal,
): Promise<void> {
  const timings = {
    leaseDurationMs: durationMs('--leader-elect-lease-duration', flags.leaderElectLeaseDuration ?? '15s'),
    renewDeadlineMs: durationMs('--leader-elect-renew-deadline', flags.leaderElectRenewDeadline ?? '10s'),
    retryPeriodMs: durationMs('--leader-elect-retry-period', flags.leaderElectRetryPeriod ?? '2s'),
  };
  const [{ LeaderElector, timingProblem }, { loadKubeConfig }, { createLeaseStore }, { abortableSleep }] = await Promise.all([
    import('../schedule/leader.ts'),
    import('./kube-config.ts'),
    import('../kube/leases.ts'),
    import('../schedule/scheduler.ts'),
  ]);
  const problem = timingProblem(timings);
  if (problem) throw new UsageError(`--leader-elect timings: ${problem}`);
  const kubeConfig = loadKubeConfig(flags);
  const name = flags.leaderElectLeaseName ?? 'imagepull-sweeper';
  const store = createLeaseStore(kubeConfig, leaseNamespace(flags.leaderElectNamespace, kubeConfig), name, {
    timeoutMs: timings.renewDeadlineMs,
  });
  const elector = new LeaderElector({
    store,
    // Unique per process, as client-go's hostname_uuid: a restarted pod is a new candidate.
    identity: `${instanceName()}_${randomUUID()}`,
    timings,
    monotonicMs: () => performance.now(),
    wallClock: () => new Date(),
    sleep: abortableSleep,
    logger,
  });
  await elector.run(lead, stop);
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

function durationMs(flag: string, text: string): number {
  const parsed = tryParseGoDuration(text);
  if (!parsed.ok || parsed.seconds <= 0) throw new UsageError(`${flag} ${text}: ${parsed.ok ? 'must be more than 0' : parsed.error}`);
  return parsed.seconds * 1000;
}
