// A keyed work queue with client-go semantics: a key is never processed twice at once, repeated adds
// coalesce, adds during processing re-run the key afterwards, failures back off per key.
import { AsyncLocalStorage } from 'node:async_hooks';
import { REQUEUE_MS, backoffDelay, unrefClock, type Clock, type TimerHandle } from '@skr-watcher/api';
import {
  Counter,
  Gauge,
  Histogram,
  registeredMetric,
  scrapeTimeGauge,
  type Registry,
} from '@skr-watcher/telemetry';
import type { Logger } from '@skr-watcher/telemetry';

// Clocks live in @skr-watcher/api only: `systemClock` (its timers keep the process alive) and `unrefClock` (they do
// not). The queue's timers are unref'd, so a pending requeue does not hold a stopping process.

/**
 * What a run may tell the queue about itself. A run that waits for something of this process (a pacing slot) is
 * not waiting on a slow cluster: it keeps its worker and is not marked slow meanwhile.
 */
export interface RunPhase {
  /** The run waits inside this process; the slow clock stops. */
  waiting(): void;
  /** The run works (again): it goes slow slowAfterMs from now. */
  working(): void;
}

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

interface QueueMetrics {
  depth: Gauge;
  adds: Counter;
  retries: Counter;
  failures: Counter;
  workDuration: Histogram;
  queueDuration: Histogram;
  inFlight: Gauge;
}

/**
 * Healthy reconciles take tens to hundreds of milliseconds; one still running after a second is waiting on a slow
 * cluster, and must not keep a healthy key's edit (bar: 500 ms end to end) waiting for a worker.
 */
export const SLOW_RUN_MS = 1_000;

/** The run (of any queue) whose work is on the current async path: what a cluster client reports its requests to. */
interface RunActivity {
  /** An API server answered a request of the run. */
  answered(): void;
  /** Requests of the run in flight to a cluster every run shares (the KCP). */
  sharedInFlight: number;
}
const activeRuns = new AsyncLocalStorage<RunActivity>();

/**
 * An API server answered a request made by the current run (clients given workQueueRunHooks call it for every
 * answer): the run is working, not waiting on a silent cluster, and its slow clock starts again. A pass that installs
 * five modules is slow on a loaded machine because it has much to do, not because a cluster hangs; giving its worker
 * away started every Kyma of the fleet at once, each then passed its deadline and nothing converged (1,000 Kymas × 5
 * modules).
 */
export function noteAnswer(): void {
  activeRuns.getStore()?.answered();
}

/**
 * Runs a request of the current run to a cluster every run shares (the KCP): while it waits, the run is not slow.
 * A KCP that answers slowly does so for every run, and starting more runs would only add to its load.
 */
export async function whileSharedClusterWorks<T>(request: () => Promise<T>): Promise<T> {
  const run = activeRuns.getStore();
  if (!run) return request();
  run.sharedInFlight += 1;
  try {
    return await request();
  } finally {
    run.sharedInFlight -= 1;
    run.answered();
  }
}

/** The hooks a cluster client built for work of these queues is given (ClusterClientOptions.runs). */
export const workQueueRunHooks = { noteAnswer, whileSharedClusterWorks } as const;

/** The queues that report into one registry; the stuck-worker gauges ask each at scrape time. */
const queuesOf = new WeakMap<Registry, Set<WorkQueue>>();

/**
 * controller-runtime's stuck-worker gauges, read at scrape time: how long the longest run in flight has been going,
 * and the sum of every run in flight's age (grows without bound while a worker hangs).
 */
function registerStuckWorkerGauges(registry: Registry, queue: WorkQueue): void {
  let queues = queuesOf.get(registry);
  if (!queues) {
    queues = new Set();
    queuesOf.set(registry, queues);
  }
  queues.add(queue);
  const known = queues;
  const gauge = (name: string, help: string, value: (ages: number[]) => number) =>
    scrapeTimeGauge(registry, {
      name,
      help,
      labelNames: ['name'],
      collect() {
        this.reset();
        const ages = new Map<string, number[]>();
        for (const each of known) ages.set(each.name, [...(ages.get(each.name) ?? []), ...each.runAges()]);
        for (const [name, of] of ages) this.set({ name }, value(of));
      },
    });
  gauge(
    'workqueue_longest_running_processor_seconds',
    'How long the longest run in flight has been going.',
    (ages) => ages.reduce((max, age) => Math.max(max, age), 0),
  );
  gauge(
    'workqueue_unfinished_work_seconds',
    'Seconds of work in flight not yet observed by workqueue_work_duration_seconds; a large value means stuck runs.',
    (ages) => ages.reduce((sum, age) => sum + age, 0),
  );
}

const WORK_BUCKETS_SECONDS = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60];

function queueMetrics(registry: Registry | undefined): QueueMetrics | undefined {
  if (!registry) return undefined;
  // Several queues may share one registry: reuse a metric that is registered already.
  const existing = <M>(name: string, create: () => M): M => registeredMetric(registry, name, create);
  const registers = [registry];
  return {
    depth: existing(
      'workqueue_depth',
      () =>
        new Gauge({
          name: 'workqueue_depth',
          help: 'Keys waiting to be processed.',
          labelNames: ['name'],
          registers,
        }),
    ),
    adds: existing(
      'workqueue_adds_total',
      () =>
        new Counter({
          name: 'workqueue_adds_total',
          help: 'Adds of keys, coalesced or not.',
          labelNames: ['name'],
          registers,
        }),
    ),
    retries: existing(
      'workqueue_retries_total',
      () =>
        new Counter({
          name: 'workqueue_retries_total',
          help: 'Keys requeued with backoff after a failure.',
          labelNames: ['name'],
          registers,
        }),
    ),
    failures: existing(
      'workqueue_failures_total',
      () =>
        new Counter({
          name: 'workqueue_failures_total',
          help: 'Processing runs that failed.',
          labelNames: ['name'],
          registers,
        }),
    ),
    workDuration: existing(
      'workqueue_work_duration_seconds',
      () =>
        new Histogram({
          name: 'workqueue_work_duration_seconds',
          help: 'Time spent processing one key.',
          labelNames: ['name'],
          buckets: WORK_BUCKETS_SECONDS,
          registers,
        }),
    ),
    queueDuration: existing(
      'workqueue_queue_duration_seconds',
      () =>
        new Histogram({
          name: 'workqueue_queue_duration_seconds',
          help: 'Time a key waited in the queue before processing started.',
          labelNames: ['name'],
          buckets: WORK_BUCKETS_SECONDS,
          registers,
        }),
    ),
    inFlight: existing(
      'workqueue_in_flight',
      () =>
        new Gauge({
          name: 'workqueue_in_flight',
          help: 'Keys being processed now.',
          labelNames: ['name'],
          registers,
        }),
    ),
  };
}

export class WorkQueue {
  readonly name: string;
  private readonly processKey: (key: string, phase: RunPhase) => Promise<ProcessResult | void>;
  private readonly workers: number;
  private readonly slowAfterMs: number;
  private readonly backoffBaseMs: number;
  private readonly backoffMaxMs: number;
  private readonly clock: Clock;
  private readonly logger: Logger | undefined;
  private readonly failureLogLevel: 'warn' | 'debug';
  private readonly metrics: QueueMetrics | undefined;

  /** Keys ready to run, in order; each key appears at most once. */
  private readonly queue: string[] = [];
  /** Keys that need a run: queued ones, and processing ones that were added again. */
  private readonly dirty = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly registry: Registry | undefined;
  /** When each run in flight started (clock ms), for the stuck-worker gauges. */
  private readonly runStarts = new Map<string, number>();
  /** When each dirty key was first added, for the queue-duration metric. */
  private readonly addedAt = new Map<string, number>();
  private readonly delayed = new Map<string, { due: number; timer: TimerHandle }>();
  private readonly failures = new Map<string, number>();
  private readonly running = new Set<Promise<void>>();
  /** Runs that count as workers: all runs but the slow ones. */
  private workerRuns = 0;
  /** Of those, runs of suspect keys. */
  private suspectWorkerRuns = 0;
  private slowRuns = 0;
  /** One per run in the worker lane; cleared on stop, when freeing workers no longer matters. */
  private readonly slowTimers = new Set<TimerHandle>();
  /**
   * Keys whose last run failed or went slow. They may hold all workers but one, so N hung clusters cannot make
   * a healthy key wait behind them (client-go has no such rule; its keys are assumed to cost the same).
   */
  private readonly suspect = new Set<string>();
  /**
   * Keys whose last run succeeded within slowAfterMs: their cluster answers. A free worker takes them before keys
   * queued earlier whose cluster is unknown (never run, e.g. Kymas just added) or suspect, so a healthy Kyma's edit
   * does not wait behind a wave of new hung clusters, each of which holds a worker for slowAfterMs.
   */
  private readonly proven = new Set<string>();
  /** Proven keys in `queue`, so picking needs no scan while there are none. */
  private provenQueued = 0;
  /**
   * Proven keys taken in a row while a key that is not proven waited in the queue. After `workers` of them the next
   * free worker takes the oldest key that is not proven (within the suspect cap): proven keys go first, but never
   * forever. A busy replica's resyncs and Ready requeues keep proven keys queued at all times (1,750 Kymas on one
   * replica of a 5,000-Kyma fleet), and the retry of a Kyma whose pass failed in the start-up burst waited behind
   * them for 46 minutes, its Kyma in state Error all along.
   */
  private provenInARow = 0;
  /**
   * Keys added with addUrgent whose run has not started yet: a free worker takes them before everything else
   * (proven keys included). A Kyma this replica just took over from a dead one is reconciled by nobody until
   * its first run here; routine work (a resync's thousand keys) must not queue ahead of it.
   */
  private readonly urgent = new Set<string>();
  /** Urgent keys in `queue`. */
  private urgentQueued = 0;
  private started = false;
  private stopping = false;
  private drainOnStop = false;
  private idleWaiters: (() => void)[] = [];

  constructor(options: WorkQueueOptions) {
    this.name = options.name;
    this.processKey = options.process;
    this.workers = Math.max(1, options.workers ?? 4);
    this.slowAfterMs = options.slowAfterMs ?? SLOW_RUN_MS;

    this.backoffBaseMs = options.backoffBaseMs ?? REQUEUE_MS.backoffBase;
    this.backoffMaxMs = options.backoffMaxMs ?? REQUEUE_MS.backoffMax;
    this.clock = options.clock ?? unrefClock;
    this.logger = options.logger;
    this.failureLogLevel = options.processLogsFailures ? 'debug' : 'warn';
    this.metrics = queueMetrics(options.registry);
    this.registry = options.registry;
    if (options.registry) registerStuckWorkerGauges(options.registry, this);
  }

  /** Keys waiting to run now (not counting delayed or in-flight ones). */
  get depth(): number {
    return this.queue.length;
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
    return this.failures.get(key) ?? 0;
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
    if (!this.urgent.has(key)) {
      this.urgent.add(key);
      // Queued already: it moves up now. Processing (or not dirty yet): it counts once enqueued.
      if (this.dirty.has(key) && !this.processing.has(key)) this.urgentQueued += 1;
    }
    this.add(key);
  }

  /** Asks for a run of `key` after `delayMs`; an earlier pending schedule of the key wins. */
  addAfter(key: string, delayMs: number): void {
    if (this.stopping) return;
    if (delayMs <= 0) {
      this.add(key);
      return;
    }
    const due = this.clock.now() + delayMs;
    const pending = this.delayed.get(key);
    if (pending) {
      if (pending.due <= due) return;
      this.clock.clearTimeout(pending.timer);
    }
    const timer = this.clock.setTimeout(() => {
      this.delayed.delete(key);
      this.add(key);
    }, delayMs);
    this.delayed.set(key, { due, timer });
  }

  /** Forgets the failure history of a key (its next failure starts from the base backoff). */
  forget(key: string): void {
    this.failures.delete(key);
    this.suspect.delete(key);
  }

  /** Seconds each run in flight has been going. */
  runAges(): number[] {
    const now = this.clock.now();
    return [...this.runStarts.values()].map((startedAt) => (now - startedAt) / 1000);
  }

  /** Resolves when nothing is queued or in flight (delayed keys do not count). For tests and `--once`. */
  whenIdle(): Promise<void> {
    if (this.queue.length === 0 && this.processing.size === 0) return Promise.resolve();
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
      for (const { timer } of this.delayed.values()) this.clock.clearTimeout(timer);
      this.delayed.clear();
      for (const timer of this.slowTimers) this.clock.clearTimeout(timer);
      this.slowTimers.clear();
      if (!this.drainOnStop) {
        if (this.queue.length > 0) {
          this.logger?.info(
            { queue: this.name, dropped: this.queue.length },
            'work queue stopping; queued keys dropped',
          );
        }
        for (const key of this.queue) this.dirty.delete(key);
        this.queue.length = 0;
        this.provenQueued = 0;
        this.urgent.clear();
        this.urgentQueued = 0;
        this.setDepth();
      }
    }
    while (this.running.size > 0 || (this.drainOnStop && this.queue.length > 0)) {
      await Promise.race(this.running);
    }
    if (this.registry) queuesOf.get(this.registry)?.delete(this);
    this.notifyIdle();
  }

  private setDepth(): void {
    this.metrics?.depth.set({ name: this.name }, this.queue.length);
  }

  private backoffFor(failures: number): number {
    // Plain capped doubling: a key is retried by this process alone, so there is nothing to spread out.
    return backoffDelay(failures, this.backoffBaseMs, this.backoffMaxMs, () => 1);
  }

  private leaveWorkers(wasSuspect: boolean): void {
    this.workerRuns -= 1;
    if (wasSuspect) this.suspectWorkerRuns -= 1;
  }

  /**
   * Index of the next queued key a free worker may take: urgent keys first, then proven keys (each in order) but
   * the oldest other key after `workers` proven ones in a row, then the others in order, where suspect keys leave
   * the last worker to the rest.
   */
  private nextRunnable(): number {
    const urgent = this.nextUrgent();
    if (urgent >= 0) return urgent;
    const suspectMayRun = this.suspectMayRun();
    const mayRun = (key: string) => suspectMayRun || !this.suspect.has(key);
    if (this.provenQueued > 0) {
      const proven = this.queue.findIndex((key) => this.proven.has(key));
      if (proven >= 0) {
        if (this.provenInARow < this.workers) return proven;
        const turn = this.queue.findIndex((key) => !this.proven.has(key) && mayRun(key));
        return turn >= 0 ? turn : proven;
      }
    }
    return this.queue.findIndex(mayRun);
  }

  private suspectMayRun(): boolean {
    return this.suspectWorkerRuns < (this.workers > 1 ? this.workers - 1 : 1);
  }

  /** Index of the first queued urgent key a free worker may take; -1 when none. */
  private nextUrgent(): number {
    if (this.urgentQueued === 0) return -1;
    const suspectMayRun = this.suspectMayRun();
    return this.queue.findIndex((key) => this.urgent.has(key) && (suspectMayRun || !this.suspect.has(key)));
  }

  private enqueueKey(key: string): void {
    this.queue.push(key);
    if (this.proven.has(key)) this.provenQueued += 1;
    if (this.urgent.has(key)) this.urgentQueued += 1;
    this.setDepth();
  }

  private pump(): void {
    if (!this.started) return;
    while (this.workerRuns < this.workers) {
      if (this.stopping && !this.drainOnStop) return;
      const index = this.nextRunnable();
      if (index < 0) return;
      const key = this.queue.splice(index, 1)[0] as string;
      const urgent = this.urgent.delete(key);
      if (urgent) this.urgentQueued -= 1;
      if (this.proven.has(key)) {
        this.provenQueued -= 1;
        if (!urgent && this.queue.length > this.provenQueued) this.provenInARow += 1;
      } else if (!urgent) this.provenInARow = 0;
      this.dirty.delete(key);
      this.processing.add(key);
      this.setDepth();
      const addedAt = this.addedAt.get(key);
      this.addedAt.delete(key);
      if (addedAt !== undefined) {
        this.metrics?.queueDuration.observe({ name: this.name }, (this.clock.now() - addedAt) / 1000);
      }
      const wasSuspect = this.suspect.has(key);
      this.workerRuns += 1;
      if (wasSuspect) this.suspectWorkerRuns += 1;
      let wentSlow = false;
      let ended = false;
      let slowTimer: TimerHandle | undefined;
      // A run that got no answer from any cluster for this long, and waits on no request to the KCP (slow for every
      // run alike), is waiting on its own cluster: it frees its worker and its key is suspect. Slow runs are not capped: each is bounded by its own deadline and holds a socket.
      let lastAnswerAt = Number.NEGATIVE_INFINITY;
      let armedAt = 0;
      const activity: RunActivity = {
        answered: () => {
          lastAnswerAt = this.clock.now();
        },
        sharedInFlight: 0,
      };
      const goSlow = () => {
        if (slowTimer !== undefined) this.slowTimers.delete(slowTimer);
        slowTimer = undefined;
        // Answered since the clock was armed: slow only after slowAfterMs without any answer.
        if (activity.sharedInFlight > 0) {
          armSlow();
          return;
        }
        if (lastAnswerAt > armedAt) {
          armSlow(lastAnswerAt + this.slowAfterMs - this.clock.now());
          return;
        }
        wentSlow = true;
        this.suspect.add(key);
        this.slowRuns += 1;
        this.leaveWorkers(wasSuspect);
        this.pump();
      };
      const disarmSlow = () => {
        if (slowTimer === undefined) return;
        this.clock.clearTimeout(slowTimer);
        this.slowTimers.delete(slowTimer);
        slowTimer = undefined;
      };
      const armSlow = (ms = this.slowAfterMs) => {
        if (wentSlow || ended || this.stopping || slowTimer !== undefined) return;
        armedAt = this.clock.now();
        slowTimer = this.clock.setTimeout(goSlow, Math.max(1, ms));
        this.slowTimers.add(slowTimer);
      };
      armSlow();
      // A run waiting for a slot of this process keeps its worker (the queue takes no more keys meanwhile).
      const phase: RunPhase = { waiting: () => disarmSlow(), working: () => armSlow() };
      const run: Promise<void> = activeRuns
        .run(activity, () => this.runKey(key, phase))
        .then((succeeded) => {
          ended = true;
          disarmSlow();
          if (wentSlow) this.slowRuns -= 1;
          else this.leaveWorkers(wasSuspect);
          if (succeeded && !wentSlow) {
            this.suspect.delete(key);
            this.proven.add(key);
          } else {
            this.suspect.add(key);
            this.proven.delete(key);
          }
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
  }

  /** Processes a key; true when it succeeded. Never rejects. */
  private async runKey(key: string, phase: RunPhase): Promise<boolean> {
    const startedAt = this.clock.now();
    this.runStarts.set(key, startedAt);
    try {
      const result = await this.processKey(key, phase);
      this.failures.delete(key);
      const requeueAfterMs = result?.requeueAfterMs;
      if (requeueAfterMs !== undefined && Number.isFinite(requeueAfterMs)) this.addAfter(key, requeueAfterMs);
      return true;
    } catch (error) {
      const failures = (this.failures.get(key) ?? 0) + 1;
      this.failures.set(key, failures);
      const delayMs = this.backoffFor(failures);
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
    if (this.queue.length > 0 || this.processing.size > 0) return;
    const waiters = this.idleWaiters;
    this.idleWaiters = [];
    for (const resolve of waiters) resolve();
  }
}
