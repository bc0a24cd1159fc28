// Validating what a watch cache holds once per object, not once per read (decision 016).
const parsed = new WeakMap<object, unknown>();

/**
 * `parse(object)`, once per object a watch delivered: a watch replaces an object on every change, so passes over an
 * unchanged cache validate nothing again. Callers must not mutate what `parse` returns. Non-objects are parsed
 * every time.
 */
export function parsedOnce<T>(object: unknown, parse: (object: unknown) => T): T {
  if (object === null || typeof object !== 'object') return parse(object);
  if (parsed.has(object)) return parsed.get(object) as T;
  const result = parse(object);
  parsed.set(object, result);
  return result;
}
