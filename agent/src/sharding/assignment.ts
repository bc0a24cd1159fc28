// Which replica reconciles which Kyma (decision 012). The owner is a label on the Kyma, written only:
//   - by the owner itself, handing a Kyma over after the last of its reconciles of that Kyma has finished;
//   - by the ring's choice, claiming a Kyma that has no owner or whose owner is gone (Lease released or
//     expired), with the read resourceVersion as precondition so two claimers cannot both win.
// A replica reconciles a key only while its own view says the label names it and it is not handing it over,
// so the old and the new owner never run one Kyma at the same time. A run is aborted (every KCP and SKR request
// of it, sent or not) as soon as the replica decides to hand its Kyma over or its membership is suspended: no
// write of ours reaches a cluster after that, and a suspended replica's work is over long before peers may take
// over. Reconciles wait for a slot of the pacer (pacing.ts), so a start-up does not starve the Lease renewals.
import { appendFileSync } from 'node:fs';
import { CustomObjectsApi, PatchStrategy, setHeaderOptions, type KubeConfig } from '@kubernetes/client-node';
import { GROUP, KINDS, LABELS, SHARDING } from '@skr-watcher/api';
import {
  ResilientInformer,
  abortableBy,
  customResourceSource,
  metadataOnly,
  objectKey,
  type RunPhase,
} from '@skr-watcher/kube';
import { Gauge, type Logger, type Registry } from '@skr-watcher/telemetry';
import type { Member, Membership, Renewal } from './membership.js';
import { PLACEMENT } from './placement.js';
import { createPacer, type PacerOptions } from './pacing.js';
import { bucketKey, bucketOf, createHashRing, type HashRing } from './ring.js';
import { shardMetrics } from './metrics.js';

/** What the assignment keeps of every Kyma in the namespace: identity, runtime-id and owner, nothing else. */
interface KymaOwnership {
  metadata: { name: string; namespace?: string; resourceVersion?: string; labels?: Record<string, string> };
  /**
   * bucketOf(name), hashed once as the Kyma is cached: every assignment pass (one per batch of label changes during a
   * takeover, and the sweep every second) places every Kyma, and an MD5 per Kyma per pass was most of a pass's cost.
   */
  bucket: number;
}

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
   * A callback waits for this Kyma (issue 26): when its owner is gone (or it has none) and the ring picks this
   * replica, claims it at once, ahead of the takeover's queue of claims. Resolves true once our view names us the
   * owner (at once when it already does), false when it is not ours to take or the claim did not land in time.
   */
  claimForCallback(kymaKey: string): Promise<boolean>;
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

const RUNTIME_ID_INDEX = 'runtime-id';
/** How long a callback waits for our view to show the claim it wrote: within the forward's timeout (2 s). */
const CALLBACK_CLAIM_WAIT_MS = 1_500;
const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

type Placed = { metadata: { name: string; namespace?: string; labels?: Record<string, string> } };

/** The ring places a Kyma by its bucket (a function of its name), so its dependents can be selected by bucket. */
export function shardKeyOf(kyma: Placed) {
  return bucketKey(bucketOf(kyma.metadata.name));
}

/** Placement before session 10, kept while a member of that version runs: by runtime-id, else the key. */
export function runtimeIdShardKeyOf(kyma: Placed) {
  return kyma.metadata.labels?.[LABELS.runtimeId] || objectKey(kyma);
}

/** What the requests of a run withdrawn by this replica are aborted with. */
export class WorkWithdrawnError extends Error {
  constructor(kymaKey: string, reason: string) {
    super(`work on Kyma ${kymaKey} withdrawn: ${reason}`);
    // Not AbortError or TimeoutError: those mean a cluster that does not answer and would trip its circuit.
    this.name = 'WorkWithdrawnError';
  }
}

interface Run {
  /** Resolves when the run has ended, however. */
  settled: Promise<unknown>;
  abort: AbortController;
}

/** Runs tasks with at most `limit` in flight. */
export function limiter(limit: number) {
  let active = 0;
  const waiting: (() => void)[] = [];
  return async <T>(task: () => Promise<T>): Promise<T> => {
    if (active >= limit) await new Promise<void>((resolve) => waiting.push(resolve));
    active += 1;
    try {
      return await task();
    } finally {
      active -= 1;
      waiting.shift()?.();
    }
  };
}

export function createAssignment(options: AssignmentOptions): Assignment {
  const { namespace, membership } = options;
  const me = membership.identity;
  const logger = options.logger?.child({ subsystem: 'assignment', identity: me });
  const api = options.kubeConfig.makeApiClient(CustomObjectsApi);
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

  const kymas = new ResilientInformer<KymaOwnership>({
    kubeConfig: options.kubeConfig,
    // Thousands of Kymas on every replica: the API server sends their metadata only (no spec, no status).
    source: metadataOnly<KymaOwnership>(
      options.kubeConfig,
      customResourceSource(options.kubeConfig, {
        group: GROUP,
        version: KINDS.kyma.version,
        plural: KINDS.kyma.plural,
        namespace,
      }),
    ),
    resyncMs: options.resyncMs,
    // Of the metadata, keep the three fields assignment reads.
    transform: (kyma) => {
      const labels = kyma.metadata.labels ?? {};
      const kept: Record<string, string> = {};
      for (const key of [LABELS.runtimeId, LABELS.shardOwner]) if (labels[key]) kept[key] = labels[key];
      return {
        metadata: {
          name: kyma.metadata.name,
          namespace: kyma.metadata.namespace,
          resourceVersion: kyma.metadata.resourceVersion,
          labels: kept,
        },
        bucket: bucketOf(kyma.metadata.name),
      };
    },
    logger,
    registry: options.registry,
  });
  kymas.addIndex(RUNTIME_ID_INDEX, (kyma) => {
    const runtimeId = kyma.metadata.labels?.[LABELS.runtimeId];
    return runtimeId ? [runtimeId] : [];
  });

  let ring: HashRing = createHashRing([me]);
  /** False while a live member does not place by bucket (a rolling update from an older version). */
  let byBucket = true;
  const placeOf = (kyma: KymaOwnership) => (byBucket ? bucketKey(kyma.bucket) : runtimeIdShardKeyOf(kyma));
  const scopeListeners: (() => void)[] = [];
  const scopeChanged = () => scopeListeners.forEach((listener) => listener());
  let ringBuckets: { ring: HashRing; buckets: number[] } | undefined;
  const bucketsOfRing = () => {
    if (ringBuckets?.ring !== ring) {
      const buckets: number[] = [];
      for (let b = 0; b < SHARDING.buckets; b++) if (ring.ownerOf(bucketKey(b)) === me) buckets.push(b);
      ringBuckets = { ring, buckets };
    }
    return ringBuckets.buckets;
  };
  /** Keys this replica is handing over: never started again, whatever the (possibly stale) label says. */
  const releasing = new Set<string>();
  /** Relabels in flight, so a pass does not write the same Kyma twice. */
  const writing = new Set<string>();
  /**
   * Owner labels this replica wrote, by key: the resourceVersion the write was conditional on. Until our cache shows
   * a later version, a write conditional on that one again can only meet a conflict (on a loaded KCP the watch event
   * of a claim can come seconds after it, and passes run meanwhile): no pass writes it.
   */
  const wrote = new Map<string, string | undefined>();
  const awaitingOwnWrite = (kyma: KymaOwnership) => {
    const key = objectKey(kyma);
    return wrote.has(key) && wrote.get(key) === kyma.metadata.resourceVersion;
  };
  /** Reconciles (and targeted mirrors) in flight, per key. */
  const inFlight = new Map<string, Set<Run>>();
  const settledRuns = (key: string) => Promise.all([...(inFlight.get(key) ?? [])].map((run) => run.settled));
  const withdraw = (key: string, reason: string) => {
    for (const run of inFlight.get(key) ?? []) run.abort.abort(new WorkWithdrawnError(key, reason));
  };
  const withdrawAll = (reason: string) => {
    for (const key of inFlight.keys()) withdraw(key, reason);
  };
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
  /** Callbacks waiting for our view to name us the owner of a Kyma they claimed (claimForCallback). */
  const claimWaiters = new Map<string, (() => void)[]>();
  const ownedNow = (key: string) => {
    for (const resolve of claimWaiters.get(key) ?? []) resolve();
    claimWaiters.delete(key);
  };

  const labelOf = (kyma: KymaOwnership | undefined) =>
    kyma?.metadata.labels?.[LABELS.shardOwner] || undefined;
  const owns = (key: string) => !stopped && !releasing.has(key) && labelOf(kymas.get(key)) === me;
  const ownedKeys = () => kymas.keys().filter((key) => labelOf(kymas.get(key)) === me);

  const journal = (kymaKey: string, phase: 'start' | 'end') => {
    if (!options.journalFile) return;
    // Synchronous, so a SIGKILL loses nothing written before it; hrtime is CLOCK_MONOTONIC, shared by processes.
    appendFileSync(
      options.journalFile,
      `${JSON.stringify({ kyma: kymaKey, replica: me, phase, t: process.hrtime.bigint().toString() })}\n`,
    );
  };

  /** Starts `work`, registered as in flight before its first await, so a handover decided from now on waits for it. */
  const startRun = <T>(kymaKey: string, work: () => Promise<T>): Promise<T | undefined> => {
    journal(kymaKey, 'start');
    const runs = inFlight.get(kymaKey) ?? new Set<Run>();
    inFlight.set(kymaKey, runs);
    const abort = new AbortController();
    const run = abortableBy(abort.signal, work).finally(() => {
      journal(kymaKey, 'end');
      runs.delete(entry);
      if (runs.size === 0 && inFlight.get(kymaKey) === runs) inFlight.delete(kymaKey);
    });
    const entry: Run = { settled: run.catch(() => undefined), abort };
    runs.add(entry);
    // A withdrawn run ends like one for a Kyma that is not ours: no failure to back off; the new owner, or this
    // replica once it resumes, runs it again.
    return run.catch((error: unknown) => {
      if (abort.signal.aborted) return undefined;
      throw error;
    });
  };

  /** One PATCH of the owner label, conditional on the resourceVersion this replica decided on. */
  const writeOwner = async (kyma: KymaOwnership, owner: string) => {
    const key = objectKey(kyma);
    const written: unknown = await api.patchNamespacedCustomObject(
      {
        group: GROUP,
        version: KINDS.kyma.version,
        plural: KINDS.kyma.plural,
        namespace: kyma.metadata.namespace ?? namespace,
        name: kyma.metadata.name,
        body: {
          metadata: {
            resourceVersion: kyma.metadata.resourceVersion,
            labels: { [LABELS.shardOwner]: owner },
          },
        },
      },
      mergePatch,
    );
    wrote.set(key, kyma.metadata.resourceVersion);
    logger?.debug({ kyma: key, from: labelOf(kyma), to: owner }, 'Kyma owner written');
    // Our view takes the label now, not when its watch event comes: seconds later on a KCP busy with a takeover's
    // claims, and a callback waiting for the claim (claimForCallback) would be answered 503 meanwhile.
    kymas.observeWritten(written);
  };

  const handOver = (kyma: KymaOwnership, to: string) => {
    const key = objectKey(kyma);
    releasing.add(key);
    // Its requests end now rather than when the run would: the handover below waits for the run to be over.
    withdraw(key, `handed over to ${to}`);
    writing.add(key);
    void relabel(async () => {
      // The last reconcile of ours must be over before the new owner can see the label.
      await settledRuns(key);
      const current = kymas.get(key) ?? kyma;
      if (labelOf(current) !== me) return;
      await writeOwner(current, to);
      logger?.info({ kyma: key, to }, 'Kyma handed over');
      shard?.handover();
    })
      .catch((error: unknown) =>
        // A conflict means the Kyma changed since we read it; its update event brings the next pass.
        logger?.debug({ err: error, kyma: key, to }, 'handover not written; next pass retries'),
      )
      .finally(() => writing.delete(key));
  };

  const claim = (kyma: KymaOwnership) => {
    const key = objectKey(kyma);
    writing.add(key);
    const from = labelOf(kyma);
    void relabel(async () => {
      // Queued behind other claims: written meanwhile (for a callback) or changed since the pass decided, the next
      // pass decides again rather than this write meeting a conflict.
      const current = kymas.get(key);
      if (current?.metadata.resourceVersion !== kyma.metadata.resourceVersion || awaitingOwnWrite(kyma)) {
        throw new Error('changed or written since the pass decided');
      }
      await writeOwner(kyma, me);
    })
      .then(() => {
        logger?.info({ kyma: key, from }, 'Kyma claimed');
        const since = from === undefined ? undefined : goneSeenAt.get(from);
        if (since !== undefined) shard?.takeover((Date.now() - since) / 1000);
      })
      .catch((error: unknown) =>
        logger?.debug({ err: error, kyma: key }, 'claim not written; next pass retries'),
      )
      .finally(() => writing.delete(key));
  };

  /** Compares every Kyma's owner with the ring's choice and writes what this replica may write. */
  const assign = () => {
    passTimer = undefined;
    // Suspended, we write no label: our own view may be about to be taken over.
    if (stopped || !membership.isActive()) return;
    for (const kyma of kymas.list()) {
      const key = objectKey(kyma);
      if (writing.has(key) || awaitingOwnWrite(kyma)) continue;
      const owner = labelOf(kyma);
      const target = ring.ownerOf(placeOf(kyma));
      if (owner === me) {
        if (target !== me && target !== undefined) handOver(kyma, target);
        else if (releasing.delete(key)) options.onAcquired(key); // the ring moved it back before we let go
      } else if (target === me && (owner === undefined || membership.isGone(owner))) {
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
      if (labelOf(kyma) === me) {
        options.onAcquired(objectKey(kyma));
        ownedNow(objectKey(kyma));
      }
      if (labelOf(kyma) === me || !byBucket) scopeChanged();
      schedulePass();
    },
    onUpdate: (previous, kyma) => {
      const key = objectKey(kyma);
      if (previous.metadata.resourceVersion !== kyma.metadata.resourceVersion) wrote.delete(key);
      if (labelOf(kyma) !== me) {
        releasing.delete(key);
        withdraw(key, 'its owner label names another replica');
      } else if (labelOf(previous) !== me) {
        options.onAcquired(key);
        ownedNow(key);
      }
      // Other changes (our status writes) need no pass; the sweep retries writes that met a conflict.
      if (labelOf(previous) !== labelOf(kyma)) {
        if (labelOf(previous) === me || labelOf(kyma) === me) scopeChanged();
        schedulePass();
      }
    },
    onDelete: (kyma) => {
      releasing.delete(objectKey(kyma));
      wrote.delete(objectKey(kyma));
      if (labelOf(kyma) === me || !byBucket) scopeChanged();
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
      ring = createHashRing(members.map((m) => m.identity));
      const wasByBucket = byBucket;
      byBucket = members.every((m) => m.placement === PLACEMENT);
      if (byBucket !== wasByBucket) {
        logger?.info({ placement: byBucket ? 'buckets' : 'runtime-id' }, 'ring placement changed');
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
      if (!paced) return startRun(kymaKey, work);
      phase?.waiting();
      const release = await pacer.acquire();
      phase?.working();
      try {
        // Ownership and membership may have changed while it waited; checked and registered in one tick.
        if (!release || !admitted()) return undefined;
        return await startRun(kymaKey, work);
      } finally {
        release?.();
      }
    },
    ownerOf: (kymaKey) => labelOf(kymas.get(kymaKey)),
    targetOf(kymaKey) {
      const kyma = kymas.get(kymaKey);
      return kyma ? ring.ownerOf(placeOf(kyma)) : undefined;
    },
    async claimForCallback(kymaKey) {
      const kyma = kymas.get(kymaKey);
      if (!kyma || stopped || !membership.isActive()) return false;
      const from = labelOf(kyma);
      if (from === me) return owns(kymaKey);
      // The pass's own rule (assign): ours by the ring, and the named owner gone, so no one else may write it.
      if (ring.ownerOf(placeOf(kyma)) !== me || (from !== undefined && !membership.isGone(from)))
        return false;
      let seenNow = () => {};
      const seen = new Promise<void>((resolve) => (seenNow = resolve));
      claimWaiters.set(kymaKey, [...(claimWaiters.get(kymaKey) ?? []), seenNow]);
      const queued = writing.has(kymaKey);
      writing.add(kymaKey);
      try {
        // The resourceVersion read is the precondition, as for the pass's claim: a claim the pass queued for the same
        // version then sees it written and writes nothing. Claimed already (our view lags): only wait for the view.
        if (!awaitingOwnWrite(kyma)) {
          await writeOwner(kyma, me);
          logger?.info({ kyma: kymaKey, from, forCallback: true }, 'Kyma claimed');
          const since = from === undefined ? undefined : goneSeenAt.get(from);
          if (since !== undefined) shard?.takeover((Date.now() - since) / 1000);
        }
      } catch (error) {
        // A conflict: the pass's claim (or the Kyma's own change) came first; our view tells who owns it now.
        logger?.debug({ err: error, kyma: kymaKey }, 'claim for a callback not written');
      } finally {
        if (!queued) writing.delete(kymaKey);
      }
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([
        seen,
        new Promise((resolve) => (timer = setTimeout(resolve, CALLBACK_CLAIM_WAIT_MS))),
      ]);
      clearTimeout(timer);
      const left = (claimWaiters.get(kymaKey) ?? []).filter((waiter) => waiter !== seenNow);
      if (left.length) claimWaiters.set(kymaKey, left);
      else claimWaiters.delete(kymaKey);
      return owns(kymaKey);
    },
    neededBuckets() {
      const needed = new Set<number>(byBucket ? bucketsOfRing() : []);
      for (const kyma of kymas.list()) {
        if (labelOf(kyma) === me || (!byBucket && ring.ownerOf(placeOf(kyma)) === me)) {
          needed.add(kyma.bucket);
        }
      }
      return needed;
    },
    labelsBucket: (bucket) => ring.ownerOf(bucketKey(bucket)) === me,
    onScopeChange: (listener) => scopeListeners.push(listener),
    resolveKyma(runtimeId) {
      const matches = kymas.byIndex(RUNTIME_ID_INDEX, runtimeId).map(objectKey).sort();
      const first = matches[0];
      if (!first) return undefined;
      const kyma = kymas.get(first) as KymaOwnership;
      return { namespace: kyma.metadata.namespace ?? namespace, name: kyma.metadata.name };
    },
    ownedKeys,
    idle: () => inFlight.size === 0,
    resumed() {
      const again = [...refused];
      refused.clear();
      for (const key of again) if (owns(key)) options.onAcquired(key);
      schedulePass();
    },
    renewed: (renewal) => pacer.renewed(renewal),
    suspended() {
      pacer.narrow();
      for (const key of inFlight.keys()) refused.add(key);
      withdrawAll('membership renewal overdue');
    },
    withdrawAll,
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
      const mine = kymas.list().filter((kyma) => labelOf(kyma) === me);
      let handed = 0;
      await Promise.all(
        mine.map((kyma) =>
          relabel(async () => {
            const to = others.ownerOf(placeOf(kyma));
            if (!to) return;
            await settledRuns(objectKey(kyma));
            await writeOwner(kymas.get(objectKey(kyma)) ?? kyma, to);
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
