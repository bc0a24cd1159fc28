// The modules of one Kyma: for each wanted module (listed in the SKR Kyma, or mandatory) its resolution, its
// Module CR in the SKR (created from the template's spec.data when absent) and its ModuleConfig mirror in KCP;
// for each module no longer wanted, its ModuleConfig and the Module CR the agent created. The result is the
// Kyma's status.modules in upstream's shape.
import { gateUpgrade, runtimeOfKyma } from '../../rollout/maintenance-window.js';
import type { KubernetesObject } from '@kubernetes/client-node';
import {
  DEFAULTS,
  FIELD_MANAGER,
  LABELS,
  LIMITS,
  MANAGED_BY,
  manifestName,
  nestsDeeperThan,
  parseManifest,
  trackedObject,
  type Kyma,
  type KymaModule,
  type KymaModuleStatus,
  type Manifest,
  type ModuleConfig,
  type ModuleReleaseMeta,
  type SyncedObject,
} from '@skr-watcher/api';
import {
  createIfAbsent,
  deleteIfExists,
  getCustomObject,
  isUnreachable,
  KubeRequestError,
  readObject,
  type ClusterClient,
  type ObjectRef,
} from '@skr-watcher/kube';
import { eventTarget, refOf, trackingOf, type ReconcileContext } from '../context.js';
import { leaveModule, reconcileManifest } from '../manifests/install.js';
import {
  applyManifest,
  deleteManifest,
  manifestState,
  manifestsOf,
  manifestTracking,
  rewriteReason,
} from '../manifests/manifests-of-kyma.js';
import {
  deleteModuleConfig,
  markModuleConfigError,
  mirrorModuleCr,
  readModuleConfig,
} from './module-config.js';
import { mirroredObjectOf } from './mirror-lanes.js';
import { isModuleFailure, resolveModule, type ModuleFailure, type ResolvedModule } from './resolution.js';
import { isResourceState, isUnknownModule, worstState } from '../status.js';

/** What a module is reconciled from; `mandatory` is its ModuleReleaseMeta when the module is mandatory. */
export interface WantedModule {
  module: KymaModule;
  mandatory?: ModuleReleaseMeta;
}

/**
 * The wanted modules: those listed in the SKR Kyma, then every mandatory module (a listed mandatory module
 * counts once, as mandatory: upstream installs it for every Kyma whatever the list says).
 */
export function wantedModules(skrKyma: Kyma, mandatory: ModuleReleaseMeta[]): WantedModule[] {
  const mandatoryNames = new Set(mandatory.map((meta) => meta.spec.moduleName));
  return [
    ...(skrKyma.spec.modules ?? [])
      .filter((module) => !mandatoryNames.has(module.name))
      .map((module) => ({ module })),
    ...mandatory.map((meta) => ({ module: { name: meta.spec.moduleName }, mandatory: meta })),
  ];
}

/** Like Promise.all, but waits for every promise, so no work of this pass runs on after it has failed. */
async function settleAll<T>(promises: Promise<T>[]): Promise<T[]> {
  const results = await Promise.allSettled(promises);
  const failed = results.find((result) => result.status === 'rejected');
  if (failed) throw failed.reason;
  return results.map((result) => (result as PromiseFulfilledResult<T>).value);
}

export async function reconcileModules(
  ctx: ReconcileContext,
  kyma: Kyma,
  skr: ClusterClient,
  wanted: WantedModule[],
  kymaChannel: string | undefined,
  skrNamespace: string,
  configs: Map<string, ModuleConfig>,
  /** Filled with the objects the Kyma's Manifests keep in the SKR (the SyncResource guard's `manifestObjects`). */
  manifestObjects: SyncedObject[] = [],
): Promise<KymaModuleStatus[]> {
  const kymaName = kyma.metadata.name;
  const kymaKey = `${kyma.metadata.namespace ?? ctx.namespace}/${kymaName}`;
  const previousStatus = new Map((kyma.status?.modules ?? []).map((module) => [module.name, module]));
  // With module installation, the Kyma's Manifests (decision 021); one list per pass.
  const manifests = ctx.modules ? await manifestsOf(ctx, kymaName) : undefined;
  for (const manifest of manifests?.values() ?? []) manifestObjects.push(...(manifest.status?.synced ?? []));
  const keeps = (manifest: Manifest | undefined) => {
    if (manifest) manifestObjects.push(...(manifest.status?.synced ?? []));
    return manifest;
  };
  // Modules are independent of each other: one round trip of latency for all of them, not one each.
  const statuses = await settleAll(
    wanted.map((entry) =>
      reconcileModule(
        ctx,
        kyma,
        entry,
        kymaChannel,
        skrNamespace,
        skr,
        previousStatus.get(entry.module.name),
        manifests,
        keeps,
      ),
    ),
  );

  // Modules no longer wanted: their ModuleConfig goes, and a Module CR the agent created goes with it, unless
  // the module was unmanaged (then the user owns the Module CR).
  const wantedNames = new Set(wanted.map((entry) => entry.module.name));
  const dropped = new Set(
    [...configs.keys(), ...previousStatus.keys()].filter((name) => !wantedNames.has(name)),
  );
  if (manifests) {
    // A Manifest of a module no longer wanted is deleted; its reconcile removes the module (default CR first), and
    // the module stays in the status, with the Manifest's state, until the Manifest is gone (upstream's order).
    for (const listed of manifests.values()) {
      const module = listed.metadata.labels?.[LABELS.moduleName];
      if (module === undefined || wantedNames.has(module)) continue;
      const manifest = await deletedManifest(ctx, listed);
      if (!manifest) continue;
      // Its reconcile removes the module in upstream's order, one step per pass.
      const outcome = await reconcileManifest(ctx, skr, ctx.modules!, manifest, eventTarget(ctx, kyma));
      keeps(outcome.manifest);
      if (!outcome.manifest) continue;
      const previous = previousStatus.get(module);
      const message = outcome.manifest.status?.lastOperation?.operation;
      statuses.push({
        ...(previous ?? { name: module }),
        state: manifestState(outcome.manifest) === 'Ready' ? 'Deleting' : manifestState(outcome.manifest),
        manifest: manifestTracking(outcome.manifest),
        ...(message ? { message } : {}),
      });
    }
  }
  for (const name of dropped) {
    const config = configs.get(name);
    const previous = previousStatus.get(name);
    const moduleCr = recordedModuleCr(previous, config);
    // With Manifests, the Manifest's reconcile deletes the default CR, after the user's CRs are gone.
    if (moduleCr && previous?.state !== 'Unmanaged' && !manifests) {
      const current = await readObject(skr.objects, moduleCr);
      if (current?.metadata?.labels?.[LABELS.managedBy] === MANAGED_BY)
        await deleteIfExists(skr.objects, moduleCr);
    }
    const remove = () => deleteModuleConfig(ctx, kymaName, name, config);
    await (moduleCr ? ctx.inMirrorLane(kymaKey, mirroredObjectOf(moduleCr), remove) : remove());
    ctx.logger.info({ kyma: kymaName, module: name }, 'module disabled; ModuleConfig removed');
  }
  return boundUnknownModules(statuses);
}

/** Entries of modules no catalog knows that the Kyma's status lists by name; the rest are counted in the last. */
export const MAX_UNKNOWN_MODULE_ENTRIES = 10;

/**
 * A user may list any name in their Kyma: names no catalog knows get at most MAX_UNKNOWN_MODULE_ENTRIES entries in
 * the status (in name order), and the last of them says how many more there are, so the status stays bounded.
 */
export function boundUnknownModules(statuses: KymaModuleStatus[]): KymaModuleStatus[] {
  const unknown = statuses.filter(isUnknownModule).sort((a, b) => a.name.localeCompare(b.name));
  if (unknown.length <= MAX_UNKNOWN_MODULE_ENTRIES) return statuses;
  const listed = new Set(unknown.slice(0, MAX_UNKNOWN_MODULE_ENTRIES));
  const last = unknown[MAX_UNKNOWN_MODULE_ENTRIES - 1]!;
  const more = unknown.length - MAX_UNKNOWN_MODULE_ENTRIES;
  return statuses
    .filter((status) => !isUnknownModule(status) || listed.has(status))
    .map((status) =>
      status === last
        ? { ...status, message: `${status.message}; and ${more} more modules no catalog knows, not listed` }
        : status,
    );
}

/** Identity of a Module CR as recorded in a ModuleConfig or, failing that, a Kyma module status. */
export function recordedModuleCr(
  status: KymaModuleStatus | undefined,
  config: ModuleConfig | undefined,
): ObjectRef | undefined {
  if (config) {
    const { apiVersion, kind, metadata } = config.spec.resource;
    return {
      apiVersion,
      kind,
      name: metadata.name,
      ...(metadata.namespace ? { namespace: metadata.namespace } : {}),
    };
  }
  return trackedObject(status?.resource);
}

/** The module status of a resolved module, before its Module CR is looked at. */
function resolvedStatus(resolved: ResolvedModule): KymaModuleStatus {
  const { template } = resolved;
  return {
    name: resolved.name,
    ...(resolved.fqdn ? { fqdn: resolved.fqdn, ocmComponentName: resolved.fqdn } : {}),
    ...(resolved.channel ? { channel: resolved.channel } : {}),
    version: resolved.version,
    state: 'Ready',
    template: trackingOf('moduleTemplate', template.metadata),
    ...(resolved.resource
      ? {
          resource: {
            apiVersion: resolved.resource.apiVersion,
            kind: resolved.resource.kind,
            metadata: { name: resolved.resource.name, namespace: resolved.resource.namespace },
          },
        }
      : {}),
  };
}

/**
 * A resolution failure. A ModuleReleaseMeta that went missing under an installed module keeps what was
 * installed in status: Error the first time, Warning from then on, as upstream reports it.
 */
function failedStatus(failure: ModuleFailure, previous: KymaModuleStatus | undefined): KymaModuleStatus {
  const message = `${failure.reason}: ${failure.message}`;
  if (failure.reason === 'ModuleReleaseMetaNotFound' && previous?.template) {
    const reported = previous.state === 'Error' || previous.state === 'Warning';
    return { ...previous, state: reported ? 'Warning' : 'Error', message };
  }
  return { name: failure.name, state: 'Error', message };
}

async function reconcileModule(
  ctx: ReconcileContext,
  kyma: Kyma,
  { module, mandatory }: WantedModule,
  kymaChannel: string | undefined,
  skrNamespace: string,
  skr: ClusterClient,
  previous: KymaModuleStatus | undefined,
  manifests: Map<string, Manifest> | undefined,
  keeps: (manifest: Manifest | undefined) => Manifest | undefined,
): Promise<KymaModuleStatus> {
  const kymaName = kyma.metadata.name;
  const kymaKey = `${kyma.metadata.namespace ?? ctx.namespace}/${kymaName}`;
  // Whether there is a ModuleConfig to remove: only the full reconcile creates one (a targeted mirror updates it),
  // so one found absent here stays absent; removing one happens in its Module CR's mirror lane, so no targeted
  // mirror that read it a moment before writes it back. Read only on the paths that remove one.
  const removeConfig = async (moduleCr: ObjectRef | undefined) => {
    if (!(await readModuleConfig(ctx, kymaName, module.name))) return;
    const remove = () => deleteModuleConfig(ctx, kymaName, module.name);
    await (moduleCr ? ctx.inMirrorLane(kymaKey, mirroredObjectOf(moduleCr), remove) : remove());
  };

  if (module.managed === false) {
    // The user runs the module: its Module CR is left alone and no longer mirrored (docs/decisions/009); its
    // Manifest is marked, and its reconcile leaves the SKR objects to the user and removes it (decision 021).
    await removeConfig(trackedObject(previous?.resource));
    for (const manifest of manifests?.values() ?? []) {
      if (manifest.metadata.labels?.[LABELS.moduleName] === module.name)
        await leaveModule(
          ctx,
          manifest,
          eventTarget(ctx, kyma),
          'ModuleUnmanaged',
          'the module is unmanaged (managed: false)',
          skr,
        );
    }
    const kept = { ...previous, name: module.name, state: 'Unmanaged' as const };
    delete kept.message;
    // Upstream reports no Manifest for an unmanaged module.
    delete kept.manifest;
    return kept;
  }

  const resolved = await resolveModule(ctx, {
    module,
    kyma,
    kymaChannel,
    skrNamespace,
    installedVersion: previous?.version,
    ...(mandatory ? { mandatory } : {}),
  });
  // The mirror of an existing Module CR stays: a catalog problem in KCP is no reason to lose user data.
  if (isModuleFailure(resolved)) return failedStatus(resolved, previous);

  let base = resolvedStatus(resolved);
  const warn = (status: KymaModuleStatus): KymaModuleStatus =>
    resolved.warning
      ? { ...status, state: worstState([status.state, 'Warning']), message: resolved.warning }
      : status;
  let manifest: Manifest | undefined;
  if (manifests) {
    const installed = await manifestOfModule(
      ctx,
      kyma,
      { module, mandatory },
      resolved,
      skrNamespace,
      previous,
      manifests,
    );
    if ('state' in installed) return installed;
    const { waiting } = installed;
    // The Manifest's own reconcile (decision 021): pull, render, apply, default CR, readiness, status.
    const outcome = await reconcileManifest(
      ctx,
      skr,
      ctx.modules!,
      installed.manifest,
      eventTarget(ctx, kyma),
    );
    manifest = keeps(outcome.manifest);
    if (!manifest)
      return {
        ...base,
        state: 'Processing',
        message: `Manifest ${installed.manifest.metadata.name} was removed; it is written again on the next pass`,
      };
    base = withManifest(base, manifest);
    // Held for a maintenance window: the running version stays, and the entry says why (upstream's shape).
    if (waiting) base = { ...base, maintenance: true, message: waiting };
  }
  const resource = manifest ? trackedObject(base.resource) : resolved.resource;
  if (!resource?.namespace) {
    // A module without a default CR (no spec.data) is installed without one, as upstream does.
    await removeConfig(trackedObject(previous?.resource));
    return warn(base);
  }
  const resourceNamespace = resource.namespace;
  // The Module CR is read, and its ModuleConfig read and written, inside its mirror lane: a targeted mirror of an
  // edit made after this read runs after this write (decision 010).
  return ctx.inMirrorLane(kymaKey, mirroredObjectOf(resource), async () => {
    const fresh = readModuleConfig(ctx, kymaName, module.name);
    fresh.catch(() => undefined);
    let moduleCr: (KubernetesObject & { spec?: unknown; status?: unknown }) | undefined;
    try {
      moduleCr = (await readObject(skr.objects, resource)) as
        (KubernetesObject & { spec?: unknown; status?: unknown }) | undefined;
      if (!moduleCr && manifest) {
        // The Manifest's reconcile creates the default CR once its CRD is there; a mirror of one gone goes.
        if (await fresh) await deleteModuleConfig(ctx, kymaName, module.name);
        return warn(base);
      }
      if (!moduleCr) {
        if ((module.customResourcePolicy ?? 'CreateAndDelete') === 'Ignore') {
          if (await fresh) await deleteModuleConfig(ctx, kymaName, module.name);
          return warn({
            ...base,
            state: 'Warning',
            message: `Module CR ${resource.kind} ${resourceNamespace}/${resource.name} absent; customResourcePolicy Ignore leaves it to the user`,
          });
        }
        const data = resolved.template.spec.data!;
        const body = {
          apiVersion: data.apiVersion,
          kind: data.kind,
          metadata: {
            name: resource.name,
            namespace: resourceNamespace,
            labels: { [LABELS.managedBy]: MANAGED_BY, [LABELS.watchedBy]: DEFAULTS.manager },
          },
          ...(data.spec ? { spec: structuredClone(data.spec) } : {}),
        };
        moduleCr =
          (await createIfAbsent(skr.objects, body, FIELD_MANAGER)) ??
          (await readObject(skr.objects, resource));
        if (!moduleCr) throw new Error(`Module CR ${resource.name} vanished right after its creation`);
        ctx.logger.info(
          { kyma: kymaName, module: module.name, gvk: `${data.apiVersion}/${data.kind}` },
          'created Module CR from template',
        );
      }
    } catch (error) {
      // An SKR answer about this module only (e.g. its CRD is not installed) fails the module; no answer fails the pass.
      if (isUnreachable(error) || !(error instanceof KubeRequestError)) throw error;
      return { ...base, state: 'Error', message: error.message };
    }
    // Deeper objects overflow the stack in cloning and comparison: an Error on this module, not a failed pass.
    if (nestsDeeperThan(moduleCr.spec, LIMITS.objectDepth)) {
      const message = `Module CR ${resource.kind} ${resource.namespace}/${resource.name}: spec nests deeper than ${LIMITS.objectDepth} levels; not mirrored`;
      await markModuleConfigError(ctx, await fresh, 'SpecTooDeep', message);
      return { ...base, state: 'Error', message };
    }
    const crState = manifest ? base.state : (moduleCr.status as { state?: unknown } | undefined)?.state;
    const state = isResourceState(crState) ? crState : manifest ? 'Processing' : 'Ready';
    const existing = await fresh;
    try {
      await mirrorModuleCr(ctx, kymaName, module.name, moduleCr, state, existing);
    } catch (error) {
      // KCP refused the mirror itself (too large, invalid): an Error on this module and its ModuleConfig.
      if (
        !(error instanceof KubeRequestError) ||
        !(error.code === 400 || error.code === 413 || error.code === 422)
      )
        throw error;
      await markModuleConfigError(ctx, existing, 'MirrorRefused', error.message);
      return { ...base, state: 'Error', message: error.message };
    }
    if (manifest) return warn(base);
    return warn({ ...base, state, ...(state !== 'Ready' ? { message: `Module CR state ${state}` } : {}) });
  });
}

/** The module's status as its Manifest reports it: state, version, the Manifest and its default CR (upstream's). */
function withManifest(base: KymaModuleStatus, manifest: Manifest): KymaModuleStatus {
  const state = manifestState(manifest);
  const resource = manifest.spec.resource;
  const message = state === 'Ready' ? undefined : manifest.status?.lastOperation?.operation;
  const status: KymaModuleStatus = {
    ...base,
    state,
    ...(manifest.spec.version ? { version: manifest.spec.version } : {}),
    manifest: manifestTracking(manifest),
    ...(message ? { message } : {}),
  };
  delete status.resource;
  if (resource && (manifest.spec.customResourcePolicy ?? 'CreateAndDelete') === 'CreateAndDelete') {
    status.resource = {
      apiVersion: resource.apiVersion,
      kind: resource.kind,
      metadata: { name: resource.metadata?.name ?? '', namespace: resource.metadata?.namespace ?? '' },
    };
  }
  return status;
}

/**
 * The module's Manifest, written when it is missing or out of date (decision 021), or the module's failed status when
 * it cannot be: no OCM component name to find it by, or the registry failed for it (that module only).
 */
async function manifestOfModule(
  ctx: ReconcileContext,
  kyma: Kyma,
  { module, mandatory }: WantedModule,
  resolved: ResolvedModule,
  skrNamespace: string,
  previous: KymaModuleStatus | undefined,
  manifests: Map<string, Manifest>,
): Promise<{ manifest: Manifest; waiting?: string } | KymaModuleStatus> {
  const installation = ctx.modules!;
  const component = resolved.fqdn;
  if (!component) {
    return {
      ...resolvedStatus(resolved),
      state: 'Error',
      message: `ModuleReleaseMeta ${ctx.namespace}/${module.name} has no ocmComponentName: the module cannot be found in the registry`,
    };
  }
  const existing = manifests.get(manifestName(component, kyma.metadata.name, module.name));
  const input = {
    kyma,
    module,
    resolved,
    ocmComponentName: component,
    mandatory: mandatory !== undefined,
    skrNamespace,
    previous,
    existing,
  };
  const reason = rewriteReason(input);
  if (!reason) return { manifest: existing! };
  if (existing && existing.spec.version !== resolved.version) {
    const gate = gateUpgrade({
      requiresDowntime: resolved.template.spec.requiresDowntime === true,
      skipMaintenanceWindows: kyma.spec.skipMaintenanceWindows === true,
      installedVersion: previous?.version ?? existing.spec.version,
      targetVersion: resolved.version,
      runtime: runtimeOfKyma(kyma.metadata.labels),
      now: ctx.clock(),
      policy: installation.maintenance?.policy(),
      minWindowMs: installation.maintenance?.minWindowMs ?? 0,
    });
    if (gate.kind === 'wait') return { manifest: existing, waiting: gate.message };
    if (gate.kind === 'error')
      return { ...withManifest(resolvedStatus(resolved), existing), state: 'Error', message: gate.message };
  }
  try {
    const manifest = await applyManifest(ctx, installation, input);
    ctx.logger.info(
      { kyma: kyma.metadata.name, module: module.name, manifest: manifest.metadata.name, reason },
      'Manifest written',
    );
    return { manifest };
  } catch (error) {
    // KCP failures back off the pass; anything else (the registry, the descriptor) fails this module only.
    if (error instanceof KubeRequestError || isUnreachable(error)) throw error;
    const message = `module ${module.name} ${resolved.version}: ${error instanceof Error ? error.message : String(error)}`;
    return existing
      ? { ...withManifest(resolvedStatus(resolved), existing), state: 'Error', message }
      : { ...resolvedStatus(resolved), state: 'Error', message };
  }
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
