// What a Manifest says of itself that every step reads: its address in KCP, the holder its SKR objects name
// (decision 026), whether it keeps a default CR, which of its conditions are True, and the finalizers this controller
// puts on it; and the narrow view of KCP through which a Manifest is read and written.
import { DEFAULTS, LIFECYCLE_MANAGER, MANIFEST, type Manifest } from '@skr-watcher/api';
import { manifestHolder, type ClusterClient, type Holding } from '@skr-watcher/kube';
import { refOf } from '../context.js';

/** Where Manifests are read and written: the KCP API server's custom objects. */
export interface ManifestStore {
  kcp: Pick<ClusterClient, 'custom'>;
}

/**
 * The finalizers this controller removes a module behind and then drops: its own, and lifecycle-manager's on a
 * Manifest it took over (decision 028), which nobody else will drop once lifecycle-manager is gone.
 */
export const OWN_FINALIZERS: readonly string[] = [MANIFEST.finalizer, ...LIFECYCLE_MANAGER.finalizers];

export function refOfManifest(manifest: Manifest) {
  return refOf('manifest', manifest.metadata.namespace ?? DEFAULTS.kcpNamespace, manifest.metadata.name);
}

export function hasOwnFinalizer(manifest: Manifest): boolean {
  return (manifest.metadata.finalizers ?? []).some((f) => OWN_FINALIZERS.includes(f));
}

/** The Manifest as the holder of its objects in the SKR (decision 026). */
export function holdingOf(manifest: Manifest, namespace: string): Holding {
  return { self: manifestHolder(namespace, manifest.metadata.name) };
}

export function hasDefaultCr(manifest: Manifest): boolean {
  return (
    manifest.spec.resource !== undefined &&
    (manifest.spec.customResourcePolicy ?? 'CreateAndDelete') !== 'Ignore'
  );
}

export function conditionTrue(manifest: Manifest, type: string): boolean {
  return manifest.status?.conditions?.some((c) => c.type === type && c.status === 'True') ?? false;
}
