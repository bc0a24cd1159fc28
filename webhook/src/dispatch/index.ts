// Asynchronous delivery of events to KCP (decision 003): admission never waits on this.
import type { Logger } from '@skr-watcher/telemetry';
import { RESYNC_EVENT, backoffDelay, systemClock, type Clock, type WatchEventV2 } from '@skr-watcher/api';
import { KcpBreaker, type BreakerState } from './breaker.js';
import { LogThrottle } from '../log-throttle.js';

/**
 * Drops can come once per event (a full queue, junk from a client, the end of a long outage, a shutdown with
 * thousands queued): one line per second per reason says enough; the counters have the totals.
 */
const DROP_LOG_INTERVAL_MS = 1000;

/** What one callback attempt came to. */
export type DeliveryOutcome =
  | { result: 'delivered'; status: number }
  /** 5xx, timeouts and network errors: KCP may take it later; not before `retryAfterMs` when it said so. */
  | { result: 'retry'; reason: string; status?: number; retryAfterMs?: number }
  /** Other 4xx: KCP will never take this body; retrying cannot help. */
  | { result: 'rejected'; reason: string; status: number };

export type SendEvent = (manager: string, event: WatchEventV2) => Promise<DeliveryOutcome>;

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
  /** Consecutive unreachable attempts (network errors, 502/503/504) that open the breaker; default 3. */
  breakerThreshold?: number;
  /**
   * An object changed again while its callback was on the way is sent again no sooner than this long after that
   * send started (default 0: at once). A user's edits are far apart; an object rewritten hundreds of times a second
   * (a controller's status loop through a non-status write) then costs at most 1000 / minGapMs callbacks a second
   * instead of one per round trip, and KCP still gets its latest change.
   */
  minGapMs?: number;
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
  /** When the latest send of this entry started. */
  sentAt: number;
  /** When a waiting entry is due again. */
  dueAt: number;
  /** The "look at everything" event (RESYNC_EVENT): kept until delivered, whatever its age or the queue's size. */
  resync: boolean;
}

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

/** The coalescing key: one pending callback per object and manager. */
export function dispatchKey(manager: string, event: WatchEventV2): string {
  const { group, version, kind } = event.watchedGvk;
  return `${manager}\n${group}/${version}/${kind}\n${event.watched.Namespace}\n${event.watched.Name}`;
}

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

/** Entries backing off, earliest due first: a binary heap, so the dispatcher needs one timer, not one per entry. */
class DueQueue {
  private readonly heap: Entry[] = [];

  get size(): number {
    return this.heap.length;
  }

  peek(): Entry | undefined {
    return this.heap[0];
  }

  push(entry: Entry): void {
    const heap = this.heap;
    let i = heap.push(entry) - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if ((heap[parent] as Entry).dueAt <= entry.dueAt) break;
      heap[i] = heap[parent] as Entry;
      i = parent;
    }
    heap[i] = entry;
  }

  pop(): Entry | undefined {
    const heap = this.heap;
    const top = heap[0];
    const last = heap.pop();
    if (top === undefined || last === undefined || heap.length === 0) return top;
    let i = 0;
    for (;;) {
      const left = 2 * i + 1;
      if (left >= heap.length) break;
      const right = left + 1;
      const child =
        right < heap.length && (heap[right] as Entry).dueAt < (heap[left] as Entry).dueAt ? right : left;
      if ((heap[child] as Entry).dueAt >= last.dueAt) break;
      heap[i] = heap[child] as Entry;
      i = child;
    }
    heap[i] = last;
    return top;
  }

  clear(): void {
    this.heap.length = 0;
  }
}

export class Dispatcher {
  readonly stats: DispatchStats = emptyDispatchStats();
  private readonly entries = new Map<string, Entry>();
  /** Entries due now, in order; `readyHead` is the next one (the array is compacted now and then). */
  private ready: Entry[] = [];
  private readyHead = 0;
  private readonly waiting = new DueQueue();
  /** The one timer: the earliest retry, or the breaker's probe while entries wait for it. */
  private wakeTimer: unknown;
  private wakeAt = Infinity;
  private readonly breaker: KcpBreaker;
  /** Last sweep for max age of entries held by an open breaker. */
  private sweptAt = -Infinity;
  /** Changes arrived since the breaker's last probe (see KcpBreaker.acquire). */
  private fresh = false;
  private active = 0;
  private pumpScheduled = false;
  private closed = false;
  private emptied: (() => void) | undefined;
  /**
   * Managers whose events were dropped since the last pump: each gets a resync callback, so KCP reconciles what it
   * did not hear about.
   */
  private readonly resyncWanted = new Set<string>();
  /** Entries in `entries` that are resyncs. */
  private resyncs = 0;
  private readonly dropLog: LogThrottle;
  private readonly clock: Clock;
  private readonly random: () => number;

  constructor(private readonly options: DispatcherOptions) {
    if (!(options.workers >= 1))
      throw new Error(`dispatch workers must be at least 1, got ${options.workers}`);
    if (!(options.maxQueue >= 1))
      throw new Error(`dispatch queue size must be at least 1, got ${options.maxQueue}`);
    this.clock = options.clock ?? systemClock;
    this.random = options.random ?? Math.random;
    this.dropLog = new LogThrottle(options.logger, DROP_LOG_INTERVAL_MS, this.clock);
    this.breaker = new KcpBreaker({
      threshold: options.breakerThreshold ?? 3,
      clock: this.clock,
      eagerIntervalMs: options.backoffInitialMs,
      delayMs: (level) => backoffDelay(level, options.backoffInitialMs, options.backoffMaxMs, this.random),
    });
  }

  /** Objects with an event waiting, in flight or backing off (resync callbacks are not counted). */
  get depth(): number {
    return this.entries.size - this.resyncs;
  }

  /** Resync callbacks not delivered yet (one per manager at most). */
  get resyncsPending(): number {
    return this.resyncs;
  }

  /** Whether callbacks are held back because KCP could not be reached (see KcpBreaker). */
  get breakerState(): BreakerState {
    return this.breaker.state;
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
      if (this.breaker.state === 'open') {
        // Fresh changes may probe early; nothing else would pump for a coalesced change.
        this.fresh = true;
        this.schedulePump();
      }
      return 'coalesced';
    }
    const invalid = this.options.validate?.(event);
    if (invalid !== undefined) {
      this.drop(undefined, 'invalid', { manager, event, uid }, { why: invalid });
      return 'dropped';
    }
    if (this.depth >= this.options.maxQueue) {
      this.drop(undefined, 'queue_full', { manager, event, uid });
      return 'dropped';
    }
    this.add(key, manager, event, uid, false);
    return 'enqueued';
  }

  /**
   * Asks KCP to look at everything of `manager`'s: at start (changes made while no webhook ran have no event) and
   * after drops. One per manager at a time; it holds no place of the queue's and is never dropped for its age.
   */
  resync(manager: string, why: string): void {
    if (this.closed) return;
    const key = dispatchKey(manager, RESYNC_EVENT);
    const existing = this.entries.get(key);
    if (existing) {
      if (!existing.resync) this.resyncs++;
      existing.resync = true;
      // What KCP reads for the send under way may miss what made us ask: send once more after it.
      if (existing.state === 'in-flight') existing.changedDuringSend = true;
      return;
    }
    this.options.logger.info({ manager, why }, 'asking KCP to reconcile this SKR in full');
    this.add(key, manager, RESYNC_EVENT, undefined, true);
  }

  private add(
    key: string,
    manager: string,
    event: WatchEventV2,
    uid: string | undefined,
    resync: boolean,
  ): void {
    const entry: Entry = {
      key,
      manager,
      event,
      uid,
      changedAt: this.clock.now(),
      attempts: 0,
      state: 'ready',
      changedDuringSend: false,
      sentAt: 0,
      dueAt: 0,
      resync,
    };
    this.entries.set(key, entry);
    if (resync) this.resyncs++;
    // The counters are about users' changes; a resync is one line in the log.
    if (!resync) {
      this.stats.enqueued++;
      this.options.observer?.enqueued();
    }
    this.options.observer?.depth(this.depth);
    this.fresh = true;
    this.makeReady(entry, true);
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
    const left = [...this.entries.values()].filter((entry) => !entry.resync);
    this.entries.clear();
    this.resyncs = 0;
    this.waiting.clear();
    this.ready = [];
    this.readyHead = 0;
    this.disarm();
    this.options.observer?.depth(0);
    for (const entry of left) this.drop(entry, 'shutdown', entry);
    this.dropLog.flush();
  }

  /**
   * `deferred`: called from the admission path, so start sends after the current I/O callbacks;
   * answers to the API server go out first and one pump serves a burst of enqueues.
   */
  private makeReady(entry: Entry, deferred = false): void {
    entry.state = 'ready';
    this.ready.push(entry);
    if (deferred) this.schedulePump();
    else this.pump();
  }

  private schedulePump(): void {
    if (this.pumpScheduled) return;
    this.pumpScheduled = true;
    setImmediate(() => {
      this.pumpScheduled = false;
      this.pump();
    });
  }

  /** The next live ready entry, without taking it; stale slots are skipped and the array compacted. */
  private peekReady(): Entry | undefined {
    while (this.readyHead < this.ready.length) {
      const entry = this.ready[this.readyHead] as Entry;
      if (this.entries.get(entry.key) === entry && entry.state === 'ready') return entry;
      this.readyHead++;
    }
    if (this.readyHead > 0) {
      this.ready = [];
      this.readyHead = 0;
    }
    return undefined;
  }

  private takeReady(): void {
    this.readyHead++;
    if (this.readyHead > 1024 && this.readyHead * 2 > this.ready.length) {
      this.ready = this.ready.slice(this.readyHead);
      this.readyHead = 0;
    }
  }

  private pump(): void {
    for (const manager of this.resyncWanted) this.resync(manager, 'events were dropped');
    this.resyncWanted.clear();
    const now = this.clock.now();
    while (this.active < this.options.workers) {
      const entry = this.peekReady();
      if (!entry) break;
      if (now - entry.changedAt > this.options.maxAgeMs && !entry.resync) {
        this.takeReady();
        this.remove(entry);
        this.drop(entry, 'max_age', entry);
        continue;
      }
      const permit = this.breaker.acquire(this.fresh);
      if (permit === 'wait') {
        this.sweepHeldEntries(now);
        break;
      }
      if (permit === 'probe') this.fresh = false;
      this.takeReady();
      this.active++;
      entry.state = 'in-flight';
      entry.changedDuringSend = false;
      entry.sentAt = now;
      void this.attempt(entry, permit === 'probe');
    }
    this.arm();
  }

  /**
   * While the breaker is open, due entries stay in the ready list without being looked at; drop those
   * past their max age (at most once a second: this runs on every pump that the breaker holds back, i.e.
   * after each failed probe and on changes) so they do not hold queue places a new object could use.
   */
  private sweepHeldEntries(now: number): void {
    if (now - this.sweptAt < 1000) return;
    this.sweptAt = now;
    const kept: Entry[] = [];
    for (let i = this.readyHead; i < this.ready.length; i++) {
      const entry = this.ready[i] as Entry;
      if (this.entries.get(entry.key) !== entry || entry.state !== 'ready') continue;
      if (now - entry.changedAt > this.options.maxAgeMs && !entry.resync) {
        this.remove(entry);
        this.drop(entry, 'max_age', entry, { why: 'KCP unreachable' });
      } else kept.push(entry);
    }
    this.ready = kept;
    this.readyHead = 0;
  }

  /** Keeps the one timer set for the earliest moment something can be sent. */
  private arm(): void {
    let at = this.waiting.peek()?.dueAt ?? Infinity;
    const probeAt = this.breaker.probeAt(this.fresh);
    if (probeAt !== undefined && probeAt < at && this.readyHead < this.ready.length) at = probeAt;
    if (at === this.wakeAt) return;
    this.disarm();
    if (at === Infinity) return;
    this.wakeAt = at;
    this.wakeTimer = this.clock.setTimeout(() => this.wake(), Math.max(0, at - this.clock.now()));
  }

  private disarm(): void {
    if (this.wakeTimer !== undefined) this.clock.clearTimeout(this.wakeTimer);
    this.wakeTimer = undefined;
    this.wakeAt = Infinity;
  }

  private wake(): void {
    this.wakeTimer = undefined;
    this.wakeAt = Infinity;
    const now = this.clock.now();
    for (let top = this.waiting.peek(); top && top.dueAt <= now; top = this.waiting.peek()) {
      this.waiting.pop();
      if (this.entries.get(top.key) !== top || top.state !== 'waiting') continue;
      top.state = 'ready';
      this.ready.push(top);
    }
    this.pump();
  }

  private async attempt(entry: Entry, probe: boolean): Promise<void> {
    const started = this.clock.now();
    let outcome: DeliveryOutcome;
    try {
      outcome = await this.options.send(entry.manager, entry.event);
    } catch (error) {
      outcome = { result: 'retry', reason: error instanceof Error ? error.message : String(error) };
    }
    this.active--;
    this.options.observer?.attempt(outcome.result, (this.clock.now() - started) / 1000);
    this.noteReachability(outcome, probe);
    if (this.entries.get(entry.key) !== entry) {
      // Dropped by a drain timeout while in flight.
      this.pump();
      return;
    }
    entry.attempts++;
    switch (outcome.result) {
      case 'delivered':
        if (!entry.resync) {
          this.stats.delivered++;
          this.options.observer?.delivered();
        }
        if (entry.changedDuringSend) {
          entry.attempts = 0;
          this.sendAgain(entry);
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
        this.scheduleRetry(entry, outcome.reason, outcome.retryAfterMs);
        break;
    }
    this.pump();
  }

  /** An object that changed during its send goes again, once the minimum gap after that send's start has passed. */
  private sendAgain(entry: Entry): void {
    const dueAt = entry.sentAt + (this.options.minGapMs ?? 0);
    if (dueAt <= this.clock.now()) {
      entry.state = 'ready';
      this.ready.push(entry);
      return;
    }
    entry.state = 'waiting';
    entry.dueAt = dueAt;
    this.waiting.push(entry);
  }

  private noteReachability(outcome: DeliveryOutcome, probe: boolean): void {
    if (!isUnreachable(outcome)) {
      if (this.breaker.reachable()) {
        this.options.observer?.breaker?.(false);
        // KCP answers again: what backed off during the outage need not wait out its backoff.
        for (let entry = this.waiting.pop(); entry; entry = this.waiting.pop()) {
          if (this.entries.get(entry.key) !== entry || entry.state !== 'waiting') continue;
          entry.state = 'ready';
          this.ready.push(entry);
        }
        this.options.logger.info({ queued: this.depth }, 'KCP reachable again; callbacks resume');
      }
      return;
    }
    const wasClosed = this.breaker.state === 'closed';
    if (!this.breaker.unreachable(probe)) return;
    if (wasClosed) {
      this.options.observer?.breaker?.(true);
      // Once per outage, not per attempt: the failed probes are debug lines.
      this.options.logger.warn(
        {
          queued: this.depth,
          probeInMs: Math.round(this.breaker.delayMs),
          reason: outcome.result === 'retry' ? outcome.reason : undefined,
        },
        'KCP unreachable; holding callbacks and probing with one at a time',
      );
    } else if (this.options.logger.isLevelEnabled('debug')) {
      this.options.logger.debug(
        { queued: this.depth, probeInMs: Math.round(this.breaker.delayMs) },
        'KCP still unreachable',
      );
    }
  }

  private scheduleRetry(entry: Entry, reason: string, retryAfterMs: number | undefined): void {
    const now = this.clock.now();
    // KCP's Retry-After says when sending again is worth it (a callback budget refilled, a dead owner's Lease run
    // out): that is the delay, not a floor under a backoff grown past it. Bounded by the backoff's own range, so a
    // KCP can neither make an entry spin nor park it for longer than the backoff would; the max age still applies.
    const { backoffInitialMs, backoffMaxMs } = this.options;
    const delay =
      retryAfterMs === undefined
        ? backoffDelay(entry.attempts, backoffInitialMs, backoffMaxMs, this.random)
        : Math.min(Math.max(retryAfterMs, backoffInitialMs), backoffMaxMs);
    if (now + delay - entry.changedAt > this.options.maxAgeMs && !entry.resync) {
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
    entry.dueAt = now + delay;
    this.waiting.push(entry);
  }

  private remove(entry: Entry): void {
    if (this.entries.get(entry.key) === entry) {
      this.entries.delete(entry.key);
      if (entry.resync) this.resyncs--;
    }
    this.options.observer?.depth(this.depth);
    if (this.entries.size === 0) {
      // Nothing left to wake for; stale slots go with it.
      this.waiting.clear();
      this.ready = [];
      this.readyHead = 0;
      this.disarm();
      this.emptied?.();
    }
  }

  private drop(
    entry: Entry | undefined,
    reason: DropReason,
    what: { manager: string; event: WatchEventV2; uid?: string | undefined },
    extra: Record<string, unknown> = {},
  ): void {
    this.stats.dropped[reason]++;
    this.options.observer?.dropped(reason);
    if ((reason === 'queue_full' || reason === 'max_age') && !this.closed) {
      // KCP never hears of that change: ask it to look at everything once the current pass is done.
      this.resyncWanted.add(what.manager);
      this.schedulePump();
    }
    const fields = {
      ...identity(what.manager, what.event),
      uid: what.uid,
      reason,
      attempts: entry?.attempts ?? 0,
      ...extra,
    };
    this.dropLog.warn(
      reason,
      reason === 'queue_full' ? { ...fields, maxQueue: this.options.maxQueue } : fields,
      DROP_MESSAGES[reason],
    );
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
