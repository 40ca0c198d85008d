// JSON Schema of policy.yaml, generated from the same zod schema that validates it.
import * as z from 'zod';
import { policyFileSchema } from './schema.ts';

/** Draft-07 (the draft yaml-language-server supports best). */
export function policyJsonSchema(): Record<string, unknown> {
  return z.toJSONSchema(policyFileSchema, { target: 'draft-07', io: 'input', unrepresentable: 'throw' }) as Record<string, unknown>;
}
