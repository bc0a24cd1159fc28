// Per-key retry delays of the work queue: plain capped doubling over a key's consecutive failures.
import { backoffDelay } from '@skr-watcher/api';

export class KeyBackoff {
  private readonly failures = new Map<string, number>();

  constructor(
    private readonly baseMs: number,
    private readonly maxMs: number,
  ) {}

  /** Consecutive failures of a key since its last success. */
  failuresOf(key: string): number {
    return this.failures.get(key) ?? 0;
  }

  /** Counts a failure of the key; returns its consecutive failures and how long it waits before its retry. */
  failed(key: string): { failures: number; delayMs: number } {
    const failures = this.failuresOf(key) + 1;
    this.failures.set(key, failures);
    // Plain capped doubling: a key is retried by this process alone, so there is nothing to spread out.
    return { failures, delayMs: backoffDelay(failures, this.baseMs, this.maxMs, () => 1) };
  }

  /** The key succeeded, or its history is forgotten: its next failure waits the base delay. */
  forget(key: string): void {
    this.failures.delete(key);
  }
}
