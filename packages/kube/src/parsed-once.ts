// Validating what a watch cache holds once per object, not once per read (decision 016).
const parsedBySlot = new Map<string, WeakMap<object, unknown>>();

function slotOf(slot: string): WeakMap<object, unknown> {
  let parsed = parsedBySlot.get(slot);
  if (!parsed) {
    parsed = new WeakMap();
    parsedBySlot.set(slot, parsed);
  }
  return parsed;
}

/**
 * `parse(object)`, once per object a watch delivered and `slot`: a watch replaces an object on every change, so
 * passes over an unchanged cache validate nothing again. The slot names what `parse` makes of the object; two readers
 * that make different things of the same cached object (a schema's safeParse result, a parsed value or its
 * ShapeError) must use different slots, or one gets what the other stored. Callers must not mutate what `parse`
 * returns. Non-objects are parsed every time.
 */
export function parsedOnce<T>(object: unknown, slot: string, parse: (object: unknown) => T): T {
  if (object === null || typeof object !== 'object') return parse(object);
  const parsed = slotOf(slot);
  if (parsed.has(object)) return parsed.get(object) as T;
  const result = parse(object);
  parsed.set(object, result);
  return result;
}

/**
 * An informer `transform` that caches `parse(object)` in place of the object, and as its own parse under `slot`: a
 * reader's `parsedOnce(cached, slot, parse)` then answers the cached value itself, so the cache holds one copy of
 * each object, not the object and its parsed copy beside it (decision 021). `parse` must answer an
 * object that its readers and the informer's handlers and indexers may take for the one delivered (a schema that
 * keeps metadata). An object `parse` rejects is cached as delivered, and its readers' `parsedOnce` fail on it as
 * before.
 */
export function parsedInPlace<T extends object>(
  slot: string,
  parse: (object: unknown) => T,
): <O extends object>(object: O) => O {
  return (object) => {
    let result: T;
    try {
      result = parse(object);
    } catch {
      return object;
    }
    slotOf(slot).set(result, result);
    return result as unknown as typeof object;
  };
}
