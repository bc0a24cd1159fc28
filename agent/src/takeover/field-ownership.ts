// Moving server-side apply ownership from one field manager to another without touching an object's content
// (decision 028). The fields the old managers own are merged into the new manager's Apply entry and the old entries
// removed, in one write of `metadata.managedFields` guarded by the resourceVersion read, as client-go's csaupgrade
// does for kubectl's move to server-side apply. An apply by the new manager alone would leave the old entries
// co-owning every field: a field the new manager later stops applying would then stay in the object for good.
import { PatchStrategy, type KubernetesObject } from '@kubernetes/client-node';
import {
  describeRef,
  isConflict,
  isNotFound,
  isUnknownKind,
  KubeRequestError,
  withContext,
  type DiscoveringObjectApi,
  type ObjectRef,
} from '@skr-watcher/kube';

/** A field set as the API server writes it (FieldsV1): nested keys, leaves `{}`. */
export type FieldSet = { [key: string]: FieldSet };

/** One entry of `metadata.managedFields`, as read. */
export interface ManagedFieldsEntry {
  manager?: string;
  operation?: string;
  apiVersion?: string;
  time?: string | Date;
  fieldsType?: string;
  fieldsV1?: FieldSet;
  subresource?: string;
}

/** The union of two field sets: a field either owns, the new owner owns. */
export function unionOfFields(a: FieldSet = {}, b: FieldSet = {}): FieldSet {
  const union: FieldSet = { ...a };
  for (const [key, value] of Object.entries(b)) union[key] = unionOfFields(union[key], value);
  return union;
}

/**
 * The managed fields with every entry of a manager in `from` merged into `to`'s Apply entry of the same
 * subresource (created from the old entry when `to` has none); undefined when no entry of `from` is there.
 */
export function transferredEntries(
  entries: readonly ManagedFieldsEntry[],
  from: readonly string[],
  to: string,
): ManagedFieldsEntry[] | undefined {
  const leaving = (entry: ManagedFieldsEntry) =>
    entry.manager !== undefined && entry.manager !== to && from.includes(entry.manager);
  if (!entries.some(leaving)) return undefined;
  const next = entries.filter((entry) => !leaving(entry)).map((entry) => ({ ...entry }));
  for (const old of entries.filter(leaving)) {
    const subresource = old.subresource ?? '';
    const target = next.find(
      (entry) =>
        entry.manager === to && entry.operation === 'Apply' && (entry.subresource ?? '') === subresource,
    );
    if (target) {
      target.fieldsV1 = unionOfFields(target.fieldsV1, old.fieldsV1);
      continue;
    }
    next.push({ ...old, manager: to, operation: 'Apply', fieldsType: 'FieldsV1' });
  }
  return next;
}

/** What a transfer did to one object. */
export type TransferOutcome = 'moved' | 'unchanged' | 'absent';

/**
 * Moves the fields `from` owns on the object to `to`: one merge patch of `metadata.managedFields` guarded by the
 * resourceVersion read (a writer in between makes it read again, up to three times). The object's content is not
 * part of the write, so only its resourceVersion and managed fields change. `dryRun`: read only, answer what
 * would be done.
 */
export async function transferFieldOwnership(
  objects: DiscoveringObjectApi,
  ref: ObjectRef,
  from: readonly string[],
  to: string,
  dryRun = false,
): Promise<TransferOutcome> {
  const what = describeRef(ref);
  for (let attempt = 1; ; attempt++) {
    let live: KubernetesObject;
    try {
      live = await objects.readMetadata(objectOf(ref));
    } catch (error) {
      if (isNotFound(error) || isUnknownKind(error)) return 'absent';
      throw new KubeRequestError(`read the managed fields of ${what}`, error);
    }
    const entries = (live.metadata?.managedFields ?? []) as ManagedFieldsEntry[];
    const next = transferredEntries(entries, from, to);
    if (next === undefined) return 'unchanged';
    if (dryRun) return 'moved';
    const patch = {
      ...objectOf(ref),
      metadata: {
        ...objectOf(ref).metadata,
        resourceVersion: live.metadata?.resourceVersion,
        // client-node writes a known kind's times through its Date model: hand it Dates, whatever was read.
        managedFields: next.map((entry) => ({
          ...entry,
          ...(entry.time ? { time: new Date(entry.time) } : {}),
        })),
      },
    } as KubernetesObject;
    let written: KubernetesObject;
    try {
      written = await withContext(`move the managed fields of ${what} to ${to}`, () =>
        objects.patch(patch, undefined, undefined, undefined, undefined, PatchStrategy.MergePatch),
      );
    } catch (error) {
      if (isNotFound(error)) return 'absent';
      if (!isConflict(error) || attempt >= 3) throw error;
      continue;
    }
    // An API server that cannot decode managed fields written to it keeps the old ones without an error.
    const kept = ((written.metadata?.managedFields ?? []) as ManagedFieldsEntry[]).filter((entry) =>
      from.includes(entry.manager ?? ''),
    );
    if (kept.length > 0)
      throw new Error(`move the managed fields of ${what} to ${to}: the API server kept them`);
    return 'moved';
  }
}

function objectOf(ref: ObjectRef): KubernetesObject & { metadata: { name: string; namespace?: string } } {
  return {
    apiVersion: ref.apiVersion,
    kind: ref.kind,
    metadata: { name: ref.name, ...(ref.namespace ? { namespace: ref.namespace } : {}) },
  };
}
