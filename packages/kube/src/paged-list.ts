// Lists read page by page, with the page size halved while a page exceeds the client's response bound.
import type { ListPage } from './informer.js';
import { isResponseTooLarge } from './request-layers.js';

const FIRST_PAGE_SIZE = 100;

/**
 * Every item of a list, read page by page so no answer grows with the cluster; a page above the client's
 * response bound is asked again at half the size, down to one object. `keep` reduces each item as its page
 * arrives, so what is held is the kept part only.
 */
export async function listInPages<T, K>(
  listPage: (page: { limit: number; continueToken?: string }) => Promise<ListPage<T>>,
  keep: (item: T) => K,
): Promise<K[]> {
  const kept: K[] = [];
  let limit = FIRST_PAGE_SIZE;
  let continueToken: string | undefined;
  for (;;) {
    let page: ListPage<T>;
    try {
      page = await listPage({ limit, ...(continueToken ? { continueToken } : {}) });
    } catch (error) {
      if (!isResponseTooLarge(error) || limit === 1) throw error;
      limit = Math.max(1, Math.floor(limit / 2));
      continue;
    }
    for (const item of page.items) kept.push(keep(item));
    continueToken = page.metadata?.continue || undefined;
    if (!continueToken) break;
  }
  return kept;
}
