// The removal of a deleted Manifest's module in upstream's order: users' CRs of the module's kind block it, then the
// default CR goes (while it is there, the set follows the Manifest's spec, so a version written after the deletion
// began still reaches the SKR), then the set in two phases (dependents, then operators), then the finalizers, after
// which the API server removes the Manifest. A step whose object is gone goes on to the next in the same pass (a
// default CR without finalizers is gone when its DELETE returns, a CRD without instances moments later); one that
// waits for others' finalizers ends the pass, and a later pass goes on from there.
import type { Manifest, SyncedObject } from '@skr-watcher/api';
import { deleteIfExists, readObject, removeObjects, type ClusterClient } from '@skr-watcher/kube';
import { servedDefaultCrRef, usersCrs } from './default-cr.js';
import { releaseManifest } from './finalizers.js';
import { keepSpecSetWhileDeleting, type InstallContext, type ModuleObjects } from './install-steps.js';
import { hasDefaultCr, hasOwnFinalizer, holdingOf } from './manifest.js';
import { endWith, halt, proceed, type ManifestOutcome, type StepResult } from './step-result.js';

/**
 * What the removal steps use of the pass: the Manifest's store, the clock, the KCP namespace and the log, and what
 * applying the set uses (the set follows the spec while the default CR is there).
 */
export type RemovalContext = InstallContext;

interface RemovalPass {
  ctx: RemovalContext;
  skr: ClusterClient;
  installation: ModuleObjects;
  manifest: Manifest;
  /** What the SKR may still hold of the module: the Manifest's inventory, or the set a step just applied. */
  synced: SyncedObject[];
}

/** A step answers the inventory the next step works on, or ends the pass. */
type RemovalStep = (pass: RemovalPass) => Promise<StepResult<SyncedObject[]>>;

/** Upstream's operation text for a deleted Manifest held only by others' finalizers (its e2e tests look for it). */
const WAITING_FOR_OTHER_FINALIZERS = 'waiting as other finalizers are present';

/** The steps in upstream's order; each ends the pass with `Deleting` while what it waits for is not through. */
const REMOVAL_STEPS: readonly RemovalStep[] = [waitForUsersCrs, deleteDefaultCr, removeSet];

/**
 * Removal of a deleted Manifest's module: user CRs gone, default CR, the set, the finalizers; as far as one pass gets
 * (all the way when nothing but the API server holds what is deleted).
 */
export async function removeModule(
  ctx: RemovalContext,
  skr: ClusterClient,
  installation: ModuleObjects,
  manifest: Manifest,
): Promise<ManifestOutcome> {
  if (!hasOwnFinalizer(manifest)) return waitForOtherFinalizers(ctx, manifest);
  let synced = manifest.status?.synced ?? [];
  for (const step of REMOVAL_STEPS) {
    const result = await step({ ctx, skr, installation, manifest, synced });
    if (!result.proceed) return endWith(ctx, manifest, result.status);
    synced = result.value;
  }
  await releaseManifest(ctx, manifest);
  ctx.logger.info({ manifest: manifest.metadata.name }, 'module removed from the SKR');
  return { manifest: undefined };
}

/**
 * A deleted Manifest that only others' finalizers keep: nothing is left for this controller to do, and its status says
 * so in upstream's words; written once, so later passes leave its lastUpdateTime as it is.
 */
function waitForOtherFinalizers(ctx: RemovalContext, manifest: Manifest): Promise<ManifestOutcome> {
  if ((manifest.metadata.finalizers ?? []).length === 0) return Promise.resolve({ manifest });
  return endWith(ctx, manifest, {
    state: 'Deleting',
    operation: WAITING_FOR_OTHER_FINALIZERS,
    synced: manifest.status?.synced ?? [],
  });
}

/** Users' CRs of the module's kind block the removal until they are gone. */
async function waitForUsersCrs({ skr, manifest, synced }: RemovalPass): Promise<StepResult<SyncedObject[]>> {
  if (!manifest.spec.resource) return proceed(synced);
  const users = await usersCrs(skr, manifest, await servedDefaultCrRef(skr, manifest));
  if (users.length === 0) return proceed(synced);
  const more = users.length > 5 ? ` and ${users.length - 5} more` : '';
  return halt({
    state: 'Deleting',
    operation: `waiting for module CRs deletion: ${manifest.spec.resource.kind} ${users.slice(0, 5).join(', ')}${more}`,
    synced,
  });
}

/**
 * The default CR, deleted and waited for before the set goes (its operator may still need to clean up). Until it is
 * gone the operator keeps running, at the version the Manifest's spec names now (upstream applies the full set then).
 * Read again once deleted: without finalizers it is gone at once, and the set goes in the same pass.
 */
async function deleteDefaultCr({
  ctx,
  skr,
  installation,
  manifest,
  synced,
}: RemovalPass): Promise<StepResult<SyncedObject[]>> {
  if (!manifest.spec.resource || !hasDefaultCr(manifest)) return proceed(synced);
  const ref = await servedDefaultCrRef(skr, manifest);
  if (!(await readObject(skr.objects, ref))) return proceed(synced);
  const kept = await keepSpecSetWhileDeleting(ctx, skr, installation, manifest);
  await deleteIfExists(skr.objects, ref);
  // Gone at once (no finalizer): the set goes in this pass. Held by the operator's or a user's finalizer: a later one.
  if (!(await readObject(skr.objects, ref))) return proceed(kept.synced);
  const operation = `deleting the default CR ${ref.kind} ${ref.namespace ?? ''}/${ref.name}`;
  return halt({
    state: 'Deleting',
    operation: kept.problem
      ? `${operation}; version ${manifest.spec.version} not applied: ${kept.problem}`
      : operation,
    synced: kept.synced,
  });
}

/** The set in two phases, only what this Manifest holds; the inventory keeps what may still exist. */
async function removeSet({ ctx, skr, manifest, synced }: RemovalPass): Promise<StepResult<SyncedObject[]>> {
  const removal = await removeObjects(skr, synced, {
    holding: holdingOf(manifest, manifest.metadata.namespace ?? ctx.namespace),
  });
  if (removal.finished) return proceed([]);
  const pending = removal.results.find((result) => result.outcome !== 'deleted' && result.outcome !== 'kept');
  return halt({
    state: 'Deleting',
    operation: pending?.message ?? 'waiting for resources to be deleted',
    synced: removal.remaining,
  });
}
