// The modules of one Kyma: for each wanted module (listed in the SKR Kyma, or mandatory) its resolution, its
// Module CR in the SKR (created from the template's spec.data when absent) and its ModuleConfig mirror in KCP;
// for each module no longer wanted, its ModuleConfig and the Module CR the agent created. The result is the
// Kyma's status.modules in upstream's shape.
import type { KubernetesObject } from '@kubernetes/client-node';
import {
  DEFAULTS,
  FIELD_MANAGER,
  KINDS,
  LABELS,
  LIMITS,
  MANAGED_BY,
  nestsDeeperThan,
  trackedObject,
  type Kyma,
  type KymaModule,
  type KymaModuleStatus,
  type ModuleConfig,
  type ModuleReleaseMeta,
} from '@skr-watcher/api';
import {
  createIfAbsent,
  deleteIfExists,
  isUnreachable,
  KubeRequestError,
  readObject,
  type ClusterClient,
  type ObjectRef,
} from '@skr-watcher/kube';
import { apiVersionOf, type ReconcileContext } from './context.js';
import { deleteModuleConfig, mirrorModuleCr, readModuleConfig } from './module-config.js';
import { mirroredObjectOf } from './mirror-lanes.js';
import { isModuleFailure, resolveModule, type ModuleFailure, type ResolvedModule } from './resolution.js';
import { isResourceState, worstState } from './status.js';

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
): Promise<KymaModuleStatus[]> {
  const kymaName = kyma.metadata.name;
  const kymaKey = `${kyma.metadata.namespace ?? ctx.namespace}/${kymaName}`;
  const previousStatus = new Map((kyma.status?.modules ?? []).map((module) => [module.name, module]));
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
      ),
    ),
  );

  // Modules no longer wanted: their ModuleConfig goes, and a Module CR the agent created goes with it, unless
  // the module was unmanaged (then the user owns the Module CR).
  const wantedNames = new Set(wanted.map((entry) => entry.module.name));
  const dropped = new Set(
    [...configs.keys(), ...previousStatus.keys()].filter((name) => !wantedNames.has(name)),
  );
  for (const name of dropped) {
    const config = configs.get(name);
    const previous = previousStatus.get(name);
    const moduleCr = recordedModuleCr(previous, config);
    if (moduleCr && previous?.state !== 'Unmanaged') {
      const current = await readObject(skr.objects, moduleCr);
      if (current?.metadata?.labels?.[LABELS.managedBy] === MANAGED_BY)
        await deleteIfExists(skr.objects, moduleCr);
    }
    const remove = () => deleteModuleConfig(ctx, kymaName, name, config);
    await (moduleCr ? ctx.inMirrorLane(kymaKey, mirroredObjectOf(moduleCr), remove) : remove());
    ctx.logger.info({ kyma: kymaName, module: name }, 'module disabled; ModuleConfig removed');
  }
  return statuses;
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
    template: {
      apiVersion: apiVersionOf('moduleTemplate'),
      kind: KINDS.moduleTemplate.kind,
      metadata: {
        name: template.metadata.name,
        namespace: template.metadata.namespace ?? '',
        ...(template.metadata.generation === undefined ? {} : { generation: template.metadata.generation }),
      },
    },
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
    // The user runs the module: its Module CR is left alone and no longer mirrored (docs/decisions/009).
    await removeConfig(trackedObject(previous?.resource));
    const kept = { ...previous, name: module.name, state: 'Unmanaged' as const };
    delete kept.message;
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

  const base = resolvedStatus(resolved);
  const warn = (status: KymaModuleStatus): KymaModuleStatus =>
    resolved.warning
      ? { ...status, state: worstState([status.state, 'Warning']), message: resolved.warning }
      : status;
  if (!resolved.resource) {
    // A module without a default CR (no spec.data) is installed without one, as upstream does.
    await removeConfig(trackedObject(previous?.resource));
    return warn(base);
  }
  const resource = resolved.resource;
  // The Module CR is read, and its ModuleConfig read and written, inside its mirror lane: a targeted mirror of an
  // edit made after this read runs after this write (decision 010).
  return ctx.inMirrorLane(kymaKey, mirroredObjectOf(resource), async () => {
    const fresh = readModuleConfig(ctx, kymaName, module.name);
    fresh.catch(() => undefined);
    let moduleCr: (KubernetesObject & { spec?: unknown; status?: unknown }) | undefined;
    try {
      moduleCr = (await readObject(skr.objects, resource)) as
        (KubernetesObject & { spec?: unknown; status?: unknown }) | undefined;
      if (!moduleCr) {
        if ((module.customResourcePolicy ?? 'CreateAndDelete') === 'Ignore') {
          if (await fresh) await deleteModuleConfig(ctx, kymaName, module.name);
          return warn({
            ...base,
            state: 'Warning',
            message: `Module CR ${resource.kind} ${resource.namespace}/${resource.name} absent; customResourcePolicy Ignore leaves it to the user`,
          });
        }
        const data = resolved.template.spec.data!;
        const body = {
          apiVersion: data.apiVersion,
          kind: data.kind,
          metadata: {
            name: resource.name,
            namespace: resource.namespace,
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
      return { ...base, state: 'Error', message };
    }
    const crState = (moduleCr.status as { state?: unknown } | undefined)?.state;
    const state = isResourceState(crState) ? crState : 'Ready';
    await mirrorModuleCr(ctx, kymaName, module.name, moduleCr, state, await fresh);
    return warn({ ...base, state, ...(state !== 'Ready' ? { message: `Module CR state ${state}` } : {}) });
  });
}
