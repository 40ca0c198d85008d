// The policy file format (zod), its built-in defaults, and the conversion to the typed Policy.
//
// Decisions where the SPEC is silent:
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
import { tryParseGoDuration } from './duration.ts';
import { namespaceGlobError } from './glob.ts';
import { labelKeyError, labelValueError, requirementValuesError, SELECTOR_OPERATORS } from './selector.ts';
import type { CronJobsPolicy, Limits, Policy, Rule } from './types.ts';

export const DEFAULT_GRACE_TEXT: Record<PullClass, string> = {
  permanent: '2m',
  auth: '10m',
  transient: '1h',
  unknown: '15m',
  stalled: '30m',
};
export const DEFAULT_JOB_OVERRIDES_TEXT = { allowed: true, maxGrace: '1h' } as const;
export const DEFAULT_ACTION = 'fail' as const;
export const DEFAULT_LIMITS: Limits = {
  maxJobsPerSweep: 100,
  maxJobsPerNamespace: 20,
  outage: { minStuckPods: 20, minImages: 5, transientFraction: 0.6, authFraction: 0.6 },
  confirmWithinSeconds: 300,
  forceDeleteAfterSeconds: 60,
};
export const DEFAULT_CONFIRM_WITHIN_TEXT = '5m';
export const DEFAULT_FORCE_DELETE_AFTER_TEXT = '60s';

export const DEFAULT_CRONJOBS: CronJobsPolicy = { suspendAfter: 0 };

export const RESERVED_RULE_NAMES = ['defaults'] as const;
const RULE_NAME_RE = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;

export function ruleNameError(name: string): string | undefined {
  if (name === '') return 'rule name must not be empty';
  if ((RESERVED_RULE_NAMES as readonly string[]).includes(name)) return `rule name ${JSON.stringify(name)} is reserved`;
  if (name.length > 63) return `rule name ${JSON.stringify(name)} is longer than 63 characters`;
  if (!RULE_NAME_RE.test(name)) {
    return `rule name ${JSON.stringify(name)} must consist of alphanumerics, '-', '_' or '.', starting and ending with an alphanumeric`;
  }
  return undefined;
}

/** Describes a YAML value for messages: `"abc"`, `number 3`, `a list`, `an empty value`. */
export function describeValue(value: unknown): string {
  if (value === undefined) return 'nothing';
  if (value === null) return 'an empty value';
  if (typeof value === 'string') return JSON.stringify(value.length > 60 ? `${value.slice(0, 57)}...` : value);
  if (typeof value === 'number' || typeof value === 'boolean') return `${typeof value} ${String(value)}`;
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'a mapping';
  return typeof value;
}

const EXPECTED_NAMES: Record<string, string> = {
  string: 'a string',
  object: 'a mapping',
  record: 'a mapping',
  array: 'a list',
  number: 'a number',
  int: 'an integer',
  boolean: 'true or false',
};

/** Messages for the zod issues this schema can produce, in the policy author's terms. */
export const policyErrorMap: z.core.$ZodErrorMap = (issue) => {
  switch (issue.code) {
    case 'invalid_type': {
      const expected = EXPECTED_NAMES[issue.expected] ?? issue.expected;
      const hint =
        issue.expected === 'string' && (typeof issue.input === 'number' || typeof issue.input === 'boolean')
          ? ` (quote it: "${String(issue.input)}")`
          : '';
      return `expected ${expected}, got ${describeValue(issue.input)}${hint}`;
    }
    case 'invalid_value':
      return `expected one of ${issue.values.map((v) => JSON.stringify(v)).join(', ')}, got ${describeValue(issue.input)}`;
    case 'unrecognized_keys':
      return `unknown key${issue.keys.length > 1 ? 's' : ''} ${issue.keys.map((k) => JSON.stringify(k)).join(', ')}`;
    default:
      return undefined;
  }
};

function issueFrom(message: string | undefined, ctx: z.RefinementCtx, extra: { path?: PropertyKey[]; at?: 'key' } = {}) {
  if (message === undefined) return;
  ctx.addIssue({
    code: 'custom',
    message,
    ...(extra.path ? { path: extra.path } : {}),
    ...(extra.at ? { params: { at: extra.at } } : {}),
  });
}

const GO_DURATION_PATTERN = '^[+]?(0|(([0-9]+[.]?[0-9]*|[.][0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$';

function duration(description: string, defaultValue?: string) {
  return z
    .string({
      error: (iss) =>
        iss.input === undefined ? undefined : `expected a duration string such as "30s" or "1h30m", got ${describeValue(iss.input)}`,
    })
    .superRefine((value, ctx) => {
      const parsed = tryParseGoDuration(value);
      if (!parsed.ok) issueFrom(parsed.error, ctx);
    })
    .meta({
      description: `${description} Go duration syntax, e.g. "30s", "10m", "1h30m".`,
      pattern: GO_DURATION_PATTERN,
      ...(defaultValue !== undefined ? { default: defaultValue } : {}),
    });
}

/** A duration, or the number 0 (YAML `0`: never). */
function durationOrNever(description: string, defaultValue: string) {
  const expected = (iss: { input?: unknown }) => `expected a duration string such as "60s", or 0 for never, got ${describeValue(iss.input)}`;
  return z.union([duration(description), z.literal(0)], { error: expected }).meta({ description: `${description} Go duration syntax, e.g. "30s", "10m".`, default: defaultValue });
}

const CLASS_DESCRIPTIONS: Record<PullClass, string> = {
  permanent: 'Image or tag not found, manifest unknown, invalid name, ErrImageNeverPull, no image for this platform, an image the runtime refuses for good (schema 1 on containerd 2, a short name that resolves nowhere).',
  auth: 'Unauthorized, denied, insufficient_scope, no credentials.',
  transient: '429/toomanyrequests, pull QPS exceeded, 5xx, dial/DNS/TLS/timeouts.',
  unknown: 'Any other pull failure.',
  stalled:
    'No pull error at all, but the container has waited in ContainerCreating since its pod\'s sandbox was ready (a registry that never answers), or a pull the runtime cancelled for lack of progress (code = Canceled ... context canceled).',
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

function positiveInt(description: string, defaultValue: number) {
  const message = (iss: { input?: unknown }) =>
    iss.input === undefined ? undefined : `expected a positive integer, got ${describeValue(iss.input)}`;
  return z
    .int({ error: message })
    .min(1, { error: message })
    .meta({ description, default: defaultValue });
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

const labelValueSchema = z.string().superRefine((value, ctx) => issueFrom(labelValueError(value), ctx));

const matchLabelsSchema = z
  .record(z.string(), labelValueSchema)
  .superRefine(
    (labels, ctx) => {
      if (typeof labels !== 'object' || labels === null || Array.isArray(labels)) return;
      for (const key of Object.keys(labels)) issueFrom(labelKeyError(key), ctx, { path: [key], at: 'key' });
    },
    { when: () => true },
  )
  .meta({ description: 'Labels the namespace must have, with these exact values.' });

const requirementSchema = z
  .strictObject({
    key: z.string().superRefine((key, ctx) => issueFrom(labelKeyError(key), ctx)),
    operator: z.enum(SELECTOR_OPERATORS),
    values: z.array(labelValueSchema).optional(),
  })
  .superRefine((req, ctx) => {
    issueFrom(requirementValuesError(req.operator, req.values), ctx, { path: req.values ? ['values'] : [] });
  });

export const labelSelectorSchema = z
  .strictObject({
    matchLabels: matchLabelsSchema.optional(),
    matchExpressions: z
      .array(requirementSchema)
      .meta({ description: 'Label requirements (In, NotIn, Exists, DoesNotExist), all of which must hold.' })
      .optional(),
  })
  .meta({ description: 'Kubernetes label selector over the namespace labels; an empty selector matches every namespace.' });

const globSchema = z
  .string()
  .superRefine((glob, ctx) => issueFrom(namespaceGlobError(glob), ctx))
  .meta({ pattern: '^[a-z0-9*?\\[\\]!-]+$' });

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
    action: actionSchema.optional(),
    grace: graceSchema(false).optional(),
    jobOverrides: jobOverridesSchema(false).optional(),
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

const fractionMessage = (iss: { input?: unknown }) =>
  `expected a fraction greater than 0 and at most 1, got ${describeValue(iss.input)}`;

function fraction(description: string, defaultValue: number) {
  return z
    .number({ error: (iss) => (iss.input === undefined ? undefined : `expected a number, got ${describeValue(iss.input)}`) })
    .gt(0, { error: fractionMessage })
    .lte(1, { error: fractionMessage })
    .meta({ description, default: defaultValue });
}

const outageSchema = z
  .strictObject({
    minStuckPods: positiveInt('Stuck pods needed in one sweep to suspect a registry outage.', DEFAULT_LIMITS.outage.minStuckPods).optional(),
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
      'Outage breaker, evaluated for the whole sweep and for each registry host: when it trips for a class, that class\'s Jobs are reported, not failed, that sweep. A burst of not-found on one host (minStuckPods pods across minImages repositories) holds that host\'s permanent-class Jobs the same way.',
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
      })
      .meta({ description: 'Values used where no rule matches, and where the matching rule leaves a field unset.' })
      .optional(),
    rules: rulesSchema.optional(),
    limits: z
      .strictObject({
        maxJobsPerSweep: positiveInt('Most Jobs acted on in one sweep; the rest wait, oldest stuck first.', DEFAULT_LIMITS.maxJobsPerSweep).optional(),
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

/** Keys allowed in the mapping at `path` (for "did you mean"), if it is a mapping of the schema. */
export function allowedKeysAt(path: readonly PropertyKey[]): string[] | undefined {
  let schema: unknown = policyFileSchema;
  for (const segment of path) {
    schema = unwrap(schema);
    if (schema instanceof z.ZodObject) schema = (schema.shape as Record<string, unknown>)[String(segment)];
    else if (schema instanceof z.ZodArray) schema = schema.element;
    else if (schema instanceof z.ZodRecord) schema = schema.valueType;
    else return undefined;
  }
  schema = unwrap(schema);
  return schema instanceof z.ZodObject ? Object.keys(schema.shape) : undefined;
}

function unwrap(schema: unknown): unknown {
  let s = schema;
  while (s instanceof z.ZodOptional) s = s.unwrap();
  return s;
}

const seconds = (text: string) => {
  const parsed = tryParseGoDuration(text);
  if (!parsed.ok) throw new Error(parsed.error);
  return parsed.seconds;
};

/** The typed Policy of a validated file, with built-in defaults filled in. */
export function toPolicy(file: PolicyFile): Policy {
  const grace = Object.fromEntries(
    PULL_CLASSES.map((cls) => [cls, seconds(file.defaults?.grace?.[cls] ?? DEFAULT_GRACE_TEXT[cls])]),
  ) as Record<PullClass, number>;
  const overrides = file.defaults?.jobOverrides;
  return {
    defaults: {
      action: file.defaults?.action ?? DEFAULT_ACTION,
      grace,
      jobOverrides: {
        allowed: overrides?.allowed ?? DEFAULT_JOB_OVERRIDES_TEXT.allowed,
        maxGraceSeconds: seconds(overrides?.maxGrace ?? DEFAULT_JOB_OVERRIDES_TEXT.maxGrace),
      },
    },
    rules: (file.rules ?? []).map(toRule),
    limits: {
      maxJobsPerSweep: file.limits?.maxJobsPerSweep ?? DEFAULT_LIMITS.maxJobsPerSweep,
      maxJobsPerNamespace: file.limits?.maxJobsPerNamespace ?? DEFAULT_LIMITS.maxJobsPerNamespace,
      outage: {
        minStuckPods: file.limits?.outage?.minStuckPods ?? DEFAULT_LIMITS.outage.minStuckPods,
        minImages: file.limits?.outage?.minImages ?? DEFAULT_LIMITS.outage.minImages,
        transientFraction: file.limits?.outage?.transientFraction ?? DEFAULT_LIMITS.outage.transientFraction,
        authFraction: file.limits?.outage?.authFraction ?? DEFAULT_LIMITS.outage.authFraction,
      },
      confirmWithinSeconds: seconds(file.limits?.confirmWithin ?? DEFAULT_CONFIRM_WITHIN_TEXT),
      forceDeleteAfterSeconds: seconds(String(file.limits?.forceDeleteAfter ?? DEFAULT_FORCE_DELETE_AFTER_TEXT)),
    },
    cronJobs: { suspendAfter: file.cronJobs?.suspendAfter ?? DEFAULT_CRONJOBS.suspendAfter },
  };
}

type RuleFile = NonNullable<PolicyFile['rules']>[number];

function toRule(file: RuleFile): Rule {
  const rule: Rule = { name: file.name };
  if (file.namespaces) rule.namespaces = [...file.namespaces];
  if (file.namespaceSelector) {
    const { matchLabels, matchExpressions } = file.namespaceSelector;
    rule.namespaceSelector = {
      ...(matchLabels ? { matchLabels: { ...matchLabels } } : {}),
      ...(matchExpressions
        ? {
            matchExpressions: matchExpressions.map((req) => ({
              key: req.key,
              operator: req.operator,
              ...(req.values ? { values: [...req.values] } : {}),
            })),
          }
        : {}),
    };
  }
  if (file.action) rule.action = file.action;
  if (file.grace) {
    const grace: Rule['grace'] = {};
    for (const cls of PULL_CLASSES) {
      const text = file.grace[cls];
      if (text !== undefined) grace[cls] = seconds(text);
    }
    rule.grace = grace;
  }
  if (file.jobOverrides) {
    const { allowed, maxGrace } = file.jobOverrides;
    rule.jobOverrides = {
      ...(allowed !== undefined ? { allowed } : {}),
      ...(maxGrace !== undefined ? { maxGraceSeconds: seconds(maxGrace) } : {}),
    };
  }
  return rule;
}
