// The modules of one Kyma: for each wanted module (listed in the SKR Kyma, or mandatory) its status entry, in
// the Kyma's mode (registry-mode.ts with module installation from an OCI registry, else template-mode.ts); for
// each module no longer wanted, what the mode installed, its ModuleConfig and, where the agent created it, its
// Module CR. The result is the Kyma's status.modules in upstream's shape.
import type { Kyma, KymaModuleStatus, ModuleConfig, ModuleReleaseMeta, SyncedObject } from '@skr-watcher/api';
import { inModuleCrLane } from './mirror-step.js';
import { deleteModuleConfig } from './module-config.js';
import { kymaKeyOf, type KymaScope, type ModuleMode, type WantedModule } from './module-input.js';
import { recordedModuleCr } from './module-status.js';
import { reconcileModule } from './reconcile-module.js';
import { registryMode } from './registry-mode.js';
import { templateMode } from './template-mode.js';
import { boundUnknownModules } from './unknown-modules.js';

export type { KymaScope, WantedModule } from './module-input.js';
export { recordedModuleCr } from './module-status.js';
export { boundUnknownModules, MAX_UNKNOWN_MODULE_ENTRIES } from './unknown-modules.js';

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

/** What the Kyma's modules are converged from, beside the Kyma and its SKR. */
export interface ModulesInput {
  wanted: WantedModule[];
  /** The channel modules resolve in unless they name their own: the SKR Kyma's, else the KCP Kyma's. */
  kymaChannel: string | undefined;
  skrNamespace: string;
  /** The Kyma's ModuleConfigs by module name. */
  configs: Map<string, ModuleConfig>;
  /** Filled with the objects the Kyma's Manifests keep in the SKR (the SyncResource guard's `manifestObjects`). */
  manifestObjects?: SyncedObject[];
}

export async function reconcileModules(
  scope: KymaScope,
  { wanted, kymaChannel, skrNamespace, configs, manifestObjects = [] }: ModulesInput,
): Promise<KymaModuleStatus[]> {
  const { ctx, kyma } = scope;
  const previousStatus = new Map((kyma.status?.modules ?? []).map((module) => [module.name, module]));
  const mode = ctx.modules ? await registryMode(scope, ctx.modules, manifestObjects) : templateMode(scope);
  // Modules are independent of each other: one round trip of latency for all of them, not one each.
  const statuses = await settleAll(
    wanted.map((entry) =>
      reconcileModule(
        {
          ...scope,
          wanted: entry,
          kymaChannel,
          skrNamespace,
          previous: previousStatus.get(entry.module.name),
        },
        mode,
      ),
    ),
  );

  const wantedNames = new Set(wanted.map((entry) => entry.module.name));
  const dropped = new Set(
    [...configs.keys(), ...previousStatus.keys()].filter((name) => !wantedNames.has(name)),
  );
  statuses.push(...(await mode.removeUnwanted(wantedNames, previousStatus, { kymaChannel, skrNamespace })));
  await removeDroppedModules(scope, mode, dropped, configs, previousStatus);
  return boundUnknownModules(statuses);
}

/**
 * Modules no longer wanted: their ModuleConfig goes, and a Module CR the agent created goes with it, unless
 * the module was unmanaged (then the user owns the Module CR).
 */
async function removeDroppedModules(
  { ctx, kyma }: KymaScope,
  mode: ModuleMode,
  dropped: ReadonlySet<string>,
  configs: ReadonlyMap<string, ModuleConfig>,
  previousStatus: ReadonlyMap<string, KymaModuleStatus>,
): Promise<void> {
  const kymaName = kyma.metadata.name;
  for (const name of dropped) {
    const config = configs.get(name);
    const previous = previousStatus.get(name);
    const moduleCr = recordedModuleCr(previous, config);
    if (moduleCr && previous?.state !== 'Unmanaged') await mode.removeModuleCr(moduleCr);
    await inModuleCrLane(ctx, kymaKeyOf(ctx, kyma), moduleCr, () =>
      deleteModuleConfig(ctx, kymaName, name, config),
    );
    ctx.logger.info({ kyma: kymaName, module: name }, 'module disabled; ModuleConfig removed');
  }
}
