// When this replica's Lease renewals went and whether they landed in time: the renew deadline that suspends the
// replica when none landed, and the drain deadline by which a suspended replica's work must be over.
import type { Clock, TimerHandle } from '@skr-watcher/api';
import { drainDeadlineMs, renewalOnTime, type LeaseTiming } from './lease-timing.js';

/** One renewal attempt as the pacer sees it. */
export interface Renewal {
  ok: boolean;
  /**
   * Landed within half a retry period of being sent, and sent within one and a half retry periods of the attempt
   * before: neither the KCP nor our event loop held it up.
   */
  onTime: boolean;
  latencyMs: number;
}

/** A renewal request on its way. */
export interface Attempt {
  /** Our clock when it was sent. */
  startedAt: number;
  /** Since the attempt before it was sent; 0 for the first. */
  sincePreviousMs: number;
}

export interface RenewalsOptions {
  timing: LeaseTiming;
  clock: Clock;
  /** The renew deadline passed without a renewal. */
  onSuspended: () => void;
  /** A renewal landed while suspended. */
  onResumed: () => void;
  /** Still suspended at the drain deadline, and `idle` says work is running. */
  onWorkOverdue: () => void;
  /** True when no work of this replica is running. */
  idle: () => boolean;
}

export class Renewals {
  private readonly timing: LeaseTiming;
  private readonly clock: Clock;
  /** Start of the last attempt, landed or not: the next one is a retry period after it. */
  private lastAttemptAt = 0;
  /** Start of the last renewal that landed: the renew deadline counts from it. */
  private lastLandedAt = 0;
  /** When the request in flight was sent; what a late renewal waited on. */
  private sentAt: number | undefined;
  private lastLatencyMs = 0;
  private deadlineTimer: TimerHandle;
  private drainTimer: TimerHandle;
  private suspendedNow = false;
  private stopped = false;

  constructor(private readonly options: RenewalsOptions) {
    this.timing = options.timing;
    this.clock = options.clock;
  }

  /** A renewal request goes now. */
  begin(): Attempt {
    const startedAt = this.clock.now();
    const sincePreviousMs = this.lastAttemptAt > 0 ? startedAt - this.lastAttemptAt : 0;
    this.sentAt = startedAt;
    this.lastAttemptAt = startedAt;
    return { startedAt, sincePreviousMs };
  }

  /** Its request ended, whether it landed or not. */
  end(attempt: Attempt): void {
    this.sentAt = undefined;
    this.lastLatencyMs = this.clock.now() - attempt.startedAt;
  }

  /** True when half the renew deadline has passed since the start of the last renewal that landed. */
  isLate(): boolean {
    return this.lastLandedAt > 0 && this.clock.now() - this.lastLandedAt > this.timing.renewDeadlineMs / 2;
  }

  /** It landed: the renew deadline counts from its start again, and a suspension ends. */
  landed(attempt: Attempt): void {
    this.lastLandedAt = attempt.startedAt;
    this.armDeadline();
    if (this.suspendedNow) this.resume();
  }

  /** What the pacer is told of an attempt. */
  report(attempt: Attempt, ok: boolean): Renewal {
    return {
      ok,
      onTime: ok && renewalOnTime(this.timing, this.lastLatencyMs, attempt.sincePreviousMs),
      latencyMs: this.lastLatencyMs,
    };
  }

  /** True while a renewal request is in flight. */
  inFlight(): boolean {
    return this.sentAt !== undefined;
  }

  /** How long until an attempt `periodMs` after the start of the last one. */
  dueInMs(periodMs: number): number {
    return Math.max(0, periodMs - (this.clock.now() - this.lastAttemptAt));
  }

  get suspended(): boolean {
    return this.suspendedNow;
  }

  /** For the log lines of a late or missing renewal. */
  diagnosis(): {
    sinceLastRenewalMs: number;
    renewalPendingMs: number | undefined;
    lastRenewLatencyMs: number;
  } {
    const now = this.clock.now();
    return {
      sinceLastRenewalMs: now - this.lastLandedAt,
      renewalPendingMs: this.sentAt === undefined ? undefined : now - this.sentAt,
      lastRenewLatencyMs: this.lastLatencyMs,
    };
  }

  /** No deadline fires any more. */
  stop(): void {
    this.stopped = true;
    this.clock.clearTimeout(this.deadlineTimer);
    this.clock.clearTimeout(this.drainTimer);
  }

  private sinceLanded(): number {
    return this.clock.now() - this.lastLandedAt;
  }

  private armDeadline(): void {
    this.clock.clearTimeout(this.deadlineTimer);
    const remaining = this.timing.renewDeadlineMs - this.sinceLanded();
    this.deadlineTimer = this.clock.setTimeout(() => this.suspend(), Math.max(0, remaining));
  }

  private suspend(): void {
    if (this.suspendedNow || this.stopped) return;
    this.suspendedNow = true;
    this.options.onSuspended();
    this.drainTimer = this.clock.setTimeout(
      () => {
        if (this.suspendedNow && !this.options.idle()) this.options.onWorkOverdue();
      },
      Math.max(0, drainDeadlineMs(this.timing) - this.sinceLanded()),
    );
  }

  private resume(): void {
    this.suspendedNow = false;
    this.clock.clearTimeout(this.drainTimer);
    this.options.onResumed();
  }
}
