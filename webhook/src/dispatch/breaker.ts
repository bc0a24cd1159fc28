// A circuit breaker in front of KCP: while the listener cannot be reached, one callback at a time
// probes it, instead of every worker opening a connection to a closed port for every queued object.
import type { Clock } from '@skr-watcher/api';

export interface KcpBreakerOptions {
  /** Consecutive unreachable attempts that open the breaker. */
  threshold: number;
  /** Delay before the probe after the breaker opened `level` times in a row (1-based). */
  delayMs: (level: number) => number;
  /**
   * While changes keep coming, a probe may go this soon after the last one even before the probe delay
   * has passed, so a KCP that is back is noticed within this time, not only after a long delay.
   */
  eagerIntervalMs: number;
  clock: Clock;
}

/** What an attempt about to start may do. */
export type BreakerPermit = 'send' | 'probe' | 'wait';

export type BreakerState = 'closed' | 'open' | 'probing';

/**
 * closed: every attempt may start; `threshold` consecutive unreachable outcomes open it.
 * open: no attempt starts before `probeAt` (or, while changes keep coming, `eagerIntervalMs` after the
 * last probe); the first one then is the probe (state probing).
 * probing: nothing else starts until the probe's outcome: reachable closes the breaker, unreachable
 * opens it again with the next, longer delay. Any reachable outcome (a straggler sent before the breaker
 * opened) closes it too. The breaker owns no timer: the dispatcher wakes itself at `probeAt`.
 */
export class KcpBreaker {
  private current: BreakerState = 'closed';
  private failures = 0;
  /** Times the breaker opened in a row without a reachable outcome; sets the probe delay. */
  private level = 0;
  private openUntil = 0;
  private lastProbeAt = -Infinity;

  constructor(private readonly options: KcpBreakerOptions) {
    if (!(options.threshold >= 1))
      throw new Error(`breaker threshold must be at least 1, got ${options.threshold}`);
  }

  get state(): BreakerState {
    return this.current;
  }

  /** When an open breaker lets its probe through (`fresh` as for `acquire`); undefined unless open. */
  probeAt(fresh = false): number | undefined {
    if (this.current !== 'open') return undefined;
    return fresh ? Math.min(this.openUntil, this.lastProbeAt + this.options.eagerIntervalMs) : this.openUntil;
  }

  /**
   * Takes a permit for one attempt; `probe` must be reported back with `probe: true`. `fresh`: changes
   * arrived since the last probe, which lets a probe go after `eagerIntervalMs` already.
   */
  acquire(fresh = false): BreakerPermit {
    if (this.current === 'closed') return 'send';
    if (this.current === 'probing') return 'wait';
    const now = this.options.clock.now();
    if (now < this.openUntil && !(fresh && now - this.lastProbeAt >= this.options.eagerIntervalMs))
      return 'wait';
    this.current = 'probing';
    this.lastProbeAt = now;
    return 'probe';
  }

  /** KCP answered (any HTTP status that is not a gateway's "upstream unavailable"). True if this closed it. */
  reachable(): boolean {
    this.failures = 0;
    this.level = 0;
    if (this.current === 'closed') return false;
    this.current = 'closed';
    return true;
  }

  /** KCP could not be reached. True if this opened the breaker (from closed or by a failed probe). */
  unreachable(probe: boolean): boolean {
    if (this.current === 'closed') {
      if (++this.failures < this.options.threshold) return false;
      this.open();
      return true;
    }
    // Stragglers that started before the breaker opened say nothing new.
    if (this.current === 'probing' && probe) {
      this.open();
      return true;
    }
    return false;
  }

  /** The delay the breaker last opened for, for log lines. */
  get delayMs(): number {
    return Math.max(0, this.openUntil - this.options.clock.now());
  }

  private open(): void {
    this.level++;
    this.failures = 0;
    this.current = 'open';
    this.lastProbeAt = this.options.clock.now();
    this.openUntil = this.options.clock.now() + this.options.delayMs(this.level);
  }
}
