// Pacing of a sharded replica's reconciles (decision 012). A replica that takes hundreds of Kymas at start-up
// would otherwise run all their first reconciles at once; on a small machine their CPU starves its own Lease
// renewals and its peers', and replicas lose membership. So runs wait for a slot: the limit starts small, widens
// by a step with every renewal that lands on time while the limit was in use, halves with every late or failed
// one (additive increase, multiplicative decrease, as TCP paces itself; like TCP's window validation, an idle
// limit does not grow), drops back to the start on suspension, and no run starts while a renewal is in flight,
// so a renewal never waits behind a wave of new runs. A run still going after `slotHeldMs` (the work queue's slow
// mark) gives its slot back while the last renewal was on time: our event loop and the KCP answer in time, so it
// waits on another cluster (a hung SKR, up to the reconcile deadline), not on the CPU and KCP the pacer shares out,
// and hung SKRs cannot narrow the replica's throughput. While renewals are late, slow runs are as likely slow from
// overload, so they keep their slots; and at most `maxLingering` runs go on without one.
import { SHARDING } from '@skr-watcher/api';
import { Gauge, type Registry } from '@skr-watcher/telemetry';
import type { Renewal } from './renewals.js';

export interface PacerOptions {
  /** True while a membership renewal is in flight: no run starts then. */
  renewalInFlight: () => boolean;
  initial?: number;
  max?: number;
  step?: number;
  /** A run gives its slot back after this long (while renewals are on time) even if it goes on. */
  slotHeldMs?: number;
  /** At most this many runs go on without a slot. */
  maxLingering?: number;
  registry?: Registry;
}

export interface Pacer {
  /** Resolves once a run may start, with the function that ends it; undefined once the pacer was closed. */
  acquire(): Promise<(() => void) | undefined>;
  /** A renewal attempt ended: widen or narrow, and start what may start now. */
  renewed(renewal: Renewal): void;
  /** Membership suspended: back to the initial limit. */
  narrow(): void;
  /** Runs holding a slot, runs waiting for one, runs that gave theirs back, and the current limit. */
  state(): { running: number; waiting: number; lingering: number; limit: number };
  /** Stops starting: every waiter resolves to undefined, as does every later acquire. */
  close(): void;
}

export function createPacer(options: PacerOptions): Pacer {
  const initial = options.initial ?? SHARDING.pacing.initialRuns;
  const max = Math.max(initial, options.max ?? SHARDING.pacing.maxRuns);
  const step = options.step ?? SHARDING.pacing.widenBy;
  const slotHeldMs = options.slotHeldMs ?? SHARDING.pacing.slotHeldMs;
  const maxLingering = options.maxLingering ?? SHARDING.pacing.maxRuns;
  let limit = initial;
  /** Runs holding a slot. */
  let running = 0;
  /** Runs that gave their slot back (past slotHeldMs while renewals were on time) and go on. */
  let lingering = 0;
  let lastRenewalOnTime = false;
  /** Runs past slotHeldMs that still hold their slot: given back once renewals are on time. */
  const overdue = new Set<{ giveBack: () => void }>();
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

  const giveBackOverdue = () => {
    for (const held of overdue) {
      if (!lastRenewalOnTime || lingering >= maxLingering) return;
      held.giveBack();
    }
  };
  const slot = () => {
    running += 1;
    if (running >= limit) saturated = true;
    let state: 'holding' | 'lingering' | 'ended' = 'holding';
    const held = {
      giveBack: () => {
        if (state !== 'holding') return;
        overdue.delete(held);
        state = 'lingering';
        running -= 1;
        lingering += 1;
        pump();
      },
    };
    const overdueTimer = setTimeout(() => {
      overdue.add(held);
      giveBackOverdue();
    }, slotHeldMs);
    overdueTimer.unref();
    return () => {
      if (state === 'ended') return;
      clearTimeout(overdueTimer);
      overdue.delete(held);
      if (state === 'holding') running -= 1;
      else lingering -= 1;
      state = 'ended';
      pump();
    };
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
      lastRenewalOnTime = renewal.onTime;
      if (!renewal.onTime) limit = Math.max(initial, Math.floor(limit / 2));
      else if (saturated) limit = Math.min(max, limit + step);
      saturated = waiting.length > 0 || running >= limit;
      giveBackOverdue();
      pump();
    },
    narrow() {
      limit = initial;
      lastRenewalOnTime = false;
    },
    state: () => ({ running, waiting: waiting.length, lingering, limit }),
    close() {
      closed = true;
      for (const resolve of waiting.splice(0)) resolve(undefined);
    },
  };
}
