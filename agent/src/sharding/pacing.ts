// Pacing of a sharded replica's reconciles (decision 012). A replica that takes hundreds of Kymas at start-up
// would otherwise run all their first reconciles at once; on a small machine their CPU starves its own Lease
// renewals and its peers', and replicas lose membership. So runs wait for a slot: the limit starts small, widens
// by a step with every renewal that lands on time while the limit was in use, halves with every late or failed
// one (additive increase, multiplicative decrease, as TCP paces itself; like TCP's window validation, an idle
// limit does not grow), drops back to the start on suspension, and no run starts while a renewal is in flight,
// so a renewal never waits behind a wave of new runs. A run holds its slot for at most `slotHeldMs` (the work
// queue's slow mark): one still going then waits on a cluster (a hung SKR, up to the reconcile deadline), not on
// the CPU the pacer shares out, so hung SKRs cannot narrow the replica's throughput; the limit then bounds starts
// per `slotHeldMs` as well as runs at once.
import { SHARDING } from '@skr-watcher/api';
import { Gauge, type Registry } from '@skr-watcher/telemetry';
import type { Renewal } from './membership.js';

export interface PacerOptions {
  /** True while a membership renewal is in flight: no run starts then. */
  renewalInFlight: () => boolean;
  initial?: number;
  max?: number;
  step?: number;
  /** A run gives its slot back after this long even if it goes on. */
  slotHeldMs?: number;
  registry?: Registry;
}

export interface Pacer {
  /** Resolves once a run may start, with the function that ends it; undefined once the pacer was closed. */
  acquire(): Promise<(() => void) | undefined>;
  /** A renewal attempt ended: widen or narrow, and start what may start now. */
  renewed(renewal: Renewal): void;
  /** Membership suspended: back to the initial limit. */
  narrow(): void;
  /** Runs in progress and the current limit. */
  state(): { running: number; waiting: number; limit: number };
  /** Stops starting: every waiter resolves to undefined, as does every later acquire. */
  close(): void;
}

export function createPacer(options: PacerOptions): Pacer {
  const initial = options.initial ?? SHARDING.pacing.initialRuns;
  const max = Math.max(initial, options.max ?? SHARDING.pacing.maxRuns);
  const step = options.step ?? SHARDING.pacing.widenBy;
  const slotHeldMs = options.slotHeldMs ?? SHARDING.pacing.slotHeldMs;
  let limit = initial;
  let running = 0;
  let closed = false;
  /** The limit held runs back (or was reached) since the last renewal: only then has widening been earned. */
  let saturated = false;
  const waiting: ((release: (() => void) | undefined) => void)[] = [];
  if (options.registry) {
    // Read at scrape time; the bench prints it beside each replica's progress.
    new Gauge({
      name: 'skr_agent_shard_reconcile_limit',
      help: 'Reconciles this replica may run at once now; widens while membership renewals are on time.',
      registers: [options.registry],
      collect(this: Gauge) {
        this.set(limit);
      },
    });
    new Gauge({
      name: 'skr_agent_shard_reconciles_waiting',
      help: 'Reconciles waiting for a pacing slot now.',
      registers: [options.registry],
      collect(this: Gauge) {
        this.set(waiting.length);
      },
    });
  }

  const slot = () => {
    running += 1;
    if (running >= limit) saturated = true;
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      clearTimeout(giveBack);
      running -= 1;
      pump();
    };
    const giveBack = setTimeout(release, slotHeldMs);
    giveBack.unref();
    return release;
  };
  const pump = () => {
    while (!closed && waiting.length > 0 && running < limit && !options.renewalInFlight()) {
      waiting.shift()?.(slot());
    }
  };

  return {
    acquire() {
      if (closed) return Promise.resolve(undefined);
      if (waiting.length === 0 && running < limit && !options.renewalInFlight()) {
        return Promise.resolve(slot());
      }
      saturated = true;
      return new Promise((resolve) => waiting.push(resolve));
    },
    renewed(renewal) {
      if (!renewal.onTime) limit = Math.max(initial, Math.floor(limit / 2));
      else if (saturated) limit = Math.min(max, limit + step);
      saturated = waiting.length > 0 || running >= limit;
      pump();
    },
    narrow() {
      limit = initial;
    },
    state: () => ({ running, waiting: waiting.length, limit }),
    close() {
      closed = true;
      for (const resolve of waiting.splice(0)) resolve(undefined);
    },
  };
}
