import { setTimeout as delay } from 'node:timers/promises';
import { describeApiError, isRetryable } from './errors.ts';
import type { Page } from './gateway.ts';

/**
 * How many more times a page whose request failed in a retryable way (after the gateway's own
 * retries) is asked again from the same continue token, and the first wait: the pages already
 * read are kept, so one bad moment on page 250 costs that page, not the list.
 */
export const PAGE_RESUMES = 3;
const PAGE_RESUME_FIRST_MS = 1_000;

/** Follows continue tokens; hands over one page at a time so nothing piles up. */
export async function forEachPage<T>(
  listPage: (continueToken: string | undefined) => Promise<Page<T>>,
  onPage: (items: T[]) => void,
  wait: (ms: number) => Promise<unknown> = delay,
): Promise<void> {
  let continueToken: string | undefined;
  do {
    const page = await resuming(() => listPage(continueToken), wait);
    onPage(page.items);
    continueToken = page.continueToken;
  } while (continueToken);
}

async function resuming<T>(ask: () => Promise<T>, wait: (ms: number) => Promise<unknown>): Promise<T> {
  for (let resume = 0; ; resume += 1) {
    try {
      return await ask();
    } catch (error) {
      const failure = describeApiError(error);
      if (resume >= PAGE_RESUMES || failure.status === 410 || !isRetryable(failure)) throw error;
      await wait(PAGE_RESUME_FIRST_MS * 2 ** resume);
    }
  }
}

export interface RestartOptions {
  /** How many times the list may start over after its continue token expired (default 3). */
  maxRestarts?: number;
  onRestart?: (restart: number) => void;
  /** Before a failed page is asked again (default: the wall clock's timer). */
  wait?: (ms: number) => Promise<unknown>;
}

/**
 * A complete list pass into a fresh accumulator. When a continue token has expired (410 Gone,
 * e.g. etcd compacted between pages), the partial pass is dropped and the list starts over.
 */
export async function listFromStart<T, A>(
  listPage: (continueToken: string | undefined) => Promise<Page<T>>,
  fresh: () => A,
  onPage: (acc: A, items: T[]) => void,
  options: RestartOptions = {},
): Promise<A> {
  const maxRestarts = options.maxRestarts ?? 3;
  for (let restart = 0; ; restart += 1) {
    const acc = fresh();
    try {
      await forEachPage(listPage, (items) => onPage(acc, items), options.wait);
      return acc;
    } catch (error) {
      if (describeApiError(error).status !== 410 || restart >= maxRestarts) throw error;
      options.onRestart?.(restart + 1);
    }
  }
}
