// Warnings: a valid policy that probably does not mean what it says.
import { formatPath } from './problems.ts';
import { isEmptySelector } from './selector.ts';
import type { Policy, PolicyProblem, Rule } from './types.ts';
import { locate, type Loaded } from './yaml-position.ts';

function isCatchAll(rule: Rule): boolean {
  const anyName = !rule.namespaces || rule.namespaces.some((glob) => /^\*+$/.test(glob));
  const anyLabels = !rule.namespaceSelector || isEmptySelector(rule.namespaceSelector);
  return anyName && anyLabels;
}

export function unreachableRuleWarnings(policy: Policy, loaded: Loaded): PolicyProblem[] {
  const catchAll = policy.rules.findIndex(isCatchAll);
  if (catchAll < 0) return [];
  const shadowing = policy.rules[catchAll]!.name;
  return policy.rules.slice(catchAll + 1).map((rule, offset) => {
    const path = ['rules', catchAll + 1 + offset];
    return {
      ...locate(loaded, path, 'value'),
      path: formatPath(path),
      message: `rule ${JSON.stringify(rule.name)} can never match: rule ${JSON.stringify(shadowing)} before it matches every namespace`,
    };
  });
}
