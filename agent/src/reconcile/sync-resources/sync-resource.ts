// SyncResource: manifests a module manager wants in one SKR, kept there by the object-set engine
// (@skr-watcher/kube object-set, decision 020) as Manifests are. Each item is applied by its strategy: CreateAndSync
// re-applies (server-side apply, forced) so drift is reverted; CreateAndIgnore creates once and then leaves the
// object to the SKR's users; Delete removes it. What was applied is recorded per item (status.items[].applied) and
// as the set's inventory (status.synced), so an object that left the set (an item dropped or renamed, a deleted
// SyncResource) is removed from the SKR, once the new set is in place. Items are refused when the allow-list does
// not admit them or when they name what the agent runs in the SKR itself (agent-owned.ts), whatever the allow-list.
// Two paths apply one: the Kyma's full pass (every SyncResource of the Kyma), and the targeted path, which applies
// one changed SyncResource at once when its watch reports a spec change (applyChangedSyncResource). Both run in the
// SyncResource's lane, so they never apply one SyncResource at the same time.
import { isDeepStrictEqual } from 'node:util';
import {
  FIELD_MANAGER,
  GROUP,
  HOLDER_MARKS,
  KINDS,
  LABELS,
  MANAGED_BY,
  splitApiVersion,
  type Kyma,
  type ResourceState,
  type SyncItemStatus,
  listItems,
  parseSyncItem,
  parseSyncResource,
  ShapeError,
  type RawSyncResource,
} from '@skr-watcher/api';
import {
  applyCustomStatus,
  applyObjectSet,
  apiVersionOfSynced,
  getCustomObject,
  mirrorable,
  removeObjects,
  syncedKey,
  syncResourceHolder,
  syncedObjectOfRef,
  uniqueSynced,
  type ClusterClient,
  type DesiredObject,
  type Holding,
  type MemberResult,
  type Removal,
  type SetMember,
  type SyncedObject,
} from '@skr-watcher/kube';
import { bucketOf } from '../../sharding/ring.js';
import { agentOwnedObjects, type AgentOwnedObjects } from '../agent-owned.js';
import {
  apiVersionOf,
  listKcp,
  refOf,
  type MirroredObject,
  type ReconcileContext,
  type SyncResourcePolicy,
} from '../context.js';
import { addFinalizer, dropFinalizer } from '../kyma/finalizers.js';
import { manifestsOf } from '../manifests/manifests-of-kyma.js';
import { worstState } from '../status.js';

type Applied = NonNullable<SyncItemStatus['applied']>;

export interface SyncResourceOutcome {
  name: string;
  state: ResourceState;
  /** Items that failed, as `<syncresource>/<item>` with a message. */
  failures: { name: string; message: string }[];
}

/**
 * The SyncResources in the KCP namespace whose spec.kyma names this Kyma. Which ones exist comes from the API
 * server's watch cache (`resourceVersion=0`: a consistent list would wait for the cache to catch up with our
 * own writes, tens of milliseconds per reconcile); their content is then read fresh from etcd, because what to
 * apply and what to remove depends on it. A SyncResource created a moment ago may be missed by one pass; its
 * creation is itself a trigger (the runtime watches SyncResources), so the next pass sees it.
 */
export async function syncResourcesOf(ctx: ReconcileContext, kyma: string): Promise<RawSyncResource[]> {
  const names =
    (await ctx.syncResourceNames?.(ctx.namespace, kyma)) ?? (await listSyncResourceNames(ctx, kyma));
  const fresh = await Promise.all(
    names.map((name) => getCustomObject(ctx.kcp.custom, refOf('syncResource', ctx.namespace, name))),
  );
  return fresh
    .map((raw) => (raw === undefined ? undefined : parseOrWarn(ctx, raw)))
    .filter((sync): sync is RawSyncResource => sync?.spec.kyma === kyma);
}

/**
 * Those labelled with the Kyma's bucket and those not labelled (yet): where the agent shards, two lists of a few
 * objects instead of one of every SyncResource of the namespace (decision 012).
 */
async function listSyncResourceNames(ctx: ReconcileContext, kyma: string): Promise<string[]> {
  const selectors = [`${LABELS.shardBucket}=${bucketOf(kyma)}`, `!${LABELS.shardBucket}`];
  const answers = await Promise.all(selectors.map((selector) => listKcp(ctx, 'syncResource', selector)));
  const names: string[] = [];
  for (const item of answers.flatMap((answer) => listItems(answer, 'SyncResource list'))) {
    const parsed = parseOrWarn(ctx, item);
    if (parsed?.spec.kyma === kyma) names.push(parsed.metadata.name);
  }
  return names;
}

function parseOrWarn(ctx: ReconcileContext, raw: unknown): RawSyncResource | undefined {
  try {
    return parseSyncResource(raw, 'SyncResource');
  } catch (error) {
    if (!(error instanceof ShapeError)) throw error;
    ctx.logger.warn({ err: error }, 'skipping malformed SyncResource');
    return undefined;
  }
}

function identityOf(resource: {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string };
}): Applied {
  const namespace = resource.metadata.namespace;
  return {
    apiVersion: resource.apiVersion,
    kind: resource.kind,
    name: resource.metadata.name,
    ...(namespace ? { namespace } : {}),
  };
}

/** The `applied` record of an inventory entry. */
function appliedOf(entry: SyncedObject): Applied {
  return {
    apiVersion: apiVersionOfSynced(entry),
    kind: entry.kind,
    name: entry.name,
    ...(entry.namespace ? { namespace: entry.namespace } : {}),
  };
}

/**
 * Why SyncResources may not touch this object, or undefined when they may. A module manager's SyncResource must
 * not reach anything in the SKR (RBAC, webhooks, other tenants' namespaces): only allowed kinds in allowed namespaces.
 */
export function refusedByPolicy(policy: SyncResourcePolicy, applied: Applied): string | undefined {
  const { group } = splitApiVersion(applied.apiVersion);
  const kind = group ? `${applied.kind}.${group}` : applied.kind;
  if (!policy.kinds.includes(kind))
    return `${describe(applied)}: kind ${kind} is not allowed for SyncResources (allowed: ${policy.kinds.join(', ')}); refused`;
  if (!applied.namespace || !policy.namespaces.includes(applied.namespace))
    return `${describe(applied)}: SyncResources may touch namespaces ${policy.namespaces.join(', ')} only; refused`;
  return undefined;
}

function describe(applied: Applied): string {
  return `${applied.kind} ${applied.namespace ? `${applied.namespace}/` : ''}${applied.name}`;
}

/**
 * The guard of every write and delete a SyncResource causes: the agent's own objects first (their reason is the
 * one a user needs to see), then the allow-list. Records are checked too: whoever may write SyncResource status
 * must not be able to delete anything by it.
 */
function guardOf(
  ctx: ReconcileContext,
  owned: AgentOwnedObjects,
): (object: SyncedObject) => string | undefined {
  return (object) => owned.reasonFor(object) ?? refusedByPolicy(ctx.syncResourcePolicy, appliedOf(object));
}

/** What this SyncResource may have put into the SKR: the recorded inventory and the `applied` records of items. */
function inventoryOf(sync: RawSyncResource): SyncedObject[] {
  return uniqueSynced([
    ...(sync.status?.synced ?? []),
    ...(sync.status?.items ?? []).flatMap((item) => (item.applied ? [syncedObjectOfRef(item.applied)] : [])),
  ]);
}

const READY_OUTCOMES = new Set<MemberResult['outcome']>(['applied', 'adopted', 'created', 'present', 'left']);

/**
 * The lane of one SyncResource of a Kyma. Its group is prefixed, so no SKR object (a Module CR's lane) can share it.
 */
function syncResourceLane(ctx: ReconcileContext, name: string): MirroredObject {
  return { group: `kcp:${GROUP}`, kind: KINDS.syncResource.kind, namespace: ctx.namespace, name };
}

/**
 * Per reconciler (its KCP client), the newest generation of each SyncResource (by uid) the targeted path applied;
 * one whose deletion it finished counts as newer than any. A full pass read its SyncResources when it started; where
 * the targeted path applied a newer generation meanwhile, the pass reads that SyncResource again rather than put an
 * older spec back into the SKR.
 */
const targetedGenerations = new WeakMap<ClusterClient, Map<string, number>>();

function generationsOf(ctx: ReconcileContext): Map<string, number> {
  let generations = targetedGenerations.get(ctx.kcp);
  if (!generations) targetedGenerations.set(ctx.kcp, (generations = new Map()));
  return generations;
}

async function readSyncResource(ctx: ReconcileContext, name: string): Promise<RawSyncResource | undefined> {
  const raw = await getCustomObject(ctx.kcp.custom, refOf('syncResource', ctx.namespace, name));
  return raw === undefined ? undefined : parseOrWarn(ctx, raw);
}

/**
 * Applies every item of one SyncResource to the SKR and records the outcome in its status (the full pass's step),
 * in the SyncResource's lane.
 */
export function reconcileSyncResource(
  ctx: ReconcileContext,
  skr: ClusterClient,
  sync: RawSyncResource,
  owned: AgentOwnedObjects = agentOwnedObjects(),
): Promise<SyncResourceOutcome> {
  const kymaKey = `${ctx.namespace}/${sync.spec.kyma}`;
  return ctx.inMirrorLane(kymaKey, syncResourceLane(ctx, sync.metadata.name), async () => {
    const generations = generationsOf(ctx);
    const uid = sync.metadata.uid ?? '';
    const applied = generations.get(uid);
    if (applied === undefined || applied <= (sync.metadata.generation ?? 0))
      return applySyncResource(ctx, skr, sync, owned);
    const fresh = await readSyncResource(ctx, sync.metadata.name);
    // Gone (or another object of that name), or moved to another Kyma since the pass listed it: not this pass's.
    if (fresh?.metadata.uid !== uid || fresh.spec.kyma !== sync.spec.kyma) {
      if (fresh?.metadata.uid !== uid) generations.delete(uid);
      return { name: sync.metadata.name, state: 'Ready', failures: [] };
    }
    return applySyncResource(ctx, skr, fresh, owned);
  });
}

/** What the targeted path did with one SyncResource change. */
export type SyncResourceApplyOutcome =
  /**
   * Applied (or found in place); `state` is the SyncResource's. `kymaStatusChanged`: what the Kyma's status says of
   * it (its state, its failed items, that it exists) may differ now, so the Kyma's full pass has something to write.
   */
  | { outcome: 'applied'; state: ResourceState; kymaStatusChanged: boolean }
  /** Nothing to do here: the SyncResource is gone or names another Kyma, or the Kyma is absent, paused or deleting,
   * or has no SKR credentials: the full pass decides. */
  | { outcome: 'skipped'; reason: string };

/** When the steps of one targeted apply ended (epoch ms), for the debug log bench:e2e reads. */
export interface SyncResourceApplySteps {
  /** The SyncResource generation applied. */
  generation?: number;
  /** The objects were applied in the SKR (the change is visible there from here); the status write follows. */
  skrAppliedAt?: number;
}

/** A SyncResource's failed items as the Kyma's status names them. */
function failuresOf(syncName: string, items: SyncItemStatus[] | undefined): string[] {
  return (items ?? [])
    .filter((item) => item.state === 'Error')
    .map((item) => `${syncName}/${item.name}: ${item.message ?? 'failed'}`);
}

/**
 * The targeted path: one SyncResource of `kymaName` changed, so it alone is applied into the Kyma's SKR now, under
 * the same guard as in the full pass (allow-list; the agent's own objects: the Module CRs the Kyma's last status
 * names and its Manifests' objects), its status written; the Kyma's full pass follows later (its status, every other
 * SyncResource). `kyma` is the KCP Kyma as read now (undefined: absent); `started` is called once the apply has its
 * lane (it reads everything after).
 */
export function applyChangedSyncResource(
  ctx: ReconcileContext,
  kyma: Promise<Kyma | undefined>,
  kymaName: string,
  name: string,
  started: () => void = () => {},
  steps: SyncResourceApplySteps = {},
  superseded: () => boolean = () => false,
): Promise<SyncResourceApplyOutcome> {
  kyma.catch(() => undefined);
  return ctx.inMirrorLane(`${ctx.namespace}/${kymaName}`, syncResourceLane(ctx, name), async () => {
    started();
    const syncRead = readSyncResource(ctx, name);
    syncRead.catch(() => undefined);
    const current = await kyma;
    if (!current) return { outcome: 'skipped', reason: 'Kyma absent' };
    if (current.metadata.labels?.[LABELS.skipReconciliation] === 'true')
      return { outcome: 'skipped', reason: 'Kyma paused' };
    if (current.metadata.deletionTimestamp) return { outcome: 'skipped', reason: 'Kyma deleting' };
    const sync = await syncRead;
    if (!sync) return { outcome: 'skipped', reason: 'SyncResource absent' };
    if (sync.spec.kyma !== kymaName) return { outcome: 'skipped', reason: 'SyncResource of another Kyma' };
    const lookup = await ctx.skrClients.forKyma(kymaName);
    if (!lookup) return { outcome: 'skipped', reason: 'no kubeconfig Secret' };
    // The guard of the full pass: the Module CRs (from the Kyma's last status) and the Kyma's Manifests' objects.
    const manifests = ctx.modules ? await manifestsOf(ctx, kymaName) : undefined;
    const owned = agentOwnedObjects({
      modules: current.status?.modules ?? [],
      manifestObjects: [...(manifests?.values() ?? [])].flatMap((manifest) => manifest.status?.synced ?? []),
    });
    steps.generation = sync.metadata.generation;
    const outcome = await applySyncResource(
      ctx,
      lookup.client,
      sync,
      owned,
      () => {
        steps.skrAppliedAt = Date.now();
      },
      superseded,
    );
    const uid = sync.metadata.uid;
    if (uid) {
      const generations = generationsOf(ctx);
      const generation = sync.metadata.deletionTimestamp
        ? Number.MAX_SAFE_INTEGER
        : (sync.metadata.generation ?? 0);
      generations.set(uid, Math.max(generations.get(uid) ?? 0, generation));
    }
    // The Kyma's status counts its SyncResources and names their state and failed items: unchanged, a full pass
    // would write nothing for this change (a first apply and a deletion change the count).
    const kymaStatusChanged =
      sync.status?.state === undefined ||
      sync.metadata.deletionTimestamp !== undefined ||
      sync.status.state !== outcome.state ||
      !isDeepStrictEqual(
        failuresOf(sync.metadata.name, sync.status.items),
        outcome.failures.map((failure) => `${failure.name}: ${failure.message}`),
      );
    return { outcome: 'applied', state: outcome.state, kymaStatusChanged };
  });
}

async function applySyncResource(
  ctx: ReconcileContext,
  skr: ClusterClient,
  sync: RawSyncResource,
  owned: AgentOwnedObjects,
  onApplied: () => void = () => {},
  statusLeftToNext: () => boolean = () => false,
): Promise<SyncResourceOutcome> {
  const syncName = sync.metadata.name;
  if (sync.metadata.deletionTimestamp) {
    const removal = await removeAll(ctx, skr, sync, owned);
    if (removal.finished) {
      await removeFinalizer(ctx, sync);
      return { name: syncName, state: 'Ready', failures: [] };
    }
    // Objects still being deleted (finalizers) or a phase that waits: record what is left and look again.
    const pending = removal.results.find((result) => removal.remaining.includes(result.object));
    await writeStatus(
      ctx,
      sync,
      'Deleting',
      sync.status?.items ?? [],
      removal.remaining,
      `removing applied objects: ${pending?.message ?? 'not finished'}`,
    );
    return { name: syncName, state: 'Processing', failures: [] };
  }
  await ensureFinalizer(ctx, sync);

  const previous = new Map((sync.status?.items ?? []).map((item) => [item.name, item]));
  const guard = guardOf(ctx, owned);
  // Per spec item, in order: its status once known, or the index of its object in the set.
  const slots: (
    | { status: SyncItemStatus }
    | { name: string; strategy: string; before: SyncItemStatus | undefined; member: number }
  )[] = [];
  const desired: DesiredObject[] = [];
  const deletes: { name: string; object: SyncedObject }[] = [];
  const keep: SyncedObject[] = [];
  for (const [index, raw] of sync.spec.items.entries()) {
    const itemWhat = `SyncResource ${ctx.namespace}/${syncName} spec.items[${index}]`;
    let item;
    try {
      item = parseSyncItem(raw, itemWhat);
    } catch (error) {
      if (!(error instanceof ShapeError)) throw error;
      const rawName = (raw as { name?: unknown } | null)?.name;
      const name = typeof rawName === 'string' ? rawName : `#${index}`;
      // A malformed item is not a dropped one: what it applied before stays until it is fixed or removed.
      const applied = previous.get(name)?.applied;
      if (applied) keep.push(syncedObjectOfRef(applied));
      slots.push({
        status: { name, state: 'Error', message: error.message, ...(applied ? { applied } : {}) },
      });
      continue;
    }
    const identity = identityOf(item.resource);
    const refusal = guard(syncedObjectOfRef(identity)) ?? tokenSecretRefusal(item.resource);
    if (refusal) {
      slots.push({ status: itemStatus(item.name, 'Error', refusal, undefined) });
      continue;
    }
    if (item.strategy === 'Delete') {
      deletes.push({ name: item.name, object: syncedObjectOfRef(identity) });
      slots.push({ name: item.name, strategy: item.strategy, before: undefined, member: deletes.length - 1 });
      continue;
    }
    const before = previous.get(item.name);
    const body = mirrorable(item.resource) as SetMember;
    body.metadata = {
      ...body.metadata,
      labels: { ...body.metadata.labels, [LABELS.managedBy]: MANAGED_BY },
      annotations: {
        ...body.metadata.annotations,
        [HOLDER_MARKS.syncResourceAnnotation]: `${ctx.namespace}/${syncName}`,
      },
    };
    desired.push(
      item.strategy === 'CreateAndSync'
        ? { object: body }
        : {
            object: body,
            mode: 'create',
            // Created once and deleted in the SKR since: the user's decision stands.
            createdBefore:
              before?.applied !== undefined &&
              isDeepStrictEqual(before.applied, identity) &&
              before.state === 'Ready',
          },
    );
    slots.push({ name: item.name, strategy: item.strategy, before, member: desired.length - 1 });
  }

  const applied = await applyObjectSet(
    skr,
    { objects: desired, inventory: inventoryOf(sync), keep },
    {
      fieldManager: FIELD_MANAGER,
      refuse: guard,
      holding: holdingOf(ctx, syncName),
      // Requests of one SKR share one connection (LIMITS.skrConnections); more in flight would only queue.
      concurrency: 2,
    },
  );
  const removed =
    deletes.length > 0
      ? await removeObjects(
          skr,
          deletes.map((entry) => entry.object),
          // A Delete item removes what nobody holds, never what a module or another SyncResource holds.
          { refuse: guard, holding: { ...holdingOf(ctx, syncName), unheld: 'delete' } },
        )
      : undefined;
  onApplied();

  const statuses: SyncItemStatus[] = slots.map((slot) => {
    if ('status' in slot) return slot.status;
    if (slot.strategy === 'Delete') {
      const result = removed?.results[slot.member];
      if (!result || result.outcome === 'deleted')
        return itemStatus(
          slot.name,
          'Ready',
          `${describe(appliedOf(deletes[slot.member]!.object))} absent`,
          undefined,
        );
      return itemStatus(
        slot.name,
        result.outcome === 'failed' ? 'Error' : 'Processing',
        result.message,
        undefined,
      );
    }
    const result = applied.results[slot.member]!;
    const identity = appliedOf(result.object);
    if (READY_OUTCOMES.has(result.outcome)) return itemStatus(slot.name, 'Ready', result.message, identity);
    const keptRecord =
      slot.before?.applied && isDeepStrictEqual(slot.before.applied, identity) ? identity : undefined;
    return itemStatus(
      slot.name,
      result.outcome === 'waiting' ? 'Processing' : 'Error',
      result.message,
      keptRecord,
    );
  });
  // Objects that left the set and are not gone yet stay visible under the item that applied them.
  const named = new Set(statuses.map((status) => status.name));
  const current = new Set(
    statuses.flatMap((status) => (status.applied ? [syncedKey(syncedObjectOfRef(status.applied))] : [])),
  );
  const stillThere = new Set(applied.inventory.map(syncedKey).filter((key) => !current.has(key)));
  for (const [name, before] of previous) {
    if (named.has(name) || !before.applied || !stillThere.has(syncedKey(syncedObjectOfRef(before.applied))))
      continue;
    const pruning = applied.pruned.find(
      (result) => syncedKey(result.object) === syncedKey(syncedObjectOfRef(before.applied!)),
    );
    statuses.push({
      ...before,
      state: pruning?.outcome === 'failed' ? 'Error' : 'Processing',
      message: pruning
        ? `removing dropped item: ${pruning.message}`
        : 'dropped item: removed once the new items are applied',
    });
  }

  const state = worstState(statuses.map((status) => status.state));
  const failures = statuses
    .filter((status) => status.state === 'Error')
    .map((status) => ({ name: `${syncName}/${status.name}`, message: status.message ?? 'failed' }));
  const comparable = (items: SyncItemStatus[] | undefined) =>
    (items ?? []).map(({ name, state: itemState, message, applied: record }) => ({
      name,
      state: itemState,
      message,
      applied: record,
    }));
  const changed =
    sync.status?.state !== state ||
    sync.status?.observedGeneration !== sync.metadata.generation ||
    !isDeepStrictEqual(comparable(sync.status?.items), comparable(statuses)) ||
    !isDeepStrictEqual(sync.status?.synced ?? [], applied.inventory);
  // A targeted apply of a newer generation waits in the lane: it reads the SyncResource fresh and writes the status
  // (one that ends otherwise wakes the full pass, which applies and writes it), so this one leaves it.
  if (changed && !statusLeftToNext())
    await writeStatus(ctx, sync, state, statuses, applied.inventory, `applied ${statuses.length} item(s)`);
  return { name: syncName, state, failures };
}

/**
 * A Secret of type service-account-token makes the SKR's token controller mint a token for any ServiceAccount it
 * names: a module manager could so obtain the credentials of a ServiceAccount of the SKR. Refused whatever the
 * allow-list says.
 */
function tokenSecretRefusal(resource: Record<string, unknown>): string | undefined {
  if (resource['apiVersion'] !== 'v1' || resource['kind'] !== 'Secret') return undefined;
  if (resource['type'] !== 'kubernetes.io/service-account-token') return undefined;
  return "a Secret of type kubernetes.io/service-account-token would be given a ServiceAccount's token by the SKR; refused";
}

/** The SyncResource as the holder of its objects in the SKR (decision 026). */
function holdingOf(ctx: ReconcileContext, name: string): Holding {
  return { self: syncResourceHolder(ctx.namespace, name) };
}

function itemStatus(
  name: string,
  state: ResourceState,
  message: string,
  applied: Applied | undefined,
): SyncItemStatus {
  return { name, state, message, ...(applied ? { applied } : {}) };
}

/**
 * Removes every object this SyncResource applied (its inventory and the current items of the create strategies),
 * in the engine's two phases; the agent's own objects and what the allow-list excludes are never deleted.
 */
function removeAll(
  ctx: ReconcileContext,
  skr: ClusterClient,
  sync: RawSyncResource,
  owned: AgentOwnedObjects,
): Promise<Removal> {
  const targets = inventoryOf(sync);
  for (const raw of sync.spec.items) {
    try {
      const item = parseSyncItem(raw, 'item');
      if (item.strategy !== 'Delete') targets.push(syncedObjectOfRef(identityOf(item.resource)));
    } catch (error) {
      if (!(error instanceof ShapeError)) throw error;
    }
  }
  const guard = guardOf(ctx, owned);
  // Refused targets were never applied by this SyncResource: not part of the removal at all.
  return removeObjects(
    skr,
    uniqueSynced(targets).filter((target) => !guard(target)),
    { refuse: guard, holding: holdingOf(ctx, sync.metadata.name) },
  );
}

/**
 * Removes every object this SyncResource applied to the SKR (the Kyma is being deleted). Throws while the removal
 * is not finished, so the caller retries the Kyma's cleanup as a whole.
 */
export async function removeAppliedObjects(
  ctx: ReconcileContext,
  skr: ClusterClient,
  sync: RawSyncResource,
  owned: AgentOwnedObjects = agentOwnedObjects(),
): Promise<void> {
  const removal = await removeAll(ctx, skr, sync, owned);
  if (!removal.finished) {
    const pending = removal.results.filter((result) => removal.remaining.includes(result.object));
    throw new Error(
      `removing the objects of SyncResource ${ctx.namespace}/${sync.metadata.name} is not finished: ${pending.map((result) => result.message).join('; ')}`,
    );
  }
  if ((sync.status?.items?.length ?? 0) > 0 || (sync.status?.synced?.length ?? 0) > 0) {
    if (!sync.metadata.deletionTimestamp)
      await writeStatus(ctx, sync, 'Ready', [], [], 'removed applied objects from the SKR: Kyma deleted');
  }
}

async function writeStatus(
  ctx: ReconcileContext,
  sync: RawSyncResource,
  state: ResourceState,
  items: SyncItemStatus[],
  synced: SyncedObject[],
  operation: string,
): Promise<void> {
  await applyCustomStatus(
    ctx.kcp.custom,
    refOf('syncResource', ctx.namespace, sync.metadata.name),
    {
      apiVersion: apiVersionOf('syncResource'),
      kind: KINDS.syncResource.kind,
      metadata: { name: sync.metadata.name, namespace: ctx.namespace },
      status: {
        state,
        items,
        synced,
        ...(sync.metadata.generation !== undefined ? { observedGeneration: sync.metadata.generation } : {}),
        lastOperation: { operation, lastUpdateTime: ctx.clock().toISOString() },
      },
    },
    { fieldManager: FIELD_MANAGER, force: true },
  );
}

/** Our finalizer keeps a deleted SyncResource until what it applied is gone from the SKR. */
function ensureFinalizer(ctx: ReconcileContext, sync: RawSyncResource): Promise<void> {
  return addFinalizer(ctx, refOf('syncResource', ctx.namespace, sync.metadata.name), sync.metadata);
}

export function removeFinalizer(ctx: ReconcileContext, sync: RawSyncResource): Promise<void> {
  return dropFinalizer(ctx, refOf('syncResource', ctx.namespace, sync.metadata.name), sync.metadata);
}
