// How deep a JSON value nests. structuredClone, isDeepStrictEqual and most deep comparisons recurse, so an
// object nested thousands of levels (which the API server accepts) overflows the stack of whoever touches it.

/** True when `value` nests objects or arrays deeper than `maxDepth` levels; iterative, so safe at any depth. */
export function nestsDeeperThan(value: unknown, maxDepth: number): boolean {
  const pending: { value: unknown; depth: number }[] = [{ value, depth: 0 }];
  for (let next = pending.pop(); next; next = pending.pop()) {
    if (typeof next.value !== 'object' || next.value === null) continue;
    const depth = next.depth + 1;
    if (depth > maxDepth) return true;
    for (const child of Object.values(next.value)) {
      if (typeof child === 'object' && child !== null) pending.push({ value: child, depth });
    }
  }
  return false;
}
