// SyncResource: manifests a module manager wants in one SKR, kept there by the object-set engine
// (@skr-watcher/kube object-set, decision 020) as Manifests are. Each item is applied by its strategy: CreateAndSync
// re-applies (server-side apply, forced) so drift is reverted; CreateAndIgnore creates once and then leaves the
// object to the SKR's users; Delete removes it. What was applied is recorded per item (status.items[].applied) and
// as the set's inventory (status.synced), so an object that left the set (an item dropped or renamed, a deleted
// SyncResource) is removed from the SKR, once the new set is in place. Items are refused when the allow-list does
// not admit them or when they name what the agent runs in the SKR itself (agent-owned.ts), whatever the allow-list.
// Two paths apply one: the Kyma's full pass (every SyncResource of the Kyma; its step, reconcileSyncResource, is
// here), and the targeted path, which applies one changed SyncResource at once when its watch reports a spec change
// (apply-changed.ts). Both run in the SyncResource's lane (lane.ts), so they never apply one at the same time.
// This module is what the rest of the reconciler imports of SyncResources.
import type { RawSyncResource } from '@skr-watcher/api';
import type { ClusterClient } from '@skr-watcher/kube';
import { agentOwnedObjects, type AgentOwnedObjects } from '../agent-owned.js';
import type { ReconcileContext } from '../context.js';
import { applySyncResource } from './apply-sync-resource.js';
import type { SyncResourceOutcome } from './item-status.js';
import { forgetTargetedApply, inSyncResourceLane, targetedApplyIsNewer } from './lane.js';
import { readSyncResource } from './sync-resources-of-kyma.js';

export { applyChangedSyncResource } from './apply-changed.js';
export type { SyncResourceApplyOutcome, SyncResourceApplySteps } from './apply-changed.js';
export type { SyncResourceOutcome } from './item-status.js';
export { refusedByPolicy } from './item-guard.js';
export { removeAppliedObjects, removeFinalizer } from './removal.js';
export { syncResourcesOf } from './sync-resources-of-kyma.js';

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
  return inSyncResourceLane(ctx, sync.spec.kyma, sync.metadata.name, () =>
    targetedApplyIsNewer(ctx.kcp, sync)
      ? applyAsReadNow(ctx, skr, sync, owned)
      : applySyncResource(ctx, skr, sync, owned),
  );
}

/** The targeted path applied a newer generation since the pass listed `listed`: the pass applies it as read now. */
async function applyAsReadNow(
  ctx: ReconcileContext,
  skr: ClusterClient,
  listed: RawSyncResource,
  owned: AgentOwnedObjects,
): Promise<SyncResourceOutcome> {
  const uid = listed.metadata.uid ?? '';
  const fresh = await readSyncResource(ctx, listed.metadata.name);
  // Gone (or another object of that name), or moved to another Kyma since the pass listed it: not this pass's.
  if (fresh?.metadata.uid !== uid) forgetTargetedApply(ctx.kcp, uid);
  if (fresh?.metadata.uid !== uid || fresh.spec.kyma !== listed.spec.kyma)
    return { name: listed.metadata.name, state: 'Ready', failures: [] };
  return applySyncResource(ctx, skr, fresh, owned);
}
