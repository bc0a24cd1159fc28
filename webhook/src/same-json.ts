// Structural equality of decoded JSON, shared by the Module CR relevance rules (admission.ts) and drift.ts.
/**
 * Structural equality of decoded JSON values; object key order does not matter. Iterative, with its own stack of
 * pairs still to compare: a user may nest a Module CR thousands of levels deep (the API server accepts it), and
 * a recursive walk would overflow the call stack and take the webhook down with it.
 */
export function sameJson(a: unknown, b: unknown): boolean {
  const pending: unknown[] = [a, b];
  while (pending.length > 0) {
    const right = pending.pop();
    const left = pending.pop();
    if (left === right) continue;
    if (typeof left !== 'object' || typeof right !== 'object' || left === null || right === null)
      return false;
    if (Array.isArray(left)) {
      if (!Array.isArray(right) || left.length !== right.length) return false;
      for (let i = 0; i < left.length; i++) pending.push(left[i], right[i]);
      continue;
    }
    if (Array.isArray(right)) return false;
    const l = left as Record<string, unknown>;
    const r = right as Record<string, unknown>;
    let count = 0;
    for (const key in l) {
      if (!Object.hasOwn(l, key)) continue;
      count++;
      if (!Object.hasOwn(r, key)) return false;
      pending.push(l[key], r[key]);
    }
    for (const key in r) if (Object.hasOwn(r, key)) count--;
    if (count !== 0) return false;
  }
  return true;
}
