// Sharding of Kymas over agent replicas (decision 012): membership Leases, the hash ring, the owner label with
// its handover, and forwarding of callbacks to the owner. `skr-agent run --shard` starts it before the work.
import type { KubeConfig } from '@kubernetes/client-node';
import type { RunPhase } from '@skr-watcher/kube';
import { LABELS } from '@skr-watcher/api';
import type { Logger, Registry } from '@skr-watcher/telemetry';
import type { AgentConfig, ShardingConfig } from '../config.js';
import type { DependentScope } from '../dependents.js';
import { NotTakenYetError, type AcceptedEvent, type TlsMaterial } from '../listener/index.js';
import { createAssignment, type Assignment } from './assignment.js';
import {
  PeerUnreachableError,
  createForwarder,
  startPeerServer,
  type Forwarder,
  type PeerServer,
} from './forward.js';
import { createMembership } from './membership.js';

export { bucketKey, bucketOf, createHashRing, type HashRing } from './ring.js';
export { defaultShardIdentity, validShardIdentity } from './identity.js';
export { createMembership, type Membership } from './membership.js';
export type { Member } from './peer-leases.js';
export type { Renewal } from './renewals.js';
export { createAssignment, type Assignment } from './assignment.js';
export { runtimeIdShardKeyOf, shardKeyOf } from './placement.js';
export { WorkWithdrawnError } from './runs.js';
export { createPacer, type Pacer } from './pacing.js';
export {
  createForwarder,
  startPeerServer,
  commonNameOf,
  PeerUnreachableError,
  type Delivery,
  type Forwarder,
  type PeerServer,
} from './forward.js';

/**
 * A callback whose owner cannot be reached is worth sending again this long after the owner's Lease expires on our
 * clock: a replica it then reaches looks at the ring at once (recheck), fences the Lease or finds it fenced, and the
 * Kyma's new owner claims it for the callback. (The listener rounds up to whole seconds, HTTP's unit.)
 */
const RETRY_AFTER_LEASE_EXPIRY_MS = 100;

/** Where this replica's own callbacks go (the work queue). */
type OwnerRoute = (kymaKey: string, event?: AcceptedEvent) => void;
/** The listener's enqueue: settles once the Kyma's owner has the event, rejects when it could not get it. */
type Route = (kymaKey: string, event?: AcceptedEvent) => void | Promise<void>;

export interface Sharding {
  readonly identity: string;
  /** The controller's Kyma watch: only the Kymas this replica owns. */
  readonly kymaLabelSelector: string;
  /** The controller's ModuleConfig and SyncResource watches: the buckets of the Kymas this replica has or gets. */
  readonly dependents: DependentScope;
  /**
   * Connects the running work: forwarded callbacks go to `route`; Kymas this replica just acquired (claimed from a
   * gone replica, handed to it, or back after a suspension) to `acquired`, which runs them ahead of routine work.
   */
  attach(route: OwnerRoute, acquired: (kymaKey: string) => void): void;
  /**
   * Runs a reconcile or a targeted mirror only while this replica owns the Kyma; else (or when the run was
   * withdrawn: the Kyma handed over, membership suspended) resolves to `absent`. A `paced` run (a reconcile) first
   * waits for a slot, so a start-up burst does not starve the membership renewals; `phase` (the work queue's) is
   * told while it waits, so the wait does not count as a slow run.
   */
  guard<T>(kymaKey: string, work: () => Promise<T>, absent: T, paced: boolean, phase?: RunPhase): Promise<T>;
  /** The work is stopping: reconciles waiting for a slot give up and none starts any more. */
  stopStarting(): void;
  /** The listener's lookup: Kymas of every owner. */
  resolveKyma(runtimeId: string): { namespace: string; name: string } | undefined;
  /** The listener's enqueue: here when we own the Kyma, forwarded to its owner otherwise. */
  route: Route;
  updateTls(tls: TlsMaterial): void;
  /** Graceful shutdown after the work stopped: hand every owned Kyma to a peer, release the Lease. */
  leave(): Promise<void>;
}

export interface ShardingOptions {
  config: ShardingConfig;
  timing: AgentConfig['leaseTiming'];
  namespace: string;
  resyncMs: number;
  kubeConfig: KubeConfig;
  /** The listener's certificate, key and CA bundle: the replicas' identity towards each other. */
  tls?: TlsMaterial;
  /** Called when this replica lost its membership: stop reconciling at once (the process exits). */
  onLost: (reason: string) => void;
  logger: Logger;
  registry: Registry;
}

export async function startSharding(options: ShardingOptions): Promise<Sharding> {
  const { config, logger, registry, namespace } = options;
  const log = logger.child({ subsystem: 'sharding', identity: config.identity });
  let route: OwnerRoute | undefined;
  let acquired: ((kymaKey: string) => void) | undefined;
  const me = config.identity;

  let peerServer: PeerServer | undefined;
  let forwarder: Forwarder | undefined;
  // Membership reports changes from its first tick on; the assignment it reports to is created after it.
  const late: { assignment?: Assignment } = {};
  if (config.peer && options.tls) {
    peerServer = await startPeerServer({
      host: config.peer.address.host,
      port: config.peer.address.port,
      tls: options.tls,
      deliver: async (event) => {
        const key = `${event.kyma.namespace}/${event.kyma.name}`;
        const assignment = late.assignment;
        if (!route || !assignment) return 'not-owner';
        // Right after a handover our view may lag: the acquire reconcile covers what this event would have. A Kyma
        // whose owner is gone and that the ring gives us is claimed now, so the callback need not wait its turn.
        let ours = assignment.ownerOf(key) === me || (await assignment.claimForCallback(key));
        // The peer sent it here because the named owner is gone in its view; ours may lag by up to a retry period
        // (the peer fenced the Lease first). Look now instead of answering no until our next look. Or the named owner
        // is alive and has handed the Kyma to us: the peer saw its label before our view did.
        const named = assignment.ownerOf(key);
        if (!ours && named !== undefined && named !== me) {
          ours = (await membership.recheck(named))
            ? await assignment.claimForCallback(key)
            : await assignment.awaitHandover(key);
        }
        if (!ours) return 'not-owner';
        route(key, event);
        return 'accepted';
      },
      logger,
      registry,
    });
    forwarder = createForwarder({ tls: options.tls, logger, registry });
  }
  const advertise =
    config.peer && peerServer ? (config.peer.advertise ?? `127.0.0.1:${peerServer.port}`) : undefined;

  const membership = createMembership({
    kubeConfig: options.kubeConfig,
    namespace: config.leaseNamespace,
    ring: config.ring,
    identity: me,
    ...(advertise ? { peerAddress: advertise } : {}),
    ...options.timing,
    onChange: (members) => late.assignment?.setMembers(members),
    onLost: (reason) => {
      late.assignment?.withdrawAll('membership lost');
      options.onLost(reason);
    },
    onResumed: () => late.assignment?.resumed(),
    onSuspended: () => late.assignment?.suspended(),
    onRenewal: (renewal) => late.assignment?.renewed(renewal),
    idle: () => late.assignment?.idle() ?? true,
    logger,
    registry,
  });
  await membership.start();
  const owned = createAssignment({
    kubeConfig: options.kubeConfig,
    namespace,
    membership,
    onAcquired: (key) => acquired?.(key),
    resyncMs: options.resyncMs,
    logger,
    registry,
    ...(config.journalFile ? { journalFile: config.journalFile } : {}),
  });
  late.assignment = owned;
  owned.setMembers(membership.members());
  await owned.start();
  log.info(
    { members: membership.members().map((m) => m.identity), peer: advertise },
    'joined the shard ring',
  );

  /** The listener's enqueue; `rechecked`: the owner was found unreachable once and our view of it refreshed. */
  const routeTo = (
    kymaKey: string,
    event: AcceptedEvent | undefined,
    rechecked: boolean,
  ): void | Promise<void> => {
    let owner = owned.ownerOf(kymaKey);
    if (owner === me) return route?.(kymaKey, event);
    if (!event) return;
    // The old owner gone (or none yet), the new one is known: the ring's pick. It claims the Kyma for this callback
    // at once instead of the webhook being answered 503 until the takeover's claims reach it.
    if (owner === undefined || membership.isGone(owner)) {
      owner = owned.targetOf(kymaKey);
      if (owner === me) {
        return owned.claimForCallback(kymaKey).then((claimed) => {
          if (!claimed) throw new Error(`Kyma ${kymaKey} could not be claimed for a callback yet`);
          route?.(kymaKey, event);
        });
      }
      if (!owner) return Promise.reject(new Error(`Kyma ${kymaKey} has no owner and no replica to take it`));
    }
    const address = membership.members().find((m) => m.identity === owner)?.peerAddress;
    // The listener answers only once the owner took it, so a webhook sends a lost event again.
    if (!address || !forwarder) {
      return Promise.reject(new Error(`the owner ${owner} has no peer address this replica can reach`));
    }
    const named = owner;
    return forwarder.forward(address, event).catch(async (error: unknown) => {
      if (!(error instanceof PeerUnreachableError)) {
        log.warn({ err: error, kyma: kymaKey, owner: named }, 'forwarding a callback to its owner failed');
        throw error;
      }
      // Nobody at the owner's address (killed, say). Its Lease may have run out on our clock, or a peer may have
      // fenced it already: once our view says it is gone, the callback goes to the ring's pick now.
      if (!rechecked && (await membership.recheck(named))) return routeTo(kymaKey, event, true);
      log.warn({ err: error, kyma: kymaKey, owner: named }, 'forwarding a callback to its owner failed');
      // Sending again is worth it once its Lease has run out, not every second before (a webhook whose backoff
      // grew meanwhile would wait past that moment).
      const expiresInMs = membership.expiresInMs(named);
      if (expiresInMs === undefined) throw error;
      throw new NotTakenYetError(
        `the owner ${named} of Kyma ${kymaKey} cannot be reached; its Lease expires in ${expiresInMs} ms`,
        (expiresInMs + RETRY_AFTER_LEASE_EXPIRY_MS) / 1000,
        { cause: error },
      );
    });
  };

  return {
    identity: me,
    kymaLabelSelector: `${LABELS.shardOwner}=${me}`,
    dependents: {
      buckets: () => owned.neededBuckets(),
      labelsBucket: (bucket) => owned.labelsBucket(bucket),
      onChange: (listener) => owned.onScopeChange(listener),
    },
    attach(nextRoute, nextAcquired) {
      route = nextRoute;
      acquired = nextAcquired;
    },
    async guard(kymaKey, work, absent, paced, phase) {
      return (await owned.guard(kymaKey, work, paced, phase)) ?? absent;
    },
    stopStarting: () => owned.stopStarting(),
    resolveKyma: (runtimeId) => owned.resolveKyma(runtimeId),
    route: (kymaKey, event) => routeTo(kymaKey, event, false),
    updateTls(tls) {
      peerServer?.updateTls(tls);
      forwarder?.updateTls(tls);
    },
    async leave() {
      await owned.handOverAll();
      await membership.release();
      await owned.stop();
      forwarder?.close();
      await peerServer?.close();
    },
  };
}
