// What one SKR may cost: a token bucket per runtime-id, so a flood from one SKR's certificate is
// answered 429 with Retry-After (the webhook honours it) instead of work. Only runtime-ids that carry a Kyma get a
// bucket (the listener asks after resolving the Kyma), and full buckets are forgotten, so strangers cannot grow it.

import { systemClock, type Clock } from '@skr-watcher/api';

export interface CallbackBudgetOptions {
  /** Tokens added per second. */
  perSecond: number;
  /** Bucket size: callbacks one runtime-id may send at once. */
  burst: number;
  clock?: Clock;
}

export type Spend = { ok: true } | { ok: false; retryAfterSeconds: number };

interface Bucket {
  tokens: number;
  at: number;
}

/** Buckets are swept for full ones at most this often. */
const SWEEP_EVERY_MS = 60_000;

export class CallbackBudget {
  private readonly buckets = new Map<string, Bucket>();
  private readonly clock: Clock;
  private lastSweep: number;

  constructor(private readonly options: CallbackBudgetOptions) {
    if (!(options.perSecond > 0) || !(options.burst >= 1)) {
      throw new Error(
        `callback budget needs perSecond > 0 and burst >= 1, got ${options.perSecond} and ${options.burst}`,
      );
    }
    this.clock = options.clock ?? systemClock;
    this.lastSweep = this.clock.now();
  }

  /** Takes one callback's token from `runtimeId`'s bucket, or says how many seconds until one is there. */
  spend(runtimeId: string): Spend {
    const now = this.clock.now();
    if (now - this.lastSweep >= SWEEP_EVERY_MS) this.sweep(now);
    const bucket = this.buckets.get(runtimeId) ?? { tokens: this.options.burst, at: now };
    const tokens = this.refilled(bucket, now);
    if (tokens < 1) {
      this.buckets.set(runtimeId, { tokens, at: now });
      return { ok: false, retryAfterSeconds: Math.max(1, Math.ceil((1 - tokens) / this.options.perSecond)) };
    }
    this.buckets.set(runtimeId, { tokens: tokens - 1, at: now });
    return { ok: true };
  }

  get perSecond(): number {
    return this.options.perSecond;
  }

  /** Runtime-ids with a bucket that is not full (for tests and the sweep). */
  get size(): number {
    return this.buckets.size;
  }

  private refilled(bucket: Bucket, now: number): number {
    return Math.min(this.options.burst, bucket.tokens + ((now - bucket.at) / 1000) * this.options.perSecond);
  }

  private sweep(now: number): void {
    this.lastSweep = now;
    for (const [runtimeId, bucket] of this.buckets) {
      if (this.refilled(bucket, now) >= this.options.burst) this.buckets.delete(runtimeId);
    }
  }
}
