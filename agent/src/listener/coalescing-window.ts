// Optional hold of Kyma keys before they reach the reconcile queue, so a burst from one SKR becomes one
// reconcile even when the queue is idle. Safe because the reconcile runs after the hold ends and reads the
// world then: every event that arrived during the hold is covered by it. A key is never held twice.

import { systemClock, type Clock, type TimerHandle } from '@skr-watcher/api';

export class CoalescingWindow {
  private readonly held = new Map<string, TimerHandle>();

  constructor(
    private readonly windowMs: number,
    private readonly release: (key: string) => void,
    private readonly clock: Clock = systemClock,
  ) {}

  /** Holds `key` for the window; returns false when it is held already (the event is merged). */
  hold(key: string): boolean {
    if (this.held.has(key)) return false;
    const timer = this.clock.setTimeout(() => {
      this.held.delete(key);
      this.release(key);
    }, this.windowMs);
    this.held.set(key, timer);
    return true;
  }

  get size(): number {
    return this.held.size;
  }

  /** Releases every held key now (shutdown: the events were answered 200, so they must not be lost). */
  flush(): void {
    const keys = [...this.held.keys()];
    for (const timer of this.held.values()) this.clock.clearTimeout(timer);
    this.held.clear();
    for (const key of keys) this.release(key);
  }
}
