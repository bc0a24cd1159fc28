// A module's Manifest in KCP (decision 021), with module installation from an OCI registry: written when missing
// or out of date, an upgrade held for the runtime's maintenance window, and the module's status entry as its
// Manifest reports it.
import { gateUpgrade, runtimeOfKyma } from '../../rollout/maintenance-window.js';
import { manifestName, type KymaModuleStatus, type Manifest } from '@skr-watcher/api';
import { isUnreachable, KubeRequestError } from '@skr-watcher/kube';
import type { ModuleInstallation } from '../context.js';
import {
  applyManifest,
  manifestState,
  manifestTracking,
  rewriteReason,
} from '../manifests/manifests-of-kyma.js';
import type { ModuleInput } from './module-input.js';
import { resolvedStatus } from './module-status.js';
import type { ResolvedModule } from './resolution.js';

/** The module's Manifest to reconcile; `waiting` says why an upgrade of it waits for a maintenance window. */
export interface ModuleManifest {
  manifest: Manifest;
  waiting?: string;
}

/** The module's status as its Manifest reports it: state, version, the Manifest and its default CR (upstream's). */
export function withManifest(base: KymaModuleStatus, manifest: Manifest): KymaModuleStatus {
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
export async function manifestOfModule(
  { ctx, kyma, wanted, skrNamespace, previous }: ModuleInput,
  resolved: ResolvedModule,
  manifests: ReadonlyMap<string, Manifest>,
  installation: ModuleInstallation,
): Promise<ModuleManifest | KymaModuleStatus> {
  const { module, mandatory } = wanted;
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
