// Time as the apps use it: one clock interface that tests can replace, and one retry backoff.

/** Timers and time, injectable so tests can advance time without sleeping. */
export interface Clock {
  now(): number;
  setTimeout(callback: () => void, ms: number): TimerHandle;
  clearTimeout(handle: TimerHandle): void;
}

/** Opaque handle returned by `Clock.setTimeout`. */
export type TimerHandle = unknown;

/** Wall-clock time and Node timers; the timers keep the process alive (see `unrefClock` for ones that do not). */
export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout: (callback, ms) => setTimeout(callback, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/** Like `systemClock`, but a pending timer does not keep a stopping process alive (delayed requeues). */
export const unrefClock: Clock = {
  now: () => Date.now(),
  setTimeout: (callback, ms) => {
    const timer = setTimeout(callback, ms);
    timer.unref();
    return timer;
  },
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/**
 * Delay before retry number `attempt` (1-based): the ceiling doubles from `initialMs` up to `maxMs`, and the delay
 * is drawn from its upper half ("equal jitter"), so retries of many clients spread out yet never come sooner than
 * half the ceiling. `random` is uniform in [0, 1); pass `() => 1` for the plain capped doubling.
 */
export function backoffDelay(
  attempt: number,
  initialMs: number,
  maxMs: number,
  random: () => number = Math.random,
): number {
  const ceiling = Math.min(maxMs, initialMs * 2 ** Math.min(Math.max(attempt, 1) - 1, 30));
  return ceiling / 2 + random() * (ceiling / 2);
}

/**
 * A period stretched by up to `fraction` of itself (0.1: up to 10 % longer), whole milliseconds: processes started
 * together that repeat the same write drift apart instead of writing in lockstep.
 */
export function jittered(periodMs: number, fraction: number, random: () => number = Math.random): number {
  return Math.round(periodMs * (1 + random() * fraction));
}
