// How the dispatcher hears of KCP's reachability: each outcome goes to the breaker, and its transitions reach the
// metrics and the log (one warn line per outage, debug lines for the failed probes, one line when callbacks resume).
import type { Logger } from '@skr-watcher/telemetry';
import type { KcpBreaker } from './breaker.js';
import type { DispatchObserver } from './observer.js';
import { isUnreachable, type DeliveryOutcome } from './outcome.js';

export interface KcpReachabilityOptions {
  breaker: KcpBreaker;
  logger: Logger;
  observer?: DispatchObserver | undefined;
  /** Objects queued, for the log lines. */
  queued: () => number;
  /** KCP answers again after an outage: what backed off meanwhile need not wait out its backoff. */
  onReachable: () => void;
}

export class KcpReachability {
  constructor(private readonly options: KcpReachabilityOptions) {}

  /** Tells the breaker what an attempt (`probe`: the breaker's probe) came to. */
  note(outcome: DeliveryOutcome, probe: boolean): void {
    if (isUnreachable(outcome)) this.unreachable(outcome, probe);
    else this.reachable();
  }

  private reachable(): void {
    const { breaker, observer, logger } = this.options;
    if (!breaker.reachable()) return;
    observer?.breaker?.(false);
    this.options.onReachable();
    logger.info({ queued: this.options.queued() }, 'KCP reachable again; callbacks resume');
  }

  private unreachable(outcome: DeliveryOutcome, probe: boolean): void {
    const { breaker, observer, logger } = this.options;
    const wasClosed = breaker.state === 'closed';
    if (!breaker.unreachable(probe)) return;
    if (wasClosed) {
      observer?.breaker?.(true);
      // Once per outage, not per attempt: the failed probes are debug lines.
      logger.warn(
        {
          queued: this.options.queued(),
          probeInMs: Math.round(breaker.delayMs),
          reason: outcome.result === 'retry' ? outcome.reason : undefined,
        },
        'KCP unreachable; holding callbacks and probing with one at a time',
      );
    } else if (logger.isLevelEnabled('debug')) {
      logger.debug(
        { queued: this.options.queued(), probeInMs: Math.round(breaker.delayMs) },
        'KCP still unreachable',
      );
    }
  }
}
