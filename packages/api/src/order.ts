// The order of names in what the project writes and shows: by UTF-16 code unit, as Go's sort.Strings and kubectl
// order them. String.prototype.localeCompare would load ICU's collation data into every process (several MiB of
// the node binary made resident) to order ASCII names the same way.

/** A comparator for `Array.prototype.sort`: code-unit order, stable for equal strings. */
export function byCodeUnit(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
