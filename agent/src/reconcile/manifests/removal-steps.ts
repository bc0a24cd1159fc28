// The removal of a deleted Manifest's module in upstream's order, one step per pass until each is through: users' CRs
// of the module's kind block it, then the default CR goes (while it is there, the set follows the Manifest's spec, so a
// version written after the deletion began still reaches the SKR), then the set in two phases (dependents, then
// operators), then the finalizers, after which the API server removes the Manifest.
import type { Manifest } from '@skr-watcher/api';
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
}

type RemovalStep = (pass: RemovalPass) => Promise<StepResult<void>>;

const DONE: StepResult<void> = proceed(undefined);

/** Upstream's operation text for a deleted Manifest held only by others' finalizers (its e2e tests look for it). */
const WAITING_FOR_OTHER_FINALIZERS = 'waiting as other finalizers are present';

/** The steps in upstream's order; each ends the pass with `Deleting` while what it waits for is not through. */
const REMOVAL_STEPS: readonly RemovalStep[] = [waitForUsersCrs, deleteDefaultCr, removeSet];

/** Removal of a deleted Manifest's module, one step per pass: user CRs gone, default CR, the set, the finalizers. */
export async function removeModule(
  ctx: RemovalContext,
  skr: ClusterClient,
  installation: ModuleObjects,
  manifest: Manifest,
): Promise<ManifestOutcome> {
  if (!hasOwnFinalizer(manifest)) return waitForOtherFinalizers(ctx, manifest);
  for (const step of REMOVAL_STEPS) {
    const result = await step({ ctx, skr, installation, manifest });
    if (!result.proceed) return endWith(ctx, manifest, result.status);
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

function deleting(manifest: Manifest, operation: string): StepResult<never> {
  return halt({ state: 'Deleting', operation, synced: manifest.status?.synced ?? [] });
}

/** Users' CRs of the module's kind block the removal until they are gone. */
async function waitForUsersCrs({ skr, manifest }: RemovalPass): Promise<StepResult<void>> {
  if (!manifest.spec.resource) return DONE;
  const users = await usersCrs(skr, manifest, await servedDefaultCrRef(skr, manifest));
  if (users.length === 0) return DONE;
  const more = users.length > 5 ? ` and ${users.length - 5} more` : '';
  return deleting(
    manifest,
    `waiting for module CRs deletion: ${manifest.spec.resource.kind} ${users.slice(0, 5).join(', ')}${more}`,
  );
}

/**
 * The default CR, deleted and waited for before the set goes (its operator may still need to clean up). Until it is
 * gone the operator keeps running, at the version the Manifest's spec names now (upstream applies the full set then).
 */
async function deleteDefaultCr({ ctx, skr, installation, manifest }: RemovalPass): Promise<StepResult<void>> {
  if (!manifest.spec.resource || !hasDefaultCr(manifest)) return DONE;
  const ref = await servedDefaultCrRef(skr, manifest);
  if (!(await readObject(skr.objects, ref))) return DONE;
  const kept = await keepSpecSetWhileDeleting(ctx, skr, installation, manifest);
  await deleteIfExists(skr.objects, ref);
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
async function removeSet({ ctx, skr, manifest }: RemovalPass): Promise<StepResult<void>> {
  const removal = await removeObjects(skr, manifest.status?.synced ?? [], {
    holding: holdingOf(manifest, manifest.metadata.namespace ?? ctx.namespace),
  });
  if (removal.finished) return DONE;
  const pending = removal.results.find((result) => result.outcome !== 'deleted' && result.outcome !== 'kept');
  return halt({
    state: 'Deleting',
    operation: pending?.message ?? 'waiting for resources to be deleted',
    synced: removal.remaining,
  });
}
