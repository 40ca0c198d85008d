// The policy file format (zod): the one source of the validator, the types of a file and the
// JSON Schema. Field types are in fields.ts, defaults in defaults.ts, the conversion in convert.ts.
//
// Decisions where the product contract (docs/contract.md) is silent:
// - A rule with neither `namespaces` nor `namespaceSelector` matches every namespace (all of its
//   zero matchers match); rules after such a catch-all can never match and get a warning.
// - `namespaces: []` is an error (ambiguous); leave the key out to match every namespace.
// - `namespaceSelector: {}` matches every namespace (Kubernetes semantics of an empty selector).
// - Rule names look like label values (<= 63 chars, alphanumerics, '-', '_', '.'); "defaults" is
//   reserved because EffectivePolicy uses it as the source of values that no rule set.
// - Empty values (`rules:` with nothing after it) are errors, like any other wrong type.
import * as z from 'zod';
import { ACTIONS, PULL_CLASSES } from '../model.ts';
import type { PullClass } from '../model.ts';
import {
  DEFAULT_ACTION,
  DEFAULT_CONFIRM_WITHIN_TEXT,
  DEFAULT_CRONJOBS,
  DEFAULT_FORCE_DELETE_AFTER_TEXT,
  DEFAULT_GRACE_TEXT,
  DEFAULT_HEAL,
  DEFAULT_JOB_OVERRIDES_TEXT,
  DEFAULT_LIMITS,
} from './defaults.ts';
import { duration, durationOrNever, fraction, globSchema, labelSelectorSchema, positiveInt } from './fields.ts';
import { describeValue, issueFrom } from './messages.ts';
import { ownerKindError } from './owners.ts';
import { isLabelName } from './selector.ts';

export const RESERVED_RULE_NAMES = ['defaults'] as const;

export function ruleNameError(name: string): string | undefined {
  if (name === '') return 'rule name must not be empty';
  if ((RESERVED_RULE_NAMES as readonly string[]).includes(name)) return `rule name ${JSON.stringify(name)} is reserved`;
  if (name.length > 63) return `rule name ${JSON.stringify(name)} is longer than 63 characters`;
  if (!isLabelName(name)) {
    return `rule name ${JSON.stringify(name)} must consist of alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric`;
  }
  return undefined;
}

const CLASS_DESCRIPTIONS: Record<PullClass, string> = {
  permanent:
    'Image or tag not found, manifest unknown, invalid name, ErrImageNeverPull, no image for this platform, an image the runtime refuses for good (schema 1 on containerd 2, a short name that resolves nowhere).',
  auth: 'Unauthorized, denied, insufficient_scope, no credentials.',
  transient: '429/toomanyrequests, pull QPS exceeded, 5xx, dial/DNS/TLS/timeouts.',
  unknown: 'Any other pull failure.',
  stalled:
    "No pull error at all, but the container has waited in ContainerCreating since its pod's sandbox was ready (a registry that never answers), or a pull the runtime cancelled for lack of progress (code = Canceled ... context canceled).",
};

function graceSchema(withDefaults: boolean) {
  const shape = Object.fromEntries(
    PULL_CLASSES.map((cls) => [
      cls,
      duration(`Grace for the ${cls} class: ${CLASS_DESCRIPTIONS[cls]}`, withDefaults ? DEFAULT_GRACE_TEXT[cls] : undefined).optional(),
    ]),
  ) as Record<PullClass, z.ZodOptional<ReturnType<typeof duration>>>;
  return z.strictObject(shape).meta({
    description: withDefaults
      ? 'How long a container may wait on its image before its Job is failed, per pull class.'
      : 'Grace per pull class for this rule; unset classes fall back to defaults.grace.',
  });
}

const actionSchema = z.enum(ACTIONS).meta({
  description: 'fail: fail the Job; report: emit the Event and audit line only; ignore: skip.',
});

function jobOverridesSchema(withDefaults: boolean) {
  return z
    .strictObject({
      allowed: z
        .boolean()
        .meta({
          description: 'Whether the imagepull-sweeper/grace annotation on a Job may set its grace.',
          ...(withDefaults ? { default: DEFAULT_JOB_OVERRIDES_TEXT.allowed } : {}),
        })
        .optional(),
      maxGrace: duration(
        'Longest grace a Job annotation may ask for; longer values are clamped.',
        withDefaults ? DEFAULT_JOB_OVERRIDES_TEXT.maxGrace : undefined,
      ).optional(),
    })
    .meta({ description: 'Bounds on the per-Job imagepull-sweeper/grace annotation.' });
}

function healSchema(withDefaults: boolean) {
  return z.boolean().meta({
    description:
      "Opt-in: recreate a Job's stuck pod, none of whose containers ever ran, once its cause is gone (auth: a pull secret its ServiceAccount now lists, or a named pull Secret created or changed since; transient and stalled: the registry host healthy again), within the Job's budget (the Eviction API when its podFailurePolicy ignores DisruptionTarget, else a deletion while failures + 1 stay within backoffLimit); at most once per pod and cause." +
      (withDefaults ? '' : ' Unset: defaults.heal.'),
    ...(withDefaults ? { default: DEFAULT_HEAL } : {}),
  });
}

const ruleSchema = z
  .strictObject({
    name: z
      .string()
      .superRefine((name, ctx) => issueFrom(ruleNameError(name), ctx))
      .meta({ description: 'Unique rule name, shown in audit lines, Events and `policy explain`.' }),
    namespaces: z
      .array(globSchema)
      .min(1, { error: 'list at least one glob, or leave "namespaces" out to match every namespace' })
      .meta({ description: 'Globs over namespace names (*, ?, [abc], [a-z], [!x]); any may match.' })
      .optional(),
    namespaceSelector: labelSelectorSchema.optional(),
    owners: z
      .array(z.string().superRefine((entry, ctx) => issueFrom(ownerKindError(entry), ctx)))
      .min(1, { error: 'list at least one kind, or leave "owners" out for a rule about Jobs' })
      .meta({
        description:
          "Opt-in: the rule applies to stuck pods whose controller is one of these kinds (Kind.group as kubectl names kinds, or Pod for a pod with no controller), never to a Job's pods; fail sets the pod's spec.activeDeadlineSeconds so the kubelet fails it. Kinds that recreate their pods for ever (ReplicaSet, Deployment, StatefulSet, DaemonSet, ReplicationController) are refused.",
        examples: [['SparkApplication.sparkoperator.k8s.io', 'Workflow.argoproj.io', 'Pod']],
      })
      .optional(),
    action: actionSchema.optional(),
    grace: graceSchema(false).optional(),
    jobOverrides: jobOverridesSchema(false).optional(),
    heal: healSchema(false).optional(),
  })
  .meta({
    description:
      'A rule applies when all of its matchers match (a rule with no matcher matches every namespace). Unset fields fall back to defaults.',
  });

const rulesSchema = z
  .array(ruleSchema)
  .superRefine(
    (rules, ctx) => {
      if (!Array.isArray(rules)) return;
      const firstIndex = new Map<string, number>();
      rules.forEach((rule: unknown, index) => {
        const name = typeof rule === 'object' && rule !== null ? (rule as { name?: unknown }).name : undefined;
        if (typeof name !== 'string') return;
        const first = firstIndex.get(name);
        if (first === undefined) firstIndex.set(name, index);
        else issueFrom(`duplicate rule name ${JSON.stringify(name)} (first used by rules[${first}])`, ctx, { path: [index, 'name'] });
      });
    },
    { when: () => true },
  )
  .meta({ description: 'Per-namespace rules; the first rule that matches a namespace wins.' });

const outageSchema = z
  .strictObject({
    minStuckPods: positiveInt(
      'Stuck pods needed in one sweep to suspect a registry outage.',
      DEFAULT_LIMITS.outage.minStuckPods,
    ).optional(),
    minImages: positiveInt('Distinct stuck images needed to suspect a registry outage.', DEFAULT_LIMITS.outage.minImages).optional(),
    transientFraction: fraction(
      'Fraction (0 < f <= 1) of stuck pods that must be transient for the breaker to trip for the transient class.',
      DEFAULT_LIMITS.outage.transientFraction,
    ).optional(),
    authFraction: fraction(
      'Fraction (0 < f <= 1) of stuck pods that must be auth for the breaker to trip for the auth class (a credential helper or token service is down).',
      DEFAULT_LIMITS.outage.authFraction,
    ).optional(),
  })
  .meta({
    description:
      "Outage breaker, evaluated for the whole sweep and for each registry host: when it trips for a class, that class's Jobs are reported, not failed, that sweep. A burst of not-found on one host (minStuckPods pods across minImages repositories) holds that host's permanent-class Jobs the same way.",
  });

const cronJobsSchema = z
  .strictObject({
    suspendAfter: z
      .int({ error: (iss) => (iss.input === undefined ? undefined : `expected 0 or a positive integer, got ${describeValue(iss.input)}`) })
      .min(0, { error: (iss) => `expected 0 or a positive integer, got ${describeValue(iss.input)}` })
      .meta({
        description: '0 = off; N = suspend a CronJob after N of its Jobs in a row were failed by the sweeper on the same image.',
        default: DEFAULT_CRONJOBS.suspendAfter,
      })
      .optional(),
  })
  .meta({ description: 'Stopping a CronJob that keeps creating Jobs stuck on the same image.' });

export const policyFileSchema = z
  .strictObject({
    defaults: z
      .strictObject({
        action: actionSchema.meta({ default: DEFAULT_ACTION }).optional(),
        grace: graceSchema(true).optional(),
        jobOverrides: jobOverridesSchema(true).optional(),
        heal: healSchema(true).optional(),
      })
      .meta({ description: 'Values used where no rule matches, and where the matching rule leaves a field unset.' })
      .optional(),
    rules: rulesSchema.optional(),
    limits: z
      .strictObject({
        maxJobsPerSweep: positiveInt(
          'Most Jobs acted on in one sweep; the rest wait, oldest stuck first.',
          DEFAULT_LIMITS.maxJobsPerSweep,
        ).optional(),
        maxJobsPerNamespace: positiveInt('Most Jobs acted on per namespace in one sweep.', DEFAULT_LIMITS.maxJobsPerNamespace).optional(),
        outage: outageSchema.optional(),
        confirmWithin: duration(
          'A Job failed by the sweeper but not Failed this long after is failed again (by its deadline).',
          DEFAULT_CONFIRM_WITHIN_TEXT,
        ).optional(),
        forceDeleteAfter: durationOrNever(
          'A pod of a Job failed by the sweeper, none of whose containers ever ran, still terminating this long after is deleted with grace period 0. 0 = never.',
          DEFAULT_FORCE_DELETE_AFTER_TEXT,
        ).optional(),
      })
      .meta({ description: 'Bounds on the blast radius of one sweep.' })
      .optional(),
    cronJobs: cronJobsSchema.optional(),
  })
  .meta({
    title: 'imagepull-sweeper policy',
    description: 'The policy.yaml key of the imagepull-sweeper policy ConfigMap.',
  });

export type PolicyFile = z.output<typeof policyFileSchema>;
