// The admission thread's end of the dispatch thread (decision 015): relevant changes go over through a ring in
// shared memory (change-ring.ts, decision 022), which the thread reads on its own timer; counts and log lines come
// back as messages and land in this process's registry and logger, so `/metrics` and the logs look as they did with
// one thread.
import { Worker } from 'node:worker_threads';
import type { WatchEventV2 } from '@skr-watcher/api';
import type { Logger } from '@skr-watcher/telemetry';
import {
  DROP_MESSAGES,
  emptyDispatchStats,
  type DispatchObserver,
  type DispatchStats,
  type DropReason,
} from './observer.js';
import { identity } from './queue.js';
import type {
  DispatchReport,
  DispatchThreadData,
  FromDispatch,
  QueuedChange,
  ToDispatch,
} from './protocol.js';
import { ChangeRing } from './change-ring.js';
import { LogThrottle } from '../log-throttle.js';
import type { TlsMaterial } from '../tls-reload.js';

// Run from source (tests, the demo, under tsx) the thread loads the TypeScript file; built, the JavaScript one.
const WORKER_URL = new URL(import.meta.url.endsWith('.ts') ? './worker.ts' : './worker.js', import.meta.url);

/**
 * The thread holds the queue (10,000 entries of well under 1 KiB) and a few sockets: a small young generation
 * keeps its share of the Pod's memory small (V8's default sizes it for throughput, ~30 MiB more at rest).
 */
const DISPATCH_THREAD_HEAP = { maxYoungGenerationSizeMb: 4, maxOldGenerationSizeMb: 64 };

/** While the ring is full (the dispatch thread starved of CPU), how often the changes held here are offered again. */
const RING_RETRY_MS = 5;

/** Keys pino writes on every line; the admission thread's logger adds its own. */
const LINE_KEYS = new Set(['level', 'time', 'msg', 'component', 'pid', 'hostname']);
const LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace'] as const;

export interface DispatchThreadOptions extends Omit<DispatchThreadData, 'logLevel' | 'ring'> {
  logger: Logger;
  observer: DispatchObserver;
}

export class DispatchThread {
  readonly stats: DispatchStats = emptyDispatchStats();
  private worker: Worker;
  /** Set by spawn(): each thread has a ring of its own. */
  private ring!: ChangeRing;
  /** Changes that did not fit in the ring yet, oldest first; bounded by the queue size. */
  private held: Uint8Array[] = [];
  private retryTimer: NodeJS.Timeout | undefined;
  /** Messages posted to the thread so far; changes travel without any (a sleeping thread gets one wake-up). */
  messagesPosted = 0;
  /** Callers of depth() and drain() waiting for the held changes to be in the ring. */
  private readonly heldWaiters: (() => void)[] = [];
  /** A resync was asked for since the hold last overflowed. */
  private resyncAsked = false;
  private closed = false;
  private terminated = false;
  private nextQueryId = 1;
  private readonly depthQueries = new Map<number, (depth: number) => void>();
  private drained: (() => void) | undefined;
  private material: TlsMaterial;
  /** Last depth the thread reported; what is lost if it dies. */
  private lastDepth = 0;
  private readonly dropLog: LogThrottle;

  private constructor(private readonly options: DispatchThreadOptions) {
    this.material = options.material;
    this.dropLog = new LogThrottle(options.logger, 1000);
    this.worker = this.spawn();
  }

  /** Starts the thread and waits until it can take changes. */
  static async start(options: DispatchThreadOptions): Promise<DispatchThread> {
    const thread = new DispatchThread(options);
    await thread.ready();
    return thread;
  }

  /**
   * Queues a relevant change for the dispatch thread. Called on the admission path after the answer is written: it
   * only writes the change into the ring (no lock, no message while the thread is awake); the thread takes it within
   * `CHANGE_POLL_MS` and validates what needs a new queue entry.
   */
  enqueue(manager: string, event: WatchEventV2, uid: string | undefined): void {
    if (this.closed) {
      this.dropHere('shutdown', manager, event, uid);
      return;
    }
    const change: QueuedChange = [manager, event, uid];
    const record = Buffer.from(JSON.stringify(change));
    if (this.held.length === 0 && this.ring.write(record)) {
      this.wakeThread();
      return;
    }
    if (this.held.length >= this.options.maxQueue) {
      this.dropHere('queue_full', manager, event, uid);
      // KCP never hears of this change: the thread asks it to look at everything (once per full hold).
      if (!this.resyncAsked) this.resync('events were dropped');
      this.resyncAsked = true;
      return;
    }
    this.held.push(record);
    this.retryTimer ??= setTimeout(() => this.offerHeld(), RING_RETRY_MS);
  }

  /** Asks KCP to reconcile this SKR in full (its own configuration went or changed). */
  resync(why: string): void {
    if (!this.closed) this.send({ type: 'resync', why });
  }

  updateTls(material: TlsMaterial): void {
    this.material = material;
    this.send({ type: 'tls', material });
  }

  /** Objects with an undelivered event, as the thread counts them once it has taken every change sent so far. */
  async depth(): Promise<number> {
    if (this.terminated) return 0;
    await this.heldTaken();
    if (this.terminated) return 0;
    const id = this.nextQueryId++;
    return new Promise((resolve) => {
      this.depthQueries.set(id, resolve);
      this.send({ type: 'depth', id });
    });
  }

  /** Stops taking changes, lets the thread deliver for up to `timeoutMs`, then ends it. */
  async drain(timeoutMs: number): Promise<void> {
    this.closed = true;
    await this.heldTaken(timeoutMs);
    for (const record of this.held) {
      const [manager, event, uid] = JSON.parse(Buffer.from(record).toString('utf8')) as QueuedChange;
      this.dropHere('shutdown', manager, event, uid ?? undefined);
    }
    this.held = [];
    clearTimeout(this.retryTimer);
    const done = new Promise<void>((resolve) => (this.drained = resolve));
    this.send({ type: 'drain', timeoutMs });
    // The thread bounds the drain itself; this bound only covers a thread that stopped answering.
    const stuck = setTimeout(() => this.drained?.(), timeoutMs + 5_000);
    await done;
    clearTimeout(stuck);
    this.dropLog.flush();
    this.terminated = true;
    await this.worker.terminate();
    // Nobody will answer these any more; the queue they ask about is gone.
    for (const resolve of this.depthQueries.values()) resolve(0);
    this.depthQueries.clear();
  }

  /** A thread that went to sleep on an empty ring is told there is something (once, whoever wrote first). */
  private wakeThread(): void {
    if (this.ring.wake()) this.send({ type: 'wake' });
  }

  /** Moves held changes into the ring as far as they fit; keeps trying while some are left. */
  private offerHeld(): void {
    this.retryTimer = undefined;
    let taken = 0;
    while (taken < this.held.length && this.ring.write(this.held[taken] as Uint8Array)) taken++;
    if (taken > 0) {
      this.held = this.held.slice(taken);
      this.wakeThread();
    }
    if (this.held.length > 0) this.retryTimer = setTimeout(() => this.offerHeld(), RING_RETRY_MS);
    else {
      this.resyncAsked = false;
      for (const resolve of this.heldWaiters.splice(0)) resolve();
    }
  }

  /** Resolves once every held change is in the ring (or after `timeoutMs`). */
  private heldTaken(timeoutMs = Infinity): Promise<void> {
    if (this.held.length === 0) return Promise.resolve();
    return new Promise((resolve) => {
      this.heldWaiters.push(resolve);
      if (Number.isFinite(timeoutMs)) setTimeout(resolve, timeoutMs).unref();
    });
  }

  private send(message: ToDispatch): void {
    this.messagesPosted++;
    this.worker.postMessage(message);
  }

  private spawn(): Worker {
    // A new thread gets a new ring: what the old one had not read went with its queue.
    this.ring = new ChangeRing();
    const data: DispatchThreadData = {
      ring: this.ring.buffer,
      address: this.options.address,
      material: this.material,
      workers: this.options.workers,
      maxQueue: this.options.maxQueue,
      backoffInitialMs: this.options.backoffInitialMs,
      backoffMaxMs: this.options.backoffMaxMs,
      maxAgeMs: this.options.maxAgeMs,
      callbackTimeoutMs: this.options.callbackTimeoutMs,
      minGapMs: this.options.minGapMs,
      kcpServerCn: this.options.kcpServerCn,
      resyncManager: this.options.resyncManager,
      logLevel: this.options.logger.level,
    };
    const worker = new Worker(WORKER_URL, {
      workerData: data,
      name: 'skr-webhook-dispatch',
      resourceLimits: DISPATCH_THREAD_HEAP,
    });
    worker.on('message', (message: FromDispatch) => this.receive(message));
    worker.on('error', (error) => {
      this.options.logger.error({ err: error }, 'dispatch thread failed');
    });
    worker.on('exit', (code) => {
      if (this.closed || worker !== this.worker) return;
      // Its queue is gone; the KCP's periodic resync covers those objects. Callbacks must go on for new changes.
      this.options.logger.error({ code, lost: this.lastDepth }, 'dispatch thread exited; starting a new one');
      this.lastDepth = 0;
      this.options.observer.depth(0);
      this.worker = this.spawn();
    });
    return worker;
  }

  private ready(): Promise<void> {
    return new Promise((resolve, reject) => {
      const onMessage = (message: FromDispatch) => {
        if (message.type !== 'ready') return;
        this.worker.off('error', onError);
        this.worker.off('message', onMessage);
        resolve();
      };
      const onError = (cause: Error) => {
        this.closed = true;
        reject(new Error('start the dispatch thread', { cause }));
      };
      this.worker.on('message', onMessage);
      this.worker.once('error', onError);
    });
  }

  private receive(message: FromDispatch): void {
    switch (message.type) {
      case 'report':
        this.apply(message.report);
        break;
      case 'depth':
        this.depthQueries.get(message.id)?.(message.depth);
        this.depthQueries.delete(message.id);
        break;
      case 'log':
        this.relog(message.line);
        break;
      case 'drained':
        this.drained?.();
        break;
      case 'scheduling':
        this.options.observer.threadScheduling?.(message.policy);
        break;
      case 'ready':
        break;
    }
  }

  private apply(report: DispatchReport): void {
    const { stats, options } = this;
    const observer = options.observer;
    stats.enqueued += report.enqueued;
    stats.coalesced += report.coalesced;
    stats.delivered += report.delivered;
    observer.enqueued(report.enqueued);
    observer.coalesced(report.coalesced);
    observer.delivered(report.delivered);
    for (const [reason, count] of Object.entries(report.dropped) as [DropReason, number][]) {
      if (count === 0) continue;
      stats.dropped[reason] += count;
      observer.dropped(reason, count);
    }
    this.lastDepth = report.depth;
    observer.depth(report.depth);
    if (report.breakerOpen !== undefined) observer.breaker?.(report.breakerOpen);
    for (const [outcome, durations] of Object.entries(report.attempts) as [
      keyof DispatchReport['attempts'],
      number[],
    ][])
      for (const seconds of durations) observer.attempt(outcome, seconds);
  }

  /** A line from the dispatch thread, written again through this thread's logger (its level, its stream). */
  private relog(line: string): void {
    let record: Record<string, unknown>;
    try {
      record = JSON.parse(line) as Record<string, unknown>;
    } catch {
      return;
    }
    const level = LEVELS.find((name) => name === record['level']) ?? 'info';
    const msg = typeof record['msg'] === 'string' ? record['msg'] : '';
    const fields: Record<string, unknown> = {};
    for (const [key, value] of Object.entries(record)) if (!LINE_KEYS.has(key)) fields[key] = value;
    this.options.logger[level](fields, msg);
  }

  /** Changes that come after shutdown began, or find the ring and the hold full: counted and logged here. */
  private dropHere(
    reason: 'shutdown' | 'queue_full',
    manager: string,
    event: WatchEventV2,
    uid: string | undefined,
  ): void {
    this.stats.dropped[reason]++;
    this.options.observer.dropped(reason, 1);
    this.dropLog.warn(reason, { ...identity(manager, event), uid, reason }, DROP_MESSAGES[reason]);
  }
}
