// The plan of one SyncResource's items for the object-set engine: each spec item, in order, becomes an object of
// the set (CreateAndSync re-applies, CreateAndIgnore creates once), an object to delete (Delete), or, refused or
// malformed, a status of its own. Once the engine is done, each item's status is read back from its object's result.
import { isDeepStrictEqual } from 'node:util';
import {
  HOLDER_MARKS,
  LABELS,
  MANAGED_BY,
  parseSyncItem,
  ShapeError,
  type RawSyncResource,
  type SyncItem,
  type SyncItemStatus,
} from '@skr-watcher/api';
import {
  mirrorable,
  syncedObjectOfRef,
  type ApplySetResult,
  type DesiredObject,
  type MemberResult,
  type Removal,
  type SetMember,
  type SyncedObject,
} from '@skr-watcher/kube';
import { appliedOf, describeApplied, identityOf, type Applied } from './applied-objects.js';
import { tokenSecretRefusal, type SyncResourceGuard } from './item-guard.js';
import { itemStatus } from './item-status.js';

/** One spec item, in order: its status once known, or the index of its object among `desired` or `deletes`. */
type ItemSlot =
  | { status: SyncItemStatus }
  | { name: string; strategy: SyncItem['strategy']; before: SyncItemStatus | undefined; member: number };

export interface ItemPlan {
  slots: ItemSlot[];
  /** The set to apply. */
  desired: DesiredObject[];
  /** What Delete items remove. */
  deletes: { name: string; object: SyncedObject }[];
  /** Not in the set, yet not to be pruned: what malformed items applied before. */
  keep: SyncedObject[];
}

/** What the engine did with the plan: the set applied, and the Delete items' removal (none without them). */
export interface PlanResults {
  applied: ApplySetResult;
  removed: Removal | undefined;
}

interface PlanInputs {
  namespace: string;
  syncName: string;
  /** The items of the last status, by name. */
  previous: Map<string, SyncItemStatus>;
  guard: SyncResourceGuard;
}

const READY_OUTCOMES = new Set<MemberResult['outcome']>(['applied', 'adopted', 'created', 'present', 'left']);

export function planItems(
  namespace: string,
  sync: RawSyncResource,
  previous: Map<string, SyncItemStatus>,
  guard: SyncResourceGuard,
): ItemPlan {
  const inputs: PlanInputs = { namespace, syncName: sync.metadata.name, previous, guard };
  const plan: ItemPlan = { slots: [], desired: [], deletes: [], keep: [] };
  for (const [index, raw] of sync.spec.items.entries()) planItem(plan, inputs, raw, index);
  return plan;
}

function planItem(plan: ItemPlan, inputs: PlanInputs, raw: unknown, index: number): void {
  let item: SyncItem;
  try {
    item = parseSyncItem(raw, `SyncResource ${inputs.namespace}/${inputs.syncName} spec.items[${index}]`);
  } catch (error) {
    if (!(error instanceof ShapeError)) throw error;
    planMalformed(plan, inputs.previous, raw, index, error);
    return;
  }
  const identity = identityOf(item.resource);
  const refusal = inputs.guard(syncedObjectOfRef(identity)) ?? tokenSecretRefusal(item.resource);
  if (refusal) plan.slots.push({ status: itemStatus(item.name, 'Error', refusal, undefined) });
  else if (item.strategy === 'Delete') planDelete(plan, item, identity);
  else planApply(plan, inputs, item, identity);
}

/** A malformed item is not a dropped one: what it applied before stays until it is fixed or removed. */
function planMalformed(
  plan: ItemPlan,
  previous: Map<string, SyncItemStatus>,
  raw: unknown,
  index: number,
  error: ShapeError,
): void {
  const rawName = (raw as { name?: unknown } | null)?.name;
  const name = typeof rawName === 'string' ? rawName : `#${index}`;
  const applied = previous.get(name)?.applied;
  if (applied) plan.keep.push(syncedObjectOfRef(applied));
  plan.slots.push({ status: itemStatus(name, 'Error', error.message, applied) });
}

function planDelete(plan: ItemPlan, item: SyncItem, identity: Applied): void {
  plan.deletes.push({ name: item.name, object: syncedObjectOfRef(identity) });
  plan.slots.push({
    name: item.name,
    strategy: item.strategy,
    before: undefined,
    member: plan.deletes.length - 1,
  });
}

function planApply(plan: ItemPlan, inputs: PlanInputs, item: SyncItem, identity: Applied): void {
  const before = inputs.previous.get(item.name);
  const body = markedBody(inputs, item.resource);
  plan.desired.push(
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
  plan.slots.push({ name: item.name, strategy: item.strategy, before, member: plan.desired.length - 1 });
}

/** The item's object as the SKR gets it: labelled as the agent's, annotated with the SyncResource that holds it. */
function markedBody(inputs: PlanInputs, resource: SyncItem['resource']): SetMember {
  const body = mirrorable(resource) as SetMember;
  body.metadata = {
    ...body.metadata,
    labels: { ...body.metadata.labels, [LABELS.managedBy]: MANAGED_BY },
    annotations: {
      ...body.metadata.annotations,
      [HOLDER_MARKS.syncResourceAnnotation]: `${inputs.namespace}/${inputs.syncName}`,
    },
  };
  return body;
}

/** Each spec item's status, in order, from what the engine did with its object. */
export function itemStatusesOf(plan: ItemPlan, results: PlanResults): SyncItemStatus[] {
  return plan.slots.map((slot) => {
    if ('status' in slot) return slot.status;
    if (slot.strategy === 'Delete') return deleteItemStatus(slot, plan, results.removed);
    return applyItemStatus(slot, results.applied);
  });
}

type MemberSlot = Exclude<ItemSlot, { status: SyncItemStatus }>;

function deleteItemStatus(slot: MemberSlot, plan: ItemPlan, removed: Removal | undefined): SyncItemStatus {
  const result = removed?.results[slot.member];
  if (!result || result.outcome === 'deleted') {
    const target = appliedOf(plan.deletes[slot.member]!.object);
    return itemStatus(slot.name, 'Ready', `${describeApplied(target)} absent`, undefined);
  }
  return itemStatus(
    slot.name,
    result.outcome === 'failed' ? 'Error' : 'Processing',
    result.message,
    undefined,
  );
}

function applyItemStatus(slot: MemberSlot, applied: ApplySetResult): SyncItemStatus {
  const result = applied.results[slot.member]!;
  const identity = appliedOf(result.object);
  if (READY_OUTCOMES.has(result.outcome)) return itemStatus(slot.name, 'Ready', result.message, identity);
  // A failed or waiting object keeps its record only where it is the one the item applied before.
  const keptRecord =
    slot.before?.applied && isDeepStrictEqual(slot.before.applied, identity) ? identity : undefined;
  return itemStatus(
    slot.name,
    result.outcome === 'waiting' ? 'Processing' : 'Error',
    result.message,
    keptRecord,
  );
}
