/** Bad flags, arguments or files: exit 2, one line, no stack trace. */
export class UsageError extends Error {}
