// The status of one SyncResource: an item's status record, the items that left the set while their objects are
// still being removed, the SyncResource's outcome (its state and failed items, as the Kyma's status names them),
// whether anything of that changed since the status the SyncResource carries, and the status write itself.
import { isDeepStrictEqual } from 'node:util';
import {
  FIELD_MANAGER,
  KINDS,
  type RawSyncResource,
  type ResourceState,
  type SyncItemStatus,
} from '@skr-watcher/api';
import {
  applyCustomStatus,
  syncedKey,
  syncedObjectOfRef,
  type ApplySetResult,
  type RemovalResult,
  type SyncedObject,
} from '@skr-watcher/kube';
import { apiVersionOf, refOf, type ReconcileContext } from '../context.js';
import type { Applied } from './applied-objects.js';

/** A failed item, as `<syncresource>/<item>` with a message. */
export interface SyncResourceFailure {
  name: string;
  message: string;
}

export interface SyncResourceOutcome {
  name: string;
  state: ResourceState;
  /** Items that failed, as `<syncresource>/<item>` with a message. */
  failures: SyncResourceFailure[];
}

/** What a status write needs of the reconciler: the KCP client, the namespace, the clock. */
export type StatusWriter = Pick<ReconcileContext, 'kcp' | 'namespace' | 'clock'>;

export function itemStatus(
  name: string,
  state: ResourceState,
  message: string,
  applied: Applied | undefined,
): SyncItemStatus {
  return { name, state, message, ...(applied ? { applied } : {}) };
}

function keyOfApplied(applied: Applied): string {
  return syncedKey(syncedObjectOfRef(applied));
}

/**
 * The items of the last status that left the spec while the object they applied is still in the inventory: they
 * stay visible under their name until that object is gone.
 */
export function droppedItemStatuses(
  previous: Map<string, SyncItemStatus>,
  statuses: SyncItemStatus[],
  applied: Pick<ApplySetResult, 'inventory' | 'pruned'>,
): SyncItemStatus[] {
  const named = new Set(statuses.map((status) => status.name));
  const current = new Set(
    statuses.flatMap((status) => (status.applied ? [keyOfApplied(status.applied)] : [])),
  );
  const stillThere = new Set(applied.inventory.map(syncedKey).filter((key) => !current.has(key)));
  const dropped: SyncItemStatus[] = [];
  for (const [name, before] of previous) {
    if (named.has(name) || !before.applied || !stillThere.has(keyOfApplied(before.applied))) continue;
    dropped.push(droppedItemStatus(before, before.applied, applied.pruned));
  }
  return dropped;
}

function droppedItemStatus(before: SyncItemStatus, record: Applied, pruned: RemovalResult[]): SyncItemStatus {
  const key = keyOfApplied(record);
  const pruning = pruned.find((result) => syncedKey(result.object) === key);
  return {
    ...before,
    state: pruning?.outcome === 'failed' ? 'Error' : 'Processing',
    message: pruning
      ? `removing dropped item: ${pruning.message}`
      : 'dropped item: removed once the new items are applied',
  };
}

/** A SyncResource's failed items, named `<syncresource>/<item>`. */
export function failuresOf(syncName: string, items: SyncItemStatus[] | undefined): SyncResourceFailure[] {
  return (items ?? [])
    .filter((item) => item.state === 'Error')
    .map((item) => ({ name: `${syncName}/${item.name}`, message: item.message ?? 'failed' }));
}

/** Whether the status to write differs from the one the SyncResource carries (its timestamps aside). */
export function statusChanged(
  sync: RawSyncResource,
  state: ResourceState,
  items: SyncItemStatus[],
  synced: SyncedObject[],
): boolean {
  return (
    sync.status?.state !== state ||
    sync.status?.observedGeneration !== sync.metadata.generation ||
    !isDeepStrictEqual(comparable(sync.status?.items), comparable(items)) ||
    !isDeepStrictEqual(sync.status?.synced ?? [], synced)
  );
}

function comparable(items: SyncItemStatus[] | undefined) {
  return (items ?? []).map(({ name, state, message, applied }) => ({ name, state, message, applied }));
}

export async function writeStatus(
  ctx: StatusWriter,
  sync: RawSyncResource,
  state: ResourceState,
  items: SyncItemStatus[],
  synced: SyncedObject[],
  operation: string,
): Promise<void> {
  await applyCustomStatus(
    ctx.kcp.custom,
    refOf('syncResource', ctx.namespace, sync.metadata.name),
    {
      apiVersion: apiVersionOf('syncResource'),
      kind: KINDS.syncResource.kind,
      metadata: { name: sync.metadata.name, namespace: ctx.namespace },
      status: {
        state,
        items,
        synced,
        ...(sync.metadata.generation !== undefined ? { observedGeneration: sync.metadata.generation } : {}),
        lastOperation: { operation, lastUpdateTime: ctx.clock().toISOString() },
      },
    },
    { fieldManager: FIELD_MANAGER, force: true },
  );
}
