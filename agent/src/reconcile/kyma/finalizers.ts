// Adding and removing our finalizer with optimistic concurrency: the list is patched together with the
// resourceVersion it was read at; on a conflict the object is read again and the change retried.
import { KYMA_FINALIZER, isRecord } from '@skr-watcher/api';
import { getCustomObject, isConflict, mergePatchCustomObject, type CustomObjectRef } from '@skr-watcher/kube';
import type { ReconcileContext } from '../context.js';

const ATTEMPTS = 3;

interface Seen {
  finalizers?: string[] | undefined;
  resourceVersion?: string | undefined;
}

function metadataOf(object: unknown): Seen | undefined {
  if (!isRecord(object) || !isRecord(object['metadata'])) return undefined;
  const { finalizers, resourceVersion } = object['metadata'];
  return {
    finalizers: Array.isArray(finalizers) ? finalizers.filter((f): f is string => typeof f === 'string') : [],
    ...(typeof resourceVersion === 'string' ? { resourceVersion } : {}),
  };
}

/**
 * The object's resourceVersion as the change left it: the answer of its write, or the one `seen` carried when there
 * was nothing to change; undefined after a conflict (the version the change went on from was not the caller's).
 */
async function changeFinalizers(
  ctx: ReconcileContext,
  ref: CustomObjectRef,
  seen: Seen,
  change: (finalizers: string[]) => string[] | undefined,
): Promise<string | undefined> {
  let current: Seen | undefined = seen;
  for (let attempt = 1; current; attempt++) {
    const next = change(current.finalizers ?? []);
    if (!next) return attempt === 1 ? current.resourceVersion : undefined;
    try {
      const written = await mergePatchCustomObject(ctx.kcp.custom, ref, {
        metadata: { finalizers: next, resourceVersion: current.resourceVersion },
      });
      return attempt === 1 ? metadataOf(written)?.resourceVersion : undefined;
    } catch (error) {
      if (!isConflict(error) || attempt >= ATTEMPTS) throw error;
    }
    current = metadataOf(await getCustomObject(ctx.kcp.custom, ref));
  }
  return undefined;
}

/** Adds our finalizer unless present; `seen` is the metadata the caller read. */
export function addFinalizer(ctx: ReconcileContext, ref: CustomObjectRef, seen: Seen): Promise<void> {
  return addFinalizerAt(ctx, ref, seen).then(() => undefined);
}

/** addFinalizer, answering the resourceVersion it left the object at (see changeFinalizers). */
export function addFinalizerAt(
  ctx: ReconcileContext,
  ref: CustomObjectRef,
  seen: Seen,
): Promise<string | undefined> {
  return changeFinalizers(ctx, ref, seen, (finalizers) =>
    finalizers.includes(KYMA_FINALIZER) ? undefined : [...finalizers, KYMA_FINALIZER],
  );
}

/** Removes our finalizer if present (a gone object counts as done). */
export function dropFinalizer(ctx: ReconcileContext, ref: CustomObjectRef, seen: Seen): Promise<void> {
  return changeFinalizers(ctx, ref, seen, (finalizers) =>
    finalizers.includes(KYMA_FINALIZER) ? finalizers.filter((f) => f !== KYMA_FINALIZER) : undefined,
  ).then(() => undefined);
}
