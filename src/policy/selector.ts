// Kubernetes LabelSelector: validation (apimachinery rules) and matching.
import type { LabelSelector, LabelSelectorRequirement } from './types.ts';

export const SELECTOR_OPERATORS = ['In', 'NotIn', 'Exists', 'DoesNotExist'] as const;

const NAME_RE = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
/** The shape of a label value and of a label key's name part (rule names use it too). */
export function isLabelName(text: string): boolean {
  return NAME_RE.test(text);
}

const DNS_SUBDOMAIN_RE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const NAME_RULE = "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

/** Error message for an invalid label key (`[prefix/]name`), or undefined. */
export function labelKeyError(key: string): string | undefined {
  const parts = key.split('/');
  if (parts.length > 2) return `invalid label key ${JSON.stringify(key)}: at most one "/" is allowed`;
  const name = parts.length === 2 ? parts[1]! : parts[0]!;
  if (parts.length === 2) {
    const prefix = parts[0]!;
    if (prefix === '') return `invalid label key ${JSON.stringify(key)}: the prefix before "/" must not be empty`;
    if (prefix.length > 253) return `invalid label key ${JSON.stringify(key)}: the prefix must be at most 253 characters`;
    if (!DNS_SUBDOMAIN_RE.test(prefix)) {
      return `invalid label key ${JSON.stringify(key)}: the prefix must be a DNS subdomain (lowercase alphanumerics, '-' and '.')`;
    }
  }
  if (name === '') return `invalid label key ${JSON.stringify(key)}: the name part must not be empty`;
  if (name.length > 63) return `invalid label key ${JSON.stringify(key)}: the name part must be at most 63 characters`;
  if (!NAME_RE.test(name)) return `invalid label key ${JSON.stringify(key)}: the name part ${NAME_RULE}`;
  return undefined;
}

/** Error message for an invalid label value (may be empty), or undefined. */
export function labelValueError(value: string): string | undefined {
  if (value === '') return undefined;
  if (value.length > 63) return `invalid label value ${JSON.stringify(value)}: must be at most 63 characters`;
  if (!NAME_RE.test(value)) return `invalid label value ${JSON.stringify(value)}: ${NAME_RULE}`;
  return undefined;
}

/** Error message for an operator/values combination k8s would reject, or undefined. */
export function requirementValuesError(operator: string, values: readonly string[] | undefined): string | undefined {
  const count = values?.length ?? 0;
  if ((operator === 'In' || operator === 'NotIn') && count === 0) {
    return `operator ${operator} needs a non-empty "values" list`;
  }
  if ((operator === 'Exists' || operator === 'DoesNotExist') && count > 0) {
    return `operator ${operator} takes no "values"`;
  }
  return undefined;
}

function has(labels: Record<string, string>, key: string): boolean {
  return Object.hasOwn(labels, key);
}

function matchesRequirement(req: LabelSelectorRequirement, labels: Record<string, string>): boolean {
  const present = has(labels, req.key);
  const values = req.values ?? [];
  switch (req.operator) {
    case 'In':
      return present && values.includes(labels[req.key]!);
    case 'NotIn':
      return !present || !values.includes(labels[req.key]!);
    case 'Exists':
      return present;
    case 'DoesNotExist':
      return !present;
  }
}

/** Kubernetes semantics: every requirement must hold; an empty selector matches everything. */
export function matchesSelector(selector: LabelSelector, labels: Record<string, string>): boolean {
  for (const [key, value] of Object.entries(selector.matchLabels ?? {})) {
    if (!has(labels, key) || labels[key] !== value) return false;
  }
  return (selector.matchExpressions ?? []).every((req) => matchesRequirement(req, labels));
}

/** True when the selector has no requirement at all (matches every label set). */
export function isEmptySelector(selector: LabelSelector): boolean {
  return Object.keys(selector.matchLabels ?? {}).length === 0 && (selector.matchExpressions ?? []).length === 0;
}
