// Identity of the objects of a set, in the inventory's shape (`status.synced`): group, version, kind, name and
// namespace ("" when cluster-scoped). Two objects are the same member of a set only when all five are equal.
import type { KubernetesObject } from '@kubernetes/client-node';
import { splitApiVersion, type SyncedObject } from '@skr-watcher/api';
import type { ObjectRef } from '../apply.js';

export type { SyncedObject };

/** An object of a set as callers hand it over: apiVersion, kind and metadata.name at least, the rest as written. */
export type SetMember = KubernetesObject &
  Record<string, unknown> & {
    apiVersion: string;
    kind: string;
    metadata: KubernetesObject['metadata'] & { name: string };
  };

/** The inventory entry of an object. */
export function syncedObjectOf(object: {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string | undefined };
}): SyncedObject {
  const { group, version } = splitApiVersion(object.apiVersion);
  return {
    group,
    version,
    kind: object.kind,
    name: object.metadata.name,
    namespace: object.metadata.namespace ?? '',
  };
}

/** The inventory entry of an address given as apiVersion/kind/name/namespace (SyncResource's `applied`). */
export function syncedObjectOfRef(ref: ObjectRef): SyncedObject {
  return syncedObjectOf({
    apiVersion: ref.apiVersion,
    kind: ref.kind,
    metadata: { name: ref.name, namespace: ref.namespace },
  });
}

export function apiVersionOfSynced(entry: Pick<SyncedObject, 'group' | 'version'>): string {
  return entry.group ? `${entry.group}/${entry.version}` : entry.version;
}

/** The address of an inventory entry, for reads and deletes. */
export function refOfSynced(entry: SyncedObject): ObjectRef {
  return {
    apiVersion: apiVersionOfSynced(entry),
    kind: entry.kind,
    name: entry.name,
    ...(entry.namespace ? { namespace: entry.namespace } : {}),
  };
}

/** A key for maps and sets; equal exactly when the identities are. */
export function syncedKey(entry: SyncedObject): string {
  return [entry.group, entry.version, entry.kind, entry.namespace, entry.name].join('\0');
}

/** `Kind group/namespace/name` for messages: `Deployment apps kyma-system/operator`, `Namespace web`. */
export function describeSynced(entry: SyncedObject): string {
  const kind = entry.group ? `${entry.kind}.${entry.group}` : entry.kind;
  return `${kind} ${entry.namespace ? `${entry.namespace}/` : ''}${entry.name}`;
}

/** `entries` without duplicates, first occurrence kept, in order. */
export function uniqueSynced(entries: Iterable<SyncedObject>): SyncedObject[] {
  const seen = new Map<string, SyncedObject>();
  for (const entry of entries) if (!seen.has(syncedKey(entry))) seen.set(syncedKey(entry), entry);
  return [...seen.values()];
}

/** Entries of `previous` that `next` does not hold: what left the set. */
export function leftTheSet(previous: Iterable<SyncedObject>, next: Iterable<SyncedObject>): SyncedObject[] {
  const kept = new Set([...next].map(syncedKey));
  return uniqueSynced([...previous].filter((entry) => !kept.has(syncedKey(entry))));
}

/** Whether two inventories hold the same objects, whatever their order. */
export function sameInventory(a: readonly SyncedObject[], b: readonly SyncedObject[]): boolean {
  const left = new Set(a.map(syncedKey));
  const right = new Set(b.map(syncedKey));
  return left.size === right.size && [...left].every((key) => right.has(key));
}
