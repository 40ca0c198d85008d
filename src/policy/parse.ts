// Policy YAML text → Policy, with every problem located by line and column. The zod schema
// (schema.ts) is the one source of the types, the validator and the JSON Schema.
import { isMap, isScalar } from 'yaml';
import { describeValue, policyErrorMap, policyFileSchema, toPolicy } from './schema.ts';
import { schemaProblems, uniqueProblems } from './problems.ts';
import type { Policy, PolicyProblem } from './types.ts';
import { unreachableRuleWarnings } from './warnings.ts';
import { load, locate, resolveAlias, type Loaded } from './yaml-position.ts';

export type PolicyParseResult =
  | { ok: true; policy: Policy; warnings: PolicyProblem[] }
  | { ok: false; problems: PolicyProblem[] };

/** Validates a parsed YAML document holding the policy. */
export function validate(loaded: Loaded): PolicyParseResult {
  const { doc } = loaded;
  const root = resolveAlias(doc, doc.contents);
  if (root === null || root === undefined || (isScalar(root) && root.value === null)) {
    return { ok: true, policy: toPolicy({}), warnings: [] };
  }
  let raw: unknown;
  try {
    raw = doc.toJS();
  } catch (error) {
    return { ok: false, problems: [{ line: 1, column: 1, path: '', message: `cannot read the YAML: ${(error as Error).message}` }] };
  }
  if (!isMap(root)) {
    return {
      ok: false,
      problems: [
        {
          ...locate(loaded, [], 'value'),
          path: '',
          message: `the policy must be a mapping (with keys defaults, rules, limits), got ${describeValue(raw)}`,
        },
      ],
    };
  }
  const result = policyFileSchema.safeParse(raw, { error: policyErrorMap });
  if (result.success) {
    const policy = toPolicy(result.data);
    return { ok: true, policy, warnings: unreachableRuleWarnings(policy, loaded) };
  }
  return { ok: false, problems: schemaProblems(result.error.issues, raw, loaded) };
}

/** Parses the policy YAML (the ConfigMap's `policy.yaml`). Returns every problem, not just the first. */
export function parsePolicyYaml(text: string): PolicyParseResult {
  const loaded = load(text);
  if (!loaded.ok) return { ok: false, problems: uniqueProblems(loaded.problems) };
  return validate(loaded.loaded);
}
