// SyncResource: manifests a module manager wants in one SKR. Each item is applied by its strategy:
// CreateAndSync re-applies (server-side apply, forced) so drift is reverted; CreateAndIgnore creates once and
// then leaves the object to the SKR's users; Delete removes it. What was applied is recorded per item in
// status.items[].applied, so an item dropped from the spec (or a deleted SyncResource) is removed from the SKR.
import { isDeepStrictEqual } from 'node:util';
import {
  FIELD_MANAGER,
  KINDS,
  LABELS,
  MANAGED_BY,
  splitApiVersion,
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
  applyObject,
  createIfAbsent,
  deleteIfExists,
  getCustomObject,
  isUnreachable,
  mirrorable,
  readObject,
  type ClusterClient,
  type ObjectRef,
} from '@skr-watcher/kube';
import { bucketOf } from '../sharding/ring.js';
import { apiVersionOf, listKcp, refOf, type ReconcileContext, type SyncResourcePolicy } from './context.js';
import { addFinalizer, dropFinalizer } from './finalizers.js';
import { worstState } from './status.js';

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
 * objects instead of one of every SyncResource of the namespace (decision 012, "Session 10").
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

/** Identities (as JSON) of the objects the current well-formed items create or sync. */
function currentIdentities(sync: RawSyncResource): Set<string> {
  const identities = new Set<string>();
  for (const raw of sync.spec.items) {
    try {
      const item = parseSyncItem(raw, 'item');
      if (item.strategy !== 'Delete') identities.add(identityKey(identityOf(item.resource)));
    } catch (error) {
      if (!(error instanceof ShapeError)) throw error;
    }
  }
  return identities;
}

function identityKey(applied: Applied): string {
  return [applied.apiVersion, applied.kind, applied.namespace ?? '', applied.name].join('\0');
}

function objectRef(applied: Applied): ObjectRef {
  return applied;
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

/** Applies every item of one SyncResource to the SKR and records the outcome in its status. */
export async function reconcileSyncResource(
  ctx: ReconcileContext,
  skr: ClusterClient,
  sync: RawSyncResource,
): Promise<SyncResourceOutcome> {
  const syncName = sync.metadata.name;
  if (sync.metadata.deletionTimestamp) {
    await removeAppliedObjects(ctx, skr, sync);
    await removeFinalizer(ctx, sync);
    return { name: syncName, state: 'Ready', failures: [] };
  }
  await ensureFinalizer(ctx, sync);

  const previous = new Map((sync.status?.items ?? []).map((item) => [item.name, item]));
  const statuses: SyncItemStatus[] = [];
  const seen = new Set<string>();
  // Objects the current items create or sync; an old record naming one of them must not delete it.
  const wanted = currentIdentities(sync);
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
      seen.add(name);
      const applied = previous.get(name)?.applied;
      statuses.push({ name, state: 'Error', message: error.message, ...(applied ? { applied } : {}) });
      continue;
    }
    seen.add(item.name);
    const identity = identityOf(item.resource);
    const before = previous.get(item.name);
    // The item now names another object: the one applied before is no longer wanted.
    if (
      before?.applied &&
      !isDeepStrictEqual(before.applied, identity) &&
      !wanted.has(identityKey(before.applied))
    ) {
      const removal = await removeApplied(ctx, skr, before.applied);
      if (removal) {
        statuses.push({ ...before, name: item.name, state: 'Error', message: removal });
        continue;
      }
    }
    const refusal = refusedByPolicy(ctx.syncResourcePolicy, identity);
    if (refusal) {
      statuses.push(itemStatus(item.name, 'Error', refusal, undefined));
      continue;
    }
    statuses.push(await applyItem(skr, item.name, item.strategy, item.resource, identity, before));
  }
  // Items dropped from the spec: remove what they applied; keep them in status until that succeeds.
  for (const [name, before] of previous) {
    if (seen.has(name) || !before.applied || wanted.has(identityKey(before.applied))) continue;
    const removal = await removeApplied(ctx, skr, before.applied);
    if (removal) statuses.push({ ...before, state: 'Error', message: `removing dropped item: ${removal}` });
  }

  const state = worstState(statuses.map((status) => status.state));
  const failures = statuses
    .filter((status) => status.state === 'Error')
    .map((status) => ({ name: `${syncName}/${status.name}`, message: status.message ?? 'failed' }));
  const comparable = (items: SyncItemStatus[] | undefined) =>
    (items ?? []).map(({ name, state: itemState, message, applied }) => ({
      name,
      state: itemState,
      message,
      applied,
    }));
  const changed =
    sync.status?.state !== state ||
    sync.status?.observedGeneration !== sync.metadata.generation ||
    !isDeepStrictEqual(comparable(sync.status?.items), comparable(statuses));
  if (changed) await writeStatus(ctx, sync, state, statuses, `applied ${statuses.length} item(s)`);
  return { name: syncName, state, failures };
}

async function applyItem(
  skr: ClusterClient,
  name: string,
  strategy: 'CreateAndSync' | 'CreateAndIgnore' | 'Delete',
  resource: Record<string, unknown> & { metadata: { name: string; labels?: Record<string, string> } },
  identity: Applied,
  before: SyncItemStatus | undefined,
): Promise<SyncItemStatus> {
  const body = mirrorable(resource) as typeof resource;
  body.metadata = { ...body.metadata, labels: { ...body.metadata.labels, [LABELS.managedBy]: MANAGED_BY } };
  try {
    switch (strategy) {
      case 'CreateAndSync':
        await applyObject(skr.objects, body, { fieldManager: FIELD_MANAGER, force: true });
        return itemStatus(name, 'Ready', `applied ${describe(identity)}`, identity);
      case 'CreateAndIgnore': {
        if (await readObject(skr.objects, objectRef(identity))) {
          return itemStatus(name, 'Ready', `${describe(identity)} exists; left to the SKR`, identity);
        }
        if (before?.applied && isDeepStrictEqual(before.applied, identity) && before.state === 'Ready') {
          // Created once and deleted in the SKR since: the user's decision stands.
          return itemStatus(name, 'Ready', `${describe(identity)} was created once; not recreated`, identity);
        }
        await createIfAbsent(skr.objects, body, FIELD_MANAGER);
        return itemStatus(name, 'Ready', `created ${describe(identity)}`, identity);
      }
      case 'Delete':
        await deleteIfExists(skr.objects, objectRef(identity));
        return itemStatus(name, 'Ready', `${describe(identity)} absent`, undefined);
    }
  } catch (error) {
    if (isUnreachable(error)) throw error;
    return itemStatus(
      name,
      'Error',
      error instanceof Error ? error.message : String(error),
      before?.applied && isDeepStrictEqual(before.applied, identity) ? identity : undefined,
    );
  }
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
 * Deletes one applied object; returns an error message, or undefined when it is gone. Records are checked
 * against the policy too: whoever may write SyncResource status must not be able to delete anything by it.
 */
async function removeApplied(
  ctx: ReconcileContext,
  skr: ClusterClient,
  applied: Applied,
): Promise<string | undefined> {
  const refusal = refusedByPolicy(ctx.syncResourcePolicy, applied);
  if (refusal) return refusal;
  try {
    await deleteIfExists(skr.objects, objectRef(applied));
    return undefined;
  } catch (error) {
    if (isUnreachable(error)) throw error;
    return error instanceof Error ? error.message : String(error);
  }
}

/**
 * Removes every object this SyncResource applied to the SKR (recorded identities and current items of the
 * create strategies). Throws on the first failure so the caller can retry or give up as a whole.
 */
export async function removeAppliedObjects(
  ctx: ReconcileContext,
  skr: ClusterClient,
  sync: RawSyncResource,
): Promise<void> {
  const targets = new Map<string, Applied>();
  for (const item of sync.status?.items ?? [])
    if (item.applied) targets.set(identityKey(item.applied), item.applied);
  for (const raw of sync.spec.items) {
    try {
      const item = parseSyncItem(raw, 'item');
      if (item.strategy !== 'Delete') {
        const identity = identityOf(item.resource);
        targets.set(identityKey(identity), identity);
      }
    } catch (error) {
      if (!(error instanceof ShapeError)) throw error;
    }
  }
  for (const target of targets.values()) {
    if (refusedByPolicy(ctx.syncResourcePolicy, target)) continue; // never applied by us
    await deleteIfExists(skr.objects, objectRef(target));
  }
  if ((sync.status?.items?.length ?? 0) > 0 && !sync.metadata.deletionTimestamp) {
    await writeStatus(ctx, sync, 'Ready', [], 'removed applied objects from the SKR: Kyma deleted');
  }
}

async function writeStatus(
  ctx: ReconcileContext,
  sync: RawSyncResource,
  state: ResourceState,
  items: SyncItemStatus[],
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
