// Domain types shared by every stage of a sweep. Pure data: no I/O, no client types.
//
// Glossary (code, audit lines and README use these words in these senses only):
// - sweep: one pass observe → classify → attribute → judge → act → report.
// - stuck container: a container waiting on its image (a stuck reason), or stalled: waiting to
//   be created although its pod's sandbox is ready, or its pull cancelled by the runtime for lack
//   of progress; its pull class (permanent|auth|transient|unknown|stalled) picks its grace.
// - action: what the policy prescribes for a Job: fail | report | ignore.
// - decision: the judge's verdict on one Job (or one pod without a Job), with its action, plan
//   and the detail saying why.
// - plan: what this sweep decided to do with that Job: fail | report | retry | heal | skip | defer | error.
// - outcome: what then happened: failed | reported | retried | healed | skipped | deferred | error; a
//   dry run writes nothing, so there it is would-fail | would-report | would-retry | would-heal instead.
// - heal: recreating a Job's stuck, never-started pods once the cause is gone (judge/heal.ts).
// - claim: the annotations (with a claim id unique to the sweep) and label that mark a Job as
//   failed by the sweeper; written in one conditional patch, so exactly one sweep owns a failure.
// - pending: a Job claimed by a sweep that has not finished yet; checked on every sweep, and
//   retried (by its deadline) once `limits.confirmWithin` has passed.
// - judgement: all decisions of one sweep plus the outage assessment.

/** The classes of a pull that failed with an error (classify/pull-class.ts; a cancelled pull is `stalled`). */
export const PULL_FAILURE_CLASSES = ['permanent', 'auth', 'transient', 'unknown'] as const;
/** Every grace class: the pull-failure classes and `stalled` (no error, no progress). */
export const PULL_CLASSES = [...PULL_FAILURE_CLASSES, 'stalled'] as const;
export type PullClass = (typeof PULL_CLASSES)[number];

export const ACTIONS = ['fail', 'report', 'ignore'] as const;
export type Action = (typeof ACTIONS)[number];

// The plans and their outcome words, live and dry run, are one table: outcomes.ts.
export { DRY_RUN_OUTCOMES, OUTCOMES, PLANS, outcomesFor, type Outcome, type Plan } from './outcomes.ts';

/** Waiting reasons that mean "this container is stuck on its image". */
export const STUCK_REASONS = [
  'ErrImagePull',
  'ImagePullBackOff',
  'InvalidImageName',
  'ErrImageNeverPull',
  'RegistryUnavailable',
  'SignatureValidationFailed',
  'ImageInspectError',
] as const;
export type StuckReason = (typeof STUCK_REASONS)[number];

export function isStuckReason(value: string | undefined): value is StuckReason {
  return value !== undefined && (STUCK_REASONS as readonly string[]).includes(value);
}

/**
 * The kubelet's default waiting reasons of a container it has not created yet (`PodInitializing`
 * when the pod has init containers). With the sandbox ready they mean: pulling, or queued behind
 * another pull (class `stalled`).
 */
export const STALLED_REASONS = ['ContainerCreating', 'PodInitializing'] as const;
export type StalledReason = (typeof STALLED_REASONS)[number];

export function isStalledReason(value: string | undefined): value is StalledReason {
  return value !== undefined && (STALLED_REASONS as readonly string[]).includes(value);
}

/** The waiting reason of a stuck container. */
export type WaitingReason = StuckReason | StalledReason;

export type ContainerKind = 'init' | 'sidecar' | 'regular';

export interface OwnerRef {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  controller: boolean;
}

/** The pod's owner reference when it points at a batch/v1 Job: the one test of Job ownership. */
export function jobOwner(controller: OwnerRef | undefined): OwnerRef | undefined {
  if (!controller) return undefined;
  const group = controller.apiVersion.split('/')[0];
  return controller.kind === 'Job' && group === 'batch' ? controller : undefined;
}

/** One container of one pod that waits on its image. Output of the classify stage. */
export interface StuckContainer {
  namespace: string;
  pod: string;
  podUid: string;
  /** The pod's resourceVersion when observed: the precondition of the sweeper's pod writes. */
  podResourceVersion: string;
  container: string;
  containerKind: ContainerKind;
  /** The reference whose pull failed: the container's image, or the image volume's it mounts. */
  image: string;
  /** The image volume (`spec.volumes[].image`) whose pull failed, when it was one (classify/image-volume.ts). */
  volume?: string;
  reason: WaitingReason;
  message: string;
  pullClass: PullClass;
  /** When the container could first start pulling (from pod status, never from sweeper memory). */
  stuckSince: Date;
  /** The pod's controller owner reference, if any. */
  controller: OwnerRef | undefined;
  /** The pod's `imagepull-sweeper/` annotations, when it has any (a pod under an `owners` rule is judged by them). */
  podAnnotations?: Record<string, string>;
  /** What a heal is judged on, for a class healing may fix (auth, transient, stalled; judge/heal.ts). */
  heal?: HealFacts;
}

/** The classes whose cause can go away: an `auth` pod given its secret, a `transient` or `stalled` registry back. */
export const HEALABLE_CLASSES = ['auth', 'transient', 'stalled'] as const satisfies readonly PullClass[];

export function isHealableClass(c: PullClass): c is (typeof HEALABLE_CLASSES)[number] {
  return (HEALABLE_CLASSES as readonly PullClass[]).includes(c);
}

/** A stuck pod's facts a heal needs (classify/stuck.ts), shared by its stuck containers. */
export interface HealFacts {
  /** A container of the pod that has run (as force-delete says it): such a pod is never healed. */
  ran?: string;
  /** `spec.serviceAccountName`, when not `default`. */
  serviceAccount?: string;
  /** The names in `spec.imagePullSecrets`, in order, when it names any. */
  pullSecrets?: string[];
  /** `batch.kubernetes.io/job-index-failure-count` (backoffLimitPerIndex), when above 0. */
  indexFailures?: number;
}

/** What a Job may still spend on a pod deletion (judge/heal.ts). */
export interface JobBudget {
  /** spec.backoffLimit (6 when unset). */
  backoffLimit: number;
  /** spec.backoffLimitPerIndex, when set. */
  backoffLimitPerIndex?: number;
  /** Failures counted so far: status.failed plus those not counted yet (uncountedTerminatedPods.failed). */
  failed: number;
  /** status.terminating: pods on their way out, each of which may still count as a failure. */
  terminating: number;
}

/** The parts of a Job the judge needs. Built by the attribute stage from a V1Job. */
export interface JobView {
  namespace: string;
  name: string;
  uid: string;
  resourceVersion: string;
  annotations: Record<string, string>;
  /** Complete or Failed condition is True (or the Job has a completionTime). */
  finished: boolean;
  /** metadata.deletionTimestamp is set. */
  deleting: boolean;
  /** spec.managedBy, when set. */
  managedBy: string | undefined;
  /** spec.suspend is true. */
  suspended: boolean;
  /** True when the Job has a Failed or FailureTarget condition. */
  failed: boolean;
  /** FailureTarget but not yet Failed: the Job controller waits for its pods to end (docs/contract.md "How a Job is failed", step 4). */
  failing?: boolean;
  /** spec.podFailurePolicy.rules, in order. */
  podFailureRules: PodFailureRule[];
  /** Names of the pod template's init and regular containers. */
  containerNames: string[];
  /** The CronJob that owns this Job, if any. */
  cronJob: string | undefined;
  /**
   * The owner chain above the Job, nearest first, by controller references only: the Job's
   * controller (CronJob, JobSet, ...) and, for a JobSet, the JobSet's own controller (e.g. a
   * TrainJob), read by the attribute stage. Empty for a Job nothing controls.
   */
  owners: OwnerRef[];
  /** That CronJob's uid (to be sure a CronJob read later is the same one). */
  cronJobUid?: string;
  /** status.startTime, used to compute an already-passed activeDeadlineSeconds. */
  startTime: Date | undefined;
  /** The JobSet that owns this Job, if any. */
  jobSet?: JobSetMembership;
  /** Its `imagepull-sweeper/pending` label: `true` once claimed, `queued` while its time stuck is kept. */
  pendingLabel?: string;
  /** The Kueue queue the Job waits in, if Kueue manages it (docs/kueue.md). */
  queue?: QueueMembership;
  /** What a pod deletion may still spend (judge/heal.ts). */
  budget?: JobBudget;
  /** The pod template names its own pull secrets: a new pod gets those, never its ServiceAccount's. */
  templatePullSecrets?: boolean;
}

/** A Job Kueue manages (label `kueue.x-k8s.io/queue-name`): Kueue suspends it to evict it and resumes it to admit it. */
export interface QueueMembership {
  /** Its LocalQueue. */
  name: string;
  /** While suspended: when (its `Suspended` condition's last transition to True, on the API server's clock). */
  suspendedSince: Date | undefined;
}

/** One rule of a Job's spec.podFailurePolicy, as far as the judge evaluates it. */
export interface PodFailureRule {
  /** FailJob | FailIndex | Ignore | Count */
  action: string;
  onExitCodes?: { containerName?: string; operator: string; values: number[] };
  onPodConditions?: { type: string; status: string }[];
}

/** What the attribute stage found behind a stuck pod (the judge's input). */
export type PodOwner =
  | { kind: 'job'; job: JobView }
  | { kind: 'not-a-job'; owner: OwnerRef | undefined }
  | { kind: 'job-gone'; owner: OwnerRef; detail: string }
  | { kind: 'unreadable'; owner: OwnerRef | undefined; detail: string };

/** The parts of a CronJob the suspension judgement needs. Built by the attribute stage from a V1CronJob. */
export interface CronJobView {
  namespace: string;
  name: string;
  uid: string;
  resourceVersion: string;
  annotations: Record<string, string>;
  suspended: boolean;
  /** status.lastSuccessfulTime as the API server wrote it, if any. */
  lastSuccessfulTime: string | undefined;
}

/** Resource name -> amount in base units: cores for cpu, bytes for memory, units otherwise. */
export type ResourceAmounts = Record<string, number>;

/** What a pod reserves on its node (observe/pod-requests.ts), and since when. */
export interface PodCapacity {
  requests: ResourceAmounts;
  /** When the node's capacity was reserved: the pod was bound (PodScheduled), else created. */
  heldSince: Date | undefined;
}

export function addInto(target: ResourceAmounts, add: ResourceAmounts, factor = 1): void {
  for (const [name, v] of Object.entries(add)) target[name] = (target[name] ?? 0) + v * factor;
}

/** The JobSet (jobset.x-k8s.io) that owns a Job, and the restart attempt the Job was created for. */
export interface JobSetMembership {
  name: string;
  uid: string;
  /** Label `jobset.sigs.k8s.io/restart-attempt`: the JobSet's restarts when it created the Job. */
  restartAttempt: number | undefined;
  /** Label `jobset.sigs.k8s.io/job-restart-attempt`: restarts of this one Job (failure policy `RestartJob`). */
  jobRestartAttempt: number | undefined;
  /** The JobSet's `imagepull-sweeper/spent` annotation, once the attribute stage has read it (docs/jobset.md). */
  remembered?: string;
  /** Why the JobSet could not be read: its Jobs then get their full grace. */
  unreadable?: string;
}

/** One Job of a JobSet the sweeper failed: a later restart stuck the same way has its grace spent. */
export interface SpentGrace {
  image: string;
  pullClass: PullClass;
  job: string;
  restartAttempt: number | undefined;
  jobRestartAttempt: number | undefined;
  /** RFC 3339, when the sweeper failed that Job. */
  at: string;
}

/** `Kind/name` per link, nearest first: how the audit line, the Event and the message name an owner chain. */
export function formatOwners(owners: readonly Pick<OwnerRef, 'kind' | 'name'>[]): string[] {
  return owners.map((o) => `${o.kind}/${o.name}`);
}
