// The leader election's defaults, in one place: the flags of `run --leader-elect` show and apply
// them, and elector.ts is built around them. Kept apart so the CLI reads them without loading the elector.

export interface ElectionTimings {
  /** How long a follower waits, after it last saw the record change, before taking the lease. */
  leaseDurationMs: number;
  /** How long the leader keeps trying to renew before it gives leadership up. */
  renewDeadlineMs: number;
  /** Between attempts to acquire or renew. */
  retryPeriodMs: number;
}

/** The Kubernetes components' defaults (kube-scheduler, kube-controller-manager). */
export const DEFAULT_TIMINGS: ElectionTimings = { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 };
export const DEFAULT_LEASE_NAME = 'imagepull-sweeper';
