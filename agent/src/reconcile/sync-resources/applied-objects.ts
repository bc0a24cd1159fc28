// What a SyncResource applies, named by identity: an item's object, the `applied` record an item's status keeps,
// and the SyncResource's inventory (what it may have put into the SKR), in the object-set engine's terms.
import type { RawSyncResource, SyncItemStatus } from '@skr-watcher/api';
import { refOfSynced, syncedObjectOfRef, uniqueSynced, type SyncedObject } from '@skr-watcher/kube';

/** The identity of one applied object, as `status.items[].applied` records it. */
export type Applied = NonNullable<SyncItemStatus['applied']>;

/** The identity of an item's object. */
export function identityOf(resource: {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
}): Applied {
  const namespace = resource.metadata.namespace;
  return {
    apiVersion: resource.apiVersion,
    kind: resource.kind,
    name: resource.metadata.name,
    ...(namespace ? { namespace } : {}),
  };
}

/** The `applied` record of an inventory entry: its address, as the engine names it. */
export function appliedOf(entry: SyncedObject): Applied {
  return refOfSynced(entry);
}

/** `Kind namespace/name`, as messages name an object. */
export function describeApplied(applied: Applied): string {
  return `${applied.kind} ${applied.namespace ? `${applied.namespace}/` : ''}${applied.name}`;
}

/** What this SyncResource may have put into the SKR: the recorded inventory and the `applied` records of items. */
export function inventoryOf(sync: RawSyncResource): SyncedObject[] {
  return uniqueSynced([
    ...(sync.status?.synced ?? []),
    ...(sync.status?.items ?? []).flatMap((item) => (item.applied ? [syncedObjectOfRef(item.applied)] : [])),
  ]);
}
