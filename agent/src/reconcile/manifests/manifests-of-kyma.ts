// The Kyma side of module installation (with --oci-registry-host, docs/decisions/021): one Manifest per wanted
// module in the Kyma's namespace, named, labelled, annotated and owned as upstream lifecycle-manager does, so a
// Manifest upstream wrote is found under the same name and adopted. A Manifest is written (server-side apply under
// upstream's field manager) only when it is missing or its version, channel or template generation changed; the
// registry is asked for the descriptor only then. The module's state and version in the Kyma status come from it.
import {
  ANNOTATIONS,
  DEFAULTS,
  GROUP,
  KINDS,
  LABELS,
  MANIFEST,
  listItems,
  manifestName,
  parseManifest,
  type Kyma,
  type KymaModule,
  type KymaModuleStatus,
  type Manifest,
  type ManifestResource,
  type ModuleState,
} from '@skr-watcher/api';
import { applyCustomObject, deleteCustomObjectIfExists, parsedInPlace, parsedOnce } from '@skr-watcher/kube';
import {
  apiVersionOf,
  listKcp,
  refOf,
  trackingOf,
  type ModuleInstallation,
  type ReconcileContext,
} from '../context.js';
import type { ResolvedModule } from '../modules/resolution.js';
import { bucketOf } from '../../sharding/ring.js';

const LISTED = 'Manifest';
const parseListed = (object: unknown) => parseManifest(object, 'Manifest');
/** The controller's Manifest cache keeps each Manifest as `manifestsOf` reads it: one copy, validated once. */
export const cachedManifest = parsedInPlace(LISTED, parseListed);

/** The Manifests of one Kyma by name, from a watch cache (a stale answer costs a rewrite at most). */
export async function manifestsOf(ctx: ReconcileContext, kyma: string): Promise<Map<string, Manifest>> {
  const items =
    ctx.caches?.manifests?.(kyma) ??
    listItems(await listKcp(ctx, 'manifest', `${LABELS.kymaName}=${kyma}`), `Manifest list ${ctx.namespace}`);
  const byName = new Map<string, Manifest>();
  for (const item of items) {
    const manifest = parsedOnce(item, LISTED, parseListed);
    byName.set(manifest.metadata.name, manifest);
  }
  return byName;
}

/** The tracking object `status.modules[].manifest` of the Kyma. */
export function manifestTracking(manifest: Manifest): NonNullable<KymaModuleStatus['manifest']> {
  return trackingOf('manifest', manifest.metadata);
}

/** A module's state as its Manifest reports it; a Manifest nobody reconciled yet is Processing. */
export function manifestState(manifest: Manifest): ModuleState {
  const state = manifest.status?.state;
  return state ? state : 'Processing';
}

/**
 * The default Module CR as the Manifest carries it: the template's spec.data, named after the Manifest and placed
 * in the SKR's sync namespace when the template leaves those out (upstream's `setNameAndNamespaceIfEmpty`).
 */
export function manifestResource(
  resolved: ResolvedModule,
  name: string,
  skrNamespace: string,
): ManifestResource | undefined {
  const data = resolved.template.spec.data;
  if (!data) return undefined;
  const copy = structuredClone(data) as ManifestResource;
  copy.metadata = {
    ...copy.metadata,
    name: data.metadata?.name || name,
    namespace: data.metadata?.namespace || skrNamespace,
  };
  return copy;
}

export interface ManifestInput {
  kyma: Kyma;
  module: KymaModule;
  resolved: ResolvedModule;
  ocmComponentName: string;
  mandatory: boolean;
  skrNamespace: string;
  /** The module's entry in the Kyma status before this pass: its template generation decides a rewrite. */
  previous: KymaModuleStatus | undefined;
  existing: Manifest | undefined;
}

/** Why the Manifest must be written now, or undefined when it is as it should be (upstream's `NeedToUpdate`). */
export function rewriteReason(input: ManifestInput): string | undefined {
  const { existing, resolved, previous, mandatory } = input;
  if (!existing) return 'absent';
  if (existing.spec.version !== resolved.version)
    return `version ${existing.spec.version} -> ${resolved.version}`;
  if (!mandatory && existing.metadata.labels?.[LABELS.channel] !== resolved.channel)
    return `channel ${existing.metadata.labels?.[LABELS.channel]} -> ${resolved.channel}`;
  const generation = resolved.template.metadata.generation;
  if (!mandatory && previous?.template?.metadata?.generation !== generation)
    return 'template generation changed';
  return undefined;
}

/** Writes the Manifest of a module; answers it as the API server stored it. */
export async function applyManifest(
  ctx: ReconcileContext,
  installation: ModuleInstallation,
  input: ManifestInput,
): Promise<Manifest> {
  const { kyma, module, resolved, ocmComponentName, mandatory, existing } = input;
  const namespace = kyma.metadata.namespace ?? ctx.namespace;
  const name = manifestName(ocmComponentName, kyma.metadata.name, module.name);
  const description = await installation.describe(ocmComponentName, resolved.version);
  const templateLabels = resolved.template.metadata.labels;
  const resource = manifestResource(resolved, name, input.skrNamespace);
  const owners = existing?.metadata.ownerReferences;
  const customStateCheck = resolved.template.spec.customStateCheck?.filter(
    (check) => check.mappedState !== '',
  );
  const body = {
    apiVersion: apiVersionOf('manifest'),
    kind: KINDS.manifest.kind,
    metadata: {
      name,
      namespace,
      labels: {
        [LABELS.kymaName]: kyma.metadata.name,
        [LABELS.moduleName]: module.name,
        [LABELS.managedBy]: MANIFEST.managedBy,
        // As on ModuleConfigs: a sharded replica's Manifest watch selects its buckets by it, so a Manifest written
        // with it needs no second write to get there (and no race of that write with the Manifest's finalizers).
        [LABELS.shardBucket]: String(bucketOf(kyma.metadata.name)),
        ...(mandatory
          ? { [LABELS.mandatoryModule]: 'true' }
          : { [LABELS.channel]: resolved.channel ?? DEFAULTS.channel }),
        ...(templateLabels ? { [LABELS.controllerName]: templateLabels[LABELS.controllerName] ?? '' } : {}),
      },
      annotations: {
        [ANNOTATIONS.ocmComponentName]: ocmComponentName,
        [ANNOTATIONS.fqdn]: ocmComponentName,
        // Upstream's former carrier of the template's customStateCheck; absent when the template sets none.
        ...(customStateCheck?.length
          ? { [ANNOTATIONS.customStateCheck]: JSON.stringify(customStateCheck) }
          : {}),
      },
      // Upstream sets the Kyma as controller only when the Manifest has no owner yet; applying it again keeps it.
      ...(owners && owners.length > 0 && !owners.some((owner) => owner.uid === kyma.metadata.uid)
        ? {}
        : kyma.metadata.uid
          ? {
              ownerReferences: [
                {
                  apiVersion: `${GROUP}/${KINDS.kyma.version}`,
                  kind: KINDS.kyma.kind,
                  name: kyma.metadata.name,
                  uid: kyma.metadata.uid,
                  controller: true,
                  blockOwnerDeletion: true,
                },
              ],
            }
          : {}),
    },
    spec: {
      customResourcePolicy: mandatory
        ? 'CreateAndDelete'
        : (module.customResourcePolicy ?? 'CreateAndDelete'),
      remote: false,
      version: resolved.version,
      install: description.install,
      ...(resource ? { resource } : {}),
      localizedImages: description.localizedImages,
      ...(resolved.template.spec.manager ? { manager: resolved.template.spec.manager } : {}),
    },
  };
  const written = await applyCustomObject(ctx.kcp.custom, refOf('manifest', namespace, name), body, {
    fieldManager: MANIFEST.kymaFieldManager,
    force: true,
  });
  return parseManifest(written, `Manifest ${namespace}/${name}`);
}

/** Marks the Manifest of a module the user now runs: its reconcile leaves the SKR objects and removes it. */
export async function markUnmanaged(ctx: ReconcileContext, manifest: Manifest): Promise<void> {
  if (manifest.metadata.annotations?.[ANNOTATIONS.isUnmanaged] === 'true') return;
  const namespace = manifest.metadata.namespace ?? ctx.namespace;
  await applyCustomObject(
    ctx.kcp.custom,
    refOf('manifest', namespace, manifest.metadata.name),
    {
      apiVersion: apiVersionOf('manifest'),
      kind: KINDS.manifest.kind,
      metadata: {
        name: manifest.metadata.name,
        namespace,
        annotations: { [ANNOTATIONS.isUnmanaged]: 'true' },
      },
    },
    // Its own field manager: applied under upstream's, the other fields of that manager would be dropped.
    { fieldManager: `${MANIFEST.kymaFieldManager}-unmanaged`, force: true },
  );
}

/** Deletes a Manifest (its reconcile then removes the module from the SKR); false when it was gone. */
export function deleteManifest(ctx: ReconcileContext, manifest: Manifest): Promise<boolean> {
  if (manifest.metadata.deletionTimestamp) return Promise.resolve(true);
  const namespace = manifest.metadata.namespace ?? ctx.namespace;
  return deleteCustomObjectIfExists(ctx.kcp.custom, refOf('manifest', namespace, manifest.metadata.name));
}
