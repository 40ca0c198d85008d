import type { Action, PullClass } from '../model.ts';

/** Seconds per pull class. */
export type GraceSeconds = Record<PullClass, number>;

export interface JobOverrides {
  allowed: boolean;
  maxGraceSeconds: number;
}

export interface LabelSelectorRequirement {
  key: string;
  operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist';
  values?: string[];
}

export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: LabelSelectorRequirement[];
}

export interface Rule {
  name: string;
  /** Globs over namespace names (`*`, `?`, `[abc]`). Unset: any namespace. */
  namespaces?: string[];
  namespaceSelector?: LabelSelector;
  /**
   * Set: the rule applies to stuck pods whose controller is one of these kinds (`Kind.group`, or
   * `Pod` for none), never to a Job's pods (policy/owners.ts). Unset: to Jobs' pods only.
   */
  owners?: string[];
  action?: Action;
  grace?: Partial<GraceSeconds>;
  jobOverrides?: Partial<JobOverrides>;
  /** Recreate a stuck pod once its cause is gone (docs/policy.md "Healing"); unset: defaults.heal. */
  heal?: boolean;
}

export interface Limits {
  maxJobsPerSweep: number;
  maxJobsPerNamespace: number;
  outage: { minStuckPods: number; minImages: number; transientFraction: number; authFraction: number };
  /** A Job failed by the sweeper but not finished this long after `failed-at` is failed again. */
  confirmWithinSeconds: number;
  /** A never-started pod of such a Job still terminating this long after `failed-at` is deleted with grace 0; 0 = never. */
  forceDeleteAfterSeconds: number;
}

export interface CronJobsPolicy {
  /** 0: off; N: suspend a CronJob after N of its Jobs in a row were failed on the same image. */
  suspendAfter: number;
}

export interface Policy {
  defaults: { action: Action; grace: GraceSeconds; jobOverrides: JobOverrides; heal: boolean };
  rules: Rule[];
  limits: Limits;
  cronJobs: CronJobsPolicy;
}

export interface PolicyProblem {
  line: number; // 1-based
  column: number; // 1-based
  path: string; // e.g. "rules[0].grace.permanent" ("" for the document root)
  message: string;
}

/** The policy in force for one namespace (and optionally one Job). */
export interface EffectivePolicy {
  /** Name of the first rule that matched, or "defaults". */
  rule: string;
  action: Action;
  grace: GraceSeconds;
  jobOverrides: JobOverrides;
  /** Healing is on (docs/policy.md "Healing"). */
  heal: boolean;
  /** For each field, where its value came from: a rule name or "defaults". */
  sources: {
    action: string;
    grace: Record<PullClass, string>;
    /** The rule name if the rule set either jobOverrides field, else "defaults". */
    jobOverrides: string;
    /** Per jobOverrides field (a rule may set one and inherit the other). */
    jobOverridesDetail?: { allowed: string; maxGraceSeconds: string };
    heal: string;
  };
}

/** Where a Job's grace came from: a rule, the defaults, or the Job's `imagepull-sweeper/grace` annotation. */
export const GRACE_SOURCES = ['rule', 'defaults', 'annotation'] as const;
export type GraceSourceKind = (typeof GRACE_SOURCES)[number];

export interface GraceSource {
  kind: GraceSourceKind;
  /** The rule's name when kind is `rule`. */
  rule: string | undefined;
  /** The annotation asked for more than jobOverrides.maxGrace. */
  clamped: boolean;
}

export interface JobGrace {
  grace: GraceSeconds;
  /** Per class, where its grace came from. */
  sources: Record<PullClass, GraceSource>;
  /** Set when the Job's imagepull-sweeper/grace annotation changed the grace. */
  override: { requested: number; applied: number; clamped: boolean } | undefined;
  /** e.g. annotation present but overrides not allowed, or unparseable. */
  warnings: string[];
}
