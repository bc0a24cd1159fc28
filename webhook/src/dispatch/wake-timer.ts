// The dispatcher's one timer: set for the earliest moment something can be sent (a retry due, the breaker's
// probe), and set again only when that moment moves.
import type { Clock } from '@skr-watcher/api';

export class WakeTimer {
  private handle: unknown;
  private at = Infinity;

  constructor(
    private readonly clock: Clock,
    private readonly onWake: () => void,
  ) {}

  /** Wakes at `at` (the clock's ms; Infinity: not at all) instead of the moment set before. */
  setFor(at: number): void {
    if (at === this.at) return;
    this.clear();
    if (at === Infinity) return;
    this.at = at;
    this.handle = this.clock.setTimeout(() => this.fire(), Math.max(0, at - this.clock.now()));
  }

  clear(): void {
    if (this.handle !== undefined) this.clock.clearTimeout(this.handle);
    this.handle = undefined;
    this.at = Infinity;
  }

  private fire(): void {
    this.handle = undefined;
    this.at = Infinity;
    this.onWake();
  }
}
