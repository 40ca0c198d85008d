/** How long one API request may take before it is aborted: --request-timeout's default. */
export const DEFAULT_REQUEST_TIMEOUT_MS = 30_000;
