// Messages between the admission thread and the dispatch thread (decision 015). Both ends are this package's
// own code in one process: the shapes are trusted, not validated.
import type { WatchEventV2 } from '@skr-watcher/api';
import type { DispatchThreadScheduling, DropReason } from './observer.js';
import type { DeliveryOutcome } from './outcome.js';
import type { KcpAddress } from '../kcp-client.js';
import type { TlsMaterial } from '../tls-reload.js';

/** What the dispatch thread starts with (its `workerData`). */
export interface DispatchThreadData {
  /** The ring the admission thread writes relevant changes into (change-ring.ts); JSON of `QueuedChange` each. */
  ring: SharedArrayBuffer;
  address: KcpAddress;
  material: TlsMaterial;
  workers: number;
  maxQueue: number;
  backoffInitialMs: number;
  backoffMaxMs: number;
  maxAgeMs: number;
  callbackTimeoutMs: number;
  /** Per object, the least time between the starts of two callbacks (Dispatcher's minGapMs). */
  minGapMs: number;
  /** CN the KCP server's certificate must carry, or `*` (`--kcp-server-cn`). */
  kcpServerCn: string;
  /** Manager whose path carries the start-up resync callback (`--resync-manager`). */
  resyncManager: string;
  /** Level of the admission thread's logger; lines at or above it travel back to it. */
  logLevel: string;
}

/** One relevant change: manager, event, admission uid (null once it went through JSON). */
export type QueuedChange = [manager: string, event: WatchEventV2, uid: string | undefined | null];

/** How often an awake dispatch thread reads the ring: a change waits at most this long before it is queued. */
export const CHANGE_POLL_MS = 5;
/** An awake thread that found the ring empty this long goes to sleep; the next change wakes it with a message. */
export const CHANGE_SLEEP_AFTER_MS = 1000;

export type ToDispatch =
  /** The ring has changes and the thread had gone to sleep. */
  | { type: 'wake' }
  | { type: 'tls'; material: TlsMaterial }
  | { type: 'depth'; id: number }
  /** Ask KCP to reconcile this SKR in full (on the resync manager's path). */
  | { type: 'resync'; why: string }
  | { type: 'drain'; timeoutMs: number };

/** What the dispatcher's observer saw since the last report: counts, and callback durations by outcome. */
export interface DispatchReport {
  enqueued: number;
  coalesced: number;
  delivered: number;
  dropped: Record<DropReason, number>;
  depth: number;
  /** Set when the breaker changed since the last report. */
  breakerOpen?: boolean;
  attempts: Record<DeliveryOutcome['result'], number[]>;
}

export type FromDispatch =
  | { type: 'ready' }
  | { type: 'report'; report: DispatchReport }
  | { type: 'depth'; id: number; depth: number }
  /** A JSON log line written in the dispatch thread. */
  | { type: 'log'; line: string }
  | { type: 'scheduling'; policy: DispatchThreadScheduling }
  | { type: 'drained' };
