import type { Action, JobView, OwnerRef, Plan, StuckContainer } from '../model.ts';
import type { GraceSource } from '../policy/types.ts';

/** What the attribute stage found behind a stuck pod. */
export type PodOwner =
  | { kind: 'job'; job: JobView }
  | { kind: 'not-a-job'; owner: OwnerRef | undefined }
  | { kind: 'job-gone'; owner: OwnerRef; detail: string }
  | { kind: 'unreadable'; owner: OwnerRef | undefined; detail: string };

export type FailMechanism = 'podFailurePolicy' | 'activeDeadlineSeconds';

/** One decision per Job (or per pod without a Job), about its most overdue stuck container. */
export interface Decision
  extends Pick<
    StuckContainer,
    'namespace' | 'pod' | 'podUid' | 'container' | 'containerKind' | 'image' | 'reason' | 'message' | 'pullClass' | 'stuckSince'
  > {
  job: string | undefined;
  cronJob: string | undefined;
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
  warnings: string[];
  /** The Job as judged; undefined for pods not owned by a Job. */
  jobView: JobView | undefined;
  /** How many of this Job's pods are stuck. */
  stuckPods: number;
}

export interface OutageAssessment {
  tripped: boolean;
  stuckPods: number;
  images: number;
  transientPods: number;
  transientFraction: number;
}

/** Every decision of one sweep, and the outage breaker they were judged under. */
export interface Judgement {
  decisions: Decision[];
  outage: OutageAssessment;
}
