// What this replica has seen of its peers' Leases, judged on its own clock (decision 007): expiry counts from when it
// saw a renewal, never from the holder's clock. From that follow who is live, who is gone, whose Lease expired and is
// to be fenced, and whose is left over long enough to be deleted.
import type { V1Lease } from '@kubernetes/client-node';
import { ANNOTATIONS, LABELS, SHARDING, type Clock } from '@skr-watcher/api';

export interface Member {
  identity: string;
  /** host:port of its peer endpoint (forwarded callbacks); absent when it serves none. */
  peerAddress?: string;
  /** `buckets` when it places Kymas by bucket (ANNOTATIONS.shardPlacement); absent on replicas that place by runtime-id. */
  placement?: string;
}

/** One peer's Lease as last seen. */
export interface PeerLease {
  renewTime: string;
  /** No holder: released by the peer or fenced. */
  released: boolean;
  durationMs: number;
  /** Our clock when the record last changed: expiry is judged from this, never from the holder's clock. */
  observedAt: number;
  peerAddress?: string;
  placement?: string;
  leaseName: string;
  resourceVersion: string;
}

function timeText(value: unknown): string {
  if (value instanceof Date) return value.toISOString();
  return typeof value === 'string' ? value : '';
}

/** One line per member set, so a change of members (or of their addresses or placement) is seen by comparing two. */
export function membersSignature(members: readonly Member[]): string {
  return members.map((m) => `${m.identity}@${m.peerAddress ?? ''}/${m.placement ?? ''}`).join(',');
}

export class PeerLeases {
  private readonly records = new Map<string, PeerLease>();
  /** Identities asked about that have no Lease: when we first noticed. */
  private readonly missingSince = new Map<string, number>();

  /**
   * @param self this replica, whose own Lease is never a peer's
   * @param leaseDurationMs ours: the duration of a Lease that names none, and the unit of the garbage rule
   */
  constructor(
    private readonly self: string,
    private readonly leaseDurationMs: number,
    private readonly clock: Clock,
  ) {}

  /** Takes in Leases of the ring; returns the peers they name. A record changes only when a renewal or release shows. */
  observe(leases: readonly V1Lease[]): Set<string> {
    const seen = new Set<string>();
    for (const lease of leases) {
      const who = lease.metadata?.labels?.[LABELS.shardOwner];
      if (!who || who === this.self) continue;
      seen.add(who);
      this.missingSince.delete(who);
      const renewTime = timeText(lease.spec?.renewTime);
      const released = !lease.spec?.holderIdentity;
      const previous = this.records.get(who);
      this.records.set(who, {
        renewTime,
        released,
        durationMs: (lease.spec?.leaseDurationSeconds ?? this.leaseDurationMs / 1000) * 1000,
        observedAt:
          previous && previous.renewTime === renewTime && previous.released === released
            ? previous.observedAt
            : this.clock.now(),
        peerAddress: lease.metadata?.annotations?.[ANNOTATIONS.peerAddress],
        placement: lease.metadata?.annotations?.[ANNOTATIONS.shardPlacement],
        leaseName: lease.metadata?.name ?? '',
        resourceVersion: lease.metadata?.resourceVersion ?? '',
      });
    }
    return seen;
  }

  /** Held and renewed within its duration on our clock. */
  live(record: PeerLease): boolean {
    return !record.released && record.observedAt + record.durationMs > this.clock.now();
  }

  /** `self` and every live peer, by identity. */
  members(self: Member): Member[] {
    const members: Member[] = [self];
    for (const [who, record] of this.records) {
      if (this.live(record))
        members.push({
          identity: who,
          ...(record.peerAddress ? { peerAddress: record.peerAddress } : {}),
          ...(record.placement ? { placement: record.placement } : {}),
        });
    }
    return members.sort((a, b) => (a.identity < b.identity ? -1 : 1));
  }

  /**
   * True when the peer can no longer be working: its Lease was released or fenced, or no Lease of it has been seen
   * for a lease duration since we were first asked (the first question starts that wait).
   */
  isGone(who: string): boolean {
    const record = this.records.get(who);
    // Expired is not enough: only a released or fenced Lease means its replica can no longer renew.
    if (record) return record.released;
    const since = this.missingSince.get(who);
    if (since === undefined) {
      this.missingSince.set(who, this.clock.now());
      return false;
    }
    return this.clock.now() - since >= this.leaseDurationMs;
  }

  /** Until the peer's Lease expires on our clock: 0 once it has or was released, undefined for a peer without one. */
  expiresInMs(who: string): number | undefined {
    const record = this.records.get(who);
    if (!record) return undefined;
    return record.released ? 0 : Math.max(0, record.observedAt + record.durationMs - this.clock.now());
  }

  /** Until the first live peer's Lease expires on our clock; Infinity when none is live. */
  untilFirstExpiryMs(): number {
    let first = Infinity;
    for (const record of this.records.values()) {
      if (this.live(record))
        first = Math.min(first, record.observedAt + record.durationMs - this.clock.now());
    }
    return first;
  }

  /** Peers whose Lease is held but expired on our clock: to be fenced. Read as it goes, so a fence between is seen. */
  *expired(): Generator<[string, PeerLease]> {
    for (const [who, record] of this.records) {
      if (!record.released && !this.live(record)) yield [who, record];
    }
  }

  /** We fenced the peer's Lease: released from now on, at the resourceVersion the fence wrote. */
  fenced(who: string, record: PeerLease, resourceVersion: string | undefined): void {
    this.records.set(who, {
      ...record,
      released: true,
      observedAt: this.clock.now(),
      resourceVersion: resourceVersion ?? record.resourceVersion,
    });
  }

  /**
   * Leases of peers in `seen` gone long enough to delete, so restarts do not pile them up: released a lease duration
   * ago, or unrenewed for SHARDING.leaseGarbageAfterDurations of them.
   */
  *garbage(seen: ReadonlySet<string>): Generator<PeerLease> {
    for (const [who, record] of this.records) {
      if (!seen.has(who)) continue;
      const now = this.clock.now();
      const deadFor = now - (record.observedAt + record.durationMs);
      if (!record.released && deadFor < this.leaseDurationMs * (SHARDING.leaseGarbageAfterDurations - 1))
        continue;
      if (record.released && now - record.observedAt < this.leaseDurationMs) continue;
      yield record;
    }
  }
}
