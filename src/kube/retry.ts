import { describeApiError, isRetryable, type ApiFailure } from './errors.ts';

export interface RetryOptions {
  attempts: number;
  baseDelayMs: number;
  maxDelayMs: number;
  sleep: (ms: number) => Promise<void>;
  onRetry?: (failure: ApiFailure, attempt: number, delayMs: number) => void;
}

export const DEFAULT_RETRY: RetryOptions = {
  attempts: 4,
  baseDelayMs: 250,
  maxDelayMs: 10_000,
  sleep: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
};

/** Retries 429, 5xx and dropped connections with exponential back-off, honouring Retry-After. */
export async function withRetry<T>(call: () => Promise<T>, options: RetryOptions = DEFAULT_RETRY): Promise<T> {
  for (let attempt = 1; ; attempt += 1) {
    try {
      return await call();
    } catch (error) {
      const failure = describeApiError(error);
      if (attempt >= options.attempts || !isRetryable(failure)) throw error;
      const backoff = Math.min(options.maxDelayMs, options.baseDelayMs * 2 ** (attempt - 1));
      const delayMs =
        failure.retryAfterSeconds !== undefined ? Math.min(options.maxDelayMs, failure.retryAfterSeconds * 1000) : backoff;
      options.onRetry?.(failure, attempt, delayMs);
      await options.sleep(delayMs);
    }
  }
}

/** Runs `work` over `items` with at most `limit` in flight, keeping input order. */
export async function mapBounded<I, O>(items: readonly I[], limit: number, work: (item: I) => Promise<O>): Promise<O[]> {
  const results = new Array<O>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const index = next++;
      results[index] = await work(items[index]!);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}
