// Modules with module installation from an OCI registry (decision 021): one Manifest per module, written in KCP
// and reconciled (pull, render, apply, default CR, readiness); the module's state is its Manifest's, and its
// default CR is mirrored once the Manifest's reconcile has created it. A module leaving the Kyma, or one the Kyma may
// no longer use, has its Manifest deleted; a module leaving the Kyma follows its channel until its Manifest is gone,
// as upstream keeps it current. A module the user now runs has its Manifest released.
import {
  ANNOTATIONS,
  LABELS,
  manifestName,
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
import { mirrorModule, removeModuleConfig } from './mirror-step.js';
import type { KymaScope, ModuleInput, ModuleMode } from './module-input.js';
import { manifestOfModule, withManifest } from './module-manifest.js';
import { failedStatus, resolvedStatus, withWarning } from './module-status.js';
import { isModuleFailure, resolveModule, type ResolvedModule } from './resolution.js';

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
    async revoke(input, failure) {
      // The Kyma may no longer use the module: its Manifest is deleted and its reconcile removes the module from the
      // SKR (users' CRs still block, as for any removal); the entry says why, in upstream's words.
      const module = input.wanted.module.name;
      const installed = [...manifests.values()].filter(
        (manifest) => manifest.metadata.labels?.[LABELS.moduleName] === module,
      );
      // Its Module CR goes with the module, and so does the mirror (looked for only while something was installed).
      if (installed.length > 0 || input.previous?.resource)
        await removeModuleConfig(input, trackedObject(input.previous?.resource));
      for (const listed of installed) {
        const manifest = await deletedManifest(ctx, listed, failure.accessDenied?.detail ?? failure.message);
        if (manifest) await reconcile(manifest);
      }
      return failedStatus(failure, input.previous);
    },
    async removeUnwanted(wanted, previousStatus, resolution) {
      // A Manifest of a module no longer wanted is deleted; its reconcile removes the module (default CR first), and
      // the module stays in the status, with the Manifest's state, until the Manifest is gone (upstream's order).
      const removing: KymaModuleStatus[] = [];
      for (const listed of manifests.values()) {
        const module = listed.metadata.labels?.[LABELS.moduleName];
        if (module === undefined || wanted.has(module)) continue;
        const deleted = await deletedManifest(ctx, listed, 'module disabled');
        if (!deleted) continue;
        const previous = previousStatus.get(module);
        const input = { ...scope, ...resolution, wanted: { module: { name: module } }, previous };
        const followed = await followChannel(input, deleted, installation);
        // Its reconcile removes the module in upstream's order, one step per pass.
        const remaining = await reconcile(followed.manifest);
        if (remaining) removing.push(removingStatus(module, remaining, previous, followed.resolved));
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

/**
 * A module being removed follows its channel until its Manifest is gone, as upstream's Kyma reconciler still resolves
 * the modules of its status (in their channel) and writes a deleting Manifest's spec when its version, channel or
 * template changed: a new version reaches the SKR while the removal waits for the user. Answers the Manifest to
 * reconcile and what the module resolved to (undefined when it did not: the Manifest stays as it is).
 */
async function followChannel(
  input: ModuleInput,
  manifest: Manifest,
  installation: ModuleInstallation,
): Promise<{ manifest: Manifest; resolved?: ResolvedModule }> {
  const { ctx, kyma, wanted, previous } = input;
  // Mandatory modules leave with their ModuleReleaseMeta and unmanaged ones are left: neither has a channel to follow.
  if (
    manifest.metadata.labels?.[LABELS.mandatoryModule] === 'true' ||
    manifest.metadata.annotations?.[ANNOTATIONS.isUnmanaged] === 'true'
  )
    return { manifest };
  // Its channel as last reported; its customResourcePolicy as the Manifest has it (the Kyma no longer lists it).
  const module = {
    name: wanted.module.name,
    ...(previous?.channel ? { channel: previous.channel } : {}),
    ...(manifest.spec.customResourcePolicy
      ? { customResourcePolicy: manifest.spec.customResourcePolicy }
      : {}),
  };
  const resolved = await resolveModule(ctx, {
    module,
    kyma,
    kymaChannel: input.kymaChannel,
    skrNamespace: input.skrNamespace,
    installedVersion: previous?.version,
  });
  if (isModuleFailure(resolved)) return { manifest };
  // Only this Manifest is written again: a module whose component was renamed meanwhile gets no second one.
  if (
    !resolved.fqdn ||
    manifestName(resolved.fqdn, kyma.metadata.name, wanted.module.name) !== manifest.metadata.name
  )
    return { manifest };
  const written = await manifestOfModule(
    { ...input, wanted: { module } },
    resolved,
    new Map([[manifest.metadata.name, manifest]]),
    installation,
  );
  // A status answers a write that failed (the registry, a maintenance window's error): the Manifest stays as it is.
  return 'state' in written ? { manifest, resolved } : { manifest: written.manifest, resolved };
}

/** The entry of a module that left the Kyma while its Manifest's reconcile removes it, at the version it follows. */
function removingStatus(
  module: string,
  manifest: Manifest,
  previous: KymaModuleStatus | undefined,
  resolved: ResolvedModule | undefined,
): KymaModuleStatus {
  const message = manifest.status?.lastOperation?.operation;
  const base = resolved
    ? withManifest({ ...previous, ...resolvedStatus(resolved) }, manifest)
    : { ...(previous ?? { name: module }), manifest: manifestTracking(manifest) };
  return {
    ...base,
    state: manifestState(manifest) === 'Ready' ? 'Deleting' : manifestState(manifest),
    ...(message ? { message } : {}),
  };
}

/** The Manifest of a module, deleted (its deletionTimestamp set) for `why`; undefined once it is gone. */
async function deletedManifest(
  ctx: ReconcileContext,
  manifest: Manifest,
  why: string,
): Promise<Manifest | undefined> {
  if (manifest.metadata.deletionTimestamp) return manifest;
  await deleteManifest(ctx, manifest);
  ctx.logger.info(
    { manifest: manifest.metadata.name, module: manifest.metadata.labels?.[LABELS.moduleName], why },
    'Manifest deleted',
  );
  const fresh = await getCustomObject(
    ctx.kcp.custom,
    refOf('manifest', manifest.metadata.namespace ?? ctx.namespace, manifest.metadata.name),
  );
  return fresh === undefined ? undefined : parseManifest(fresh, `Manifest ${manifest.metadata.name}`);
}
