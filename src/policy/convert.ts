// A validated policy file → the typed Policy, with the built-in defaults filled in.
import { PULL_CLASSES } from '../model.ts';
import type { PullClass } from '../model.ts';
import { DEFAULT_CRONJOBS, DEFAULT_LIMITS, DEFAULT_POLICY_DEFAULTS } from './defaults.ts';
import { parseGoDuration } from './duration.ts';
import type { PolicyFile } from './schema.ts';
import type { Policy, Rule } from './types.ts';

/** Seconds of a validated duration (0: never), else the default. */
function secondsOr(text: string | 0 | undefined, fallback: number): number {
  return text === undefined ? fallback : parseGoDuration(String(text));
}

/** The typed Policy of a validated file, with built-in defaults filled in. */
export function toPolicy(file: PolicyFile): Policy {
  const defaults = DEFAULT_POLICY_DEFAULTS;
  const grace = Object.fromEntries(PULL_CLASSES.map((cls) => [cls, secondsOr(file.defaults?.grace?.[cls], defaults.grace[cls])])) as Record<
    PullClass,
    number
  >;
  const overrides = file.defaults?.jobOverrides;
  const limits = file.limits;
  return {
    defaults: {
      action: file.defaults?.action ?? defaults.action,
      grace,
      jobOverrides: {
        allowed: overrides?.allowed ?? defaults.jobOverrides.allowed,
        maxGraceSeconds: secondsOr(overrides?.maxGrace, defaults.jobOverrides.maxGraceSeconds),
      },
      heal: file.defaults?.heal ?? defaults.heal,
    },
    rules: (file.rules ?? []).map(toRule),
    limits: {
      maxJobsPerSweep: limits?.maxJobsPerSweep ?? DEFAULT_LIMITS.maxJobsPerSweep,
      maxJobsPerNamespace: limits?.maxJobsPerNamespace ?? DEFAULT_LIMITS.maxJobsPerNamespace,
      outage: {
        minStuckPods: limits?.outage?.minStuckPods ?? DEFAULT_LIMITS.outage.minStuckPods,
        minImages: limits?.outage?.minImages ?? DEFAULT_LIMITS.outage.minImages,
        transientFraction: limits?.outage?.transientFraction ?? DEFAULT_LIMITS.outage.transientFraction,
        authFraction: limits?.outage?.authFraction ?? DEFAULT_LIMITS.outage.authFraction,
      },
      confirmWithinSeconds: secondsOr(limits?.confirmWithin, DEFAULT_LIMITS.confirmWithinSeconds),
      forceDeleteAfterSeconds: secondsOr(limits?.forceDeleteAfter, DEFAULT_LIMITS.forceDeleteAfterSeconds),
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
  if (file.owners) rule.owners = [...new Set(file.owners)];
  if (file.action) rule.action = file.action;
  if (file.grace) {
    const grace: Rule['grace'] = {};
    for (const cls of PULL_CLASSES) {
      const text = file.grace[cls];
      if (text !== undefined) grace[cls] = parseGoDuration(text);
    }
    rule.grace = grace;
  }
  if (file.jobOverrides) {
    const { allowed, maxGrace } = file.jobOverrides;
    rule.jobOverrides = {
      ...(allowed !== undefined ? { allowed } : {}),
      ...(maxGrace !== undefined ? { maxGraceSeconds: parseGoDuration(maxGrace) } : {}),
    };
  }
  if (file.heal !== undefined) rule.heal = file.heal;
  return rule;
}
