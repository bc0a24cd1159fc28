// Peers' Leases on the KCP as this replica handles them: listed by ring, fenced once expired on our clock, deleted once
// long gone. Every write is conditional on the resourceVersion seen, so a peer's own late renewal and our fence are
// ordered by the API server: whichever lands second meets a conflict, and a replica is never both renewing and
// taken over.
import {
  ApiException,
  PatchStrategy,
  setHeaderOptions,
  type CoordinationV1Api,
  type V1Lease,
} from '@kubernetes/client-node';
import { LABELS, type Clock } from '@skr-watcher/api';
import type { Logger } from '@skr-watcher/telemetry';
import type { ShardMetrics } from './metrics.js';
import type { PeerLeases } from './peer-leases.js';

/** The Lease calls the ring's side of membership makes. */
export type RingLeaseApi = Pick<
  CoordinationV1Api,
  'listNamespacedLease' | 'patchNamespacedLease' | 'readNamespacedLease' | 'deleteNamespacedLease'
>;

export interface RingLeasesOptions {
  api: RingLeaseApi;
  namespace: string;
  ring: string;
  peers: PeerLeases;
  clock: Clock;
  logger?: Logger | undefined;
  metrics?: ShardMetrics | undefined;
}

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

export class RingLeases {
  constructor(private readonly options: RingLeasesOptions) {}

  /** The ring's Leases, ours included. */
  async list(): Promise<V1Lease[]> {
    const { api, namespace, ring } = this.options;
    const list = await api.listNamespacedLease({ namespace, labelSelector: `${LABELS.shardRing}=${ring}` });
    return list.items;
  }

  /** Clears the holder of each Lease that expired on our clock, conditional on the resourceVersion we saw. */
  async fenceExpired(): Promise<void> {
    const { api, namespace, peers, clock, logger, metrics } = this.options;
    for (const [who, record] of peers.expired()) {
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
        peers.fenced(who, record, fenced.metadata?.resourceVersion);
        logger?.info({ peer: who }, 'fenced the expired Lease of a peer; its Kymas may be claimed');
        metrics?.fencing();
      } catch (error) {
        logger?.debug({ err: error, peer: who }, 'expired Lease not fenced');
        // A conflict: it renewed, or another peer fenced it first. Read it now rather than at the next look: when a
        // peer fenced it, its Kymas are ours to claim now, not a retry period later.
        if (error instanceof ApiException && error.code === 409) {
          await api
            .readNamespacedLease({ name: record.leaseName, namespace })
            .then((lease) => peers.observe([lease]))
            .catch((cause: unknown) => logger?.debug({ err: cause, peer: who }, 'fenced Lease not read'));
        }
      }
    }
  }

  /** Deletes the Leases of peers in `seen` that are long gone; a conflict means it changed, and it stays. */
  async collectGarbage(seen: ReadonlySet<string>): Promise<void> {
    const { api, namespace, peers } = this.options;
    for (const record of peers.garbage(seen)) {
      await api
        .deleteNamespacedLease({
          name: record.leaseName,
          namespace,
          body: { preconditions: { resourceVersion: record.resourceVersion } },
        })
        .catch(() => {});
    }
  }
}
