// What one callback to KCP came to, and which outcomes say that KCP cannot be reached at all (the breaker's input).
import type { WatchEventV2 } from '@skr-watcher/api';

/** What one callback attempt came to. */
export type DeliveryOutcome =
  | { result: 'delivered'; status: number }
  /** 5xx, timeouts and network errors: KCP may take it later; not before `retryAfterMs` when it said so. */
  | { result: 'retry'; reason: string; status?: number; retryAfterMs?: number }
  /** Other 4xx: KCP will never take this body; retrying cannot help. */
  | { result: 'rejected'; reason: string; status: number };

export type SendEvent = (manager: string, event: WatchEventV2) => Promise<DeliveryOutcome>;

/**
 * Outcomes that say KCP cannot be reached at all: no answer, or a gateway with no listener behind it. A 503 with
 * Retry-After is the listener itself asking for the event again (its Kyma's owner did not take it yet).
 */
export function isUnreachable(outcome: DeliveryOutcome): boolean {
  if (outcome.result !== 'retry' || outcome.retryAfterMs !== undefined) return false;
  return (
    outcome.status === undefined || outcome.status === 502 || outcome.status === 503 || outcome.status === 504
  );
}
