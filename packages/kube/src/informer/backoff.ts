// How long an informer waits before it lists or watches again after a failure: jittered exponential backoff over
// consecutive failures, a wait that stop() can cut short.
import { backoffDelay, type Clock } from '@skr-watcher/api';
import type { Logger } from '@skr-watcher/telemetry';

export interface RestartBackoffOptions {
  clock: Clock;
  baseMs: number;
  maxMs: number;
  logger?: Logger;
  /** Jitter source in [0, 1); Math.random unless a test fixes it. */
  random?: () => number;
}

export class RestartBackoff {
  private failures = 0;
  private wakeSleep: (() => void) | undefined;

  constructor(private readonly options: RestartBackoffOptions) {}

  /** Failures since the last success. */
  get consecutiveFailures(): number {
    return this.failures;
  }

  /** A list or watch succeeded: the next failure waits the base delay again. */
  reset(): void {
    this.failures = 0;
  }

  /** Counts a failure, logs it and waits its backoff delay (or until wake). */
  async after(error: unknown): Promise<void> {
    this.failures++;
    const { clock, baseMs, maxMs, logger, random } = this.options;
    // Jittered: every informer of every replica restarts after the same API server hiccup.
    const delayMs = Math.round(backoffDelay(this.failures, baseMs, maxMs, random));
    logger?.warn(
      { err: error, failures: this.failures, retryInMs: delayMs },
      'list/watch failed; retrying with backoff',
    );
    await new Promise<void>((resolve) => {
      const timer = clock.setTimeout(resolve, delayMs);
      this.wakeSleep = () => {
        clock.clearTimeout(timer);
        resolve();
      };
    });
    this.wakeSleep = undefined;
  }

  /** Ends a wait in progress now (the informer stops). */
  wake(): void {
    this.wakeSleep?.();
  }
}
