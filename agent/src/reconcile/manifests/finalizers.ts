// The Manifest's finalizers: added before anything is installed (so a deleted Manifest cannot leave its module's
// objects behind) and dropped once its module is removed or left, each write guarded by the resourceVersion it read.
import { parseManifest, type Manifest } from '@skr-watcher/api';
import { getCustomObject, isConflict, mergePatchCustomObject } from '@skr-watcher/kube';
import type { Logger } from '@skr-watcher/telemetry';
import { hasOwnFinalizer, OWN_FINALIZERS, refOfManifest, type ManifestStore } from './manifest.js';

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
 * Adds the finalizers of `wanted` the Manifest lacks; answers the Manifest as written. When another writer was first
 * (the bucket label a sharded replica puts on a Manifest written without it, a user), the Manifest is read again and
 * the patch sent once more, up to three times, then the pass fails: a pass must not go on without them, since a
 * Manifest deleted without its finalizers leaves its module's objects in the SKR, and nothing else brings the Kyma
 * back before its next resync (a fleet of 5,000 Kymas on three replicas lost them on about one Manifest in twenty).
 */
export async function ensureFinalizers(
  ctx: FinalizerWriter,
  manifest: Manifest,
  wanted: string[],
): Promise<Manifest> {
  for (let attempt = 1; ; attempt++) {
    const finalizers = manifest.metadata.finalizers ?? [];
    const missing = wanted.filter((f) => !finalizers.includes(f));
    if (missing.length === 0) return manifest;
    try {
      const written = await setFinalizers(ctx, manifest, [...finalizers, ...missing]);
      ctx.logger.info(
        { manifest: `${manifest.metadata.namespace}/${manifest.metadata.name}`, finalizers: missing },
        'Manifest finalizers added',
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

/** Drops this controller's finalizers (upstream's three); the API server then removes a deleted Manifest. */
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
