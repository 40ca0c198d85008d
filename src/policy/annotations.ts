// Annotation names from the product contract, and the per-Job ignore switch.

export const ANNOTATION_PREFIX = 'imagepull-sweeper/';

export const ANNOTATIONS = {
  ignore: `${ANNOTATION_PREFIX}ignore`,
  grace: `${ANNOTATION_PREFIX}grace`,
  failedAt: `${ANNOTATION_PREFIX}failed-at`,
  reason: `${ANNOTATION_PREFIX}reason`,
  message: `${ANNOTATION_PREFIX}message`,
  /** Set when a report-only Event was emitted, so later sweeps do not repeat it. */
  reportedAt: `${ANNOTATION_PREFIX}reported-at`,
  // On a CronJob (cronJobs.suspendAfter): when the sweeper suspended it, and the run of its Jobs
  // failed in a row so far (count, image, Job names, the lastSuccessfulTime it was counted against).
  suspendedAt: `${ANNOTATION_PREFIX}suspended-at`,
  cronFailedInARow: `${ANNOTATION_PREFIX}failed-in-a-row`,
  cronFailedImage: `${ANNOTATION_PREFIX}failed-image`,
  cronFailedJobs: `${ANNOTATION_PREFIX}failed-jobs`,
  cronLastSuccess: `${ANNOTATION_PREFIX}last-success-seen`,
  cronCountedAt: `${ANNOTATION_PREFIX}counted-at`,
  /** On a JobSet: the Jobs of it the sweeper failed, whose restarts stuck the same way have no grace left (docs/jobset.md). */
  jobSetSpent: `${ANNOTATION_PREFIX}spent`,
  /** The claim id of the sweep that failed the Job: unique per sweep, names its Event. */
  claim: `${ANNOTATION_PREFIX}claim`,
  /** On a Job Kueue queues: what it was stuck on and for how long, across admissions (docs/kueue.md). */
  stuck: `${ANNOTATION_PREFIX}stuck`,
  /** When the sweeper last healed a pod of the Job (docs/contract.md "Healing"). */
  healedAt: `${ANNOTATION_PREFIX}healed-at`,
  /** What it healed, per cause: never again, and the time stuck before counts (judge/heal-memory.ts). */
  healed: `${ANNOTATION_PREFIX}healed`,
  /** The registry host the outage breaker held this Job for, and since when (judge/heal-evidence.ts). */
  outageHeld: `${ANNOTATION_PREFIX}outage-held`,
} as const;

export const LABELS = {
  /**
   * Found by a label selector on every sweep until the sweeper has seen the Job finish: "true"
   * from the claim; "queued" on a Job Kueue queues whose time stuck the sweeper keeps (docs/kueue.md).
   */
  pending: `${ANNOTATION_PREFIX}pending`,
} as const;

/** The values of the `pending` label. */
export const PENDING = { claimed: 'true', queued: 'queued' } as const;

/** The label Kueue manages a Job by: its LocalQueue. */
export const KUEUE_QUEUE_LABEL = 'kueue.x-k8s.io/queue-name';

/**
 * `imagepull-sweeper/ignore`. Fails safe: any value other than "false" (case-insensitive)
 * ignores the Job; values other than "true"/"false" also produce a warning.
 */
export function ignoredByAnnotation(annotations: Record<string, string>): { ignored: boolean; warning: string | undefined } {
  if (!Object.hasOwn(annotations, ANNOTATIONS.ignore)) return { ignored: false, warning: undefined };
  const raw = annotations[ANNOTATIONS.ignore]!;
  const value = raw.trim().toLowerCase();
  if (value === 'true') return { ignored: true, warning: undefined };
  if (value === 'false') return { ignored: false, warning: undefined };
  return {
    ignored: true,
    warning: `annotation ${ANNOTATIONS.ignore}=${JSON.stringify(raw)} is not "true" or "false"; the Job is ignored to be safe`,
  };
}
