// Full reconciles that callbacks start, at most one per Kyma per interval. The first callback of a
// quiet Kyma wakes it at once (a user's edit waits for nothing); callbacks within the interval after it are merged into
// one more wake at the interval's end. Safe because a reconcile reads the world when it runs: that one wake covers every
// callback merged into it. A flood from one SKR then costs one full reconcile per interval, not one per callback.

import { systemClock, type Clock, type TimerHandle } from '@skr-watcher/api';

interface Interval {
  timer: TimerHandle;
  /** A callback came within the interval: wake once more at its end. */
  merged: boolean;
}

export class ReconcileWakes {
  private readonly intervals = new Map<string, Interval>();
  private closed = false;

  constructor(
    private readonly intervalMs: number,
    private readonly wake: (kymaKey: string) => void,
    private readonly clock: Clock = systemClock,
  ) {}

  /** Wakes `kymaKey` now, or merges the call into the wake at the end of its current interval. */
  request(kymaKey: string): void {
    const interval = this.intervals.get(kymaKey);
    if (interval) {
      interval.merged = true;
      return;
    }
    this.wakeAndOpen(kymaKey);
  }

  /** Kymas within an interval (for tests and the bench). */
  get size(): number {
    return this.intervals.size;
  }

  /** Wakes every Kyma with merged callbacks now and stops timing (shutdown: those callbacks were answered 200). */
  close(): void {
    this.closed = true;
    const merged = [...this.intervals].filter(([, interval]) => interval.merged).map(([key]) => key);
    for (const interval of this.intervals.values()) this.clock.clearTimeout(interval.timer);
    this.intervals.clear();
    for (const key of merged) this.wake(key);
  }

  private wakeAndOpen(kymaKey: string): void {
    this.wake(kymaKey);
    if (this.closed) return;
    const timer = this.clock.setTimeout(() => {
      const ended = this.intervals.get(kymaKey);
      this.intervals.delete(kymaKey);
      if (ended?.merged) this.wakeAndOpen(kymaKey);
    }, this.intervalMs);
    this.intervals.set(kymaKey, { timer, merged: false });
  }
}
