// Asynchronous delivery of events to KCP (DESIGN 4.2): admission never waits on this.
import type { Logger } from '@skr-watcher/telemetry';
import type { WatchEventV2 } from '@skr-watcher/api';

/** Timers and time, injectable so tests can advance time without sleeping. */
export interface Clock {
  now(): number;
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout: (callback, ms) => setTimeout(callback, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/** What one callback attempt came to. */
export type DeliveryOutcome =
  | { result: 'delivered'; status: number }
  /** 5xx, timeouts and network errors: KCP may take it later. */
  | { result: 'retry'; reason: string; status?: number }
  /** Other 4xx: KCP will never take this body; retrying cannot help. */
  | { result: 'rejected'; reason: string; status: number };

export type SendEvent = (manager: string, event: WatchEventV2) => Promise<DeliveryOutcome>;

export type DropReason = 'queue_full' | 'max_age' | 'rejected' | 'shutdown' | 'invalid';
export const DROP_REASONS: readonly DropReason[] = [
  'queue_full',
  'max_age',
  'rejected',
  'shutdown',
  'invalid',
];

/** Hooks for metrics; every method is called synchronously and must be cheap. */
export interface DispatchObserver {
  enqueued(): void;
  coalesced(): void;
  delivered(): void;
  dropped(reason: DropReason): void;
  depth(entries: number): void;
  attempt(outcome: DeliveryOutcome['result'], seconds: number): void;
}

export interface DispatcherOptions {
  send: SendEvent;
  /** Concurrent callbacks in flight. */
  workers: number;
  /** Distinct (manager, gvk, namespace, name) keys held at most; more are dropped. */
  maxQueue: number;
  backoffInitialMs: number;
  backoffMaxMs: number;
  /** An event whose latest change is older than this is dropped; KCP's resync covers it. */
  maxAgeMs: number;
  logger: Logger;
  observer?: DispatchObserver;
  clock?: Clock;
  /** Uniform in [0, 1); injectable for deterministic jitter. */
  random?: () => number;
  /**
   * Checks an event before it gets a queue entry; returns why it cannot be sent, or undefined.
   * Runs only for objects not already queued, which keeps it off the path of repeated changes.
   */
  validate?: (event: WatchEventV2) => string | undefined;
}

export type EnqueueResult = 'enqueued' | 'coalesced' | 'dropped';

interface Entry {
  readonly key: string;
  readonly manager: string;
  event: WatchEventV2;
  /** Admission uid of the latest change, for log lines. */
  uid: string | undefined;
  /** Time of the latest change this entry stands for. */
  changedAt: number;
  attempts: number;
  state: 'ready' | 'in-flight' | 'waiting';
  /** A change arrived while a send was in flight: send once more after it. */
  changedDuringSend: boolean;
  timer?: unknown;
}

export interface DispatchStats {
  enqueued: number;
  coalesced: number;
  delivered: number;
  dropped: Record<DropReason, number>;
}

/** The coalescing key: one pending callback per object and manager. */
export function dispatchKey(manager: string, event: WatchEventV2): string {
  const { group, version, kind } = event.watchedGvk;
  return `${manager}\n${group}/${version}/${kind}\n${event.watched.Namespace}\n${event.watched.Name}`;
}

/** Delay before retry number `attempt` (1-based): capped doubling with equal jitter. */
export function backoffDelay(
  attempt: number,
  initialMs: number,
  maxMs: number,
  random: () => number,
): number {
  const ceiling = Math.min(maxMs, initialMs * 2 ** Math.min(attempt - 1, 30));
  return ceiling / 2 + random() * (ceiling / 2);
}

export class Dispatcher {
  readonly stats: DispatchStats = {
    enqueued: 0,
    coalesced: 0,
    delivered: 0,
    dropped: { queue_full: 0, max_age: 0, rejected: 0, shutdown: 0, invalid: 0 },
  };
  private readonly entries = new Map<string, Entry>();
  private ready: Entry[] = [];
  private readyHead = 0;
  private active = 0;
  private pumpScheduled = false;
  private closed = false;
  private emptied: (() => void) | undefined;
  private readonly throttled = {
    queue_full: { lastAt: -Infinity, suppressed: 0 },
    invalid: { lastAt: -Infinity, suppressed: 0 },
  };
  private readonly clock: Clock;
  private readonly random: () => number;

  constructor(private readonly options: DispatcherOptions) {
    if (!(options.workers >= 1))
      throw new Error(`dispatch workers must be at least 1, got ${options.workers}`);
    if (!(options.maxQueue >= 1))
      throw new Error(`dispatch queue size must be at least 1, got ${options.maxQueue}`);
    this.clock = options.clock ?? systemClock;
    this.random = options.random ?? Math.random;
  }

  /** Entries waiting, in flight or backing off. */
  get depth(): number {
    return this.entries.size;
  }

  enqueue(manager: string, event: WatchEventV2, uid?: string): EnqueueResult {
    if (this.closed) {
      this.drop(undefined, 'shutdown', { manager, event, uid });
      return 'dropped';
    }
    const key = dispatchKey(manager, event);
    const existing = this.entries.get(key);
    if (existing) {
      existing.changedAt = this.clock.now();
      existing.event = event;
      existing.uid = uid;
      if (existing.state === 'in-flight') existing.changedDuringSend = true;
      this.stats.coalesced++;
      this.options.observer?.coalesced();
      return 'coalesced';
    }
    const invalid = this.options.validate?.(event);
    if (invalid !== undefined) {
      this.drop(undefined, 'invalid', { manager, event, uid }, { why: invalid });
      return 'dropped';
    }
    if (this.entries.size >= this.options.maxQueue) {
      this.drop(undefined, 'queue_full', { manager, event, uid });
      return 'dropped';
    }
    const entry: Entry = {
      key,
      manager,
      event,
      uid,
      changedAt: this.clock.now(),
      attempts: 0,
      state: 'ready',
      changedDuringSend: false,
    };
    this.entries.set(key, entry);
    this.stats.enqueued++;
    this.options.observer?.enqueued();
    this.options.observer?.depth(this.entries.size);
    this.makeReady(entry, true);
    return 'enqueued';
  }

  /**
   * Stops taking events and keeps delivering (retries included) until the queue is empty or
   * `timeoutMs` has passed; what is left then is dropped as `shutdown`.
   */
  async drain(timeoutMs: number): Promise<void> {
    this.closed = true;
    if (this.entries.size > 0) {
      let timer: unknown;
      await new Promise<void>((resolve) => {
        this.emptied = resolve;
        timer = this.clock.setTimeout(resolve, timeoutMs);
      });
      this.clock.clearTimeout(timer);
      this.emptied = undefined;
    }
    for (const entry of [...this.entries.values()]) {
      this.clock.clearTimeout(entry.timer);
      this.remove(entry);
      this.drop(entry, 'shutdown', entry);
    }
  }

  /**
   * `deferred`: called from the admission path, so start sends after the current I/O callbacks;
   * answers to the API server go out first and one pump serves a burst of enqueues.
   */
  private makeReady(entry: Entry, deferred = false): void {
    entry.state = 'ready';
    this.ready.push(entry);
    if (!deferred) this.pump();
    else if (!this.pumpScheduled) {
      this.pumpScheduled = true;
      setImmediate(() => {
        this.pumpScheduled = false;
        this.pump();
      });
    }
  }

  private pump(): void {
    while (this.active < this.options.workers && this.readyHead < this.ready.length) {
      const entry = this.ready[this.readyHead++] as Entry;
      if (this.readyHead > 1024 && this.readyHead * 2 > this.ready.length) {
        this.ready = this.ready.slice(this.readyHead);
        this.readyHead = 0;
      }
      if (this.entries.get(entry.key) !== entry || entry.state !== 'ready') continue;
      if (this.clock.now() - entry.changedAt > this.options.maxAgeMs) {
        this.remove(entry);
        this.drop(entry, 'max_age', entry);
        continue;
      }
      this.active++;
      entry.state = 'in-flight';
      entry.changedDuringSend = false;
      void this.attempt(entry);
    }
  }

  private async attempt(entry: Entry): Promise<void> {
    const started = this.clock.now();
    let outcome: DeliveryOutcome;
    try {
      outcome = await this.options.send(entry.manager, entry.event);
    } catch (error) {
      outcome = { result: 'retry', reason: error instanceof Error ? error.message : String(error) };
    }
    this.active--;
    this.options.observer?.attempt(outcome.result, (this.clock.now() - started) / 1000);
    if (this.entries.get(entry.key) !== entry) {
      // Dropped by a drain timeout while in flight.
      this.pump();
      return;
    }
    entry.attempts++;
    switch (outcome.result) {
      case 'delivered':
        this.stats.delivered++;
        this.options.observer?.delivered();
        if (entry.changedDuringSend) {
          entry.attempts = 0;
          this.makeReady(entry);
        } else {
          this.remove(entry);
        }
        break;
      case 'rejected':
        // The same key gives the same body, so a change during the send would be refused too.
        this.remove(entry);
        this.drop(entry, 'rejected', entry, { status: outcome.status, why: outcome.reason });
        break;
      case 'retry':
        this.scheduleRetry(entry, outcome.reason);
        break;
    }
    this.pump();
  }

  private scheduleRetry(entry: Entry, reason: string): void {
    const now = this.clock.now();
    const delay = backoffDelay(
      entry.attempts,
      this.options.backoffInitialMs,
      this.options.backoffMaxMs,
      this.random,
    );
    if (now + delay - entry.changedAt > this.options.maxAgeMs) {
      this.remove(entry);
      this.drop(entry, 'max_age', entry, { why: reason });
      return;
    }
    entry.state = 'waiting';
    if (this.options.logger.isLevelEnabled('debug')) {
      this.options.logger.debug(
        {
          ...identity(entry.manager, entry.event),
          uid: entry.uid,
          attempts: entry.attempts,
          delayMs: Math.round(delay),
          reason,
        },
        'callback failed; will retry',
      );
    }
    entry.timer = this.clock.setTimeout(() => {
      entry.timer = undefined;
      if (this.entries.get(entry.key) === entry) this.makeReady(entry);
    }, delay);
  }

  private remove(entry: Entry): void {
    if (this.entries.get(entry.key) === entry) this.entries.delete(entry.key);
    this.options.observer?.depth(this.entries.size);
    if (this.entries.size === 0) this.emptied?.();
  }

  private drop(
    entry: Entry | undefined,
    reason: DropReason,
    what: { manager: string; event: WatchEventV2; uid?: string | undefined },
    extra: Record<string, unknown> = {},
  ): void {
    this.stats.dropped[reason]++;
    this.options.observer?.dropped(reason);
    const fields = {
      ...identity(what.manager, what.event),
      uid: what.uid,
      reason,
      attempts: entry?.attempts ?? 0,
      ...extra,
    };
    if (reason === 'queue_full' || reason === 'invalid') {
      // Both can happen on every write (a full queue, a client sending junk): one line per second
      // per reason says enough; the counters have the totals.
      const now = this.clock.now();
      const throttle = this.throttled[reason];
      if (now - throttle.lastAt < 1000) {
        throttle.suppressed++;
        return;
      }
      const suppressed = throttle.suppressed;
      throttle.lastAt = now;
      throttle.suppressed = 0;
      this.options.logger.warn(
        { ...fields, suppressed, maxQueue: this.options.maxQueue },
        reason === 'invalid' ? 'event dropped: invalid' : 'event dropped: dispatch queue full',
      );
      return;
    }
    this.options.logger.warn(fields, `event dropped: ${reason.replace('_', ' ')}`);
  }
}

/** Log fields naming the object an event is about. */
export function identity(manager: string, event: WatchEventV2): Record<string, string> {
  const { group, version, kind } = event.watchedGvk;
  return {
    manager,
    gvk: `${group}/${version}/${kind}`,
    namespace: event.watched.Namespace,
    name: event.watched.Name,
  };
}
