// Removal of objects of a set, in upstream's two phases: everything but the operator-related kinds first, then
// those (order.ts). A phase is done only when every object of it is gone; until then the next phase waits and
// the caller is told "not finished" (it comes back later). Nothing here waits for others' finalizers; a deletion the
// API server finishes by itself (a CRD's instance cleanup) is waited for briefly, so that a removal which only waits for
// that goes on in the same call instead of costing the caller another pass.
import { PatchStrategy, type KubernetesObject } from '@kubernetes/client-node';
import { isNotFound, isUnknownKind, isUnreachable, KubeRequestError, readObject } from '../apply.js';
import type { ClusterClient } from '../cluster-client.js';
import { mapLimited } from './concurrency.js';
import { RELEASED_ANNOTATIONS, RELEASED_LABELS, removeClaim, type Holding } from './holders.js';
import { describeSynced, refOfSynced, uniqueSynced, type SyncedObject } from './inventory.js';
import { deletePhaseOf, isNamespace, neverPruned, type DeletePhase } from './order.js';
import { nextPollMs, pause } from './poll.js';

export type RemovalOutcome = 'deleted' | 'deleting' | 'waiting' | 'failed' | 'refused' | 'kept';

export interface RemovalResult {
  object: SyncedObject;
  /**
   * `deleted`: gone from the SKR; `deleting`: deletion accepted, the object still exists (finalizers);
   * `waiting`: not deleted yet, its phase comes later; `failed`: the API server refused (message says why);
   * `refused`: the caller's guard forbids touching it; `kept`: never removed (the kyma-system Namespace), or, with
   * a holding, another holder's or nobody's (left as it is) or adopted (let go with its data).
   */
  outcome: RemovalOutcome;
  message: string;
}

export interface RemovalOptions {
  /** Why this object must not be touched; undefined when it may. */
  refuse?: ((object: SyncedObject) => string | undefined) | undefined;
  concurrency?: number | undefined;
  /** Who removes (holders.ts): each object is read first and deleted only when this set holds it. */
  holding?: Holding | undefined;
  /**
   * How long this removal may wait for deletions it started that the API server finishes by itself
   * (REMOVAL_SETTLE.budgetMs unless given; 0: none, a phase with such an object ends the removal "not finished").
   */
  settleMs?: number | undefined;
}

export interface Removal {
  /** True when every object is gone (or refused or kept, which are never deleted). */
  finished: boolean;
  results: RemovalResult[];
  /** The objects that may still exist: what the inventory must keep holding. */
  remaining: SyncedObject[];
}

const PHASES: readonly DeletePhase[] = ['dependents', 'operator'];

/**
 * Re-reads of objects whose deletion the API server finishes by itself: a CRD without instances is gone within tens
 * of milliseconds of its DELETE, and a removal that ended there would wait for the next pass (a watch event or a
 * requeue, hundreds of milliseconds to seconds later). Past the budget the removal reports "not finished" as before.
 */
export const REMOVAL_SETTLE = { firstMs: 10, maxMs: 250, budgetMs: 2_000 } as const;

/** kube-apiserver's own finalizer on a deleted CRD: dropped once its instances are deleted (apiextensions). */
const CRD_CLEANUP_FINALIZER = 'customresourcecleanup.apiextensions.k8s.io';

/** One object's removal, and whether the API server alone finishes its deletion (worth a brief wait). */
interface Attempt {
  result: RemovalResult;
  settles: boolean;
}

/** Deletes `objects` phase by phase; a later phase starts only once every object of the earlier one is gone. */
export async function removeObjects(
  skr: ClusterClient,
  given: readonly SyncedObject[],
  options: RemovalOptions = {},
): Promise<Removal> {
  const objects = uniqueSynced(given);
  const results = new Map<SyncedObject, RemovalResult>();
  const deletable: SyncedObject[] = [];
  for (const object of objects) {
    const refusal = options.refuse?.(object);
    if (refusal) results.set(object, { object, outcome: 'refused', message: refusal });
    else if (neverPruned(object))
      results.set(object, { object, outcome: 'kept', message: `${describeSynced(object)} is never removed` });
    else deletable.push(object);
  }
  const concurrency = options.concurrency ?? 4;
  const settleUntil = Date.now() + (options.settleMs ?? REMOVAL_SETTLE.budgetMs);
  let blockedBy: string | undefined;
  for (const phase of PHASES) {
    const members = deletable.filter((object) => deletePhaseOf(object) === phase);
    if (blockedBy !== undefined) {
      for (const object of members)
        results.set(object, { object, outcome: 'waiting', message: `waits until ${blockedBy} is gone` });
      continue;
    }
    const attempts = await mapLimited(members, concurrency, (object) =>
      removeOne(skr, object, options.holding),
    );
    const removed = await settle(skr, attempts, settleUntil, concurrency);
    for (const result of removed) results.set(result.object, result);
    const pending = removed.find((result) => result.outcome !== 'deleted');
    if (pending) blockedBy = describeSynced(pending.object);
  }
  const ordered = objects.map((object) => results.get(object) as RemovalResult);
  return {
    finished: ordered.every(
      (result) =>
        result.outcome !== 'deleting' && result.outcome !== 'waiting' && result.outcome !== 'failed',
    ),
    results: ordered,
    remaining: ordered
      .filter(
        (result) =>
          result.outcome === 'deleting' || result.outcome === 'waiting' || result.outcome === 'failed',
      )
      .map((result) => result.object),
  };
}

/**
 * Waits (until `deadline`) for the objects of a phase still being deleted, when the API server alone finishes every
 * one of them; answers the phase's results, those gone meanwhile as deleted. One held by another finalizer keeps the
 * phase waiting anyway: then nothing is waited for.
 */
async function settle(
  skr: ClusterClient,
  attempts: readonly Attempt[],
  deadline: number,
  concurrency: number,
): Promise<RemovalResult[]> {
  const results = attempts.map((attempt) => attempt.result);
  const pending = attempts.filter((attempt) => attempt.result.outcome !== 'deleted');
  if (pending.length === 0 || pending.some((attempt) => !attempt.settles)) return results;
  let left = pending.map((attempt) => attempt.result);
  for (let pollMs = 0; left.length > 0 && Date.now() < deadline;) {
    pollMs = nextPollMs(pollMs, REMOVAL_SETTLE);
    await pause(Math.min(pollMs, Math.max(0, deadline - Date.now())));
    const present = await mapLimited(left, concurrency, async (result) => {
      try {
        return (await readObject(skr.objects, refOfSynced(result.object))) !== undefined;
      } catch (error) {
        if (isUnreachable(error)) throw error;
        // A read that failed says nothing: the object counts as still there, the next pass looks again.
        return true;
      }
    });
    left = left.filter((_, index) => present[index]);
  }
  return results.map((result) =>
    result.outcome === 'deleted' || left.includes(result)
      ? result
      : { ...result, outcome: 'deleted', message: `deleted ${describeSynced(result.object)}` },
  );
}

/**
 * Whether nothing but the API server holds a deleted object: no finalizer other than a CRD's instance cleanup, no
 * grace period (a Pod's is the kubelet's) and not a Namespace (the namespace controller empties it first, for seconds).
 */
function finishedByTheApiServer(object: SyncedObject, live: KubernetesObject): boolean {
  if (isNamespace(object) || (live.metadata?.deletionGracePeriodSeconds ?? 0) > 0) return false;
  return (live.metadata?.finalizers ?? []).every((finalizer) => finalizer === CRD_CLEANUP_FINALIZER);
}

async function removeOne(
  skr: ClusterClient,
  object: SyncedObject,
  holding: Holding | undefined,
): Promise<Attempt> {
  const done = (outcome: RemovalOutcome, message: string): Attempt => ({
    result: { object, outcome, message },
    settles: false,
  });
  const ref = refOfSynced(object);
  const what = describeSynced(object);
  try {
    let uid: string | undefined;
    // Only a deletion this call starts is waited for: one already under way in an earlier pass waits for more.
    let deletingBefore = false;
    if (holding) {
      const live = await readObject(skr.objects, ref);
      if (live === undefined) return done('deleted', `${what} absent`);
      const claim = removeClaim(live, holding);
      if (claim.verdict === 'leave') return done('kept', `${what} ${claim.why}`);
      if (claim.verdict === 'release') {
        await release(skr, live, what);
        return done('kept', `${what} existed before the install; let go with its data, not deleted`);
      }
      uid = live.metadata?.uid;
      deletingBefore = live.metadata?.deletionTimestamp !== undefined;
    }
    try {
      await skr.objects.delete(
        {
          apiVersion: ref.apiVersion,
          kind: ref.kind,
          metadata: { name: ref.name, ...(ref.namespace ? { namespace: ref.namespace } : {}) },
        },
        undefined,
        undefined,
        undefined,
        undefined,
        'Background',
        // The object that was read, not one made again since by someone else under the same name.
        uid ? { preconditions: { uid } } : undefined,
      );
    } catch (error) {
      if (isNotFound(error) || isUnknownKind(error)) return done('deleted', `${what} absent`);
      throw new KubeRequestError(`delete ${what}`, error);
    }
    // Most objects are gone once DELETE returns; those with finalizers (Namespaces, CRDs, CRs) take a while.
    const after = await readObject(skr.objects, ref);
    if (after === undefined) return done('deleted', `deleted ${what}`);
    return {
      result: { object, outcome: 'deleting', message: `${what} is being deleted (finalizers pending)` },
      settles: !deletingBefore && finishedByTheApiServer(object, after),
    };
  } catch (error) {
    if (isUnreachable(error)) throw error;
    return done('failed', error instanceof Error ? error.message : String(error));
  }
}

/** Removes the holder marks (a JSON merge patch setting them to null, RFC 7386); the rest of the object stays. */
async function release(skr: ClusterClient, live: KubernetesObject, what: string): Promise<void> {
  const patch = {
    apiVersion: live.apiVersion,
    kind: live.kind,
    metadata: {
      name: live.metadata?.name,
      ...(live.metadata?.namespace ? { namespace: live.metadata.namespace } : {}),
      labels: Object.fromEntries(RELEASED_LABELS.map((label) => [label, null])),
      annotations: Object.fromEntries(RELEASED_ANNOTATIONS.map((annotation) => [annotation, null])),
    },
  } as unknown as KubernetesObject;
  try {
    await skr.objects.patch(patch, undefined, undefined, undefined, undefined, PatchStrategy.MergePatch);
  } catch (error) {
    if (isNotFound(error)) return;
    throw new KubeRequestError(`let go of ${what}`, error);
  }
}
