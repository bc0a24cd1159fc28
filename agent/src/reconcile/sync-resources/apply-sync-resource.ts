// One SyncResource applied into its SKR, the step both paths run in its lane: a deleted one has what it applied
// removed; otherwise its finalizer is ensured, its items planned under the guard, the set applied (and what left
// it pruned once the new set is in place), its Delete items removed, and its status written when it changed.
import { FIELD_MANAGER, type RawSyncResource, type SyncItemStatus } from '@skr-watcher/api';
import {
  applyObjectSet,
  removeObjects,
  type ClusterClient,
  type Holding,
  type SyncedObject,
} from '@skr-watcher/kube';
import type { AgentOwnedObjects } from '../agent-owned.js';
import type { ReconcileContext } from '../context.js';
import { worstState } from '../status.js';
import { inventoryOf } from './applied-objects.js';
import { guardOf, holdingOf, type SyncResourceGuard } from './item-guard.js';
import { itemStatusesOf, planItems, type ItemPlan, type PlanResults } from './item-plan.js';
import {
  droppedItemStatuses,
  failuresOf,
  statusChanged,
  writeStatus,
  type StatusWriter,
  type SyncResourceOutcome,
} from './item-status.js';
import { ensureFinalizer, finishDeletion } from './removal.js';

export interface ApplyHooks {
  /** Called once the objects are in the SKR, before the status write. */
  onApplied?: () => void;
  /**
   * True when a newer apply of this SyncResource waits in the lane: it reads the SyncResource fresh and writes the
   * status (one that ends otherwise wakes the full pass, which applies and writes it), so this one leaves it.
   */
  statusLeftToNext?: () => boolean;
}

export async function applySyncResource(
  ctx: ReconcileContext,
  skr: ClusterClient,
  sync: RawSyncResource,
  owned: AgentOwnedObjects,
  hooks: ApplyHooks = {},
): Promise<SyncResourceOutcome> {
  if (sync.metadata.deletionTimestamp) return finishDeletion(ctx, skr, sync, owned);
  await ensureFinalizer(ctx, sync);
  const previous = new Map((sync.status?.items ?? []).map((item) => [item.name, item]));
  const guard = guardOf(ctx.syncResourcePolicy, owned);
  const plan = planItems(ctx.namespace, sync, previous, guard);
  const holding = holdingOf(ctx.namespace, sync.metadata.name);
  const results = await applyPlan(skr, plan, inventoryOf(sync), guard, holding);
  hooks.onApplied?.();
  const items = itemStatusesOf(plan, results);
  const statuses = [...items, ...droppedItemStatuses(previous, items, results.applied)];
  return recordOutcome(ctx, sync, statuses, results.applied.inventory, hooks.statusLeftToNext);
}

async function applyPlan(
  skr: ClusterClient,
  plan: ItemPlan,
  inventory: SyncedObject[],
  guard: SyncResourceGuard,
  holding: Holding,
): Promise<PlanResults> {
  const applied = await applyObjectSet(
    skr,
    { objects: plan.desired, inventory, keep: plan.keep },
    {
      fieldManager: FIELD_MANAGER,
      refuse: guard,
      holding,
      // Requests of one SKR share one connection (LIMITS.skrConnections); more in flight would only queue.
      concurrency: 2,
    },
  );
  const removed =
    plan.deletes.length > 0
      ? await removeObjects(
          skr,
          plan.deletes.map((entry) => entry.object),
          // A Delete item removes what nobody holds, never what a module or another SyncResource holds.
          { refuse: guard, holding: { ...holding, unheld: 'delete' } },
        )
      : undefined;
  return { applied, removed };
}

/** The SyncResource's state and failures from its items; its status written when that differs from the last. */
async function recordOutcome(
  ctx: StatusWriter,
  sync: RawSyncResource,
  statuses: SyncItemStatus[],
  inventory: SyncedObject[],
  statusLeftToNext: () => boolean = () => false,
): Promise<SyncResourceOutcome> {
  const state = worstState(statuses.map((status) => status.state));
  if (statusChanged(sync, state, statuses, inventory) && !statusLeftToNext())
    await writeStatus(ctx, sync, state, statuses, inventory, `applied ${statuses.length} item(s)`);
  return { name: sync.metadata.name, state, failures: failuresOf(sync.metadata.name, statuses) };
}
