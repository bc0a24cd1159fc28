// The module's objects as the SKR receives them: the raw manifest's documents checked to be Kubernetes objects, and
// upstream's transforms (managed-by and owned-by labels, the kyma component, the disclaimer, localized images, the
// SKR image pull Secret, the deployer's data from the KCP), which the pass and the targeted drift revert apply alike.
import { isRecord, type Manifest } from '@skr-watcher/api';
import {
  disclaimer,
  kymaComponent,
  localizeImages,
  managedByOwnedBy,
  skrImagePullSecret,
  type SetMember,
} from '@skr-watcher/kube';
import type { ModuleInstallation } from '../context.js';
import { injectDataFromKcp, type InjectedData } from './inject-data-from-kcp.js';

/** The objects of the raw manifest, each with apiVersion, kind and metadata.name; anything else fails the module. */
export function setMembers(objects: readonly unknown[], what: string): SetMember[] {
  return objects.map((object, index) => {
    if (
      !isRecord(object) ||
      typeof object['apiVersion'] !== 'string' ||
      typeof object['kind'] !== 'string' ||
      !isRecord(object['metadata']) ||
      typeof object['metadata']['name'] !== 'string'
    )
      throw new Error(
        `${what}: document ${index + 1} is not a Kubernetes object with apiVersion, kind and metadata.name`,
      );
    return object as SetMember;
  });
}

/**
 * Upstream's transforms of a Manifest's objects; the pass and the targeted drift revert (drift.ts) apply the same.
 * `injected` is the KCP data read for the deployer's Secrets (dataToInject in inject-data-from-kcp.ts).
 */
export function manifestTransforms(
  manifest: Manifest,
  namespace: string,
  installation: Pick<ModuleInstallation, 'skrImagePullSecret'>,
  injected?: InjectedData,
) {
  const manager = manifest.spec.manager;
  return [
    managedByOwnedBy({ namespace, name: manifest.metadata.name }),
    kymaComponent(manifest.metadata.name),
    disclaimer(),
    localizeImages(manifest.spec.localizedImages ?? []),
    ...(installation.skrImagePullSecret
      ? [
          skrImagePullSecret(
            installation.skrImagePullSecret,
            manager ? { kind: manager.kind, name: manager.name } : undefined,
          ),
        ]
      : []),
    ...(injected?.size ? [injectDataFromKcp(injected)] : []),
  ];
}
