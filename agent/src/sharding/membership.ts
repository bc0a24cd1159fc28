// Membership of agent replicas in a shard ring: each replica holds a coordination.k8s.io/v1 Lease of its own,
// renewed every retry period, and lists the ring's Leases to know who is alive. Timing and clock rules are
// those of decision 007: expiry is judged on the observer's own clock from when it saw a renewal.
// A replica that could not renew within the renew deadline suspends (starts no work) instead of dying: a peer
// takes its Kymas only after *fencing* its expired Lease (clearing the holder, conditional on the
// resourceVersion it saw), so the suspended replica's next renewal either lands first (nothing was taken over:
// it resumes) or meets a conflict (it is lost and exits). Work still in flight when peers may fence means lost.
// This file runs the timers and ties the parts together: own-lease.ts, renewals.ts, peer-leases.ts, ring-leases.ts.
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { CoordinationV1Api, type KubeConfig } from '@kubernetes/client-node';
import { jittered, unrefClock, type Clock } from '@skr-watcher/api';
import { Gauge, type Logger, type Registry } from '@skr-watcher/telemetry';
import { checkShardIdentity } from './identity.js';
import { EXPIRY_SLACK_MS, leaseTiming } from './lease-timing.js';
import { shardMetrics } from './metrics.js';
import { OwnLease } from './own-lease.js';
import { PeerLeases, membersSignature, type Member } from './peer-leases.js';
import { PLACEMENT } from './placement.js';
import { Renewals, type Renewal } from './renewals.js';
import { RingLeases } from './ring-leases.js';

export { defaultShardIdentity, validShardIdentity } from './identity.js';
export type { Member } from './peer-leases.js';
export type { Renewal } from './renewals.js';

export interface MembershipOptions {
  kubeConfig: KubeConfig;
  namespace: string;
  /** Ring name: the Leases of one ring carry it as a label. */
  ring: string;
  /** This replica; a label value and part of the Lease name, new for every process. */
  identity: string;
  peerAddress?: string;
  leaseDurationMs?: number;
  renewDeadlineMs?: number;
  retryPeriodMs?: number;
  /** The live members (this replica included) changed. */
  onChange: (members: Member[]) => void;
  /** This replica's Lease was fenced or removed by a peer, or work was still in flight when peers may fence it. */
  onLost: (reason: string) => void;
  /** A late renewal landed before any peer fenced our Lease: nothing was taken over. */
  onResumed?: () => void;
  /** The renew deadline passed without a renewal: stop the work in flight now, before peers may fence us. */
  onSuspended?: () => void;
  /** After every renewal attempt: whether it landed, and whether it was on time (pacing widens only then). */
  onRenewal?: (renewal: Renewal) => void;
  /** True when no reconcile or mirror of ours is running; checked before peers may fence a suspended replica. */
  idle?: () => boolean;
  clock?: Clock;
  logger?: Logger;
  registry?: Registry;
}

export interface Membership {
  readonly identity: string;
  /** True while a renewal request of ours is in flight: new work waits for it, so renewals go first. */
  renewalInFlight(): boolean;
  /** Creates this replica's Lease and reads the ring once; membership then renews in the background. */
  start(): Promise<void>;
  /** The live members, this replica included, as last observed. */
  members(): Member[];
  /** False while suspended (renewal overdue) or after losing membership: no new work may start. */
  isActive(): boolean;
  /**
   * True when `identity` can no longer be working: its Lease was released by it or fenced (by us or another
   * peer, after no renewal was seen for a lease duration on our clock), or no Lease of it has been seen for a
   * lease duration since we first asked.
   */
  isGone(identity: string): boolean;
  /**
   * How long until `identity`'s Lease expires on our clock (no renewal seen for its duration): 0 once it has or was
   * released, undefined for an identity we hold no Lease of.
   */
  expiresInMs(identity: string): number | undefined;
  /**
   * For a callback that cannot wait for our next look at the ring: looks now when `identity` is not gone in our
   * view, so a Lease that expired on our clock is fenced now and one a peer fenced first is seen now (peers' clocks
   * see an expiry up to a retry period apart). Coalesced (a look in flight is awaited, none starts within
   * RECHECK_SPACING_MS of the last), so a burst of callbacks costs one list of the ring. Resolves isGone(identity).
   */
  recheck(identity: string): Promise<boolean>;
  /** Stops renewing and marks the Lease released, so peers take over at their next look. */
  release(): Promise<void>;
}

/** A recheck starts no look within this long of the last one's start: that look's answer is recent enough. */
const RECHECK_SPACING_MS = 250;

export function createMembership(options: MembershipOptions): Membership {
  const { namespace, ring, identity } = options;
  checkShardIdentity(identity);
  const timing = leaseTiming(options);
  const { retryPeriodMs } = timing;
  const clock = options.clock ?? unrefClock;
  const logger = options.logger?.child({ subsystem: 'membership', ring, identity });
  const api = options.kubeConfig.makeApiClient(CoordinationV1Api);
  const shard = shardMetrics(options.registry);
  const membersGauge = options.registry
    ? new Gauge({
        name: 'skr_agent_shard_members',
        help: 'Live replicas in this replica’s shard ring, itself included.',
        registers: [options.registry],
      })
    : undefined;
  const suspendedGauge = options.registry
    ? new Gauge({
        name: 'skr_agent_shard_suspended',
        help: '1 while this replica’s membership renewal is overdue and it starts no work.',
        registers: [options.registry],
      })
    : undefined;

  const self: Member = {
    identity,
    placement: PLACEMENT,
    ...(options.peerAddress ? { peerAddress: options.peerAddress } : {}),
  };
  const ownLease = new OwnLease({
    api,
    namespace,
    ring,
    identity,
    peerAddress: options.peerAddress,
    leaseDurationMs: timing.leaseDurationMs,
    retryPeriodMs,
    clock,
    logger,
  });
  const peers = new PeerLeases(identity, timing.leaseDurationMs, clock);
  const ringLeases = new RingLeases({ api, namespace, ring, peers, clock, logger, metrics: shard });
  let lastMembers = '';
  let renewTimer: unknown;
  let observeTimer: unknown;
  let stopped = false;
  let lost = false;
  /** Renewal and ring look in progress; release waits for them, or a renewal could overwrite the released Lease. */
  let renewing: Promise<void> | undefined;
  let observing: Promise<void> | undefined;
  /** Event-loop delay since the last successful renewal: tells a starved loop from a slow KCP. */
  const loopDelay = monitorEventLoopDelay({ resolution: 20 });
  loopDelay.enable();
  const renewalDiagnosis = () => ({
    ...renewals.diagnosis(),
    eventLoopDelayMaxMs: Math.round(loopDelay.max / 1e6),
  });

  const renewals = new Renewals({
    timing,
    clock,
    onSuspended: () => {
      suspendedGauge?.set(1);
      logger?.warn({ ...renewalDiagnosis() }, 'membership renewal overdue; starting no work until it lands');
      options.onSuspended?.();
    },
    onResumed: () => {
      suspendedGauge?.set(0);
      logger?.warn({ ...renewalDiagnosis() }, 'membership renewed late; no peer had taken over, resuming');
      options.onResumed?.();
    },
    onWorkOverdue: () => declareLost('work still in flight when peers may take over'),
    idle: () => options.idle?.() ?? true,
  });
  const halt = () => {
    stopped = true;
    for (const t of [renewTimer, observeTimer]) clock.clearTimeout(t);
    renewals.stop();
    loopDelay.disable();
  };
  const declareLost = (reason: string) => {
    if (lost || stopped) return;
    lost = true;
    halt();
    logger?.error(
      { reason, ...renewalDiagnosis() },
      'lost shard membership; this replica must stop reconciling now',
    );
    options.onLost(reason);
  };

  /** Renews (or first creates) our Lease; the start time of a renewal that succeeded moves the deadline. */
  const renew = async () => {
    const attempt = renewals.begin();
    let ok = false;
    try {
      try {
        const lostBecause = await ownLease.renew();
        if (lostBecause) declareLost(lostBecause);
      } finally {
        renewals.end(attempt);
      }
      if (lost || stopped) return;
      ok = true;
      if (renewals.isLate()) logger?.warn({ ...renewalDiagnosis() }, 'membership renewal late');
      loopDelay.reset();
      renewals.landed(attempt);
    } finally {
      // Reported after a resume, so work that the report lets start finds the replica active.
      options.onRenewal?.(renewals.report(attempt, ok));
    }
  };

  /** Lists the ring, fences what expired, reports member changes. */
  const lookAtRing = async () => {
    const leases = await ringLeases.list();
    if (stopped) return;
    const seen = peers.observe(leases);
    await ringLeases.fenceExpired();
    await ringLeases.collectGarbage(seen);
    const members = peers.members(self);
    membersGauge?.set(members.length);
    const text = membersSignature(members);
    if (text !== lastMembers) {
      lastMembers = text;
      logger?.info({ members: members.map((m) => m.identity) }, 'shard members changed');
      options.onChange(members);
    }
  };

  // Renewal runs on a timer of its own, never behind a slow list of the ring: its period counts from the start
  // of the previous renewal, and only one is in flight. Up to 10 % jitter keeps replicas out of lockstep.
  const scheduleRenewal = () => {
    if (stopped) return;
    renewTimer = clock.setTimeout(
      () => {
        renewing = renew()
          .catch((error: unknown) => logger?.warn({ err: error }, 'membership renewal failed'))
          .finally(() => {
            renewing = undefined;
            scheduleRenewal();
          });
      },
      renewals.dueInMs(jittered(retryPeriodMs, 0.1)),
    );
  };
  let lastLookAt = -Infinity;
  /** One look at the ring, the next scheduled after it. */
  const look = (): Promise<void> => {
    lastLookAt = clock.now();
    observing = lookAtRing()
      .catch((error: unknown) => logger?.warn({ err: error }, 'listing the shard ring failed'))
      .finally(() => {
        observing = undefined;
        scheduleLook();
      });
    return observing;
  };
  // The next look goes at a retry period, or as soon as the first live peer's Lease expires on our clock (plus a
  // little, so it has expired when the timer fires): it then fences it at once rather than up to a period later.
  const scheduleLook = () => {
    if (stopped) return;
    observeTimer = clock.setTimeout(
      () => void look(),
      Math.max(0, Math.min(jittered(retryPeriodMs, 0.1), peers.untilFirstExpiryMs() + EXPIRY_SLACK_MS)),
    );
  };
  const isGone = (who: string): boolean => (who === identity ? lost : peers.isGone(who));

  return {
    identity,
    async start() {
      await ownLease.createOrTakeBack();
      await renew();
      await lookAtRing();
      scheduleRenewal();
      scheduleLook();
    },
    members: () => peers.members(self),
    renewalInFlight: () => renewals.inFlight(),
    isActive: () => !renewals.suspended && !lost && !stopped,
    isGone,
    async recheck(who) {
      if (stopped || who === identity || isGone(who)) return isGone(who);
      if (observing) await observing;
      else if (clock.now() - lastLookAt >= RECHECK_SPACING_MS) {
        clock.clearTimeout(observeTimer);
        await look();
      }
      return isGone(who);
    },
    expiresInMs: (who) => peers.expiresInMs(who),
    async release() {
      if (stopped) return;
      halt();
      suspendedGauge?.set(0);
      await Promise.all([renewing, observing]);
      if (!ownLease.held || lost) return;
      try {
        // An empty holder tells peers at their next look that our Kymas are free; they need not wait it out.
        await ownLease.release();
        logger?.info('released the membership Lease');
      } catch (error) {
        logger?.warn(
          { err: error },
          'could not release the membership Lease; peers take over when it expires',
        );
      }
    },
  };
}
