import { RunOptionError } from '../run/errors.ts';

/** Bad flags, arguments or files: exit 2, one line, no stack trace. */
export class UsageError extends Error {}

/** The error as a usage error: itself, or a stage's own error about a flag's value (same message). */
export function asUsageError(error: unknown): UsageError | undefined {
  if (error instanceof UsageError) return error;
  if (error instanceof RunOptionError) return new UsageError(error.message);
  return undefined;
}
