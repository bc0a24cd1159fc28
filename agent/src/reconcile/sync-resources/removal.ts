// Removing what a SyncResource applied from the SKR: when the SyncResource is deleted (its finalizer keeps it until
// its objects are gone) and when its Kyma is deleted. Objects go in the engine's two phases; the agent's own
// objects, what the allow-list excludes and what another holder holds are never deleted.
import { parseSyncItem, ShapeError, type RawSyncResource } from '@skr-watcher/api';
import {
  removeObjects,
  syncedObjectOfRef,
  uniqueSynced,
  type ClusterClient,
  type Removal,
  type RemovalResult,
} from '@skr-watcher/kube';
import { agentOwnedObjects, type AgentOwnedObjects } from '../agent-owned.js';
import { refOf, type ReconcileContext } from '../context.js';
import { addFinalizer, dropFinalizer } from '../kyma/finalizers.js';
import { identityOf, inventoryOf } from './applied-objects.js';
import { guardOf, holdingOf } from './item-guard.js';
import { writeStatus, type StatusWriter, type SyncResourceOutcome } from './item-status.js';

/** What a removal needs of the reconciler: where the SyncResource lives and the allow-list. */
type RemovalContext = Pick<ReconcileContext, 'namespace' | 'syncResourcePolicy'>;

/**
 * Removes every object this SyncResource applied (its inventory and the current items of the create strategies),
 * in the engine's two phases; the agent's own objects and what the allow-list excludes are never deleted.
 */
function removeAll(
  ctx: RemovalContext,
  skr: ClusterClient,
  sync: RawSyncResource,
  owned: AgentOwnedObjects,
): Promise<Removal> {
  const targets = [...inventoryOf(sync), ...currentItemObjects(sync)];
  const guard = guardOf(ctx.syncResourcePolicy, owned);
  // Refused targets were never applied by this SyncResource: not part of the removal at all.
  return removeObjects(
    skr,
    uniqueSynced(targets).filter((target) => !guard(target)),
    { refuse: guard, holding: holdingOf(ctx.namespace, sync.metadata.name) },
  );
}

/** The objects of the spec's create items (CreateAndSync, CreateAndIgnore); malformed items name none. */
function currentItemObjects(sync: RawSyncResource) {
  return sync.spec.items.flatMap((raw) => {
    try {
      const item = parseSyncItem(raw, 'item');
      return item.strategy === 'Delete' ? [] : [syncedObjectOfRef(identityOf(item.resource))];
    } catch (error) {
      if (!(error instanceof ShapeError)) throw error;
      return [];
    }
  });
}

/** The results of the objects that may still exist. */
function pendingOf(removal: Removal): RemovalResult[] {
  return removal.results.filter((result) => removal.remaining.includes(result.object));
}

/**
 * A deleted SyncResource: removes what it applied and then its finalizer; while objects are still being deleted
 * (finalizers) or a phase waits, records what is left and answers Processing, to be looked at again.
 */
export async function finishDeletion(
  ctx: ReconcileContext,
  skr: ClusterClient,
  sync: RawSyncResource,
  owned: AgentOwnedObjects,
): Promise<SyncResourceOutcome> {
  const name = sync.metadata.name;
  const removal = await removeAll(ctx, skr, sync, owned);
  if (removal.finished) {
    await removeFinalizer(ctx, sync);
    return { name, state: 'Ready', failures: [] };
  }
  const pending = pendingOf(removal)[0];
  await writeStatus(
    ctx,
    sync,
    'Deleting',
    sync.status?.items ?? [],
    removal.remaining,
    `removing applied objects: ${pending?.message ?? 'not finished'}`,
  );
  return { name, state: 'Processing', failures: [] };
}

/**
 * Removes every object this SyncResource applied to the SKR (the Kyma is being deleted). Throws while the removal
 * is not finished, so the caller retries the Kyma's cleanup as a whole.
 */
export async function removeAppliedObjects(
  ctx: RemovalContext & StatusWriter,
  skr: ClusterClient,
  sync: RawSyncResource,
  owned: AgentOwnedObjects = agentOwnedObjects(),
): Promise<void> {
  const removal = await removeAll(ctx, skr, sync, owned);
  if (!removal.finished) {
    throw new Error(
      `removing the objects of SyncResource ${ctx.namespace}/${sync.metadata.name} is not finished: ${pendingOf(
        removal,
      )
        .map((result) => result.message)
        .join('; ')}`,
    );
  }
  if ((sync.status?.items?.length ?? 0) > 0 || (sync.status?.synced?.length ?? 0) > 0) {
    if (!sync.metadata.deletionTimestamp)
      await writeStatus(ctx, sync, 'Ready', [], [], 'removed applied objects from the SKR: Kyma deleted');
  }
}

/** Our finalizer keeps a deleted SyncResource until what it applied is gone from the SKR. */
export function ensureFinalizer(ctx: ReconcileContext, sync: RawSyncResource): Promise<void> {
  return addFinalizer(ctx, refOf('syncResource', ctx.namespace, sync.metadata.name), sync.metadata);
}

export function removeFinalizer(ctx: ReconcileContext, sync: RawSyncResource): Promise<void> {
  return dropFinalizer(ctx, refOf('syncResource', ctx.namespace, sync.metadata.name), sync.metadata);
}
