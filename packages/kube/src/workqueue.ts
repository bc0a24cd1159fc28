// A keyed work queue with client-go semantics: a key is never processed twice at once, repeated adds
// coalesce, adds during processing re-run the key afterwards, failures back off per key.
// Its parts are in workqueue/: the run order, the slow-run clock and hooks, per-key backoff, delayed keys, metrics.
import { REQUEUE_MS, unrefClock, type Clock } from '@skr-watcher/api';
import type { Logger, Registry } from '@skr-watcher/telemetry';
import { DelayedKeys } from './workqueue/delayed-keys.js';
import { KeyBackoff } from './workqueue/key-backoff.js';
import { queueMetrics, registerStuckWorkerGauges, type QueueMetrics } from './workqueue/metrics.js';
import { RunOrder } from './workqueue/run-order.js';
import { SLOW_RUN_MS, SlowRunClock, type RunPhase } from './workqueue/slow-runs.js';

export {
  SLOW_RUN_MS,
  noteAnswer,
  whileSharedClusterWorks,
  workQueueRunHooks,
  type RunPhase,
} from './workqueue/slow-runs.js';

// Clocks live in @skr-watcher/api only: `systemClock` (its timers keep the process alive) and `unrefClock` (they do
// not). The queue's timers are unref'd, so a pending requeue does not hold a stopping process.

/** What processing a key asks for next: nothing, or another run after a delay. */
export interface ProcessResult {
  requeueAfterMs?: number;
}

export interface WorkQueueOptions {
  /** Names the queue in metrics (`name` label) and logs; a fixed word, not per object. */
  name: string;
  /** Processes one key; a rejection counts as a failure and backs the key off. */
  process: (key: string, phase: RunPhase) => Promise<ProcessResult | void>;
  /** How many keys are processed in parallel (each key only once at a time). Default 4. */
  workers?: number;
  /**
   * A run that got no API server answer (noteAnswer) for this long stops counting as a worker (it is waiting on a
   * slow or hung cluster, not using the CPU) and its key is marked slow. Default SLOW_RUN_MS.
   */
  slowAfterMs?: number;

  /** Per-key exponential backoff on failure: base doubles per consecutive failure, up to max. */
  backoffBaseMs?: number;
  backoffMaxMs?: number;
  /**
   * `process` logs its own failures with the object's identity (the reconciler does): the queue then notes the
   * retry at debug level only, so one failure is one warn line.
   */
  processLogsFailures?: boolean;
  clock?: Clock;
  logger?: Logger;
  registry?: Registry;
}

export interface StopOptions {
  /** Also process the keys that are queued now (not the delayed ones) before resolving. Default false. */
  drain?: boolean;
}

export class WorkQueue {
  readonly name: string;
  private readonly processKey: (key: string, phase: RunPhase) => Promise<ProcessResult | void>;
  private readonly workers: number;
  private readonly slowAfterMs: number;
  private readonly clock: Clock;
  private readonly logger: Logger | undefined;
  private readonly failureLogLevel: 'warn' | 'debug';
  private readonly metrics: QueueMetrics | undefined;
  private readonly leaveStuckWorkerGauges: (() => void) | undefined;

  /** Queued keys, in the order workers take them. */
  private readonly order: RunOrder;
  /** Keys that need a run: queued ones, and processing ones that were added again. */
  private readonly dirty = new Set<string>();
  private readonly processing = new Set<string>();
  /** When each run in flight started (clock ms), for the stuck-worker gauges. */
  private readonly runStarts = new Map<string, number>();
  /** When each dirty key was first added, for the queue-duration metric. */
  private readonly addedAt = new Map<string, number>();
  private readonly delayed: DelayedKeys;
  private readonly backoff: KeyBackoff;
  private readonly running = new Set<Promise<void>>();
  /** Runs that count as workers: all runs but the slow ones. */
  private workerRuns = 0;
  /** Of those, runs of suspect keys. */
  private suspectWorkerRuns = 0;
  private slowRuns = 0;
  /** The slow clock of each run in flight; stopped on stop, when freeing workers no longer matters. */
  private readonly slowClocks = new Set<SlowRunClock>();
  private started = false;
  private stopping = false;
  private drainOnStop = false;
  private idleWaiters: (() => void)[] = [];

  constructor(options: WorkQueueOptions) {
    this.name = options.name;
    this.processKey = options.process;
    this.workers = Math.max(1, options.workers ?? 4);
    this.slowAfterMs = options.slowAfterMs ?? SLOW_RUN_MS;
    this.order = new RunOrder(this.workers);
    this.backoff = new KeyBackoff(
      options.backoffBaseMs ?? REQUEUE_MS.backoffBase,
      options.backoffMaxMs ?? REQUEUE_MS.backoffMax,
    );
    this.clock = options.clock ?? unrefClock;
    this.delayed = new DelayedKeys(this.clock, (key) => this.add(key));
    this.logger = options.logger;
    this.failureLogLevel = options.processLogsFailures ? 'debug' : 'warn';
    this.metrics = queueMetrics(options.registry);
    this.leaveStuckWorkerGauges = options.registry && registerStuckWorkerGauges(options.registry, this);
  }

  /** Keys waiting to run now (not counting delayed or in-flight ones). */
  get depth(): number {
    return this.order.length;
  }

  get inFlight(): number {
    return this.processing.size;
  }

  /** Keys scheduled for later (requeues and backoffs). */
  get delayedCount(): number {
    return this.delayed.size;
  }

  /** Consecutive failures of a key since its last success. */
  failuresOf(key: string): number {
    return this.backoff.failuresOf(key);
  }

  /** Starts the workers; keys added before start wait in the queue. */
  start(): void {
    if (this.stopping) throw new Error(`work queue ${this.name} is stopped and cannot start again`);
    this.started = true;
    this.pump();
  }

  /** Asks for a run of `key` as soon as a worker is free; a no-op if it is already waiting. */
  add(key: string): void {
    if (this.stopping && !this.drainOnStop) return;
    this.metrics?.adds.inc({ name: this.name });
    if (this.dirty.has(key)) return;
    this.dirty.add(key);
    this.addedAt.set(key, this.clock.now());
    if (!this.processing.has(key)) {
      this.enqueueKey(key);
      this.pump();
    }
  }

  /**
   * Like add, but the key runs before every key not added urgently, even if it was queued already (its place
   * moves up). Within the urgent keys the order is kept; a suspect urgent key still leaves the last worker free.
   */
  addUrgent(key: string): void {
    if (this.stopping && !this.drainOnStop) return;
    // Queued already: it moves up now. Processing (or not dirty yet): it counts once enqueued.
    this.order.markUrgent(key, this.dirty.has(key) && !this.processing.has(key));
    this.add(key);
  }

  /** Asks for a run of `key` after `delayMs`; an earlier pending schedule of the key wins. */
  addAfter(key: string, delayMs: number): void {
    if (this.stopping) return;
    if (delayMs <= 0) {
      this.add(key);
      return;
    }
    this.delayed.schedule(key, delayMs);
  }

  /** Forgets the failure history of a key (its next failure starts from the base backoff). */
  forget(key: string): void {
    this.backoff.forget(key);
    this.order.forgetFailure(key);
  }

  /** Seconds each run in flight has been going. */
  runAges(): number[] {
    const now = this.clock.now();
    return [...this.runStarts.values()].map((startedAt) => (now - startedAt) / 1000);
  }

  /** Resolves when nothing is queued or in flight (delayed keys do not count). For tests and `--once`. */
  whenIdle(): Promise<void> {
    if (this.order.length === 0 && this.processing.size === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /**
   * Stops taking new work, cancels delayed keys and waits for the keys in flight to finish.
   * With `drain`, the keys queued now are processed too.
   */
  async stop(options: StopOptions = {}): Promise<void> {
    if (!this.stopping) {
      this.stopping = true;
      this.drainOnStop = options.drain === true && this.started;
      this.delayed.cancelAll();
      for (const slowClock of this.slowClocks) slowClock.disarm();
      this.slowClocks.clear();
      if (!this.drainOnStop) this.dropQueued();
    }
    while (this.running.size > 0 || (this.drainOnStop && this.order.length > 0)) {
      await Promise.race(this.running);
    }
    this.leaveStuckWorkerGauges?.();
    this.notifyIdle();
  }

  private dropQueued(): void {
    if (this.order.length > 0) {
      this.logger?.info(
        { queue: this.name, dropped: this.order.length },
        'work queue stopping; queued keys dropped',
      );
    }
    for (const key of this.order.clear()) this.dirty.delete(key);
    this.setDepth();
  }

  private setDepth(): void {
    this.metrics?.depth.set({ name: this.name }, this.order.length);
  }

  private leaveWorkers(wasSuspect: boolean): void {
    this.workerRuns -= 1;
    if (wasSuspect) this.suspectWorkerRuns -= 1;
  }

  private suspectMayRun(): boolean {
    return this.suspectWorkerRuns < (this.workers > 1 ? this.workers - 1 : 1);
  }

  private enqueueKey(key: string): void {
    this.order.push(key);
    this.setDepth();
  }

  private pump(): void {
    if (!this.started) return;
    while (this.workerRuns < this.workers) {
      if (this.stopping && !this.drainOnStop) return;
      const key = this.order.take(this.suspectMayRun());
      if (key === undefined) return;
      this.startRun(key);
    }
  }

  /** Starts the run of a key just taken from the queue, in the worker lane until it ends or goes slow. */
  private startRun(key: string): void {
    this.dirty.delete(key);
    this.processing.add(key);
    this.setDepth();
    const addedAt = this.addedAt.get(key);
    this.addedAt.delete(key);
    if (addedAt !== undefined) {
      this.metrics?.queueDuration.observe({ name: this.name }, (this.clock.now() - addedAt) / 1000);
    }
    const wasSuspect = this.order.isSuspect(key);
    this.workerRuns += 1;
    if (wasSuspect) this.suspectWorkerRuns += 1;
    // A run that goes slow frees its worker and its key is suspect. Slow runs are not capped: each is bounded by
    // its own deadline and holds a socket.
    const slowClock: SlowRunClock = new SlowRunClock({
      clock: this.clock,
      slowAfterMs: this.slowAfterMs,
      stopping: () => this.stopping,
      onSlow: () => {
        this.slowClocks.delete(slowClock);
        this.order.noteSlow(key);
        this.slowRuns += 1;
        this.leaveWorkers(wasSuspect);
        this.pump();
      },
    });
    this.slowClocks.add(slowClock);
    // A run waiting for a slot of this process keeps its worker (the queue takes no more keys meanwhile).
    const run: Promise<void> = slowClock
      .run(() => this.runKey(key, slowClock.phase))
      .then((succeeded) => {
        slowClock.end();
        this.slowClocks.delete(slowClock);
        if (slowClock.wentSlow) this.slowRuns -= 1;
        else this.leaveWorkers(wasSuspect);
        this.order.noteRunEnded(key, succeeded && !slowClock.wentSlow);
        this.running.delete(run);
        this.processing.delete(key);
        this.metrics?.inFlight.set({ name: this.name }, this.processing.size);
        // Added again while it ran: it goes to the back of the queue for another run.
        if (this.dirty.has(key)) this.enqueueKey(key);
        this.pump();
        this.notifyIdle();
      });
    this.running.add(run);
    this.metrics?.inFlight.set({ name: this.name }, this.processing.size);
  }

  /** Processes a key; true when it succeeded. Never rejects. */
  private async runKey(key: string, phase: RunPhase): Promise<boolean> {
    const startedAt = this.clock.now();
    this.runStarts.set(key, startedAt);
    try {
      const result = await this.processKey(key, phase);
      this.backoff.forget(key);
      const requeueAfterMs = result?.requeueAfterMs;
      if (requeueAfterMs !== undefined && Number.isFinite(requeueAfterMs)) this.addAfter(key, requeueAfterMs);
      return true;
    } catch (error) {
      const { failures, delayMs } = this.backoff.failed(key);
      this.metrics?.failures.inc({ name: this.name });
      this.logger?.[this.failureLogLevel](
        this.failureLogLevel === 'warn'
          ? { err: error, queue: this.name, key, failures, retryInMs: delayMs }
          : { queue: this.name, key, failures, retryInMs: delayMs },
        'processing failed',
      );
      if (!this.stopping) {
        this.metrics?.retries.inc({ name: this.name });
        this.addAfter(key, delayMs);
      }
      return false;
    } finally {
      this.runStarts.delete(key);
      this.metrics?.workDuration.observe({ name: this.name }, (this.clock.now() - startedAt) / 1000);
    }
  }

  private notifyIdle(): void {
    if (this.order.length > 0 || this.processing.size > 0) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const resolve of waiters) resolve();
  }
}
