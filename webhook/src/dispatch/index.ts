// Asynchronous delivery of events to KCP (decision 003): admission never waits on this. The Dispatcher coalesces
// changes per object, sends them with a bounded number of workers, retries, holds callbacks while KCP is
// unreachable and drops what outlives its max age; the units it is made of lie beside it in this folder.
import type { Logger } from '@skr-watcher/telemetry';
import { RESYNC_EVENT, backoffDelay, systemClock, type Clock, type WatchEventV2 } from '@skr-watcher/api';
import { KcpBreaker, type BreakerState } from './breaker.js';
import { DropReport, type DroppedChange } from './drops.js';
import {
  emptyDispatchStats,
  type DispatchObserver,
  type DispatchStats,
  type DropReason,
} from './observer.js';
import type { DeliveryOutcome, SendEvent } from './outcome.js';
import { DispatchQueue, dispatchKey, identity, type Entry, type NewEntry } from './queue.js';
import { KcpReachability } from './reachability.js';
import { retryDelay } from './retry.js';
import { WakeTimer } from './wake-timer.js';

export { isUnreachable } from './outcome.js';
export type { DeliveryOutcome, SendEvent } from './outcome.js';
export { DROP_MESSAGES, DROP_REASONS, emptyDispatchStats } from './observer.js';
export type { DispatchObserver, DispatchStats, DispatchThreadScheduling, DropReason } from './observer.js';
export { dispatchKey, identity } from './queue.js';

/** Max-age sweeps of the entries an open breaker holds back are at most this often. */
const HELD_SWEEP_INTERVAL_MS = 1000;

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

export class Dispatcher {
  readonly stats: DispatchStats = emptyDispatchStats();
  private readonly queue = new DispatchQueue();
  /** The earliest retry, or the breaker's probe while entries wait for it. */
  private readonly wakeTimer: WakeTimer;
  private readonly breaker: KcpBreaker;
  private readonly reachability: KcpReachability;
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
  private readonly drops: DropReport;
  private readonly clock: Clock;
  private readonly random: () => number;

  constructor(private readonly options: DispatcherOptions) {
    if (!(options.workers >= 1))
      throw new Error(`dispatch workers must be at least 1, got ${options.workers}`);
    if (!(options.maxQueue >= 1))
      throw new Error(`dispatch queue size must be at least 1, got ${options.maxQueue}`);
    this.clock = options.clock ?? systemClock;
    this.random = options.random ?? Math.random;
    this.drops = new DropReport({
      stats: this.stats,
      observer: options.observer,
      logger: options.logger,
      clock: this.clock,
      maxQueue: options.maxQueue,
    });
    this.breaker = new KcpBreaker({
      threshold: options.breakerThreshold ?? 3,
      clock: this.clock,
      eagerIntervalMs: options.backoffInitialMs,
      delayMs: (level) => backoffDelay(level, options.backoffInitialMs, options.backoffMaxMs, this.random),
    });
    this.reachability = new KcpReachability({
      breaker: this.breaker,
      logger: options.logger,
      observer: options.observer,
      queued: () => this.depth,
      onReachable: () => this.queue.releaseAllWaiting(),
    });
    this.wakeTimer = new WakeTimer(this.clock, () => this.wake());
  }

  /** Objects with an event waiting, in flight or backing off (resync callbacks are not counted). */
  get depth(): number {
    return this.queue.depth;
  }

  /** Resync callbacks not delivered yet (one per manager at most). */
  get resyncsPending(): number {
    return this.queue.resyncsPending;
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
    const existing = this.queue.get(key);
    if (existing) {
      this.coalesce(existing, event, uid);
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
    this.add({ key, manager, event, uid, resync: false });
    return 'enqueued';
  }

  /**
   * Asks KCP to look at everything of `manager`'s: at start (changes made while no webhook ran have no event) and
   * after drops. One per manager at a time; it holds no place of the queue's and is never dropped for its age.
   */
  resync(manager: string, why: string): void {
    if (this.closed) return;
    const key = dispatchKey(manager, RESYNC_EVENT);
    const existing = this.queue.get(key);
    if (existing) {
      this.queue.markResync(existing);
      // What KCP reads for the send under way may miss what made us ask: send once more after it.
      if (existing.state === 'in-flight') existing.changedDuringSend = true;
      return;
    }
    this.options.logger.info({ manager, why }, 'asking KCP to reconcile this SKR in full');
    this.add({ key, manager, event: RESYNC_EVENT, uid: undefined, resync: true });
  }

  /**
   * Stops taking events and keeps delivering (retries included) until the queue is empty or
   * `timeoutMs` has passed; what is left then is dropped as `shutdown`.
   */
  async drain(timeoutMs: number): Promise<void> {
    this.closed = true;
    if (this.queue.size > 0) {
      let timer: unknown;
      await new Promise<void>((resolve) => {
        this.emptied = resolve;
        timer = this.clock.setTimeout(resolve, timeoutMs);
      });
      this.clock.clearTimeout(timer);
      this.emptied = undefined;
    }
    const left = this.queue.clear();
    this.wakeTimer.clear();
    this.options.observer?.depth(0);
    for (const entry of left) this.drop(entry, 'shutdown', entry);
    this.drops.flush();
  }

  /** A new change of an object already queued: the entry now stands for it. */
  private coalesce(existing: Entry, event: WatchEventV2, uid: string | undefined): void {
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
  }

  private add(change: NewEntry): void {
    this.queue.add(change, this.clock.now());
    // The counters are about users' changes; a resync is one line in the log.
    if (!change.resync) {
      this.stats.enqueued++;
      this.options.observer?.enqueued();
    }
    this.options.observer?.depth(this.depth);
    this.fresh = true;
    // Called from the admission path: sends start after the current I/O callbacks, so answers to the API server
    // go out first and one pump serves a burst of enqueues.
    this.schedulePump();
  }

  private schedulePump(): void {
    if (this.pumpScheduled) return;
    this.pumpScheduled = true;
    setImmediate(() => {
      this.pumpScheduled = false;
      this.pump();
    });
  }

  private pump(): void {
    for (const manager of this.resyncWanted) this.resync(manager, 'events were dropped');
    this.resyncWanted.clear();
    const now = this.clock.now();
    while (this.active < this.options.workers) {
      const entry = this.queue.peekReady();
      if (!entry) break;
      if (this.expired(entry, now)) {
        this.queue.takeReady();
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
      this.queue.takeReady();
      this.active++;
      entry.state = 'in-flight';
      entry.changedDuringSend = false;
      entry.sentAt = now;
      void this.attempt(entry, permit === 'probe');
    }
    this.arm();
  }

  /** Whether `entry`'s latest change is past the max age by `at` (a resync never is). */
  private expired(entry: Entry, at: number): boolean {
    return at - entry.changedAt > this.options.maxAgeMs && !entry.resync;
  }

  /**
   * While the breaker is open, due entries stay in the ready list without being looked at; drop those
   * past their max age (at most once a second: this runs on every pump that the breaker holds back, i.e.
   * after each failed probe and on changes) so they do not hold queue places a new object could use.
   */
  private sweepHeldEntries(now: number): void {
    if (now - this.sweptAt < HELD_SWEEP_INTERVAL_MS) return;
    this.sweptAt = now;
    for (const entry of this.queue.takeReadyWhere((held) => this.expired(held, now))) {
      this.remove(entry);
      this.drop(entry, 'max_age', entry, { why: 'KCP unreachable' });
    }
  }

  /** Keeps the one timer set for the earliest moment something can be sent. */
  private arm(): void {
    let at = this.queue.nextDueAt;
    const probeAt = this.breaker.probeAt(this.fresh);
    if (probeAt !== undefined && probeAt < at && this.queue.hasReadySlots) at = probeAt;
    this.wakeTimer.setFor(at);
  }

  private wake(): void {
    this.queue.releaseDue(this.clock.now());
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
    this.reachability.note(outcome, probe);
    if (!this.queue.holds(entry)) {
      // Dropped by a drain timeout while in flight.
      this.pump();
      return;
    }
    entry.attempts++;
    switch (outcome.result) {
      case 'delivered':
        this.delivered(entry);
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

  private delivered(entry: Entry): void {
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
  }

  /** An object that changed during its send goes again, once the minimum gap after that send's start has passed. */
  private sendAgain(entry: Entry): void {
    const dueAt = entry.sentAt + (this.options.minGapMs ?? 0);
    if (dueAt <= this.clock.now()) this.queue.makeReady(entry);
    else this.queue.wait(entry, dueAt);
  }

  private scheduleRetry(entry: Entry, reason: string, retryAfterMs: number | undefined): void {
    const now = this.clock.now();
    const delay = retryDelay(entry.attempts, retryAfterMs, this.options, this.random);
    if (this.expired(entry, now + delay)) {
      this.remove(entry);
      this.drop(entry, 'max_age', entry, { why: reason });
      return;
    }
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
    this.queue.wait(entry, now + delay);
  }

  private remove(entry: Entry): void {
    const empty = this.queue.remove(entry);
    this.options.observer?.depth(this.depth);
    if (empty) {
      // Nothing left to wake for.
      this.wakeTimer.clear();
      this.emptied?.();
    }
  }

  private drop(
    entry: Entry | undefined,
    reason: DropReason,
    what: DroppedChange,
    extra: Record<string, unknown> = {},
  ): void {
    this.drops.report(reason, what, entry?.attempts ?? 0, extra);
    if ((reason === 'queue_full' || reason === 'max_age') && !this.closed) {
      // KCP never hears of that change: ask it to look at everything once the current pass is done.
      this.resyncWanted.add(what.manager);
      this.schedulePump();
    }
  }
}
