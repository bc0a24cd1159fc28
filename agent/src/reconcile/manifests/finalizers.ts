// The Manifest's finalizers: added before anything is installed (so a deleted Manifest cannot leave its module's
// objects behind) and dropped once its module is removed or left, each write guarded by the resourceVersion it read.
// Lifecycle-manager's finalizers on a Manifest it wrote are honoured the same way, and a takeover swaps them for the
// agent's in one write (decision 028).
import { LIFECYCLE_MANAGER, MANIFEST, parseManifest, type Manifest } from '@skr-watcher/api';
import { getCustomObject, isConflict, mergePatchCustomObject } from '@skr-watcher/kube';
import type { Logger } from '@skr-watcher/telemetry';
import {
  hasDefaultCr,
  hasOwnFinalizer,
  OWN_FINALIZERS,
  refOfManifest,
  type ManifestStore,
} from './manifest.js';

/** What adding finalizers needs: the Manifest's store and a log line for what was added. */
export interface FinalizerWriter extends ManifestStore {
  logger: Pick<Logger, 'info'>;
}

/** The Manifest's finalizers set to `next`, guarded by the resourceVersion it was read at (409 when it moved on). */
async function setFinalizers(ctx: ManifestStore, manifest: Manifest, next: string[]): Promise<Manifest> {
  const written = await mergePatchCustomObject(ctx.kcp.custom, refOfManifest(manifest), {
    metadata: { finalizers: next, resourceVersion: manifest.metadata.resourceVersion },
  });
  return parseManifest(written, `Manifest ${manifest.metadata.name}`);
}

/**
 * Writes the finalizers `change` makes of the Manifest's (undefined: nothing to write); answers the Manifest as
 * written. When another writer was first (the bucket label a sharded replica puts on a Manifest written without it,
 * a user), the Manifest is read again and the change made once more, up to three times, then the pass fails.
 */
async function changeFinalizers(
  ctx: FinalizerWriter,
  manifest: Manifest,
  change: (
    finalizers: string[],
  ) => { next: string[]; log: Record<string, unknown>; message: string } | undefined,
): Promise<Manifest> {
  for (let attempt = 1; ; attempt++) {
    const wanted = change(manifest.metadata.finalizers ?? []);
    if (wanted === undefined) return manifest;
    try {
      const written = await setFinalizers(ctx, manifest, wanted.next);
      ctx.logger.info(
        { manifest: `${manifest.metadata.namespace}/${manifest.metadata.name}`, ...wanted.log },
        wanted.message,
      );
      return written;
    } catch (error) {
      if (!isConflict(error) || attempt >= 3) throw error;
      const fresh = await getCustomObject(ctx.kcp.custom, refOfManifest(manifest));
      // Gone meanwhile: this pass ends here, and the next one finds it gone.
      if (fresh === undefined) throw error;
      manifest = parseManifest(fresh, `Manifest ${manifest.metadata.name}`);
    }
  }
}

/**
 * Adds the finalizers of `wanted` the Manifest lacks; answers the Manifest as written. A pass must not go on
 * without them, since a Manifest deleted without its finalizers leaves its module's objects in the SKR, and nothing
 * else brings the Kyma back before its next resync (a fleet of 5,000 Kymas on three replicas lost them on about one
 * Manifest in twenty when a conflict ended the attempt).
 */
export function ensureFinalizers(
  ctx: FinalizerWriter,
  manifest: Manifest,
  wanted: string[],
): Promise<Manifest> {
  return changeFinalizers(ctx, manifest, (finalizers) => {
    const missing = wanted.filter((f) => !finalizers.includes(f));
    if (missing.length === 0) return undefined;
    return {
      next: [...finalizers, ...missing],
      log: { finalizers: missing },
      message: 'Manifest finalizers added',
    };
  });
}

/**
 * The finalizers of `leaving` on the Manifest swapped for `arriving` in one write, so the Manifest is never without
 * one that guards its module's removal; answers the Manifest as written (unchanged when it holds none of `leaving`).
 */
function swapFinalizers(
  ctx: FinalizerWriter,
  manifest: Manifest,
  leaving: readonly string[],
  arriving: readonly string[],
  message: string,
): Promise<Manifest> {
  return changeFinalizers(ctx, manifest, (finalizers) => {
    const removed = finalizers.filter((f) => leaving.includes(f));
    if (removed.length === 0) return undefined;
    const kept = finalizers.filter((f) => !leaving.includes(f));
    return {
      next: [...kept, ...arriving.filter((f) => !kept.includes(f))],
      log: { removed, added: arriving },
      message,
    };
  });
}

/** Takeover: lifecycle-manager's finalizers replaced by the agent's (decision 028). */
export function takeOverFinalizers(ctx: FinalizerWriter, manifest: Manifest): Promise<Manifest> {
  return swapFinalizers(
    ctx,
    manifest,
    LIFECYCLE_MANAGER.finalizers,
    [MANIFEST.finalizer],
    "Manifest taken over: lifecycle-manager's finalizers replaced by the agent's",
  );
}

/**
 * Rollback: the agent's finalizer replaced by the ones lifecycle-manager puts on such a Manifest (its CR finalizer
 * only while it keeps a default CR), so that lifecycle-manager, started again, removes the module as its own.
 */
export function handBackFinalizers(ctx: FinalizerWriter, manifest: Manifest): Promise<Manifest> {
  const [install, labelRemoval, resource] = LIFECYCLE_MANAGER.finalizers;
  const upstream = [install!, labelRemoval!, ...(hasDefaultCr(manifest) ? [resource!] : [])];
  return swapFinalizers(
    ctx,
    manifest,
    [MANIFEST.finalizer],
    upstream,
    "Manifest handed back: the agent's finalizer replaced by lifecycle-manager's",
  );
}

/** Drops this controller's finalizers (and upstream's it honours); the API server then removes a deleted Manifest. */
export async function releaseManifest(ctx: ManifestStore, manifest: Manifest): Promise<void> {
  if (!hasOwnFinalizer(manifest)) return;
  try {
    await setFinalizers(
      ctx,
      manifest,
      (manifest.metadata.finalizers ?? []).filter((f) => !OWN_FINALIZERS.includes(f)),
    );
  } catch (error) {
    // Another writer was first: the next pass reads it again.
    if (!isConflict(error)) throw error;
  }
}
