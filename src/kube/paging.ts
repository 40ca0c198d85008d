import type { Page } from './gateway.ts';
import { withRetry, type RetryOptions } from './retry.ts';

/** Follows continue tokens, retrying each page; hands over one page at a time so nothing piles up. */
export async function forEachPage<T>(
  listPage: (continueToken: string | undefined) => Promise<Page<T>>,
  retry: RetryOptions,
  onPage: (items: T[]) => void,
): Promise<void> {
  let continueToken: string | undefined;
  do {
    const token = continueToken;
    const page = await withRetry(() => listPage(token), retry);
    onPage(page.items);
    continueToken = page.continueToken;
  } while (continueToken);
}
