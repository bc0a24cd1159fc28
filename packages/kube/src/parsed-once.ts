// Validating what a watch cache holds once per object, not once per read (decision 016).
const parsedBySlot = new Map<string, WeakMap<object, unknown>>();

/**
 * `parse(object)`, once per object a watch delivered and `slot`: a watch replaces an object on every change, so
 * passes over an unchanged cache validate nothing again. The slot names what `parse` makes of the object; two readers
 * that make different things of the same cached object (a schema's safeParse result, a parsed value or its
 * ShapeError) must use different slots, or one gets what the other stored. Callers must not mutate what `parse`
 * returns. Non-objects are parsed every time.
 */
export function parsedOnce<T>(object: unknown, slot: string, parse: (object: unknown) => T): T {
  if (object === null || typeof object !== 'object') return parse(object);
  let parsed = parsedBySlot.get(slot);
  if (!parsed) {
    parsed = new WeakMap();
    parsedBySlot.set(slot, parsed);
  }
  if (parsed.has(object)) return parsed.get(object) as T;
  const result = parse(object);
  parsed.set(object, result);
  return result;
}
