// The built-in defaults: as a policy file writes them (the JSON Schema shows these), and in
// seconds for the typed Policy. `FALLBACK_POLICY` is in force when the default policy ConfigMap
// does not exist.
import { PULL_CLASSES, type PullClass } from '../model.ts';
import { parseGoDuration } from './duration.ts';
import type { CronJobsPolicy, Limits, Policy } from './types.ts';

export const DEFAULT_GRACE_TEXT: Record<PullClass, string> = {
  permanent: '2m',
  auth: '10m',
  transient: '1h',
  unknown: '15m',
  stalled: '30m',
};
export const DEFAULT_JOB_OVERRIDES_TEXT = { allowed: true, maxGrace: '1h' } as const;
export const DEFAULT_ACTION = 'fail' as const;
export const DEFAULT_CONFIRM_WITHIN_TEXT = '5m';
export const DEFAULT_FORCE_DELETE_AFTER_TEXT = '60s';
export const DEFAULT_HEAL = false;

export const DEFAULT_LIMITS: Limits = {
  maxJobsPerSweep: 100,
  maxJobsPerNamespace: 20,
  outage: { minStuckPods: 20, minImages: 5, transientFraction: 0.6, authFraction: 0.6 },
  confirmWithinSeconds: parseGoDuration(DEFAULT_CONFIRM_WITHIN_TEXT),
  forceDeleteAfterSeconds: parseGoDuration(DEFAULT_FORCE_DELETE_AFTER_TEXT),
};

export const DEFAULT_CRONJOBS: CronJobsPolicy = { suspendAfter: 0 };

/** `defaults:` of a policy that sets none of it. */
export const DEFAULT_POLICY_DEFAULTS: Policy['defaults'] = {
  action: DEFAULT_ACTION,
  grace: Object.fromEntries(PULL_CLASSES.map((cls) => [cls, parseGoDuration(DEFAULT_GRACE_TEXT[cls])])) as Record<PullClass, number>,
  jobOverrides: { allowed: DEFAULT_JOB_OVERRIDES_TEXT.allowed, maxGraceSeconds: parseGoDuration(DEFAULT_JOB_OVERRIDES_TEXT.maxGrace) },
  heal: DEFAULT_HEAL,
};

export const BUILTIN_RULE_NAME = 'builtin-system-namespaces';
export const SYSTEM_NAMESPACES = ['kube-system', 'kube-public', 'kube-node-lease'] as const;

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null) {
    for (const child of Object.values(value)) deepFreeze(child);
    Object.freeze(value);
  }
  return value;
}

export const FALLBACK_POLICY: Policy = deepFreeze(
  structuredClone({
    defaults: DEFAULT_POLICY_DEFAULTS,
    rules: [{ name: BUILTIN_RULE_NAME, namespaces: [...SYSTEM_NAMESPACES], action: 'ignore' as const }],
    limits: DEFAULT_LIMITS,
    cronJobs: DEFAULT_CRONJOBS,
  }),
);
