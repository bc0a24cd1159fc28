// This replica's own membership Lease: created at start, or taken back from an earlier process of the same identity;
// renewed conditional on the version we last wrote, so that a peer's fence shows as a conflict; released on shutdown.
import {
  ApiException,
  V1MicroTime,
  type CoordinationV1Api,
  type V1Lease,
  type V1LeaseSpec,
} from '@kubernetes/client-node';
import { ANNOTATIONS, LABELS, type Clock } from '@skr-watcher/api';
import type { Logger } from '@skr-watcher/telemetry';
import { EXPIRY_SLACK_MS, leaseDurationSeconds } from './lease-timing.js';
import { PLACEMENT } from './placement.js';

/** The Lease calls this replica makes on its own Lease. */
export type OwnLeaseApi = Pick<
  CoordinationV1Api,
  'createNamespacedLease' | 'replaceNamespacedLease' | 'readNamespacedLease'
>;

export interface OwnLeaseOptions {
  api: OwnLeaseApi;
  namespace: string;
  ring: string;
  identity: string;
  peerAddress?: string | undefined;
  leaseDurationMs: number;
  retryPeriodMs: number;
  clock: Clock;
  logger?: Logger | undefined;
}

/** The Lease of `identity` in `ring`. */
export function ownLeaseName(ring: string, identity: string): string {
  return `${ring}-${identity}`.slice(0, 253);
}

const microTime = () => new V1MicroTime(Date.now());

/** What our Lease says of us: ring and owner labels, our placement and the address peers forward to. */
export function ownLeaseMetadata(
  options: Pick<OwnLeaseOptions, 'namespace' | 'ring' | 'identity' | 'peerAddress'>,
) {
  return {
    name: ownLeaseName(options.ring, options.identity),
    namespace: options.namespace,
    labels: { [LABELS.shardRing]: options.ring, [LABELS.shardOwner]: options.identity },
    annotations: {
      [ANNOTATIONS.shardPlacement]: PLACEMENT,
      ...(options.peerAddress ? { [ANNOTATIONS.peerAddress]: options.peerAddress } : {}),
    },
  };
}

/** Held by `identity` and renewed now; acquired now unless `acquireTime` says since when. */
export function ownLeaseSpec(identity: string, leaseDurationMs: number, acquireTime?: unknown) {
  return {
    holderIdentity: identity,
    leaseDurationSeconds: leaseDurationSeconds(leaseDurationMs),
    acquireTime: (acquireTime as V1MicroTime | undefined) ?? microTime(),
    renewTime: microTime(),
  };
}

/**
 * How long to wait before taking back our Lease, seen as `seen` `waitedMs` ago, from an earlier process of ours: 0 when
 * it may be taken now (no one holds it, or it went unrenewed for its duration, as peers decide), else until then but
 * at most a retry period.
 */
export function takeBackWaitMs(
  seen: V1Lease,
  waitedMs: number,
  timing: { leaseDurationMs: number; retryPeriodMs: number },
): number {
  const durationMs = (seen.spec?.leaseDurationSeconds ?? leaseDurationSeconds(timing.leaseDurationMs)) * 1000;
  if (!seen.spec?.holderIdentity || waitedMs >= durationMs) return 0;
  return Math.min(timing.retryPeriodMs, durationMs - waitedMs + EXPIRY_SLACK_MS);
}

/** True when `now` shows `identity` renewing the Lease since `seen`: another process runs with our identity. */
export function renewedByAnother(seen: V1Lease, now: V1Lease, identity: string): boolean {
  return now.spec?.holderIdentity === identity && now.spec?.renewTime !== seen.spec?.renewTime;
}

export class OwnLease {
  readonly name: string;
  private lease: V1Lease | undefined;

  constructor(private readonly options: OwnLeaseOptions) {
    this.name = ownLeaseName(options.ring, options.identity);
  }

  /** True once created or taken back. */
  get held(): boolean {
    return this.lease !== undefined;
  }

  /**
   * Creates our Lease, or takes it back when a process of ours left it (a fixed --shard-identity after kill -9): at
   * once when no one holds it (released, or fenced by a peer), else once it went unrenewed for its duration on our
   * clock, as peers decide. Renewed meanwhile by our identity: another process runs with it, which is refused with a
   * reason.
   */
  async createOrTakeBack(): Promise<void> {
    try {
      await this.create();
      return;
    } catch (error) {
      if (!(error instanceof ApiException && error.code === 409)) throw error;
    }
    const { api, namespace, identity, clock, logger } = this.options;
    const read = () => api.readNamespacedLease({ name: this.name, namespace });
    let seen = await read();
    let seenAt = clock.now();
    logger?.info(
      { holder: seen.spec?.holderIdentity ?? null, lease: this.name },
      'our Lease is left from an earlier process of this identity; taking it back once no one renews it',
    );
    for (;;) {
      const waitMs = takeBackWaitMs(seen, clock.now() - seenAt, this.options);
      if (waitMs === 0) {
        try {
          this.lease = await api.replaceNamespacedLease({
            name: this.name,
            namespace,
            body: {
              ...seen,
              metadata: { ...seen.metadata, ...ownLeaseMetadata(this.options) },
              spec: ownLeaseSpec(identity, this.options.leaseDurationMs),
            },
          });
          logger?.info({ lease: this.name }, 'took our Lease back');
          return;
        } catch (error) {
          if (!(error instanceof ApiException && error.code === 409)) throw error;
        }
      } else {
        await new Promise<void>((resolve) => clock.setTimeout(resolve, waitMs));
      }
      const now = await read();
      if (now.metadata?.resourceVersion === seen.metadata?.resourceVersion) continue;
      if (renewedByAnother(seen, now, identity)) {
        throw new Error(
          `shard identity ${identity}: Lease ${namespace}/${this.name} is being renewed by another process; give every replica its own --shard-identity (without the flag, each process gets $HOSTNAME-<random>)`,
        );
      }
      seen = now;
      seenAt = clock.now();
    }
  }

  /**
   * Renews our Lease (creates it when there is none yet). Resolves to why it is lost when a peer fenced or someone
   * deleted or wrote it since our last write: a peer may be reconciling our Kymas already.
   */
  async renew(): Promise<string | undefined> {
    if (!this.lease) {
      await this.create();
      return undefined;
    }
    try {
      // replace carries our last resourceVersion: it fails if a peer fenced (or anyone wrote) our Lease since.
      const { identity, leaseDurationMs } = this.options;
      this.lease = await this.replaceSpec(
        this.lease,
        ownLeaseSpec(identity, leaseDurationMs, this.lease.spec?.acquireTime),
      );
      return undefined;
    } catch (error) {
      if (error instanceof ApiException && (error.code === 404 || error.code === 409)) {
        return `own Lease ${error.code === 404 ? 'deleted' : 'fenced or written'} by someone else`;
      }
      throw error;
    }
  }

  /** Clears the holder, so peers take our Kymas at their next look instead of waiting for the Lease to expire. */
  async release(): Promise<void> {
    if (!this.lease) return;
    await this.replaceSpec(this.lease, {
      holderIdentity: undefined,
      leaseDurationSeconds: 1,
      renewTime: microTime(),
    });
  }

  /** Writes `lease` with `spec` over its own, conditional on its resourceVersion. */
  private replaceSpec(lease: V1Lease, spec: V1LeaseSpec): Promise<V1Lease> {
    return this.options.api.replaceNamespacedLease({
      name: this.name,
      namespace: this.options.namespace,
      body: { ...lease, spec: { ...lease.spec, ...spec } },
    });
  }

  private async create(): Promise<void> {
    const { api, namespace, identity, leaseDurationMs } = this.options;
    this.lease = await api.createNamespacedLease({
      namespace,
      body: {
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        metadata: ownLeaseMetadata(this.options),
        spec: ownLeaseSpec(identity, leaseDurationMs),
      },
    });
  }
}
