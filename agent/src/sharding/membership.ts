// Membership of agent replicas in a shard ring: each replica holds a coordination.k8s.io/v1 Lease of its own,
// renewed every retry period, and lists the ring's Leases to know who is alive. Timing and clock rules are
// those of decision 007: expiry is judged on the observer's own clock from when it saw a renewal.
// A replica that could not renew within the renew deadline suspends (starts no work) instead of dying: a peer
// takes its Kymas only after *fencing* its expired Lease (clearing the holder, conditional on the
// resourceVersion it saw), so the suspended replica's next renewal either lands first (nothing was taken over:
// it resumes) or meets a conflict (it is lost and exits). Work still in flight when peers may fence means lost.
import { hostname } from 'node:os';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import {
  ApiException,
  CoordinationV1Api,
  PatchStrategy,
  V1MicroTime,
  setHeaderOptions,
  type KubeConfig,
  type V1Lease,
} from '@kubernetes/client-node';
import { ANNOTATIONS, LABELS, SHARDING, jittered, unrefClock, type Clock } from '@skr-watcher/api';
import { LEADER_ELECTION_DEFAULTS } from '@skr-watcher/kube';
import { Gauge, type Logger, type Registry } from '@skr-watcher/telemetry';
import { shardMetrics } from './metrics.js';

export interface Member {
  identity: string;
  /** host:port of its peer endpoint (forwarded callbacks); absent when it serves none. */
  peerAddress?: string;
  /** `buckets` when it places Kymas by bucket (ANNOTATIONS.shardPlacement); absent on older replicas. */
  placement?: string;
}

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

export interface Renewal {
  ok: boolean;
  /**
   * Landed within half a retry period of being sent, and sent within one and a half retry periods of the attempt
   * before: neither the KCP nor our event loop held it up.
   */
  onTime: boolean;
  latencyMs: number;
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

interface Observed {
  renewTime: string;
  released: boolean;
  durationMs: number;
  /** Our clock when the record last changed: expiry is judged from this, never from the holder's clock. */
  observedAt: number;
  peerAddress?: string;
  placement?: string;
  leaseName: string;
  resourceVersion: string;
}

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
/** What this version says on its Lease: it places Kymas by bucket (decision 012, "Session 10"). */
export const PLACEMENT = 'buckets';
/** A look timed for a peer's expiry fires this much after it, so that a timer a millisecond early still finds it expired. */
const EXPIRY_SLACK_MS = 10;
/** A recheck starts no look within this long of the last one's start: that look's answer is recent enough. */
const RECHECK_SPACING_MS = 250;

/** A label value (≤ 63) that is also a DNS label, so it can name the Lease: lower-case letters, digits, '-'. */
const IDENTITY = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

export function validShardIdentity(identity: string): boolean {
  return IDENTITY.test(identity);
}

/** `<host>-<random>`: the pod name where there is one, made a DNS label, unique per process. */
export function defaultShardIdentity(host: string = process.env['HOSTNAME'] || hostname()): string {
  const base =
    host
      .toLowerCase()
      .replace(/[^a-z0-9-]+/g, '-')
      .replace(/^-+|-+$/g, '')
      .slice(0, 54)
      .replace(/-+$/, '') || 'skr-agent';
  return `${base}-${Math.random().toString(36).slice(2, 8).padEnd(6, '0')}`;
}

function timeText(value: unknown): string {
  if (value instanceof Date) return value.toISOString();
  return typeof value === 'string' ? value : '';
}

export function createMembership(options: MembershipOptions): Membership {
  const { namespace, ring, identity } = options;
  if (!validShardIdentity(identity)) {
    throw new Error(
      `shard identity ${JSON.stringify(identity)} must be a DNS label of at most 63 characters (a-z, 0-9, '-')`,
    );
  }
  const leaseDurationMs = options.leaseDurationMs ?? LEADER_ELECTION_DEFAULTS.leaseDurationMs;
  const renewDeadlineMs = options.renewDeadlineMs ?? LEADER_ELECTION_DEFAULTS.renewDeadlineMs;
  const retryPeriodMs = options.retryPeriodMs ?? LEADER_ELECTION_DEFAULTS.retryPeriodMs;
  if (!(retryPeriodMs < renewDeadlineMs && renewDeadlineMs < leaseDurationMs)) {
    throw new Error(
      `shard timing needs retry period (${retryPeriodMs} ms) < renew deadline (${renewDeadlineMs} ms) < lease duration (${leaseDurationMs} ms)`,
    );
  }
  /**
   * A suspended replica's work must be over well before peers may fence it (a lease duration after its last
   * renewal): half the margin between renew deadline and lease duration, the other half for a late timer.
   */
  const drainDeadlineMs = renewDeadlineMs + (leaseDurationMs - renewDeadlineMs) / 2;
  const clock = options.clock ?? unrefClock;
  const logger = options.logger?.child({ subsystem: 'membership', ring, identity });
  const api = options.kubeConfig.makeApiClient(CoordinationV1Api);
  const leaseName = `${ring}-${identity}`.slice(0, 253);
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

  const observed = new Map<string, Observed>();
  /** Identities asked about that have no Lease: when we first noticed. */
  const missingSince = new Map<string, number>();
  let lastMembers = '';
  let lastRenewStartedAt = 0;
  /** Start of the last renewal attempt, successful or not: the next one is a retry period after it. */
  let lastAttemptAt = 0;
  let deadlineTimer: unknown;
  let drainTimer: unknown;
  let renewTimer: unknown;
  let observeTimer: unknown;
  let stopped = false;
  let lost = false;
  let suspended = false;
  let ownLease: V1Lease | undefined;
  /** Renewal and ring look in progress; release waits for them, or a renewal could overwrite the released Lease. */
  let renewing: Promise<void> | undefined;
  let observing: Promise<void> | undefined;
  /** When the renewal request in flight was sent (our clock); what a late renewal waited on. */
  let renewSentAt: number | undefined;
  let lastRenewLatencyMs = 0;
  /** Event-loop delay since the last successful renewal: tells a starved loop from a slow KCP. */
  const loopDelay = monitorEventLoopDelay({ resolution: 20 });
  loopDelay.enable();
  const renewalDiagnosis = () => ({
    sinceLastRenewalMs: clock.now() - lastRenewStartedAt,
    renewalPendingMs: renewSentAt === undefined ? undefined : clock.now() - renewSentAt,
    lastRenewLatencyMs,
    eventLoopDelayMaxMs: Math.round(loopDelay.max / 1e6),
  });

  const microTime = () => new V1MicroTime(Date.now());
  const live = (record: Observed) => !record.released && record.observedAt + record.durationMs > clock.now();

  const halt = () => {
    stopped = true;
    for (const t of [renewTimer, observeTimer, deadlineTimer, drainTimer]) clock.clearTimeout(t);
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
  const suspend = () => {
    if (suspended || stopped) return;
    suspended = true;
    suspendedGauge?.set(1);
    logger?.warn({ ...renewalDiagnosis() }, 'membership renewal overdue; starting no work until it lands');
    options.onSuspended?.();
    drainTimer = clock.setTimeout(
      () => {
        if (suspended && !(options.idle?.() ?? true)) {
          declareLost('work still in flight when peers may take over');
        }
      },
      Math.max(0, drainDeadlineMs - (clock.now() - lastRenewStartedAt)),
    );
  };
  const resume = () => {
    suspended = false;
    suspendedGauge?.set(0);
    clock.clearTimeout(drainTimer);
    logger?.warn({ ...renewalDiagnosis() }, 'membership renewed late; no peer had taken over, resuming');
    options.onResumed?.();
  };
  /** Armed after every renewal: suspends at the renew deadline unless a later renewal re-arms it. */
  const armDeadline = () => {
    clock.clearTimeout(deadlineTimer);
    const remaining = renewDeadlineMs - (clock.now() - lastRenewStartedAt);
    deadlineTimer = clock.setTimeout(suspend, Math.max(0, remaining));
  };

  const spec = (acquireTime?: unknown) => ({
    holderIdentity: identity,
    leaseDurationSeconds: Math.ceil(leaseDurationMs / 1000),
    acquireTime: (acquireTime as V1MicroTime | undefined) ?? microTime(),
    renewTime: microTime(),
  });
  const metadata = () => ({
    name: leaseName,
    namespace,
    labels: { [LABELS.shardRing]: ring, [LABELS.shardOwner]: identity },
    annotations: {
      [ANNOTATIONS.shardPlacement]: PLACEMENT,
      ...(options.peerAddress ? { [ANNOTATIONS.peerAddress]: options.peerAddress } : {}),
    },
  });

  const writeOwnLease = async () => {
    if (!ownLease) {
      ownLease = await api.createNamespacedLease({
        namespace,
        body: { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: metadata(), spec: spec() },
      });
      return;
    }
    try {
      // replace carries our last resourceVersion: it fails if a peer fenced (or anyone wrote) our Lease since.
      ownLease = await api.replaceNamespacedLease({
        name: leaseName,
        namespace,
        body: { ...ownLease, spec: { ...ownLease.spec, ...spec(ownLease.spec?.acquireTime) } },
      });
    } catch (error) {
      if (error instanceof ApiException && (error.code === 404 || error.code === 409)) {
        // A peer fenced or deleted our Lease: it may be reconciling our Kymas already.
        declareLost(`own Lease ${error.code === 404 ? 'deleted' : 'fenced or written'} by someone else`);
        return;
      }
      throw error;
    }
  };

  /**
   * Creates our Lease, or takes it back when a process of ours left it (a fixed --shard-identity after kill -9): at once
   * when no one holds it (released, or fenced by a peer), else once it went unrenewed for its duration on our clock, as
   * peers decide. Renewed meanwhile by our identity: another process runs with it, which is refused with a reason.
   */
  const createOrTakeBackOwnLease = async () => {
    try {
      await writeOwnLease();
      return;
    } catch (error) {
      if (!(error instanceof ApiException && error.code === 409)) throw error;
    }
    const read = () => api.readNamespacedLease({ name: leaseName, namespace });
    let seen = await read();
    let seenAt = clock.now();
    logger?.info(
      { holder: seen.spec?.holderIdentity ?? null, lease: leaseName },
      'our Lease is left from an earlier process of this identity; taking it back once no one renews it',
    );
    for (;;) {
      const durationMs = (seen.spec?.leaseDurationSeconds ?? Math.ceil(leaseDurationMs / 1000)) * 1000;
      const waitedMs = clock.now() - seenAt;
      if (!seen.spec?.holderIdentity || waitedMs >= durationMs) {
        try {
          ownLease = await api.replaceNamespacedLease({
            name: leaseName,
            namespace,
            body: { ...seen, metadata: { ...seen.metadata, ...metadata() }, spec: spec() },
          });
          logger?.info({ lease: leaseName }, 'took our Lease back');
          return;
        } catch (error) {
          if (!(error instanceof ApiException && error.code === 409)) throw error;
        }
      } else {
        await new Promise<void>((resolve) =>
          clock.setTimeout(resolve, Math.min(retryPeriodMs, durationMs - waitedMs + EXPIRY_SLACK_MS)),
        );
      }
      const now = await read();
      if (now.metadata?.resourceVersion === seen.metadata?.resourceVersion) continue;
      if (now.spec?.holderIdentity === identity && now.spec?.renewTime !== seen.spec?.renewTime) {
        throw new Error(
          `shard identity ${identity}: Lease ${namespace}/${leaseName} is being renewed by another process; give every replica its own --shard-identity (without the flag, each process gets $HOSTNAME-<random>)`,
        );
      }
      seen = now;
      seenAt = clock.now();
    }
  };

  /** Renews (or first creates) our Lease; the start time of a renewal that succeeded moves the deadline. */
  const renew = async () => {
    const startedAt = clock.now();
    const sincePreviousAttempt = lastAttemptAt > 0 ? startedAt - lastAttemptAt : 0;
    renewSentAt = startedAt;
    lastAttemptAt = startedAt;
    let ok = false;
    try {
      try {
        await writeOwnLease();
      } finally {
        renewSentAt = undefined;
        lastRenewLatencyMs = clock.now() - startedAt;
      }
      if (lost || stopped) return;
      ok = true;
      if (lastRenewStartedAt > 0 && clock.now() - lastRenewStartedAt > renewDeadlineMs / 2) {
        logger?.warn({ ...renewalDiagnosis() }, 'membership renewal late');
      }
      lastRenewStartedAt = startedAt;
      loopDelay.reset();
      armDeadline();
      if (suspended) resume();
    } finally {
      // Reported after a resume, so work that the report lets start finds the replica active.
      options.onRenewal?.({
        ok,
        onTime: ok && lastRenewLatencyMs <= retryPeriodMs / 2 && sincePreviousAttempt <= retryPeriodMs * 1.5,
        latencyMs: lastRenewLatencyMs,
      });
    }
  };

  const observe = (leases: V1Lease[]) => {
    const seen = new Set<string>();
    for (const lease of leases) {
      const who = lease.metadata?.labels?.[LABELS.shardOwner];
      if (!who || who === identity) continue;
      seen.add(who);
      missingSince.delete(who);
      const renewTime = timeText(lease.spec?.renewTime);
      const released = !lease.spec?.holderIdentity;
      const previous = observed.get(who);
      const record: Observed = {
        renewTime,
        released,
        durationMs: (lease.spec?.leaseDurationSeconds ?? leaseDurationMs / 1000) * 1000,
        observedAt:
          previous && previous.renewTime === renewTime && previous.released === released
            ? previous.observedAt
            : clock.now(),
        peerAddress: lease.metadata?.annotations?.[ANNOTATIONS.peerAddress],
        placement: lease.metadata?.annotations?.[ANNOTATIONS.shardPlacement],
        leaseName: lease.metadata?.name ?? '',
        resourceVersion: lease.metadata?.resourceVersion ?? '',
      };
      observed.set(who, record);
    }
    return seen;
  };

  /**
   * Clears the holder of each Lease that expired on our clock, conditional on the resourceVersion we saw: only
   * then is its replica gone. Its own late renewal and our fence are ordered by the API server; whichever lands
   * second meets a conflict, so a replica is never both renewing and taken over.
   */
  const fenceExpired = async () => {
    for (const [who, record] of observed) {
      if (record.released || live(record)) continue;
      logger?.info(
        { peer: who, unrenewedForMs: clock.now() - record.observedAt },
        'a peer’s Lease expired on our clock; fencing it',
      );
      try {
        const fenced = await api.patchNamespacedLease(
          {
            name: record.leaseName,
            namespace,
            body: { metadata: { resourceVersion: record.resourceVersion }, spec: { holderIdentity: null } },
          },
          mergePatch,
        );
        observed.set(who, {
          ...record,
          released: true,
          observedAt: clock.now(),
          resourceVersion: fenced.metadata?.resourceVersion ?? record.resourceVersion,
        });
        logger?.info({ peer: who }, 'fenced the expired Lease of a peer; its Kymas may be claimed');
        shard?.fencing();
      } catch (error) {
        logger?.debug({ err: error, peer: who }, 'expired Lease not fenced');
        // A conflict: it renewed, or another peer fenced it first. Read it now rather than at the next look: when a
        // peer fenced it, its Kymas are ours to claim now, not a retry period later.
        if (error instanceof ApiException && error.code === 409) {
          await api
            .readNamespacedLease({ name: record.leaseName, namespace })
            .then((lease) => observe([lease]))
            .catch((cause: unknown) => logger?.debug({ err: cause, peer: who }, 'fenced Lease not read'));
        }
      }
    }
  };

  /** Deletes Leases of replicas long gone, so restarts do not pile them up; a conflict means it changed. */
  const collectGarbage = async (seen: Set<string>) => {
    for (const [who, record] of observed) {
      if (!seen.has(who)) continue;
      const deadFor = clock.now() - (record.observedAt + record.durationMs);
      if (!record.released && deadFor < leaseDurationMs * (SHARDING.leaseGarbageAfterDurations - 1)) continue;
      if (record.released && clock.now() - record.observedAt < leaseDurationMs) continue;
      await api
        .deleteNamespacedLease({
          name: record.leaseName,
          namespace,
          body: { preconditions: { resourceVersion: record.resourceVersion } },
        })
        .catch(() => {});
    }
  };

  /** Lists the ring, fences what expired, reports member changes. */
  const lookAtRing = async () => {
    const list = await api.listNamespacedLease({ namespace, labelSelector: `${LABELS.shardRing}=${ring}` });
    if (stopped) return;
    const seen = observe(list.items);
    await fenceExpired();
    await collectGarbage(seen);
    const members = currentMembers();
    membersGauge?.set(members.length);
    const text = members.map((m) => `${m.identity}@${m.peerAddress ?? ''}/${m.placement ?? ''}`).join(',');
    if (text !== lastMembers) {
      lastMembers = text;
      logger?.info({ members: members.map((m) => m.identity) }, 'shard members changed');
      options.onChange(members);
    }
  };

  const currentMembers = (): Member[] => {
    const members: Member[] = [
      {
        identity,
        placement: PLACEMENT,
        ...(options.peerAddress ? { peerAddress: options.peerAddress } : {}),
      },
    ];
    for (const [who, record] of observed) {
      if (live(record))
        members.push({
          identity: who,
          ...(record.peerAddress ? { peerAddress: record.peerAddress } : {}),
          ...(record.placement ? { placement: record.placement } : {}),
        });
    }
    return members.sort((a, b) => (a.identity < b.identity ? -1 : 1));
  };

  // Renewal runs on a timer of its own, never behind a slow list of the ring: its period counts from the start
  // of the previous renewal, and only one is in flight. Up to 10 % jitter keeps replicas out of lockstep.
  const scheduleRenewal = () => {
    if (stopped) return;
    const sinceStart = clock.now() - lastAttemptAt;
    renewTimer = clock.setTimeout(
      () => {
        renewing = renew()
          .catch((error: unknown) => logger?.warn({ err: error }, 'membership renewal failed'))
          .finally(() => {
            renewing = undefined;
            scheduleRenewal();
          });
      },
      Math.max(0, jittered(retryPeriodMs, 0.1) - sinceStart),
    );
  };
  /**
   * Our clock's time until the first live peer's Lease expires unrenewed (plus a little, so it has expired when
   * the timer fires): the look then goes at once and fences it, rather than up to a retry period later.
   */
  const untilFirstExpiry = () => {
    let first = Infinity;
    for (const record of observed.values()) {
      if (live(record)) first = Math.min(first, record.observedAt + record.durationMs - clock.now());
    }
    return first + EXPIRY_SLACK_MS;
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
  const scheduleLook = () => {
    if (stopped) return;
    observeTimer = clock.setTimeout(
      () => void look(),
      Math.max(0, Math.min(jittered(retryPeriodMs, 0.1), untilFirstExpiry())),
    );
  };
  const isGone = (who: string): boolean => {
    if (who === identity) return lost;
    const record = observed.get(who);
    // Expired is not enough: only a released or fenced Lease means its replica can no longer renew.
    if (record) return record.released;
    const since = missingSince.get(who);
    if (since === undefined) {
      missingSince.set(who, clock.now());
      return false;
    }
    return clock.now() - since >= leaseDurationMs;
  };

  return {
    identity,
    async start() {
      await createOrTakeBackOwnLease();
      await renew();
      await lookAtRing();
      scheduleRenewal();
      scheduleLook();
    },
    members: currentMembers,
    renewalInFlight: () => renewSentAt !== undefined,
    isActive: () => !suspended && !lost && !stopped,
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
    expiresInMs(who) {
      const record = observed.get(who);
      if (!record) return undefined;
      return record.released ? 0 : Math.max(0, record.observedAt + record.durationMs - clock.now());
    },
    async release() {
      if (stopped) return;
      halt();
      suspendedGauge?.set(0);
      await Promise.all([renewing, observing]);
      if (!ownLease || lost) return;
      try {
        // An empty holder tells peers at their next look that our Kymas are free; they need not wait it out.
        await api.replaceNamespacedLease({
          name: leaseName,
          namespace,
          body: {
            ...ownLease,
            spec: {
              ...ownLease.spec,
              holderIdentity: undefined,
              leaseDurationSeconds: 1,
              renewTime: microTime(),
            },
          },
        });
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
