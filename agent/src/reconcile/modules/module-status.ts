// The status entries of a Kyma's modules (status.modules, upstream's shape) that both module modes report: a
// resolved module, a resolution failure, a resolution warning, an unmanaged module; and the Module CR identity an
// entry or a ModuleConfig records.
import { trackedObject, type KymaModuleStatus, type ModuleConfig } from '@skr-watcher/api';
import type { ObjectRef } from '@skr-watcher/kube';
import { trackingOf } from '../context.js';
import { worstState } from '../status.js';
import type { ModuleFailure, ResolvedModule } from './resolution.js';

/** The module status of a resolved module, before its Module CR is looked at. */
export function resolvedStatus(resolved: ResolvedModule): KymaModuleStatus {
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

/** `status` of a module resolved not as asked (e.g. a downgrade refused): at least Warning, with the reason. */
export function withWarning(resolved: ResolvedModule, status: KymaModuleStatus): KymaModuleStatus {
  return resolved.warning
    ? { ...status, state: worstState([status.state, 'Warning']), message: resolved.warning }
    : status;
}

/**
 * A resolution failure. A ModuleReleaseMeta that went missing under an installed module keeps what was
 * installed in status: Error the first time, Warning from then on, as upstream reports it. A module the Kyma may
 * not use, or whose template is missing, reports upstream's text as it is (tools compare it).
 */
export function failedStatus(
  failure: ModuleFailure,
  previous: KymaModuleStatus | undefined,
): KymaModuleStatus {
  const message =
    failure.accessDenied || failure.upstreamText ? failure.message : `${failure.reason}: ${failure.message}`;
  if (failure.reason === 'ModuleReleaseMetaNotFound' && previous?.template) {
    const reported = previous.state === 'Error' || previous.state === 'Warning';
    return { ...previous, state: reported ? 'Warning' : 'Error', message };
  }
  return { name: failure.name, state: 'Error', message };
}

/** A module the user runs (managed: false): what was reported so far, Unmanaged, without message or Manifest. */
export function unmanagedStatus(name: string, previous: KymaModuleStatus | undefined): KymaModuleStatus {
  const kept = { ...previous, name, state: 'Unmanaged' as const };
  delete kept.message;
  // Upstream reports no Manifest for an unmanaged module.
  delete kept.manifest;
  return kept;
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
