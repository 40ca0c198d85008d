// Policy YAML text → Policy, with every problem located by line and column. The zod schema
// (schema.ts) is the one source of the types, the validator and the JSON Schema.
import { isMap, isScalar } from 'yaml';
import { toPolicy } from './convert.ts';
import { describeValue, policyErrorMap } from './messages.ts';
import { policyFileSchema } from './schema.ts';
import { schemaProblems, uniqueProblems } from './problems.ts';
import type { Policy, PolicyProblem } from './types.ts';
import { unreachableRuleWarnings } from './warnings.ts';
import { load, locate, resolveAlias, type Loaded } from './yaml-position.ts';

/** A ConfigMap holds at most 1 MiB, so a longer policy cannot be real; it is refused unparsed. */
export const MAX_POLICY_BYTES = 1024 * 1024;
/** Aliases expanded when reading the YAML; more is an alias bomb, not a policy. */
export const MAX_ALIAS_COUNT = 100;

export type PolicyParseResult = { ok: true; policy: Policy; warnings: PolicyProblem[] } | { ok: false; problems: PolicyProblem[] };

const EMPTY_POLICY_MESSAGE = 'the policy is empty (nothing but comments, or null); write {} to mean "all built-in defaults"';

/** The problem of a text over MAX_POLICY_BYTES, or undefined. Counts bytes, never parses. */
export function oversizedProblem(text: string): PolicyProblem | undefined {
  if (text.length <= MAX_POLICY_BYTES / 3 || Buffer.byteLength(text) <= MAX_POLICY_BYTES) return undefined;
  return {
    line: 1,
    column: 1,
    path: '',
    message: `the policy is larger than 1 MiB (${MAX_POLICY_BYTES} bytes), the most a ConfigMap can hold; it was not parsed`,
  };
}

/** Validates a parsed YAML document holding the policy. */
export function validate(loaded: Loaded): PolicyParseResult {
  const { doc } = loaded;
  const root = resolveAlias(doc, doc.contents);
  if (root === null || root === undefined || (isScalar(root) && root.value === null)) {
    return { ok: false, problems: [{ ...locate(loaded, [], 'value'), path: '', message: EMPTY_POLICY_MESSAGE }] };
  }
  let raw: unknown;
  try {
    raw = doc.toJS({ maxAliasCount: MAX_ALIAS_COUNT });
  } catch (error) {
    const message = /alias count/i.test((error as Error).message)
      ? `the YAML expands more than ${MAX_ALIAS_COUNT} aliases (an alias bomb?); write the values out`
      : `cannot read the YAML: ${(error as Error).message}`;
    return { ok: false, problems: [{ line: 1, column: 1, path: '', message }] };
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
  const tooLarge = oversizedProblem(text);
  if (tooLarge) return { ok: false, problems: [tooLarge] };
  const loaded = load(text);
  if (!loaded.ok) return { ok: false, problems: uniqueProblems(loaded.problems) };
  return validate(loaded.loaded);
}
