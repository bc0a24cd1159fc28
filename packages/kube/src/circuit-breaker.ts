// The per-cluster circuit breaker of cluster clients: after a few requests in a row got no answer, requests fail at
// once until a single probe after a cooldown gets one.
import {
  Observable,
  type HttpLibrary,
  type RequestContext,
  type ResponseContext,
} from '@kubernetes/client-node';
import { backoffDelay } from '@skr-watcher/api';
import { isUnreachable } from './apply.js';

/** Circuit breaker settings of cluster clients (per cluster). */
export const CIRCUIT = {
  /** Two unanswered requests in a row: one lost connection on a healthy cluster does not open it. */
  failuresToOpen: 2,
  /** First cooldown; doubles while probes keep failing, up to maxOpenMs. */
  openMs: 10_000,
  /** A cluster that comes back is used again within two minutes. */
  maxOpenMs: 120_000,
} as const;

/** A request refused at once because its cluster has not been answering. */
export class CircuitOpenError extends Error {
  /** A network-style code, so isUnreachable() and callers treat it like a refused connection. */
  readonly code = 'ECIRCUITOPEN';

  constructor(cluster: string, retryAt: number) {
    super(
      `${cluster}: not answering; requests are refused until ${new Date(retryAt).toISOString()} (circuit open)`,
    );
    this.name = 'CircuitOpenError';
  }
}

/** Closed → open after CIRCUIT.failuresToOpen unanswered requests → one probe after the cooldown → closed. */
export function circuitBreaking(inner: HttpLibrary, cluster: string): HttpLibrary {
  let failures = 0;
  let openUntil = 0;
  /** Probes that failed in a row; each doubles the next cooldown. */
  let failedProbes = 0;
  let probing = false;
  async function send(request: RequestContext): Promise<ResponseContext> {
    const now = Date.now();
    if (openUntil > now || (openUntil > 0 && probing)) throw new CircuitOpenError(cluster, openUntil);
    const probe = openUntil > 0;
    if (probe) probing = true;
    try {
      const response = await inner.send(request).toPromise();
      failures = 0;
      openUntil = 0;
      failedProbes = 0;
      return response;
    } catch (error) {
      // Only silence counts: an HTTP answer, even 5xx, came from a cluster that is there.
      if (isUnreachable(error)) {
        failures += 1;
        if (probe || failures >= CIRCUIT.failuresToOpen) {
          // No jitter: the cooldown gates this process's own requests, not a herd's.
          openUntil = Date.now() + backoffDelay(failedProbes + 1, CIRCUIT.openMs, CIRCUIT.maxOpenMs, () => 1);
          if (probe) failedProbes += 1;
        }
      }
      throw error;
    } finally {
      if (probe) probing = false;
    }
  }
  return { send: (request) => new Observable(send(request)) };
}
