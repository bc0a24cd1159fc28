// What the dispatcher tells about itself: its counters, the reasons an event is dropped (with their log
// messages), and the observer hooks the metrics hang on.
import type { DeliveryOutcome } from './outcome.js';

export type DropReason = 'queue_full' | 'max_age' | 'rejected' | 'shutdown' | 'invalid';
export const DROP_MESSAGES: Record<DropReason, string> = {
  queue_full: 'event dropped: dispatch queue full',
  max_age: 'event dropped: max age',
  rejected: 'event dropped: rejected',
  shutdown: 'event dropped: shutdown',
  invalid: 'event dropped: invalid',
};
export const DROP_REASONS: readonly DropReason[] = [
  'queue_full',
  'max_age',
  'rejected',
  'shutdown',
  'invalid',
];

/**
 * Hooks for metrics; every method is called synchronously and must be cheap. The dispatcher calls them once per
 * event; the admission thread replays the dispatch thread's reports through them with counts.
 */
export interface DispatchObserver {
  enqueued(count?: number): void;
  coalesced(count?: number): void;
  delivered(count?: number): void;
  dropped(reason: DropReason, count?: number): void;
  depth(entries: number): void;
  attempt(outcome: DeliveryOutcome['result'], seconds: number): void;
  /** The breaker opened (KCP unreachable) or closed again. */
  breaker?(open: boolean): void;
  /** How the kernel schedules the thread that sends the callbacks (decision 015); told once as it starts. */
  threadScheduling?(policy: DispatchThreadScheduling): void;
}

/** `idle`: SCHED_IDLE; `nice`: only a higher nice value; `default`: as the process. */
export type DispatchThreadScheduling = 'idle' | 'nice' | 'default';

export interface DispatchStats {
  enqueued: number;
  coalesced: number;
  delivered: number;
  dropped: Record<DropReason, number>;
}

export function emptyDispatchStats(): DispatchStats {
  return {
    enqueued: 0,
    coalesced: 0,
    delivered: 0,
    dropped: { queue_full: 0, max_age: 0, rejected: 0, shutdown: 0, invalid: 0 },
  };
}
