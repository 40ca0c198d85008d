import type { Action, JobView, Outcome, Plan, StuckContainer } from '../model.ts';
import type { CronJobOutcome } from '../outcomes.ts';
import type { GraceSource } from '../policy/types.ts';
import type { StuckCapacity } from './capacity.ts';
import type { ForceDeleteTarget } from './force-delete.ts';

/**
 * How a Job is failed (docs/contract.md "How a Job is failed"): by its own `FailureTarget`
 * condition; where that status write is refused, by a fallback (its podFailurePolicy, or its
 * deadline); and a pod under an `owners` rule, by its own deadline.
 */
export type FailMechanism = 'condition' | 'podFailurePolicy' | 'activeDeadlineSeconds' | 'podActiveDeadlineSeconds';

/** The mechanisms a Job falls back to when its status write is refused. */
export type FallbackMechanism = Extract<FailMechanism, 'podFailurePolicy' | 'activeDeadlineSeconds'>;

/** One decision per Job (or per pod without a Job), about its most overdue stuck container. */
export interface Decision extends Pick<
  StuckContainer,
  | 'namespace'
  | 'pod'
  | 'podUid'
  | 'podResourceVersion'
  | 'container'
  | 'containerKind'
  | 'image'
  | 'volume'
  | 'reason'
  | 'message'
  | 'pullClass'
  | 'stuckSince'
> {
  job: string | undefined;
  cronJob: string | undefined;
  /** The owner chain, `Kind/name` nearest first: above the Job, or a pod's own controller when it has no Job. */
  owners: string[];
  stuckSeconds: number;
  rule: string;
  /** What the policy prescribes for this Job: the rule's action, `ignore` by annotation, `report` under the outage breaker. */
  action: Action;
  graceSeconds: number | undefined;
  /** Where graceSeconds came from (set with it). */
  graceSource: GraceSource | undefined;
  /** What this sweep does with the Job (see the glossary in model.ts). */
  plan: Plan;
  /** Why, in a few words an operator can act on. */
  detail: string;
  mechanism: FailMechanism | undefined;
  /** Why a fallback mechanism was used: the status write was refused (the audit's `mechanism` and the message say so). */
  fallback?: string;
  /** The pod condition type to add, on the podFailurePolicy path (the fallback a Job's own policy allows). */
  failJobCondition: string | undefined;
  warnings: string[];
  /** The grace was already spent by an earlier restart of the Job's JobSet: says which (judge/jobset.ts). */
  spentBy?: string;
  /** A Job Kueue queues: what its earlier admissions were stuck (judge/queue.ts), for the detail and the message. */
  queued?: string;
  /** A Job Kueue queues: its `imagepull-sweeper/stuck` annotation to write (judge/queue.ts). */
  remember?: string;
  /** The Job as judged; undefined for pods not owned by a Job. */
  jobView: JobView | undefined;
  /** How many of this Job's pods are stuck. */
  stuckPods: number;
  /** A pending Job not finished `confirmWithin` after it was failed: its retry says what it found of its pods. */
  overdue?: boolean;
  /** A pending Job's never-started pods to delete with grace period 0 (plan `retry`). */
  forceDelete?: readonly ForceDeleteTarget[];
  /** What the Job's stuck pods request and how long they held it (judge/capacity.ts). */
  capacity?: StuckCapacity;
  /** Plan `heal`: the pods to recreate, how, and what the Job then remembers (judge/heal.ts). */
  heal?: HealPlan;
  /** Healing is on for the Job and its class: the evidence, or why it was not healed (the audit's `heal`). */
  healNote?: string;
  /** A Job the outage breaker holds, healing on: the annotation imagepull-sweeper/outage-held to write with its report. */
  outageHold?: string;
}

/** The pods a heal recreates, each with its evidence, and how (judge/heal.ts). */
export interface HealPlan {
  /** `evict`: the Eviction API (nothing spent); `delete`: a deletion with the pod's own grace period. */
  way: 'evict' | 'delete';
  pods: { pod: string; uid: string; resourceVersion: string; evidence: string }[];
  /** The annotation imagepull-sweeper/healed once this heal is recorded. */
  memory: string;
}

/** The breaker's figures for one scope: the whole sweep, or one registry host. */
export interface OutageScope {
  /** `the whole sweep` or `registry HOST`. */
  scope: string;
  host: string | undefined;
  stuckPods: number;
  images: number;
  transientPods: number;
  transientFraction: number;
  authPods: number;
  authFraction: number;
  /** Pods with a not-found failure, and the distinct repositories those name (a registry scope's burst). */
  notFoundPods: number;
  notFoundRepositories: number;
  /** The classes that tripped: transient/auth by fraction, permanent by a not-found burst (per host). */
  tripped: OutageTrip['pullClass'][];
}

/** One class tripped in one scope: its Jobs are reported, not failed, this sweep. */
export interface OutageTrip {
  scope: string;
  /** Undefined for the whole sweep. */
  host: string | undefined;
  /** `permanent`: a burst of not-found on one registry host. */
  pullClass: 'transient' | 'auth' | 'permanent';
  stuckPods: number;
  images: number;
  /** The share of the scope's stuck pods in that class (permanent: with a not-found failure). */
  fraction: number;
  /** Permanent trips: the distinct repositories the not-found failures name. */
  repositories?: number;
}

/** The whole sweep's figures, and every trip (whole sweep first, then registries by host). */
export interface OutageAssessment extends Omit<OutageScope, 'scope' | 'host' | 'tripped' | 'notFoundPods' | 'notFoundRepositories'> {
  tripped: boolean;
  trips: OutageTrip[];
}

/** Every decision of one sweep, and the outage breaker they were judged under. */
export interface Judgement {
  decisions: Decision[];
  outage: OutageAssessment;
}

// What became of a decision: act fills these in with live words, report words them (report/wording.ts).

/**
 * What a write sequence did beyond its plan, in live words (report/wording.ts words them for the
 * audit): a pod force-deleted (as `describeTarget` says it), or what it found.
 */
export type ActStep =
  | { kind: 'force-deleted'; pod: string }
  /** A heal: `pod P` recreated `how` (`evicted`, `deleted`). */
  | { kind: 'healed'; pod: string; how: 'evicted' | 'deleted' }
  | { kind: 'found'; text: string };

export interface ActResult {
  decision: Decision;
  outcome: Outcome;
  /** What went wrong, when an action (or part of one) failed. */
  error: string | undefined;
  /** The error was a refusal for good (RBAC, an admission policy): tried again more slowly than a fault. */
  refused?: true;
  /** What it did beyond its plan, in order; the decision's detail stays the plan's. */
  steps?: readonly ActStep[];
}

export interface CronJobResult {
  namespace: string;
  cronJob: string;
  /** The image of the run, and how many Jobs in a row failed on it (after this sweep). */
  image: string | undefined;
  failedInARow: number | undefined;
  /** Jobs of the run (most recent last). */
  jobs: string[];
  outcome: CronJobOutcome;
  detail: string;
  error: string | undefined;
}
