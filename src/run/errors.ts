/** A bad value of a `run` flag (--schedule, --timezone, --listen); the CLI reports it as a usage error. */
export class RunOptionError extends Error {}
