// Modules with module installation from an OCI registry (decision 021): one Manifest per module, written in KCP
// and reconciled (pull, render, apply, default CR, readiness); the module's state is its Manifest's, and its
// default CR is mirrored once the Manifest's reconcile has created it. A module leaving the Kyma has its Manifest
// deleted, and a module the user now runs has its Manifest released.
import {
  LABELS,
  parseManifest,
  trackedObject,
  type KymaModuleStatus,
  type Manifest,
  type SyncedObject,
} from '@skr-watcher/api';
import { getCustomObject } from '@skr-watcher/kube';
import { eventTarget, refOf, type ModuleInstallation, type ReconcileContext } from '../context.js';
import { leaveModule, reconcileManifest } from '../manifests/install.js';
import {
  deleteManifest,
  manifestState,
  manifestsOf,
  manifestTracking,
} from '../manifests/manifests-of-kyma.js';
import { isResourceState } from '../status.js';
import { mirrorModule } from './mirror-step.js';
import type { KymaScope, ModuleInput, ModuleMode } from './module-input.js';
import { manifestOfModule, withManifest } from './module-manifest.js';
import { resolvedStatus, withWarning } from './module-status.js';
import type { ResolvedModule } from './resolution.js';

/**
 * The registry mode for the Kyma in `scope`, over the Kyma's Manifests (one list per pass). `manifestObjects` is
 * filled with the objects those Manifests keep in the SKR (the SyncResource guard's `manifestObjects`).
 */
export async function registryMode(
  scope: KymaScope,
  installation: ModuleInstallation,
  manifestObjects: SyncedObject[],
): Promise<ModuleMode> {
  const { ctx, kyma, skr } = scope;
  const manifests = await manifestsOf(ctx, kyma.metadata.name);
  for (const manifest of manifests.values()) manifestObjects.push(...(manifest.status?.synced ?? []));
  const keeps = (manifest: Manifest | undefined) => {
    if (manifest) manifestObjects.push(...(manifest.status?.synced ?? []));
    return manifest;
  };
  // The Manifest's own reconcile (decision 021): pull, render, apply, default CR, readiness, status.
  const reconcile = async (manifest: Manifest) =>
    keeps((await reconcileManifest(ctx, skr, installation, manifest, eventTarget(ctx, kyma))).manifest);

  return {
    async install(input, resolved) {
      const installed = await manifestOfModule(input, resolved, manifests, installation);
      if ('state' in installed) return installed;
      const manifest = await reconcile(installed.manifest);
      return manifest
        ? mirrorDefaultCr(input, resolved, manifest, installed.waiting)
        : {
            ...resolvedStatus(resolved),
            state: 'Processing',
            message: `Manifest ${installed.manifest.metadata.name} was removed; it is written again on the next pass`,
          };
    },
    async release({ wanted }) {
      for (const manifest of manifests.values()) {
        if (manifest.metadata.labels?.[LABELS.moduleName] === wanted.module.name)
          await leaveModule(
            ctx,
            manifest,
            eventTarget(ctx, kyma),
            'ModuleUnmanaged',
            'the module is unmanaged (managed: false)',
            skr,
          );
      }
    },
    async removeUnwanted(wanted, previousStatus) {
      // A Manifest of a module no longer wanted is deleted; its reconcile removes the module (default CR first), and
      // the module stays in the status, with the Manifest's state, until the Manifest is gone (upstream's order).
      const removing: KymaModuleStatus[] = [];
      for (const listed of manifests.values()) {
        const module = listed.metadata.labels?.[LABELS.moduleName];
        if (module === undefined || wanted.has(module)) continue;
        const manifest = await deletedManifest(ctx, listed);
        if (!manifest) continue;
        // Its reconcile removes the module in upstream's order, one step per pass.
        const remaining = await reconcile(manifest);
        if (remaining) removing.push(removingStatus(module, remaining, previousStatus.get(module)));
      }
      return removing;
    },
    // The Manifest's reconcile deletes the default CR, after the user's CRs are gone.
    removeModuleCr: async () => {},
  };
}

/** The entry of a resolved module whose Manifest was reconciled; its default CR, once there, is mirrored. */
function mirrorDefaultCr(
  input: ModuleInput,
  resolved: ResolvedModule,
  manifest: Manifest,
  waiting: string | undefined,
): Promise<KymaModuleStatus> {
  let base = withManifest(resolvedStatus(resolved), manifest);
  // Held for a maintenance window: the running version stays, and the entry says why (upstream's shape).
  if (waiting) base = { ...base, maintenance: true, message: waiting };
  return mirrorModule(input, resolved, base, trackedObject(base.resource), {
    absent: async (_resource, dropMirror) => {
      // The Manifest's reconcile creates the default CR once its CRD is there; a mirror of one gone goes.
      await dropMirror();
      return { status: withWarning(resolved, base) };
    },
    mirroredState: () => (isResourceState(base.state) ? base.state : 'Processing'),
    mirrored: () => withWarning(resolved, base),
  });
}

/** The entry of a module that left the Kyma while its Manifest's reconcile removes it. */
function removingStatus(
  module: string,
  manifest: Manifest,
  previous: KymaModuleStatus | undefined,
): KymaModuleStatus {
  const message = manifest.status?.lastOperation?.operation;
  return {
    ...(previous ?? { name: module }),
    state: manifestState(manifest) === 'Ready' ? 'Deleting' : manifestState(manifest),
    manifest: manifestTracking(manifest),
    ...(message ? { message } : {}),
  };
}

/** The Manifest of a module that left the Kyma, deleted (its deletionTimestamp set); undefined once it is gone. */
async function deletedManifest(ctx: ReconcileContext, manifest: Manifest): Promise<Manifest | undefined> {
  if (manifest.metadata.deletionTimestamp) return manifest;
  await deleteManifest(ctx, manifest);
  ctx.logger.info(
    { manifest: manifest.metadata.name, module: manifest.metadata.labels?.[LABELS.moduleName] },
    'module disabled; Manifest deleted',
  );
  const fresh = await getCustomObject(
    ctx.kcp.custom,
    refOf('manifest', manifest.metadata.namespace ?? ctx.namespace, manifest.metadata.name),
  );
  return fresh === undefined ? undefined : parseManifest(fresh, `Manifest ${manifest.metadata.name}`);
}
