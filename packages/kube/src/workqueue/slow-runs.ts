// How the work queue tells a run that works from one that waits on a hung cluster: the activity of the run on the
// current async path (API server answers, requests to the shared KCP, waits inside this process) and the clock
// that marks a run slow after slowAfterMs without an answer.
import { AsyncLocalStorage } from 'node:async_hooks';
import type { Clock, TimerHandle } from '@skr-watcher/api';

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

export interface SlowRunClockOptions {
  clock: Clock;
  slowAfterMs: number;
  /** True once the queue stops: no slow clock is armed any more. */
  stopping(): boolean;
  /** The run went slow: it leaves the worker lane. Called at most once. */
  onSlow(): void;
}

/**
 * One run's slow clock. A run that got no answer from any cluster for slowAfterMs, and waits on no request to the
 * KCP (slow for every run alike), is waiting on its own cluster: it goes slow. Starts armed.
 */
export class SlowRunClock {
  /** Handed to the run: waiting stops the clock, working starts it again. */
  readonly phase: RunPhase = { waiting: () => this.disarm(), working: () => this.arm() };
  private readonly activity: RunActivity = {
    answered: () => {
      this.lastAnswerAt = this.options.clock.now();
    },
    sharedInFlight: 0,
  };
  private slow = false;
  private ended = false;
  private timer: TimerHandle | undefined;
  private lastAnswerAt = Number.NEGATIVE_INFINITY;
  private armedAt = 0;

  constructor(private readonly options: SlowRunClockOptions) {
    this.arm();
  }

  get wentSlow(): boolean {
    return this.slow;
  }

  /** Runs the run's work with its activity on the async path, where noteAnswer and whileSharedClusterWorks find it. */
  run<R>(work: () => Promise<R>): Promise<R> {
    return activeRuns.run(this.activity, work);
  }

  /** The run ended: the clock stops for good. */
  end(): void {
    this.ended = true;
    this.disarm();
  }

  disarm(): void {
    if (this.timer === undefined) return;
    this.options.clock.clearTimeout(this.timer);
    this.timer = undefined;
  }

  private arm(ms = this.options.slowAfterMs): void {
    if (this.slow || this.ended || this.options.stopping() || this.timer !== undefined) return;
    const { clock } = this.options;
    this.armedAt = clock.now();
    this.timer = clock.setTimeout(() => this.expired(), Math.max(1, ms));
  }

  private expired(): void {
    this.timer = undefined;
    if (this.activity.sharedInFlight > 0) {
      this.arm();
      return;
    }
    // Answered since the clock was armed: slow only after slowAfterMs without any answer.
    if (this.lastAnswerAt > this.armedAt) {
      this.arm(this.lastAnswerAt + this.options.slowAfterMs - this.options.clock.now());
      return;
    }
    this.slow = true;
    this.options.onSlow();
  }
}
