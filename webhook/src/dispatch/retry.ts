// How long a callback KCP did not take waits before it goes again: jittered exponential backoff, or the
// Retry-After KCP asked for, kept inside the backoff's own range.
import { backoffDelay } from '@skr-watcher/api';

export interface BackoffRange {
  backoffInitialMs: number;
  backoffMaxMs: number;
}

/**
 * KCP's Retry-After says when sending again is worth it (a callback budget refilled, a dead owner's Lease run
 * out): that is the delay, not a floor under a backoff grown past it. Bounded by the backoff's own range, so a
 * KCP can neither make an entry spin nor park it for longer than the backoff would; the max age still applies.
 */
export function retryDelay(
  attempts: number,
  retryAfterMs: number | undefined,
  range: BackoffRange,
  random: () => number,
): number {
  const { backoffInitialMs, backoffMaxMs } = range;
  return retryAfterMs === undefined
    ? backoffDelay(attempts, backoffInitialMs, backoffMaxMs, random)
    : Math.min(Math.max(retryAfterMs, backoffInitialMs), backoffMaxMs);
}
