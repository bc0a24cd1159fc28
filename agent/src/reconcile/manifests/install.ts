// The reconcile of one Manifest (decision 021): its raw manifest pulled from the registry, rendered with upstream's
// transforms and kept in the SKR by the object-set engine (CRDs and Namespaces first, prune only after the new set is
// in place), the default CR created once after its CRD exists, readiness from every workload of the set; deletion in
// upstream's order (users' CRs of the module's kind block it, then the default CR, then the set in two phases, then
// the finalizers). It runs inside its Kyma's pass, with the Kyma's SKR client, so it shares the Kyma's lane and shard.
import { checkState, parseStateChecks, type StateCheck } from '../../rollout/custom-state-check.js';
import { isDeepStrictEqual } from 'node:util';
import type { KubernetesObject } from '@kubernetes/client-node';
import {
  ANNOTATIONS,
  DEFAULTS,
  KINDS,
  LABELS,
  MANIFEST,
  MANIFEST_CONDITIONS,
  isRecord,
  parseManifest,
  type Condition,
  type Manifest,
  type ManifestStatus,
  type SyncedObject,
} from '@skr-watcher/api';
import {
  applyCustomStatus,
  applyObjectSet,
  createIfAbsent,
  deleteCustomObjectIfExists,
  deleteIfExists,
  getCustomObject,
  disclaimer,
  isConflict,
  isUnreachable,
  kymaComponent,
  KubeRequestError,
  localizeImages,
  manifestHolder,
  skrImagePullSecret,
  managedByOwnedBy,
  mergePatchCustomObject,
  MODULE_OBJECT_METADATA,
  readinessOfSet,
  readObject,
  releaseObjects,
  removeObjects,
  withContext,
  type ClusterClient,
  type Holding,
  type MemberResult,
  type SetMember,
} from '@skr-watcher/kube';
import { agentOwnedObjects } from '../agent-owned.js';
import { apiVersionOf, listKcp, refOf, type ModuleInstallation, type ReconcileContext } from '../context.js';
import type { KymaEventTarget } from '../events.js';
import { conditionsFor } from '../status.js';

const OWN_FINALIZERS: readonly string[] = [
  MANIFEST.finalizer,
  MANIFEST.labelRemovalFinalizer,
  MANIFEST.resourceFinalizer,
];

/** What the Kyma pass learns from one Manifest's reconcile. */
export interface ManifestOutcome {
  /** The Manifest as this pass left it (its status is what the Kyma reports); undefined once it is gone. */
  manifest: Manifest | undefined;
}

function refOfManifest(manifest: Manifest) {
  return refOf('manifest', manifest.metadata.namespace ?? DEFAULTS.kcpNamespace, manifest.metadata.name);
}

/** The Manifest as the holder of its objects in the SKR (decision 026). */
function holdingOf(manifest: Manifest, namespace: string): Holding {
  return { self: manifestHolder(namespace, manifest.metadata.name) };
}

/** The agent's own objects in an SKR, which no module may write or delete. */
const AGENT_OWNED = agentOwnedObjects();

function hasDefaultCr(manifest: Manifest): boolean {
  return (
    manifest.spec.resource !== undefined &&
    (manifest.spec.customResourcePolicy ?? 'CreateAndDelete') !== 'Ignore'
  );
}

function conditionTrue(manifest: Manifest, type: string): boolean {
  return manifest.status?.conditions?.some((c) => c.type === type && c.status === 'True') ?? false;
}

/** The Manifest's finalizers set to `next`, guarded by the resourceVersion it was read at (409 when it moved on). */
async function setFinalizers(
  ctx: Pick<ReconcileContext, 'kcp'>,
  manifest: Manifest,
  next: string[],
): Promise<Manifest> {
  const written = await mergePatchCustomObject(ctx.kcp.custom, refOfManifest(manifest), {
    metadata: { finalizers: next, resourceVersion: manifest.metadata.resourceVersion },
  });
  return parseManifest(written, `Manifest ${manifest.metadata.name}`);
}

/**
 * Adds the finalizers of `wanted` the Manifest lacks; answers the Manifest as written. When another writer was first
 * (the bucket label a sharded replica puts on a Manifest written without it, a user), the Manifest is read again and
 * the patch sent once more, up to three times, then the pass fails: a pass must not go on without them, since a
 * Manifest deleted without its finalizers leaves its module's objects in the SKR, and nothing else brings the Kyma
 * back before its next resync (a fleet of 5,000 Kymas on three replicas lost them on about one Manifest in twenty).
 */
export async function ensureFinalizers(
  ctx: Pick<ReconcileContext, 'kcp' | 'logger'>,
  manifest: Manifest,
  wanted: string[],
): Promise<Manifest> {
  for (let attempt = 1; ; attempt++) {
    const finalizers = manifest.metadata.finalizers ?? [];
    const missing = wanted.filter((f) => !finalizers.includes(f));
    if (missing.length === 0) return manifest;
    try {
      const written = await setFinalizers(ctx, manifest, [...finalizers, ...missing]);
      ctx.logger.info(
        { manifest: `${manifest.metadata.namespace}/${manifest.metadata.name}`, finalizers: missing },
        'Manifest finalizers added',
      );
      return written;
    } catch (error) {
      if (!isConflict(error) || attempt >= 3) throw error;
      const fresh = await getCustomObject(ctx.kcp.custom, refOfManifest(manifest));
      // Gone meanwhile: this pass ends here, and the next one finds it gone.
      if (fresh === undefined) throw error;
      manifest = parseManifest(fresh, `Manifest ${manifest.metadata.name}`);
    }
  }
}

/** Drops this controller's finalizers (upstream's three); the API server then removes a deleted Manifest. */
async function releaseManifest(ctx: ReconcileContext, manifest: Manifest): Promise<void> {
  const finalizers = manifest.metadata.finalizers ?? [];
  if (!finalizers.some((f) => OWN_FINALIZERS.includes(f))) return;
  try {
    await setFinalizers(
      ctx,
      manifest,
      finalizers.filter((f) => !OWN_FINALIZERS.includes(f)),
    );
  } catch (error) {
    // Another writer was first: the next pass reads it again.
    if (!isConflict(error)) throw error;
  }
}

interface StatusInput {
  state: NonNullable<ManifestStatus['state']>;
  operation: string;
  synced: SyncedObject[];
  resources?: boolean;
  installation?: boolean;
  moduleCr?: boolean;
  /** Objects refused (held by another) or adopted in this pass: the Ownership condition, present only then. */
  holding?: readonly MemberResult[];
}

const OWNERSHIP_CONDITION = 'Ownership';

/** The Ownership condition: False naming the holders of what was refused, True naming what was adopted. */
function ownershipCondition(results: readonly MemberResult[]) {
  const refused = results.filter((result) => result.outcome === 'refused');
  const adopted = results.filter((result) => result.outcome === 'adopted');
  if (refused.length === 0 && adopted.length === 0) return undefined;
  const list = (members: readonly MemberResult[]) =>
    members
      .slice(0, 5)
      .map((member) => member.message)
      .join('; ') + (members.length > 5 ? `; and ${members.length - 5} more` : '');
  return refused.length > 0
    ? { type: OWNERSHIP_CONDITION, ok: false, reason: 'HeldByAnother', message: list(refused) }
    : { type: OWNERSHIP_CONDITION, ok: true, reason: 'Adopted', message: list(adopted) };
}

/** Upstream's conditions, each kept True once it turned True. */
function manifestConditions(ctx: ReconcileContext, manifest: Manifest, input: StatusInput): Condition[] {
  const { resources, installation, moduleCr } = MANIFEST_CONDITIONS;
  const entries: [typeof resources | typeof installation | typeof moduleCr, boolean | undefined][] = [
    [resources, input.resources],
    [installation, input.installation],
    ...(hasDefaultCr(manifest) && manifest.spec.customResourcePolicy !== 'Ignore'
      ? ([[moduleCr, input.moduleCr]] as [typeof moduleCr, boolean | undefined][])
      : []),
  ];
  const ownership = input.holding ? ownershipCondition(input.holding) : undefined;
  return conditionsFor(
    [
      ...entries.map(([condition, ok]) => {
        const on = ok ?? conditionTrue(manifest, condition.type);
        return {
          type: condition.type,
          ok: on,
          reason: condition.reason,
          message: on ? condition.trueMessage : condition.falseMessage,
        };
      }),
      ...(ownership ? [ownership] : []),
    ],
    manifest.status?.conditions,
    ctx.clock(),
    undefined,
  );
}

/** Writes the status when a reader would see a change (state, operation, conditions, synced); answers the Manifest. */
async function writeStatus(ctx: ReconcileContext, manifest: Manifest, input: StatusInput): Promise<Manifest> {
  const conditions = manifestConditions(ctx, manifest, input);
  const previous = manifest.status;
  const comparable = (status: ManifestStatus | undefined) => ({
    state: status?.state ?? '',
    operation: status?.lastOperation?.operation,
    synced: status?.synced ?? [],
    conditions: (status?.conditions ?? []).map(({ type, status: value, message }) => ({
      type,
      value,
      message,
    })),
  });
  const status: ManifestStatus = {
    state: input.state,
    lastOperation: { operation: input.operation, lastUpdateTime: ctx.clock().toISOString() },
    conditions,
    synced: input.synced,
  };
  if (isDeepStrictEqual(comparable(previous), comparable(status))) return manifest;
  const written = await applyCustomStatus(
    ctx.kcp.custom,
    refOfManifest(manifest),
    {
      apiVersion: apiVersionOf('manifest'),
      kind: KINDS.manifest.kind,
      metadata: { name: manifest.metadata.name, namespace: manifest.metadata.namespace },
      status,
    },
    { fieldManager: MANIFEST.applyFieldManager, force: true },
  );
  return parseManifest(written, `Manifest ${manifest.metadata.name}`);
}

/**
 * Upstream's orphan check: the Manifests of a Kyma that is gone (its finalizer was removed by hand, so its deletion
 * never ran) say `Error` with why, and keep their objects in the SKR, as upstream's do; deleting such a Manifest
 * removes its module as usual once a Kyma of that name holds the SKR credentials again, or leaves the objects
 * without them. Mandatory modules are no exception here: they too belong to the Kyma that is gone.
 */
export async function markOrphanedManifests(
  ctx: ReconcileContext,
  kymaNamespace: string,
  kyma: string,
): Promise<number> {
  if (!ctx.modules) return 0;
  let marked = 0;
  for (const manifest of await manifestsOfKyma(ctx, kyma)) {
    if (
      manifest.metadata.deletionTimestamp ||
      (manifest.metadata.namespace ?? ctx.namespace) !== kymaNamespace
    )
      continue;
    const operation = `orphaned: Kyma ${kymaNamespace}/${kyma} does not exist; the module is left as it is in the SKR`;
    if (manifest.status?.state === 'Error' && manifest.status.lastOperation?.operation === operation)
      continue;
    await writeStatus(ctx, manifest, { state: 'Error', operation, synced: manifest.status?.synced ?? [] });
    marked++;
  }
  return marked;
}

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

/** Upstream's transforms of a Manifest's objects; the pass and the targeted drift revert (drift.ts) apply the same. */
export function manifestTransforms(
  manifest: Manifest,
  namespace: string,
  installation: Pick<ModuleInstallation, 'skrImagePullSecret'>,
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
  ];
}

/** The default CR as it is created in the SKR: the Manifest's spec.resource, watched by the SKR webhook. */
function defaultCrBody(manifest: Manifest): KubernetesObject {
  const resource = structuredClone(manifest.spec.resource!) as KubernetesObject & Record<string, unknown>;
  const metadata = { ...(resource.metadata ?? {}) } as Record<string, unknown>;
  metadata['labels'] = {
    ...(isRecord(metadata['labels']) ? metadata['labels'] : {}),
    [LABELS.watchedBy]: DEFAULTS.manager,
  };
  return { ...resource, metadata } as KubernetesObject;
}

function defaultCrRef(manifest: Manifest) {
  const resource = manifest.spec.resource!;
  return {
    apiVersion: resource.apiVersion,
    kind: resource.kind,
    name: resource.metadata?.name ?? manifest.metadata.name,
    ...(resource.metadata?.namespace ? { namespace: resource.metadata.namespace } : {}),
  };
}

/**
 * The module's state from its default CR by the template's customStateCheck (carried in the Manifest's annotation);
 * undefined without one. An unusable check or a missing CR is the module's Error, with the reason.
 */
async function customState(
  skr: ClusterClient,
  manifest: Manifest,
  now: Date,
): Promise<{ state: StatusInput['state']; operation: string } | undefined> {
  const text = manifest.metadata.annotations?.[ANNOTATIONS.customStateCheck];
  if (!text) return undefined;
  if (!hasDefaultCr(manifest))
    return { state: 'Error', operation: 'customStateCheck is set but the module has no default CR to read' };
  let checks: StateCheck[];
  try {
    checks = parseStateChecks(text);
  } catch (error) {
    return { state: 'Error', operation: messageOf(error) };
  }
  const ref = defaultCrRef(manifest);
  const cr = (await readObject(skr.objects, ref)) as KubernetesObject | undefined;
  if (!cr) return { state: 'Error', operation: `default CR ${ref.kind} ${ref.name} is missing` };
  const created = cr.metadata?.creationTimestamp;
  try {
    const checked = checkState(cr, checks, now, created ? new Date(created) : undefined);
    return { state: checked.state, operation: `customStateCheck: ${checked.reason}` };
  } catch (error) {
    return { state: 'Error', operation: messageOf(error) };
  }
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** One pass over a Manifest: install (or upgrade), or remove when it is being deleted. */
export async function reconcileManifest(
  ...pass: Parameters<typeof reconcileManifestPass>
): Promise<ManifestOutcome> {
  const [, , installation, manifest] = pass;
  const outcome = await reconcileManifestPass(...pass);
  if (installation.observe) observeOutcome(installation.observe, manifest, outcome.manifest);
  return outcome;
}

/**
 * What a pass finished, for `skr_agent_module_operations_total`: a removal once the Manifest is gone (or its
 * finalizers are), an install or upgrade once the Manifest records a new digest as fully installed (sync-oci-ref),
 * and any pass that leaves the Manifest in Error as an error of what it was doing.
 */
function observeOutcome(
  observe: NonNullable<ModuleInstallation['observe']>,
  before: Manifest,
  after: Manifest | undefined,
): void {
  if (before.metadata.labels?.[LABELS.skipReconciliation] === 'true') return;
  if (before.metadata.annotations?.[ANNOTATIONS.isUnmanaged] === 'true') return;
  if (before.metadata.deletionTimestamp) {
    if (!after || (after.metadata.finalizers ?? []).length === 0) observe('delete', 'success');
    else if (after.status?.state === 'Error') observe('delete', 'error');
    return;
  }
  if (!after) return;
  const installed = before.metadata.annotations?.[ANNOTATIONS.syncOciRef];
  const operation = installed === undefined ? 'install' : 'upgrade';
  if (after.status?.state === 'Error') observe(operation, 'error');
  else if (after.metadata.annotations?.[ANNOTATIONS.syncOciRef] !== installed) observe(operation, 'success');
}

async function reconcileManifestPass(
  ctx: ReconcileContext,
  skr: ClusterClient,
  installation: ModuleInstallation,
  manifest: Manifest,
  kyma: KymaEventTarget,
): Promise<ManifestOutcome> {
  if (manifest.metadata.labels?.[LABELS.skipReconciliation] === 'true') return { manifest };
  const log = ctx.logger.child({ manifest: `${manifest.metadata.namespace}/${manifest.metadata.name}` });
  if (manifest.metadata.annotations?.[ANNOTATIONS.isUnmanaged] === 'true') {
    await leaveModule(
      ctx,
      manifest,
      kyma,
      'ModuleUnmanaged',
      'the module is unmanaged (managed: false)',
      skr,
    );
    return { manifest: undefined };
  }
  if (manifest.metadata.deletionTimestamp) return removeModule(ctx, skr, manifest);

  manifest = await ensureFinalizers(ctx, manifest, [
    MANIFEST.finalizer,
    MANIFEST.labelRemovalFinalizer,
    ...(hasDefaultCr(manifest) ? [MANIFEST.resourceFinalizer] : []),
  ]);
  const synced = manifest.status?.synced ?? [];
  const what = `Manifest ${manifest.metadata.name} (${manifest.spec.install.source.name ?? '?'} ${manifest.spec.version ?? ''})`;

  let objects: SetMember[];
  try {
    objects = setMembers(await installation.objects(manifest), what);
  } catch (error) {
    if (error instanceof KubeRequestError) throw error;
    return {
      manifest: await writeStatus(ctx, manifest, {
        state: 'Error',
        operation: messageOf(error),
        synced,
        resources: false,
      }),
    };
  }

  const namespace = manifest.metadata.namespace ?? ctx.namespace;
  const applied = await applyObjectSet(
    skr,
    { objects: objects.map((object) => ({ object })), inventory: synced },
    {
      fieldManager: MANIFEST.applyFieldManager,
      transforms: manifestTransforms(manifest, namespace, installation),
      refuse: (object) => AGENT_OWNED.reasonFor(object),
      holding: holdingOf(manifest, namespace),
    },
  );
  const refused = applied.results.filter((result) => result.outcome === 'refused');
  if (applied.state === 'failed' || refused.length > 0) {
    const failed = applied.results.filter(
      (result) => result.outcome === 'failed' || result.outcome === 'refused',
    );
    const message = failed
      .map((result) => result.message)
      .slice(0, 3)
      .join('; ');
    return {
      manifest: await writeStatus(ctx, manifest, {
        state: 'Error',
        operation: message,
        synced: applied.inventory,
        resources: true,
        holding: applied.results,
      }),
    };
  }
  if (applied.state === 'waiting') {
    const waiting = applied.results.find((result) => result.outcome === 'waiting');
    return {
      manifest: await writeStatus(ctx, manifest, {
        state: 'Processing',
        operation: waiting?.message ?? 'waiting for resources to be applied',
        synced: applied.inventory,
        resources: true,
        holding: applied.results,
      }),
    };
  }

  // The default CR, once, after the set (and so its CRD) is in place; a user's deletion of it stands.
  let moduleCr: boolean | undefined;
  if (hasDefaultCr(manifest) && !conditionTrue(manifest, MANIFEST_CONDITIONS.moduleCr.type)) {
    try {
      await createIfAbsent(skr.objects, defaultCrBody(manifest), MANIFEST.resourceFieldManager);
      moduleCr = true;
      log.info(
        { gvk: `${manifest.spec.resource!.apiVersion}/${manifest.spec.resource!.kind}` },
        'default CR created',
      );
    } catch (error) {
      if (isUnreachable(error) || !(error instanceof KubeRequestError)) throw error;
      return {
        manifest: await writeStatus(ctx, manifest, {
          state: 'Error',
          operation: `default CR: ${messageOf(error)}`,
          synced: applied.inventory,
          resources: true,
          moduleCr: false,
        }),
      };
    }
  }

  const readiness = await readinessOfSet(skr, applied.inventory);
  let state: StatusInput['state'] = readiness.state;
  let operation =
    state === 'Ready'
      ? 'resources are ready'
      : (readiness.message ?? 'waiting for resources to become ready');
  // With a customStateCheck the default CR has the last word once the workloads are up (decision 025).
  if (state === 'Ready') {
    const custom = await customState(skr, manifest, ctx.clock());
    if (custom) ({ state, operation } = custom);
  }
  let next = await writeStatus(ctx, manifest, {
    state,
    operation,
    synced: applied.inventory,
    resources: true,
    installation: state === 'Ready' ? true : undefined,
    ...(moduleCr === undefined ? {} : { moduleCr }),
    holding: applied.results,
  });
  // The digest last fully installed, as upstream records it.
  const ref = manifest.spec.install.source.ref;
  const installed = manifest.metadata.annotations?.[ANNOTATIONS.syncOciRef];
  if (state === 'Ready' && ref && installed !== ref) {
    const written = await mergePatchCustomObject(ctx.kcp.custom, refOfManifest(manifest), {
      metadata: { annotations: { [ANNOTATIONS.syncOciRef]: ref } },
    });
    next = parseManifest(written, `Manifest ${manifest.metadata.name}`);
    log.info(
      { version: manifest.spec.version, ref },
      installed === undefined ? 'module installed' : 'module upgraded',
    );
  }
  return { manifest: next };
}

/** CRs of the default CR's kind in any namespace other than the default CR itself: users' CRs, which block removal. */
async function usersCrs(skr: ClusterClient, manifest: Manifest): Promise<string[]> {
  const ref = defaultCrRef(manifest);
  let items: KubernetesObject[];
  try {
    items = (await skr.objects.list(ref.apiVersion, ref.kind)).items;
  } catch (error) {
    // The kind is not served (its CRD is gone): nobody's CRs are left.
    if (
      (error as { code?: number }).code === 404 ||
      /Unrecognized API version and kind/.test(messageOf(error))
    )
      return [];
    throw new KubeRequestError(`list ${ref.kind} in ${skr.name}`, error);
  }
  const isDefault = (object: KubernetesObject) =>
    manifest.spec.customResourcePolicy !== 'Ignore' &&
    object.metadata?.name === ref.name &&
    (object.metadata?.namespace ?? '') === (ref.namespace ?? '');
  return items
    .filter((object) => !isDefault(object))
    .map(
      (object) =>
        `${object.metadata?.namespace ? `${object.metadata.namespace}/` : ''}${object.metadata?.name}`,
    );
}

/** Removal of a deleted Manifest's module, one step per pass: user CRs gone, default CR, the set, the finalizers. */
async function removeModule(
  ctx: ReconcileContext,
  skr: ClusterClient,
  manifest: Manifest,
): Promise<ManifestOutcome> {
  const synced = manifest.status?.synced ?? [];
  if (!(manifest.metadata.finalizers ?? []).some((f) => OWN_FINALIZERS.includes(f))) return { manifest };
  const deleting = async (operation: string) => ({
    manifest: await writeStatus(ctx, manifest, { state: 'Deleting', operation, synced }),
  });
  if (manifest.spec.resource) {
    const users = await usersCrs(skr, manifest);
    if (users.length > 0)
      return deleting(
        `waiting for module CRs deletion: ${manifest.spec.resource.kind} ${users.slice(0, 5).join(', ')}${users.length > 5 ? ` and ${users.length - 5} more` : ''}`,
      );
    if (hasDefaultCr(manifest)) {
      const ref = defaultCrRef(manifest);
      if (await readObject(skr.objects, ref)) {
        await deleteIfExists(skr.objects, ref);
        return deleting(`deleting the default CR ${ref.kind} ${ref.namespace ?? ''}/${ref.name}`);
      }
    }
  }
  const removal = await removeObjects(skr, synced, {
    holding: holdingOf(manifest, manifest.metadata.namespace ?? ctx.namespace),
  });
  if (!removal.finished) {
    const pending = removal.results.find(
      (result) => result.outcome !== 'deleted' && result.outcome !== 'kept',
    );
    return {
      manifest: await writeStatus(ctx, manifest, {
        state: 'Deleting',
        operation: pending?.message ?? 'waiting for resources to be deleted',
        synced: removal.remaining,
      }),
    };
  }
  await releaseManifest(ctx, manifest);
  ctx.logger.info({ manifest: manifest.metadata.name }, 'module removed from the SKR');
  return { manifest: undefined };
}

/**
 * The module's SKR objects stay where they are and the Manifest goes (its finalizers dropped, then deleted), with an
 * Event on the Kyma that says so: an unmanaged module (the user runs it now) or an SKR without credentials. Given
 * the SKR (`skr`), the objects first lose the managed-by label, as upstream does for an unmanaged module.
 */
export async function leaveModule(
  ctx: ReconcileContext,
  manifest: Manifest,
  kyma: KymaEventTarget,
  reason: string,
  why: string,
  skr?: ClusterClient,
): Promise<void> {
  if (skr) await releaseObjects(skr, manifest.status?.synced ?? [], MODULE_OBJECT_METADATA.managedByLabel);
  await releaseManifest(ctx, manifest);
  await withContext(`delete Manifest ${manifest.metadata.name}`, () =>
    deleteCustomObjectIfExists(ctx.kcp.custom, refOfManifest(manifest)),
  );
  const synced = manifest.status?.synced ?? [];
  const module = manifest.metadata.labels?.[LABELS.moduleName] ?? manifest.metadata.name;
  await ctx.events.normal(
    kyma,
    reason,
    `module ${module}: ${why}; Manifest ${manifest.metadata.name} removed, its ${synced.length} object(s) left in the SKR`,
  );
  ctx.logger.info(
    { manifest: manifest.metadata.name, reason },
    'Manifest removed; its objects left in the SKR',
  );
}

/** Every Manifest of the Kyma, read from etcd (deletion decides from it). */
async function manifestsOfKyma(ctx: ReconcileContext, kyma: string): Promise<Manifest[]> {
  const list = await listKcp(ctx, 'manifest', `${LABELS.kymaName}=${kyma}`, 'consistent');
  const items = isRecord(list) && Array.isArray(list['items']) ? (list['items'] as unknown[]) : [];
  return items.map((item) => parseManifest(item, 'Manifest'));
}

/**
 * Deletion of a Kyma with module installation: its Manifests are deleted and each removes its module in upstream's
 * order; without an SKR client (no kubeconfig Secret) the modules are left in the SKR. Answers what still blocks.
 */
export async function removeModulesOfKyma(
  ctx: ReconcileContext,
  kyma: KymaEventTarget,
  skr: ClusterClient | undefined,
): Promise<{ finished: boolean; message: string | undefined }> {
  const installation = ctx.modules;
  if (!installation) return { finished: true, message: undefined };
  const pending: string[] = [];
  for (let manifest of await manifestsOfKyma(ctx, kyma.name)) {
    if (!skr) {
      await leaveModule(ctx, manifest, kyma, 'ModuleCleanupSkipped', 'no kubeconfig Secret for the SKR');
      continue;
    }
    if (!manifest.metadata.deletionTimestamp) {
      await deleteCustomObjectIfExists(ctx.kcp.custom, refOfManifest(manifest));
      const fresh = await getCustomObject(ctx.kcp.custom, refOfManifest(manifest));
      if (fresh === undefined) continue;
      manifest = parseManifest(fresh, `Manifest ${manifest.metadata.name}`);
    }
    const outcome = await reconcileManifest(ctx, skr, installation, manifest, kyma);
    if (outcome.manifest)
      pending.push(
        `${manifest.metadata.name}: ${outcome.manifest.status?.lastOperation?.operation ?? 'being removed'}`,
      );
  }
  return {
    finished: pending.length === 0,
    message: pending.length === 0 ? undefined : `modules being removed: ${pending.slice(0, 3).join('; ')}`,
  };
}

/** Without SKR credentials, Manifests being deleted go and leave their objects in the SKR (upstream's rule). */
export async function leaveDeletedModules(ctx: ReconcileContext, kyma: KymaEventTarget): Promise<void> {
  if (!ctx.modules) return;
  for (const manifest of await manifestsOfKyma(ctx, kyma.name)) {
    if (manifest.metadata.deletionTimestamp)
      await leaveModule(ctx, manifest, kyma, 'ModuleCleanupSkipped', 'no kubeconfig Secret for the SKR');
  }
}
