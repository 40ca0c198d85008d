import { describeApiError } from './errors.ts';
import type { Page } from './gateway.ts';

/** Follows continue tokens; hands over one page at a time so nothing piles up. */
export async function forEachPage<T>(
  listPage: (continueToken: string | undefined) => Promise<Page<T>>,
  onPage: (items: T[]) => void,
): Promise<void> {
  let continueToken: string | undefined;
  do {
    const page = await listPage(continueToken);
    onPage(page.items);
    continueToken = page.continueToken;
  } while (continueToken);
}

export interface RestartOptions {
  /** How many times the list may start over after its continue token expired (default 3). */
  maxRestarts?: number;
  onRestart?: (restart: number) => void;
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
      await forEachPage(listPage, (items) => onPage(acc, items));
      return acc;
    } catch (error) {
      if (describeApiError(error).status !== 410 || restart >= maxRestarts) throw error;
      options.onRestart?.(restart + 1);
    }
  }
}
