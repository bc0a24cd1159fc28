// Keys the work queue adds later (requeues and backoffs), one timer per key; an earlier schedule of a key wins.
import type { Clock, TimerHandle } from '@skr-watcher/api';

export class DelayedKeys {
  private readonly pending = new Map<string, { due: number; timer: TimerHandle }>();

  /** `due` is called with each key when its delay has passed. */
  constructor(
    private readonly clock: Clock,
    private readonly due: (key: string) => void,
  ) {}

  /** Keys scheduled and not yet due. */
  get size(): number {
    return this.pending.size;
  }

  /** Schedules the key `delayMs` from now, unless it is scheduled for that time or earlier already. */
  schedule(key: string, delayMs: number): void {
    const due = this.clock.now() + delayMs;
    const pending = this.pending.get(key);
    if (pending) {
      if (pending.due <= due) return;
      this.clock.clearTimeout(pending.timer);
    }
    const timer = this.clock.setTimeout(() => {
      this.pending.delete(key);
      this.due(key);
    }, delayMs);
    this.pending.set(key, { due, timer });
  }

  /** Cancels every schedule. */
  cancelAll(): void {
    for (const { timer } of this.pending.values()) this.clock.clearTimeout(timer);
    this.pending.clear();
  }
}
