// The error a failed list or watch ends in, and the HTTP status code read from whatever a client threw.

/** A list or watch that failed; `code` is the HTTP status when the server gave one. */
export class WatchFailure extends Error {
  constructor(
    message: string,
    readonly code?: number,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** The HTTP status of an error thrown by client-node or fetch (`statusCode` or a numeric `code`). */
export function statusCodeOf(error: unknown): number | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const record = error as { statusCode?: unknown; code?: unknown };
  if (typeof record.statusCode === 'number') return record.statusCode;
  if (typeof record.code === 'number') return record.code;
  return undefined;
}
