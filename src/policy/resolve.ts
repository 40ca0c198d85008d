// The policy in force for a namespace, and for one Job in it.
import { PULL_CLASSES } from '../model.ts';
import type { PullClass } from '../model.ts';
import { ANNOTATIONS } from './annotations.ts';
import { formatDuration, tryParseGoDuration } from './duration.ts';
import { matchesAnyNamespaceGlob } from './glob.ts';
import { matchesSelector } from './selector.ts';
import type { EffectivePolicy, GraceSeconds, GraceSource, JobGrace, Policy, Rule } from './types.ts';

export const DEFAULTS_SOURCE = 'defaults';

export interface NamespaceInput {
  name: string;
  /** Needed only when a rule has a namespaceSelector; missing labels count as none. */
  labels?: Record<string, string>;
}

export interface RuleMatch {
  rule: string;
  matched: boolean;
  /** The rule's `owners`: it applies to those owners' pods, never to Jobs (so it never matches a Job). */
  owners?: string[];
  /** undefined when the rule has no such matcher. */
  namespaces: boolean | undefined;
  namespaceSelector: boolean | undefined;
}

/**
 * How one rule fares against a namespace, for a Job's pods (`owner` undefined) or for a pod whose
 * controller `owner` names (policy/owners.ts ownerKindOf): rules with `owners` apply only to those.
 */
export function matchRule(rule: Rule, ns: NamespaceInput, owner?: string): RuleMatch {
  const namespaces = rule.namespaces ? matchesAnyNamespaceGlob(rule.namespaces, ns.name) : undefined;
  const namespaceSelector = rule.namespaceSelector ? matchesSelector(rule.namespaceSelector, ns.labels ?? {}) : undefined;
  const forOwner = owner === undefined ? rule.owners === undefined : rule.owners?.includes(owner) === true;
  return {
    rule: rule.name,
    matched: forOwner && namespaces !== false && namespaceSelector !== false,
    ...(rule.owners ? { owners: [...rule.owners] } : {}),
    namespaces,
    namespaceSelector,
  };
}

export function ruleMatches(rule: Rule, ns: NamespaceInput, owner?: string): boolean {
  return matchRule(rule, ns, owner).matched;
}

/** Every rule in order, with whether it matched (for `policy explain`). */
export function explainRules(policy: Policy, ns: NamespaceInput, owner?: string): RuleMatch[] {
  return policy.rules.map((rule) => matchRule(rule, ns, owner));
}

/** The `owners` rule that applies to a pod of that owner kind in that namespace, if any. */
export function ownersRuleFor(policy: Policy, ns: NamespaceInput, owner: string): Rule | undefined {
  return policy.rules.find((r) => r.owners !== undefined && ruleMatches(r, ns, owner));
}

/**
 * First matching rule wins; what it leaves unset (field by field, grace class by class) comes from
 * defaults. Without `owner`, for a Job's pods (rules with `owners` never apply); with it, among the
 * rules whose `owners` list it (none matching: the defaults, but such a pod is only reported).
 */
export function resolveForNamespace(policy: Policy, ns: NamespaceInput, owner?: string): EffectivePolicy {
  const rule = policy.rules.find((r) => ruleMatches(r, ns, owner));
  const { defaults } = policy;
  const from = (set: boolean) => (set && rule ? rule.name : DEFAULTS_SOURCE);

  const grace = {} as GraceSeconds;
  const graceSources = {} as Record<PullClass, string>;
  for (const cls of PULL_CLASSES) {
    const own = rule?.grace?.[cls];
    grace[cls] = own ?? defaults.grace[cls];
    graceSources[cls] = from(own !== undefined);
  }
  const heal = rule?.heal;
  const allowed = rule?.jobOverrides?.allowed;
  const maxGraceSeconds = rule?.jobOverrides?.maxGraceSeconds;
  return {
    rule: rule?.name ?? DEFAULTS_SOURCE,
    action: rule?.action ?? defaults.action,
    grace,
    jobOverrides: {
      allowed: allowed ?? defaults.jobOverrides.allowed,
      maxGraceSeconds: maxGraceSeconds ?? defaults.jobOverrides.maxGraceSeconds,
    },
    heal: heal ?? defaults.heal,
    sources: {
      action: from(rule?.action !== undefined),
      grace: graceSources,
      jobOverrides: from(allowed !== undefined || maxGraceSeconds !== undefined),
      jobOverridesDetail: { allowed: from(allowed !== undefined), maxGraceSeconds: from(maxGraceSeconds !== undefined) },
      heal: from(heal !== undefined),
    },
  };
}

/** True when resolving needs namespace labels (some rule has a namespaceSelector). */
export function policyNeedsNamespaceLabels(policy: Policy): boolean {
  return policy.rules.some((rule) => rule.namespaceSelector !== undefined);
}

function where(effective: EffectivePolicy, field: 'allowed' | 'maxGraceSeconds'): string {
  const source = effective.sources.jobOverridesDetail?.[field] ?? effective.sources.jobOverrides;
  return source === DEFAULTS_SOURCE ? 'defaults' : `rule ${JSON.stringify(source)}`;
}

/** "rule ci", "defaults", "annotation" or "annotation, clamped to maxGrace": how the audit says it. */
export function describeGraceSource(source: GraceSource): string {
  if (source.kind === 'rule') return `rule ${source.rule ?? '?'}`;
  if (source.kind === 'annotation') return source.clamped ? 'annotation, clamped to maxGrace' : 'annotation';
  return 'defaults';
}

/** Per class, the rule or defaults the namespace's grace came from. */
function policyGraceSources(effective: EffectivePolicy): Record<PullClass, GraceSource> {
  const sources = {} as Record<PullClass, GraceSource>;
  for (const cls of PULL_CLASSES) {
    const from = effective.sources.grace[cls];
    sources[cls] =
      from === DEFAULTS_SOURCE ? { kind: 'defaults', rule: undefined, clamped: false } : { kind: 'rule', rule: from, clamped: false };
  }
  return sources;
}

/** Applies the Job's `imagepull-sweeper/grace` annotation within the rule's jobOverrides. */
export function graceForJob(effective: EffectivePolicy, annotations: Record<string, string>): JobGrace {
  const base: JobGrace = { grace: { ...effective.grace }, sources: policyGraceSources(effective), override: undefined, warnings: [] };
  if (!Object.hasOwn(annotations, ANNOTATIONS.grace)) return base;
  const raw = annotations[ANNOTATIONS.grace]!;
  const shown = `${ANNOTATIONS.grace}=${JSON.stringify(raw)}`;
  if (!effective.jobOverrides.allowed) {
    return {
      ...base,
      warnings: [
        `annotation ${shown} ignored: per-Job grace is not allowed (jobOverrides.allowed is false in ${where(effective, 'allowed')})`,
      ],
    };
  }
  const parsed = tryParseGoDuration(raw.trim());
  if (!parsed.ok) return { ...base, warnings: [`annotation ${shown} ignored: ${parsed.error}`] };
  const max = effective.jobOverrides.maxGraceSeconds;
  const clamped = parsed.seconds > max;
  const applied = clamped ? max : parsed.seconds;
  const grace = Object.fromEntries(PULL_CLASSES.map((cls) => [cls, applied])) as GraceSeconds;
  const source: GraceSource = { kind: 'annotation', rule: undefined, clamped };
  const sources = Object.fromEntries(PULL_CLASSES.map((cls) => [cls, source])) as Record<PullClass, GraceSource>;
  const warnings = clamped
    ? [`annotation ${shown} clamped to ${formatDuration(max)} (jobOverrides.maxGrace in ${where(effective, 'maxGraceSeconds')})`]
    : [];
  return { grace, sources, override: { requested: parsed.seconds, applied, clamped }, warnings };
}
