// A bound on concurrent tasks: owner-label and bucket-label writes go a few at a time, not all at once.

/** Runs tasks with at most `limit` in flight; the others wait in the order they came. */
export function limiter(limit: number) {
  let active = 0;
  const waiting: (() => void)[] = [];
  return async <T>(task: () => Promise<T>): Promise<T> => {
    if (active >= limit) await new Promise<void>((resolve) => waiting.push(resolve));
    active += 1;
    try {
      return await task();
    } finally {
      active -= 1;
      waiting.shift()?.();
    }
  };
}
