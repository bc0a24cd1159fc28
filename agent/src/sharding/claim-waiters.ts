// Callbacks waiting for this replica's view to name it the owner of a Kyma they claimed: each is released when the
// view does, or when its wait ends.
import { systemClock, type Clock } from '@skr-watcher/api';

export interface ClaimWaiter {
  /** Resolves once the view names us the owner (now or since `add`), or `ms` from now; then the waiter is gone. */
  until(ms: number): Promise<void>;
}

export class ClaimWaiters {
  private readonly waiters = new Map<string, (() => void)[]>();

  constructor(private readonly clock: Clock = systemClock) {}

  /** A waiter for `key`, registered now, so that a write whose answer our view takes at once is not missed. */
  add(key: string): ClaimWaiter {
    let seenNow = () => {};
    const seen = new Promise<void>((resolve) => (seenNow = resolve));
    this.waiters.set(key, [...(this.waiters.get(key) ?? []), seenNow]);
    return {
      until: async (ms) => {
        let timer: unknown;
        await Promise.race([
          seen,
          new Promise<void>((resolve) => (timer = this.clock.setTimeout(resolve, ms))),
        ]);
        this.clock.clearTimeout(timer);
        const left = (this.waiters.get(key) ?? []).filter((waiter) => waiter !== seenNow);
        if (left.length) this.waiters.set(key, left);
        else this.waiters.delete(key);
      },
    };
  }

  /** Our view names us the owner of `key`: every waiter of it is released. */
  owned(key: string): void {
    for (const resolve of this.waiters.get(key) ?? []) resolve();
    this.waiters.delete(key);
  }

  /** Keys with a waiter (for tests). */
  get size(): number {
    return this.waiters.size;
  }
}
