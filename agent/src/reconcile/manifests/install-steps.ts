// The install (or upgrade) of one Manifest's module (decision 021), as upstream's Manifest controller runs it, one
// named step after another; a step that cannot go on ends the pass with the status it names:
//   add finalizers → resolve the source (the raw manifest from the registry, and for the deployer module the KCP
//   data its Secrets take) → apply the set (rendered with upstream's transforms; the object-set engine checks each
//   object's holder, applies CRDs and Namespaces first and prunes only once the new set is in place) → judge the
//   apply (refused, failed, waiting) → create the default CR (once, after its CRD exists) → check readiness (every
//   workload, then the customStateCheck) → write the status → record the digest installed.
import {
  ANNOTATIONS,
  MANIFEST,
  MANIFEST_CONDITIONS,
  parseManifest,
  type Manifest,
  type SyncedObject,
} from '@skr-watcher/api';
import {
  applyObjectSet,
  createIfAbsent,
  isUnreachable,
  KubeRequestError,
  mergePatchCustomObject,
  readinessOfSet,
  type ApplySetResult,
  type ClusterClient,
  type SetMember,
} from '@skr-watcher/kube';
import type { Logger } from '@skr-watcher/telemetry';
import { agentOwnedObjects } from '../agent-owned.js';
import type { ModuleInstallation } from '../context.js';
import { customState, defaultCrBody, type StateVerdict } from './default-cr.js';
import { ensureFinalizers, type FinalizerWriter } from './finalizers.js';
import { dataToInject, type InjectedData } from './inject-data-from-kcp.js';
import { conditionTrue, hasDefaultCr, holdingOf, refOfManifest } from './manifest.js';
import { writeStatus, type StatusInput, type StatusWriter } from './manifest-status.js';
import { manifestTransforms, setMembers } from './render.js';
import { endWith, halt, messageOf, proceed, type ManifestOutcome, type StepResult } from './step-result.js';

/** What the install steps use of the pass: the Manifest's store, the clock, the KCP namespace and the log. */
export interface InstallContext extends StatusWriter, FinalizerWriter {
  /** The Manifests, and the KCP Secrets whose data the deployer module's Secrets take. */
  kcp: Pick<ClusterClient, 'custom' | 'core'>;
  namespace: string;
  logger: Logger;
}

/**
 * What the install steps use of module installation: the raw manifest's objects, the SKR pull Secret and the
 * restricted modules (`deployer` among them turns the injection of KCP data on).
 */
export type ModuleObjects = Pick<ModuleInstallation, 'objects' | 'skrImagePullSecret' | 'restrictedModules'>;

/** The set as the registry serves it and the KCP data its Secrets take. */
interface ResolvedSource {
  objects: SetMember[];
  injected: InjectedData;
}

/** One install pass: who runs it, against which SKR, for which Manifest (as its finalizers left it). */
interface InstallPass {
  ctx: InstallContext;
  skr: ClusterClient;
  installation: ModuleObjects;
  manifest: Manifest;
  log: Logger;
}

/** The agent's own objects in an SKR, which no module may write or delete. */
const AGENT_OWNED = agentOwnedObjects();

/** Installs or upgrades the module of a Manifest that is not being deleted; answers the Manifest as left. */
export async function installModule(
  ctx: InstallContext,
  skr: ClusterClient,
  installation: ModuleObjects,
  given: Manifest,
): Promise<ManifestOutcome> {
  const log = ctx.logger.child({ manifest: `${given.metadata.namespace}/${given.metadata.name}` });
  const pass: InstallPass = { ctx, skr, installation, manifest: await addFinalizers(ctx, given), log };
  const end = (status: StatusInput) => endWith(ctx, pass.manifest, status);

  const applied = await applySpecSet(pass);
  if (!applied.proceed) return end(applied.status);
  const moduleCr = await createDefaultCr(pass, applied.value.inventory);
  if (!moduleCr.proceed) return end(moduleCr.status);
  const verdict = await checkReadiness(pass, applied.value.inventory);
  const written = await writeStatus(
    ctx,
    pass.manifest,
    installStatus(verdict, applied.value, moduleCr.value),
  );
  // The digest counts as installed once the module is Ready on it (upstream's sync-oci-ref).
  return { manifest: verdict.state === 'Ready' ? await recordDigest(pass, written) : written };
}

/**
 * The set of the Manifest's spec kept in the SKR: pulled, rendered and applied, what left it pruned once the new set
 * is in place; the apply's verdict (refused or failed: Error; waiting: Processing).
 */
async function applySpecSet(pass: InstallPass): Promise<StepResult<ApplySetResult>> {
  const source = await resolveSource(pass);
  if (!source.proceed) return source;
  return judgeApply(await applySet(pass, source.value));
}

/**
 * The set of a deleted Manifest's spec while its removal waits for the default CR: a version written after the
 * deletion began (a new channel version, a re-enabled module in another channel) is applied, as upstream keeps such a
 * module up to date, and what left the set is pruned. Only when the spec's digest is not the one installed
 * (sync-oci-ref), which is recorded once the set is in place. Answers the inventory the SKR now holds, and why the
 * set is not (fully) applied: that never holds up the removal, which needs nothing from the registry.
 */
export async function keepSpecSetWhileDeleting(
  ctx: InstallContext,
  skr: ClusterClient,
  installation: ModuleObjects,
  manifest: Manifest,
): Promise<{ synced: SyncedObject[]; problem?: string }> {
  const synced = manifest.status?.synced ?? [];
  const ref = manifest.spec.install.source.ref;
  if (!ref || manifest.metadata.annotations?.[ANNOTATIONS.syncOciRef] === ref) return { synced };
  const log = ctx.logger.child({ manifest: `${manifest.metadata.namespace}/${manifest.metadata.name}` });
  const pass = { ctx, skr, installation, manifest, log };
  const applied = await applySpecSet(pass);
  if (!applied.proceed) return { synced: applied.status.synced, problem: applied.status.operation };
  await recordDigest(pass, manifest);
  return { synced: applied.value.inventory };
}

/** The agent's finalizer: the removal (default CR first, then the set) runs behind it (decision 028). */
function addFinalizers(ctx: FinalizerWriter, manifest: Manifest): Promise<Manifest> {
  return ensureFinalizers(ctx, manifest, [MANIFEST.finalizer]);
}

/**
 * The raw manifest's objects and the KCP data they take; what fails the module (registry, digest, YAML, a document,
 * the deployer's KCP Secret) is its Error.
 */
async function resolveSource({
  ctx,
  manifest,
  installation,
}: InstallPass): Promise<StepResult<ResolvedSource>> {
  const what = `Manifest ${manifest.metadata.name} (${manifest.spec.install.source.name ?? '?'} ${manifest.spec.version ?? ''})`;
  try {
    const objects = setMembers(await installation.objects(manifest), what);
    return proceed({
      objects,
      injected: await dataToInject(ctx.kcp, ctx.namespace, manifest, installation, objects),
    });
  } catch (error) {
    if (error instanceof KubeRequestError) throw error;
    return halt({
      state: 'Error',
      operation: messageOf(error),
      synced: manifest.status?.synced ?? [],
      resources: false,
    });
  }
}

/** The set rendered and kept in the SKR by the object-set engine: holders checked, applied in order, then pruned. */
function applySet(
  { ctx, skr, installation, manifest }: InstallPass,
  { objects, injected }: ResolvedSource,
): Promise<ApplySetResult> {
  const namespace = manifest.metadata.namespace ?? ctx.namespace;
  return applyObjectSet(
    skr,
    { objects: objects.map((object) => ({ object })), inventory: manifest.status?.synced ?? [] },
    {
      fieldManager: MANIFEST.applyFieldManager,
      transforms: manifestTransforms(manifest, namespace, installation, injected),
      refuse: (object) => AGENT_OWNED.reasonFor(object),
      holding: holdingOf(manifest, namespace),
    },
  );
}

/**
 * The apply's verdict: objects refused (held by another) or failed are the module's Error; CRDs not yet Established
 * or removals unfinished keep it Processing; a set in place goes on to the default CR.
 */
function judgeApply(applied: ApplySetResult): StepResult<ApplySetResult> {
  const { results, inventory } = applied;
  const refused = results.filter((result) => result.outcome === 'refused');
  if (applied.state === 'failed' || refused.length > 0) {
    const failed = results.filter((result) => result.outcome === 'failed' || result.outcome === 'refused');
    const message = failed
      .map((result) => result.message)
      .slice(0, 3)
      .join('; ');
    return halt({ state: 'Error', operation: message, synced: inventory, resources: true, holding: results });
  }
  if (applied.state === 'waiting') {
    const waiting = results.find((result) => result.outcome === 'waiting');
    const operation = waiting?.message ?? 'waiting for resources to be applied';
    return halt({ state: 'Processing', operation, synced: inventory, resources: true, holding: results });
  }
  return proceed(applied);
}

/**
 * The default CR, once, after the set (and so its CRD) is in place; a user's deletion of it stands. Answers whether
 * it was created in this pass (undefined when it was not due).
 */
async function createDefaultCr(
  { skr, manifest, log }: InstallPass,
  inventory: SyncedObject[],
): Promise<StepResult<boolean | undefined>> {
  if (!hasDefaultCr(manifest) || conditionTrue(manifest, MANIFEST_CONDITIONS.moduleCr.type))
    return proceed(undefined);
  try {
    await createIfAbsent(skr.objects, defaultCrBody(manifest), MANIFEST.resourceFieldManager);
    log.info(
      { gvk: `${manifest.spec.resource!.apiVersion}/${manifest.spec.resource!.kind}` },
      'default CR created',
    );
    return proceed(true);
  } catch (error) {
    if (isUnreachable(error) || !(error instanceof KubeRequestError)) throw error;
    return halt({
      state: 'Error',
      operation: `default CR: ${messageOf(error)}`,
      synced: inventory,
      resources: true,
      moduleCr: false,
    });
  }
}

/** Every workload of the set; with a customStateCheck the default CR has the last word once they are up (decision 025). */
async function checkReadiness(
  { ctx, skr, manifest }: InstallPass,
  inventory: SyncedObject[],
): Promise<StateVerdict> {
  const readiness = await readinessOfSet(skr, inventory);
  if (readiness.state !== 'Ready')
    return {
      state: readiness.state,
      operation: readiness.message ?? 'waiting for resources to become ready',
    };
  return (
    (await customState(skr, manifest, ctx.clock())) ?? { state: 'Ready', operation: 'resources are ready' }
  );
}

/** The status an install pass ends with: its verdict, the set's inventory and the conditions this pass settled. */
function installStatus(
  verdict: StateVerdict,
  applied: ApplySetResult,
  moduleCr: boolean | undefined,
): StatusInput {
  return {
    ...verdict,
    synced: applied.inventory,
    resources: true,
    installation: verdict.state === 'Ready' ? true : undefined,
    ...(moduleCr === undefined ? {} : { moduleCr }),
    holding: applied.results,
  };
}

/** Writes the spec's digest as the one installed (sync-oci-ref) unless it is already; answers the Manifest. */
async function recordDigest({ ctx, manifest, log }: InstallPass, written: Manifest): Promise<Manifest> {
  const ref = manifest.spec.install.source.ref;
  const installed = manifest.metadata.annotations?.[ANNOTATIONS.syncOciRef];
  if (!ref || installed === ref) return written;
  const patched = await mergePatchCustomObject(ctx.kcp.custom, refOfManifest(manifest), {
    metadata: { annotations: { [ANNOTATIONS.syncOciRef]: ref } },
  });
  const next = parseManifest(patched, `Manifest ${manifest.metadata.name}`);
  log.info(
    { version: manifest.spec.version, ref },
    installed === undefined ? 'module installed' : 'module upgraded',
  );
  return next;
}
