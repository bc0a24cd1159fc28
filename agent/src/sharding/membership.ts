// Membership of agent replicas in a shard ring: each replica holds a coordination.k8s.io/v1 Lease of its own,
// renewed every retry period, and lists the ring's Leases to know who is alive. Timing and clock rules are
// those of decision 007: expiry is judged on the observer's own clock from when it saw a renewal, and a
// replica that could not renew within the renew deadline declares itself lost before anyone may take its work.
import { hostname } from 'node:os';
import {
  ApiException,
  CoordinationV1Api,
  V1MicroTime,
  type KubeConfig,
  type V1Lease,
} from '@kubernetes/client-node';
import { ANNOTATIONS, LABELS, SHARDING, jittered } from '@skr-watcher/api';
import { LEADER_ELECTION_DEFAULTS, systemClock, type Clock } from '@skr-watcher/kube';
import { Gauge, type Logger, type Registry } from '@skr-watcher/telemetry';

export interface Member {
  identity: string;
  /** host:port of its peer endpoint (forwarded callbacks); absent when it serves none. */
  peerAddress?: string;
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
  /** This replica could not renew within the renew deadline, or its Lease was taken or removed. */
  onLost: (reason: string) => void;
  clock?: Clock;
  logger?: Logger;
  registry?: Registry;
}

export interface Membership {
  readonly identity: string;
  /** Creates this replica's Lease and reads the ring once; membership then renews in the background. */
  start(): Promise<void>;
  /** The live members, this replica included, as last observed. */
  members(): Member[];
  /**
   * True when `identity` can no longer be working: its Lease was released, or no renewal was seen for a lease
   * duration (on our clock), or no Lease of it has been seen for a lease duration since we first asked.
   */
  isGone(identity: string): boolean;
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
  leaseName: string;
  resourceVersion: string;
}

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
  const clock = options.clock ?? systemClock;
  const logger = options.logger?.child({ subsystem: 'membership', ring, identity });
  const api = options.kubeConfig.makeApiClient(CoordinationV1Api);
  const leaseName = `${ring}-${identity}`.slice(0, 253);
  const membersGauge = options.registry
    ? new Gauge({
        name: 'skr_agent_shard_members',
        help: 'Live replicas in this replica’s shard ring, itself included.',
        registers: [options.registry],
      })
    : undefined;

  const observed = new Map<string, Observed>();
  /** Identities asked about that have no Lease: when we first noticed. */
  const missingSince = new Map<string, number>();
  let lastMembers = '';
  let lastRenewStartedAt = 0;
  let fence: unknown;
  let timer: unknown;
  let stopped = false;
  let lost = false;
  let ownLease: V1Lease | undefined;
  /** The tick in progress; release waits for it, or its renewal could overwrite the released Lease. */
  let ticking: Promise<void> | undefined;

  const microTime = () => new V1MicroTime(Date.now());
  const live = (record: Observed) => !record.released && record.observedAt + record.durationMs > clock.now();

  const declareLost = (reason: string) => {
    if (lost || stopped) return;
    lost = true;
    stopped = true;
    clock.clearTimeout(timer);
    clock.clearTimeout(fence);
    logger?.error({ reason }, 'lost shard membership; this replica must stop reconciling now');
    options.onLost(reason);
  };
  /** Armed after every renewal: fires at the renew deadline unless a later renewal re-arms it. */
  const armFence = () => {
    clock.clearTimeout(fence);
    const remaining = renewDeadlineMs - (clock.now() - lastRenewStartedAt);
    fence = clock.setTimeout(
      () => declareLost('no renewal within the renew deadline'),
      Math.max(0, remaining),
    );
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
    ...(options.peerAddress ? { annotations: { [ANNOTATIONS.peerAddress]: options.peerAddress } } : {}),
  });

  /** Renews (or first creates) our Lease; the start time of a renewal that succeeded moves the fence. */
  const renew = async () => {
    const startedAt = clock.now();
    if (!ownLease) {
      ownLease = await api.createNamespacedLease({
        namespace,
        body: { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: metadata(), spec: spec() },
      });
    } else {
      try {
        // replace carries our last resourceVersion: only we write this Lease while we hold it.
        ownLease = await api.replaceNamespacedLease({
          name: leaseName,
          namespace,
          body: { ...ownLease, spec: { ...ownLease.spec, ...spec(ownLease.spec?.acquireTime) } },
        });
      } catch (error) {
        if (error instanceof ApiException && (error.code === 404 || error.code === 409)) {
          // Someone else deleted or wrote our Lease: peers may already treat us as gone.
          declareLost(`own Lease ${error.code === 404 ? 'deleted' : 'written'} by someone else`);
          return;
        }
        throw error;
      }
    }
    lastRenewStartedAt = startedAt;
    armFence();
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
        leaseName: lease.metadata?.name ?? '',
        resourceVersion: lease.metadata?.resourceVersion ?? '',
      };
      observed.set(who, record);
    }
    return seen;
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

  const tick = async () => {
    await renew();
    if (stopped) return;
    const list = await api.listNamespacedLease({ namespace, labelSelector: `${LABELS.shardRing}=${ring}` });
    const seen = observe(list.items);
    await collectGarbage(seen);
    const members = currentMembers();
    membersGauge?.set(members.length);
    const text = members.map((m) => `${m.identity}@${m.peerAddress ?? ''}`).join(',');
    if (text !== lastMembers) {
      lastMembers = text;
      logger?.info({ members: members.map((m) => m.identity) }, 'shard members changed');
      options.onChange(members);
    }
  };

  const currentMembers = (): Member[] => {
    const members: Member[] = [
      { identity, ...(options.peerAddress ? { peerAddress: options.peerAddress } : {}) },
    ];
    for (const [who, record] of observed) {
      if (live(record))
        members.push({ identity: who, ...(record.peerAddress ? { peerAddress: record.peerAddress } : {}) });
    }
    return members.sort((a, b) => (a.identity < b.identity ? -1 : 1));
  };

  const schedule = () => {
    if (stopped) return;
    // Up to 10 % jitter keeps replicas started together from writing in lockstep.
    timer = clock.setTimeout(
      () => {
        ticking = tick()
          .catch((error: unknown) => logger?.warn({ err: error }, 'membership renewal or listing failed'))
          .finally(() => {
            ticking = undefined;
            schedule();
          });
      },
      jittered(retryPeriodMs, 0.1),
    );
  };

  return {
    identity,
    async start() {
      await tick();
      schedule();
    },
    members: currentMembers,
    isGone(who) {
      if (who === identity) return lost;
      const record = observed.get(who);
      if (record) return !live(record);
      const since = missingSince.get(who);
      if (since === undefined) {
        missingSince.set(who, clock.now());
        return false;
      }
      return clock.now() - since >= leaseDurationMs;
    },
    async release() {
      if (stopped) return;
      stopped = true;
      clock.clearTimeout(timer);
      clock.clearTimeout(fence);
      await ticking;
      if (!ownLease) return;
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
