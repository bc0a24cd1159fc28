// Which replica reconciles which Kyma (decision 012). The owner is a label on the Kyma, written only:
//   - by the owner itself, handing a Kyma over after the last of its reconciles of that Kyma has finished;
//   - by the ring's choice, claiming a Kyma that has no owner or whose owner is gone (Lease released or
//     expired), with the read resourceVersion as precondition so two claimers cannot both win.
// A replica reconciles a key only while its own view says the label names it and it is not handing it over,
// so the old and the new owner never run one Kyma at the same time. A run is aborted (every KCP and SKR request
// of it, sent or not) as soon as the replica decides to hand its Kyma over or its membership is suspended: no
// write of ours reaches a cluster after that, and a suspended replica's work is over long before peers may take
// over. Reconciles wait for a slot of the pacer (pacing.ts), so a start-up does not starve the Lease renewals.
// This file runs the passes and ties the parts together: placement.ts decides, owner-labels.ts writes, runs.ts
// tracks the work, kyma-owners.ts is the view.
import { CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { SHARDING } from '@skr-watcher/api';
import { objectKey, type RunPhase } from '@skr-watcher/kube';
import { Gauge, type Logger, type Registry } from '@skr-watcher/telemetry';
import { ClaimWaiters } from './claim-waiters.js';
import { kymaOfRuntimeId, ownerOf, watchKymaOwners, type KymaOwnership } from './kyma-owners.js';
import { limiter } from './limiter.js';
import type { Member, Membership, Renewal } from './membership.js';
import { shardMetrics } from './metrics.js';
import { OwnerLabels } from './owner-labels.js';
import { createPacer, type PacerOptions } from './pacing.js';
import { Placement, ownerStep } from './placement.js';
import { createHashRing } from './ring.js';
import { Runs, fileJournal } from './runs.js';

// The same bound serves the bucket-label writes of dependents.ts, which takes it from here.
export { limiter } from './limiter.js';

export interface AssignmentOptions {
  kubeConfig: KubeConfig;
  namespace: string;
  membership: Membership;
  /** A Kyma became ours (claimed, or handed to us): reconcile it now. */
  onAcquired: (kymaKey: string) => void;
  /** Appends `{kyma, replica, phase, t}` per reconcile start and end (tests prove no overlap with it). */
  journalFile?: string;
  resyncMs?: number;
  /** Pacing limits other than SHARDING.pacing (tests). */
  pacing?: Pick<PacerOptions, 'initial' | 'max' | 'step' | 'slotHeldMs'>;
  logger?: Logger;
  registry?: Registry;
}

export interface Assignment {
  /** Lists every Kyma's ownership and starts assigning; resolves once the list is in. */
  start(): Promise<void>;
  /** The live members changed: recompute the ring and move what must move. */
  setMembers(members: Member[]): void;
  /**
   * Runs `work` only if this replica owns the Kyma; a handover waits for it. Undefined when not ours, or when the
   * run was withdrawn (the Kyma handed over, membership suspended): its requests were aborted then. `paced`: wait
   * for a slot of the pacer first (reconciles; a targeted mirror is one small write and goes at once), telling
   * `phase` (the work queue's) that it waits meanwhile.
   */
  guard<T>(kymaKey: string, work: () => Promise<T>, paced: boolean, phase?: RunPhase): Promise<T | undefined>;
  /** The replica named on the Kyma, if any. */
  ownerOf(kymaKey: string): string | undefined;
  /** The replica the ring picks for the Kyma (its next owner once the named one is gone), if any. */
  targetOf(kymaKey: string): string | undefined;
  /**
   * A callback waits for this Kyma: when its owner is gone (or it has none) and the ring picks this replica, claims
   * it at once, ahead of the takeover's queue of claims, so the webhook is not answered 503 until that queue reaches
   * it. Resolves true once our view names us the owner (at once when it already does), false when it is not ours to
   * take or the claim did not land in time.
   */
  claimForCallback(kymaKey: string): Promise<boolean>;
  /**
   * A peer forwarded a callback for this Kyma to us while our view names another, live, owner. When the ring picks
   * this replica, that owner is most likely handing the Kyma over and our view has not seen its label yet: waits
   * briefly for it. Resolves true once our view names us the owner, false when the ring does not pick us or the
   * wait ends first.
   */
  awaitHandover(kymaKey: string): Promise<boolean>;
  /**
   * The buckets whose dependents this replica must see: the ring's buckets for it and those of the Kymas it still
   * owns (a Kyma being handed over is reconciled until the label moves). While a member places by runtime-id: the
   * buckets of the Kymas the ring or the label gives it.
   */
  neededBuckets(): Set<number>;
  /** True when this replica is the one to label an unlabelled dependent of `bucket` (the ring's owner of it). */
  labelsBucket(bucket: number): boolean;
  /** Called (synchronously, often in bursts) when neededBuckets or labelsBucket may answer differently. */
  onScopeChange(listener: () => void): void;
  /** The Kyma labelled with this runtime-id, owned by anyone (the listener's view on every replica). */
  resolveKyma(runtimeId: string): { namespace: string; name: string } | undefined;
  ownedKeys(): string[];
  /** True when no reconcile or targeted mirror of ours is running. */
  idle(): boolean;
  /** Membership renewed after a suspension: run what was refused meanwhile and look at the ring again. */
  resumed(): void;
  /** A renewal attempt ended: the pacer widens or narrows. */
  renewed(renewal: Renewal): void;
  /** Membership suspended: withdraw every run (they are tried again on resumption) and narrow the pacer. */
  suspended(): void;
  /** Aborts every run in flight: membership is lost. */
  withdrawAll(reason: string): void;
  /** The work is stopping: runs waiting for a slot give up, nothing new starts. */
  stopStarting(): void;
  /**
   * Graceful shutdown, after this replica's reconciles stopped: writes each owned Kyma over to the owner the
   * ring picks among the others, so they start at once instead of after our Lease is released or expires.
   */
  handOverAll(): Promise<void>;
  stop(): Promise<void>;
}

/** How long a callback waits for our view to show the claim it wrote: within the forward's timeout (2 s). */
const CALLBACK_CLAIM_WAIT_MS = 1_500;
/** How long a forwarded callback waits for our view to show a handover to us: the label's watch event, a few ms. */
const HANDOVER_VIEW_WAIT_MS = 1_000;

export function createAssignment(options: AssignmentOptions): Assignment {
  const { namespace, membership } = options;
  const me = membership.identity;
  const logger = options.logger?.child({ subsystem: 'assignment', identity: me });
  const shard = shardMetrics(options.registry);
  /** When this replica first found each former owner gone: a takeover's duration starts there. */
  const goneSeenAt = new Map<string, number>();
  const ownedGauge: Gauge | undefined = options.registry
    ? new Gauge({
        name: 'skr_agent_shard_owned_kymas',
        help: 'Kymas whose owner label names this replica.',
        registers: [options.registry],
        collect(this: Gauge) {
          this.set(ownedKeys().length);
        },
      })
    : undefined;

  const kymas = watchKymaOwners({
    kubeConfig: options.kubeConfig,
    namespace,
    resyncMs: options.resyncMs,
    logger,
    registry: options.registry,
  });
  const labels = new OwnerLabels({
    api: options.kubeConfig.makeApiClient(CustomObjectsApi),
    namespace,
    observeWritten: (written) => kymas.observeWritten(written),
    logger,
  });
  const placement = new Placement(me);
  const scopeListeners: (() => void)[] = [];
  const scopeChanged = () => scopeListeners.forEach((listener) => listener());
  /** Keys this replica is handing over: never started again, whatever the (possibly stale) label says. */
  const releasing = new Set<string>();
  const runs = new Runs(options.journalFile ? fileJournal(options.journalFile, me) : undefined);
  const pacer = createPacer({
    ...options.pacing,
    renewalInFlight: () => membership.renewalInFlight(),
    ...(options.registry ? { registry: options.registry } : {}),
  });
  /** Keys refused while our membership was suspended; run again when it resumes. */
  const refused = new Set<string>();
  const relabel = limiter(SHARDING.relabelConcurrency);
  let stopped = false;
  let passTimer: NodeJS.Timeout | undefined;
  const claimWaiters = new ClaimWaiters();

  const owns = (key: string) => !stopped && !releasing.has(key) && ownerOf(kymas.get(key)) === me;
  const ownedKeys = () => kymas.keys().filter((key) => ownerOf(kymas.get(key)) === me);
  const tookOver = (from: string | undefined) => {
    const since = from === undefined ? undefined : goneSeenAt.get(from);
    if (since !== undefined) shard?.takeover((Date.now() - since) / 1000);
  };

  const handOver = (kyma: KymaOwnership, to: string) => {
    const key = objectKey(kyma);
    releasing.add(key);
    // Its requests end now rather than when the run would: the handover below waits for the run to be over.
    runs.withdraw(key, `handed over to ${to}`);
    labels.begin(key);
    void relabel(async () => {
      // The last reconcile of ours must be over before the new owner can see the label.
      await runs.settled(key);
      const current = kymas.get(key) ?? kyma;
      if (ownerOf(current) !== me) return;
      await labels.write(current, to);
      logger?.info({ kyma: key, to }, 'Kyma handed over');
      shard?.handover();
    })
      .catch((error: unknown) =>
        // A conflict means the Kyma changed since we read it; its update event brings the next pass.
        logger?.debug({ err: error, kyma: key, to }, 'handover not written; next pass retries'),
      )
      .finally(() => labels.done(key));
  };

  const claim = (kyma: KymaOwnership) => {
    const key = objectKey(kyma);
    labels.begin(key);
    const from = ownerOf(kyma);
    void relabel(async () => {
      // Queued behind other claims: written meanwhile (for a callback) or changed since the pass decided, the next
      // pass decides again rather than this write meeting a conflict.
      const current = kymas.get(key);
      if (
        current?.metadata.resourceVersion !== kyma.metadata.resourceVersion ||
        labels.awaitingOwnWrite(kyma)
      ) {
        throw new Error('changed or written since the pass decided');
      }
      await labels.write(kyma, me);
    })
      .then(() => {
        logger?.info({ kyma: key, from }, 'Kyma claimed');
        tookOver(from);
      })
      .catch((error: unknown) =>
        logger?.debug({ err: error, kyma: key }, 'claim not written; next pass retries'),
      )
      .finally(() => labels.done(key));
  };

  /** Compares every Kyma's owner with the ring's choice and writes what this replica may write. */
  const assign = () => {
    passTimer = undefined;
    // Suspended, we write no label: our own view may be about to be taken over.
    if (stopped || !membership.isActive()) return;
    for (const kyma of kymas.list()) {
      const key = objectKey(kyma);
      if (labels.busy(key) || labels.awaitingOwnWrite(kyma)) continue;
      const owner = ownerOf(kyma);
      const next = ownerStep(me, owner, placement.targetOf(kyma), (gone) => membership.isGone(gone));
      if (next.step === 'hand-over') handOver(kyma, next.to);
      else if (next.step === 'keep') {
        if (releasing.delete(key)) options.onAcquired(key); // the ring moved it back before we let go
      } else if (next.step === 'claim') {
        if (owner !== undefined && !goneSeenAt.has(owner)) goneSeenAt.set(owner, Date.now());
        claim(kyma);
      }
    }
  };
  const schedulePass = () => {
    if (stopped || passTimer) return;
    passTimer = setTimeout(assign, SHARDING.assignDebounceMs);
  };
  // An owner that is gone becomes claimable only with time (its Lease expires): look again every so often.
  let sweep: NodeJS.Timeout | undefined;

  kymas.addHandler({
    onAdd: (kyma) => {
      if (ownerOf(kyma) === me) {
        options.onAcquired(objectKey(kyma));
        claimWaiters.owned(objectKey(kyma));
      }
      if (ownerOf(kyma) === me || !placement.byBucket) scopeChanged();
      schedulePass();
    },
    onUpdate: (previous, kyma) => {
      const key = objectKey(kyma);
      if (previous.metadata.resourceVersion !== kyma.metadata.resourceVersion) labels.forget(key);
      if (ownerOf(kyma) !== me) {
        releasing.delete(key);
        runs.withdraw(key, 'its owner label names another replica');
      } else if (ownerOf(previous) !== me) {
        options.onAcquired(key);
        claimWaiters.owned(key);
      }
      // Other changes (our status writes) need no pass; the sweep retries writes that met a conflict.
      if (ownerOf(previous) !== ownerOf(kyma)) {
        if (ownerOf(previous) === me || ownerOf(kyma) === me) scopeChanged();
        schedulePass();
      }
    },
    onDelete: (kyma) => {
      releasing.delete(objectKey(kyma));
      labels.forget(objectKey(kyma));
      if (ownerOf(kyma) === me || !placement.byBucket) scopeChanged();
    },
  });

  return {
    async start() {
      kymas.start();
      await kymas.waitForSync();
      sweep = setInterval(schedulePass, 1_000);
      sweep.unref();
      schedulePass();
    },
    setMembers(members) {
      if (placement.setMembers(members)) {
        logger?.info({ placement: placement.byBucket ? 'buckets' : 'runtime-id' }, 'ring placement changed');
      }
      scopeChanged();
      schedulePass();
    },
    async guard(kymaKey, work, paced, phase) {
      const admitted = () => {
        if (!owns(kymaKey)) return false;
        if (membership.isActive()) return true;
        refused.add(kymaKey);
        return false;
      };
      if (!admitted()) return undefined;
      if (!paced) return runs.start(kymaKey, work);
      phase?.waiting();
      const release = await pacer.acquire();
      phase?.working();
      try {
        // Ownership and membership may have changed while it waited; checked and registered in one tick.
        if (!release || !admitted()) return undefined;
        return await runs.start(kymaKey, work);
      } finally {
        release?.();
      }
    },
    ownerOf: (kymaKey) => ownerOf(kymas.get(kymaKey)),
    targetOf(kymaKey) {
      const kyma = kymas.get(kymaKey);
      return kyma ? placement.targetOf(kyma) : undefined;
    },
    async claimForCallback(kymaKey) {
      const kyma = kymas.get(kymaKey);
      if (!kyma || stopped || !membership.isActive()) return false;
      const from = ownerOf(kyma);
      if (from === me) return owns(kymaKey);
      // The pass's own rule: ours by the ring, and the named owner gone, so no one else may write it.
      const next = ownerStep(me, from, placement.targetOf(kyma), (gone) => membership.isGone(gone));
      if (next.step !== 'claim') return false;
      const waiter = claimWaiters.add(kymaKey);
      const queued = labels.busy(kymaKey);
      labels.begin(kymaKey);
      try {
        // The resourceVersion read is the precondition, as for the pass's claim: a claim the pass queued for the same
        // version then sees it written and writes nothing. Claimed already (our view lags): only wait for the view.
        if (!labels.awaitingOwnWrite(kyma)) {
          await labels.write(kyma, me);
          logger?.info({ kyma: kymaKey, from, forCallback: true }, 'Kyma claimed');
          tookOver(from);
        }
      } catch (error) {
        // A conflict: the pass's claim (or the Kyma's own change) came first; our view tells who owns it now.
        logger?.debug({ err: error, kyma: kymaKey }, 'claim for a callback not written');
      } finally {
        if (!queued) labels.done(kymaKey);
      }
      await waiter.until(CALLBACK_CLAIM_WAIT_MS);
      return owns(kymaKey);
    },
    async awaitHandover(kymaKey) {
      const kyma = kymas.get(kymaKey);
      if (!kyma || stopped || placement.targetOf(kyma) !== me) return false;
      // Registered before looking, so that the view's update between the look and the wait is not missed.
      const waiter = claimWaiters.add(kymaKey);
      await waiter.until(owns(kymaKey) ? 0 : HANDOVER_VIEW_WAIT_MS);
      return owns(kymaKey);
    },
    neededBuckets() {
      const needed = new Set<number>(placement.byBucket ? placement.bucketsOfRing() : []);
      for (const kyma of kymas.list()) {
        if (ownerOf(kyma) === me || (!placement.byBucket && placement.targetOf(kyma) === me)) {
          needed.add(kyma.bucket);
        }
      }
      return needed;
    },
    labelsBucket: (bucket) => placement.ownsBucket(bucket),
    onScopeChange: (listener) => scopeListeners.push(listener),
    resolveKyma: (runtimeId) => kymaOfRuntimeId(kymas, runtimeId, namespace),
    ownedKeys,
    idle: () => runs.idle,
    resumed() {
      const again = [...refused];
      refused.clear();
      for (const key of again) if (owns(key)) options.onAcquired(key);
      schedulePass();
    },
    renewed: (renewal) => pacer.renewed(renewal),
    suspended() {
      pacer.narrow();
      for (const key of runs.keys()) refused.add(key);
      runs.withdrawAll('membership renewal overdue');
    },
    withdrawAll: (reason) => runs.withdrawAll(reason),
    stopStarting: () => pacer.close(),
    async handOverAll() {
      stopped = true;
      clearTimeout(passTimer);
      clearInterval(sweep);
      const others = createHashRing(
        membership
          .members()
          .map((m) => m.identity)
          .filter((identity) => identity !== me),
      );
      const mine = kymas.list().filter((kyma) => ownerOf(kyma) === me);
      let handed = 0;
      await Promise.all(
        mine.map((kyma) =>
          relabel(async () => {
            const to = others.ownerOf(placement.keyOf(kyma));
            if (!to) return;
            await runs.settled(objectKey(kyma));
            await labels.write(kymas.get(objectKey(kyma)) ?? kyma, to);
            handed += 1;
          }).catch((error: unknown) =>
            logger?.debug({ err: error, kyma: objectKey(kyma) }, 'handover at shutdown not written'),
          ),
        ),
      );
      logger?.info({ handed, owned: mine.length }, 'Kymas handed over at shutdown');
    },
    async stop() {
      stopped = true;
      clearTimeout(passTimer);
      clearInterval(sweep);
      await kymas.stop();
      ownedGauge?.set(0);
    },
  };
}
