// Deadlines and abort signals that bound every request of a piece of work (a reconcile), however deep in the call
// tree it is made: clients built with `boundByDeadline` read them from the async context.
import { AsyncLocalStorage } from 'node:async_hooks';

/** The deadline of the work this request is part of (a reconcile), if any. */
const deadlines = new AsyncLocalStorage<AbortSignal>();

/** The deadline passed: what requests made within `withinDeadline` are aborted with. */
export class DeadlineExceededError extends Error {
  constructor(what: string, ms: number) {
    super(`${what}: deadline of ${ms} ms passed`);
    // Named like AbortSignal.timeout's reason, so callers treat it as the cluster not answering in time.
    this.name = 'TimeoutError';
  }
}

/**
 * Runs `work` so that every request of a `boundByDeadline` client made inside it, however deep, is aborted
 * once `ms` have passed: one slow cluster costs its own work at most `ms`, whatever the number of calls.
 */
export async function withinDeadline<T>(what: string, ms: number, work: () => Promise<T>): Promise<T> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(new DeadlineExceededError(what, ms)), ms);
  timer.unref();
  try {
    return await abortableBy(controller.signal, work);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Runs `work` so that every request of a `boundByDeadline` client made inside it is aborted when `signal` fires
 * (or an enclosing deadline or signal does): a request not yet sent is never sent, one in flight is dropped.
 */
export function abortableBy<T>(signal: AbortSignal, work: () => Promise<T>): Promise<T> {
  const outer = deadlines.getStore();
  return deadlines.run(outer ? AbortSignal.any([outer, signal]) : signal, work);
}

/** The deadline or signal of the work on the current async path; undefined outside `withinDeadline`/`abortableBy`. */
export function currentDeadline(): AbortSignal | undefined {
  return deadlines.getStore();
}
