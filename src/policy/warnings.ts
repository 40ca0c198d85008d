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

/** True when every pod `later` applies to is one `earlier` applies to (rules without owners: Jobs' pods). */
function coversOwners(earlier: Rule, later: Rule): boolean {
  if (earlier.owners === undefined || later.owners === undefined) return earlier.owners === later.owners;
  return later.owners.every((o) => earlier.owners!.includes(o));
}

export function unreachableRuleWarnings(policy: Policy, loaded: Loaded): PolicyProblem[] {
  const problems: PolicyProblem[] = [];
  policy.rules.forEach((rule, index) => {
    const shadowing = policy.rules.slice(0, index).find((earlier) => isCatchAll(earlier) && coversOwners(earlier, rule));
    if (!shadowing) return;
    const path = ['rules', index];
    const pods = rule.owners ? ` for the pods of ${rule.owners.join(', ')}` : '';
    problems.push({
      ...locate(loaded, path, 'value'),
      path: formatPath(path),
      message: `rule ${JSON.stringify(rule.name)} can never match: rule ${JSON.stringify(shadowing.name)} before it matches every namespace${pods}`,
    });
  });
  return problems;
}
