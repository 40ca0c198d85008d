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
