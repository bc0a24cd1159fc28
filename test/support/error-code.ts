// The first string `code` on an error's cause chain (a TLS or socket error's, e.g. UNABLE_TO_VERIFY_LEAF_SIGNATURE).
export function errorCodeOf(error: unknown): string {
  for (let current = error, depth = 0; current instanceof Error && depth < 8; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string') return code;
    current = current.cause;
  }
  return `no code in ${String(error)}`;
}
