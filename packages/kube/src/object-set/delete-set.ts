// Removal of objects of a set, in upstream's two phases: everything but the operator-related kinds first, then
// those (order.ts). A phase is done only when every object of it is gone; until then the next phase waits and
// the caller is told "not finished" (it comes back later; nothing here blocks waiting for finalizers).
import { PatchStrategy, type KubernetesObject } from '@kubernetes/client-node';
import { isNotFound, isUnknownKind, isUnreachable, KubeRequestError, readObject } from '../apply.js';
import type { ClusterClient } from '../cluster-client.js';
import { mapLimited } from './concurrency.js';
import { RELEASED_ANNOTATIONS, RELEASED_LABELS, removeClaim, type Holding } from './holders.js';
import { describeSynced, refOfSynced, uniqueSynced, type SyncedObject } from './inventory.js';
import { deletePhaseOf, neverPruned, type DeletePhase } from './order.js';

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
}

export interface Removal {
  /** True when every object is gone (or refused or kept, which are never deleted). */
  finished: boolean;
  results: RemovalResult[];
  /** The objects that may still exist: what the inventory must keep holding. */
  remaining: SyncedObject[];
}

const PHASES: readonly DeletePhase[] = ['dependents', 'operator'];

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
  let blockedBy: string | undefined;
  for (const phase of PHASES) {
    const members = deletable.filter((object) => deletePhaseOf(object) === phase);
    if (blockedBy !== undefined) {
      for (const object of members)
        results.set(object, { object, outcome: 'waiting', message: `waits until ${blockedBy} is gone` });
      continue;
    }
    const removed = await mapLimited(members, options.concurrency ?? 4, (object) =>
      removeOne(skr, object, options.holding),
    );
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

async function removeOne(
  skr: ClusterClient,
  object: SyncedObject,
  holding: Holding | undefined,
): Promise<RemovalResult> {
  const ref = refOfSynced(object);
  const what = describeSynced(object);
  try {
    let uid: string | undefined;
    if (holding) {
      const live = await readObject(skr.objects, ref);
      if (live === undefined) return { object, outcome: 'deleted', message: `${what} absent` };
      const claim = removeClaim(live, holding);
      if (claim.verdict === 'leave') return { object, outcome: 'kept', message: `${what} ${claim.why}` };
      if (claim.verdict === 'release') {
        await release(skr, live, what);
        return {
          object,
          outcome: 'kept',
          message: `${what} existed before the install; let go with its data, not deleted`,
        };
      }
      uid = live.metadata?.uid;
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
      if (isNotFound(error) || isUnknownKind(error))
        return { object, outcome: 'deleted', message: `${what} absent` };
      throw new KubeRequestError(`delete ${what}`, error);
    }
    // Most objects are gone once DELETE returns; those with finalizers (Namespaces, CRDs, CRs) take a while.
    if ((await readObject(skr.objects, ref)) === undefined)
      return { object, outcome: 'deleted', message: `deleted ${what}` };
    return { object, outcome: 'deleting', message: `${what} is being deleted (finalizers pending)` };
  } catch (error) {
    if (isUnreachable(error)) throw error;
    return { object, outcome: 'failed', message: error instanceof Error ? error.message : String(error) };
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
