// What one module's reconcile is given (the Kyma, the wanted module, where it resolves, its status entry so far),
// and the interface of the two ways a module is installed: from an OCI registry through a Manifest
// (registry-mode.ts), or as a Module CR created from its ModuleTemplate's spec.data (template-mode.ts).
import type { Kyma, KymaModule, KymaModuleStatus, ModuleReleaseMeta } from '@skr-watcher/api';
import type { ClusterClient, ObjectRef } from '@skr-watcher/kube';
import type { ReconcileContext } from '../context.js';
import type { ModuleFailure, ResolvedModule } from './resolution.js';

/** What a module is reconciled from; `mandatory` is its ModuleReleaseMeta when the module is mandatory. */
export interface WantedModule {
  module: KymaModule;
  mandatory?: ModuleReleaseMeta;
}

/** The KCP Kyma whose modules are reconciled, and the client of its SKR. */
export interface KymaScope {
  ctx: ReconcileContext;
  kyma: Kyma;
  skr: ClusterClient;
}

/** One wanted module of the Kyma in `KymaScope`, with what its resolution needs and its status entry so far. */
export interface ModuleInput extends KymaScope {
  wanted: WantedModule;
  kymaChannel: string | undefined;
  skrNamespace: string;
  previous: KymaModuleStatus | undefined;
}

/** Where the Kyma's modules resolve: the channel they fall back to and the SKR namespace of their default CRs. */
export type ResolutionScope = Pick<ModuleInput, 'kymaChannel' | 'skrNamespace'>;

/** How modules are installed in the SKR, and removed from it, in one mode. */
export interface ModuleMode {
  /** Installs a resolved module and mirrors its Module CR; the module's status entry. */
  install(input: ModuleInput, resolved: ResolvedModule): Promise<KymaModuleStatus>;
  /** Lets go of what this mode installed for a module the user now runs (managed: false). */
  release(input: ModuleInput): Promise<void>;
  /**
   * A wanted module the Kyma may not use (`failure.accessDenied`: its access was taken away): what this mode
   * installed for it goes, as upstream removes it; the module's status entry.
   */
  revoke(input: ModuleInput, failure: ModuleFailure): Promise<KymaModuleStatus>;
  /**
   * Removes what this mode installed for modules not in `wanted`; the entries of those still being removed. A module
   * being removed still follows its channel (resolved in `scope`), as upstream keeps it up to date until it is gone.
   */
  removeUnwanted(
    wanted: ReadonlySet<string>,
    previousStatus: ReadonlyMap<string, KymaModuleStatus>,
    scope: ResolutionScope,
  ): Promise<KymaModuleStatus[]>;
  /** Deletes the Module CR of a module no longer wanted, where this mode is the one that deletes it. */
  removeModuleCr(moduleCr: ObjectRef): Promise<void>;
}

/** The Kyma's key (namespace/name), as mirror lanes name it. */
export function kymaKeyOf(ctx: ReconcileContext, kyma: Kyma): string {
  return `${kyma.metadata.namespace ?? ctx.namespace}/${kyma.metadata.name}`;
}
