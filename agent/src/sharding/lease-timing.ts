// The three periods of a membership Lease (decision 007) and what follows from them: by when a suspended replica's
// work must be over, and when a renewal counts as on time.
import { LEADER_ELECTION_DEFAULTS } from '@skr-watcher/kube';

export interface LeaseTiming {
  /** A Lease not renewed for this long (on the observer's clock) has expired. */
  leaseDurationMs: number;
  /** Without a renewal for this long, the holder suspends: it starts no work. */
  renewDeadlineMs: number;
  /** How often the holder renews and looks at the ring. */
  retryPeriodMs: number;
}

/** The given periods, LEADER_ELECTION_DEFAULTS for the others; throws unless retry < renew deadline < duration. */
export function leaseTiming(given: Partial<LeaseTiming> = {}): LeaseTiming {
  const timing = {
    leaseDurationMs: given.leaseDurationMs ?? LEADER_ELECTION_DEFAULTS.leaseDurationMs,
    renewDeadlineMs: given.renewDeadlineMs ?? LEADER_ELECTION_DEFAULTS.renewDeadlineMs,
    retryPeriodMs: given.retryPeriodMs ?? LEADER_ELECTION_DEFAULTS.retryPeriodMs,
  };
  const { leaseDurationMs, renewDeadlineMs, retryPeriodMs } = timing;
  if (!(retryPeriodMs < renewDeadlineMs && renewDeadlineMs < leaseDurationMs)) {
    throw new Error(
      `shard timing needs retry period (${retryPeriodMs} ms) < renew deadline (${renewDeadlineMs} ms) < lease duration (${leaseDurationMs} ms)`,
    );
  }
  return timing;
}

/**
 * Time after its last renewal by which a suspended replica's work must be over, well before peers may fence it (a
 * lease duration after that renewal): half the margin between renew deadline and lease duration, the other half
 * for a late timer.
 */
export function drainDeadlineMs(timing: LeaseTiming): number {
  return timing.renewDeadlineMs + (timing.leaseDurationMs - timing.renewDeadlineMs) / 2;
}

/**
 * A renewal that landed within half a retry period of being sent, and was sent within one and a half retry periods
 * of the attempt before: neither the KCP nor our event loop held it up.
 */
export function renewalOnTime(
  timing: LeaseTiming,
  latencyMs: number,
  sincePreviousAttemptMs: number,
): boolean {
  return latencyMs <= timing.retryPeriodMs / 2 && sincePreviousAttemptMs <= timing.retryPeriodMs * 1.5;
}

/** A Lease's `leaseDurationSeconds` for a duration in milliseconds (the API counts whole seconds). */
export function leaseDurationSeconds(durationMs: number): number {
  return Math.ceil(durationMs / 1000);
}

/** A wait timed for a Lease's expiry ends this much after it, so that a timer a millisecond early still finds it expired. */
export const EXPIRY_SLACK_MS = 10;
