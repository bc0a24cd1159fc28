// A Manifest lifecycle-manager wrote, adopted in place (decision 028): what it installed in the SKR
// (`status.synced`, kept as the agent's inventory) and the Manifest's own status change field manager, then its
// finalizers are swapped for the agent's. Nothing is applied, created or deleted; the user's CRs and the default CR
// are not touched.
import {
  GROUP,
  KINDS,
  LABELS,
  LIFECYCLE_MANAGER,
  MANIFEST,
  parseManifest,
  type Manifest,
} from '@skr-watcher/api';
import { refOfSynced, uniqueSynced, type ClusterClient } from '@skr-watcher/kube';
import type { Logger } from '@skr-watcher/telemetry';
import { handBackFinalizers, takeOverFinalizers } from '../reconcile/manifests/install.js';
import { transferFieldOwnership, type TransferOutcome } from './field-ownership.js';

/** What the takeover of one Manifest did (or, dry, would do). */
export interface ManifestTakeover {
  manifest: string;
  /** SKR objects of `status.synced` by what became of their managed fields. */
  objects: Record<TransferOutcome, number>;
  /** Whether the finalizers were (would be) swapped: lifecycle-manager's for the agent's, or back. */
  finalizers: boolean;
}

export interface ManifestTakeoverContext {
  kcp: ClusterClient;
  logger: Logger;
  dryRun?: boolean;
  /** Rollback: the same moves the other way, back to lifecycle-manager's names. */
  handBack?: boolean;
}

/** Whose names a Manifest and its objects leave, whose they get, and how its finalizers are swapped. */
function direction(handBack: boolean | undefined) {
  return handBack
    ? {
        from: [MANIFEST.applyFieldManager],
        to: LIFECYCLE_MANAGER.applyFieldManager,
        leaving: [MANIFEST.finalizer] as readonly string[],
        swap: handBackFinalizers,
      }
    : {
        from: [LIFECYCLE_MANAGER.applyFieldManager],
        to: MANIFEST.applyFieldManager,
        leaving: LIFECYCLE_MANAGER.finalizers,
        swap: takeOverFinalizers,
      };
}

/**
 * Takes one Manifest over: every object of its `status.synced` in the SKR first (so that, should the command stop
 * half-way, a Manifest still holding lifecycle-manager's finalizers is one whose objects may not all be moved
 * yet), then the Manifest's own managed fields, then its finalizers. With `handBack`, the same the other way.
 */
export async function takeOverManifest(
  ctx: ManifestTakeoverContext,
  skr: ClusterClient,
  manifest: Manifest,
): Promise<ManifestTakeover> {
  const name = `${manifest.metadata.namespace}/${manifest.metadata.name}`;
  const { from, to, leaving, swap } = direction(ctx.handBack);
  const objects: Record<TransferOutcome, number> = { moved: 0, unchanged: 0, absent: 0 };
  for (const synced of uniqueSynced(manifest.status?.synced ?? [])) {
    const outcome = await transferFieldOwnership(skr.objects, refOfSynced(synced), from, to, ctx.dryRun);
    objects[outcome]++;
  }
  await transferFieldOwnership(
    ctx.kcp.objects,
    {
      apiVersion: `${GROUP}/${KINDS.manifest.version}`,
      kind: KINDS.manifest.kind,
      name: manifest.metadata.name,
      namespace: manifest.metadata.namespace,
    },
    from,
    to,
    ctx.dryRun,
  );
  // No finalizer may be added to a Manifest being deleted; its removal drops either side's when it is through.
  const finalizers =
    !manifest.metadata.deletionTimestamp &&
    (manifest.metadata.finalizers ?? []).some((f) => leaving.includes(f));
  if (finalizers && !ctx.dryRun) await swap(ctx, manifest);
  ctx.logger.info(
    { manifest: name, objects, finalizers, handBack: ctx.handBack ?? false, dryRun: ctx.dryRun ?? false },
    ctx.handBack ? 'Manifest handed back' : 'Manifest taken over',
  );
  return { manifest: name, objects, finalizers };
}

/** The Manifests of one Kyma, read from etcd (a takeover acts on what is there now). */
export async function manifestsOfKyma(
  kcp: ClusterClient,
  namespace: string,
  kymaName: string,
): Promise<Manifest[]> {
  const list = (await kcp.custom.listNamespacedCustomObject({
    group: GROUP,
    version: KINDS.manifest.version,
    namespace,
    plural: KINDS.manifest.plural,
    labelSelector: `${LABELS.kymaName}=${kymaName}`,
  })) as { items?: unknown[] };
  return (list.items ?? []).map((item, index) =>
    parseManifest(item, `Manifest ${index} of Kyma ${kymaName}`),
  );
}
