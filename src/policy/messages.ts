// Validation messages in the policy author's terms (zod's issues reworded).
import type * as z from 'zod';

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

/** Adds a custom issue when `message` is set; `at: 'key'` points it at the key, not the value. */
export function issueFrom(message: string | undefined, ctx: z.RefinementCtx, extra: { path?: PropertyKey[]; at?: 'key' } = {}) {
  if (message === undefined) return;
  ctx.addIssue({
    code: 'custom',
    message,
    ...(extra.path ? { path: extra.path } : {}),
    ...(extra.at ? { params: { at: extra.at } } : {}),
  });
}
