// The lane one SyncResource is applied in (the full pass and the targeted path never apply it at the same time),
// and the generations the targeted path applied in it, so a full pass that read its SyncResources earlier does not
// put an older spec back into the SKR.
import { GROUP, KINDS, type RawSyncResource } from '@skr-watcher/api';
import type { ClusterClient } from '@skr-watcher/kube';
import type { MirroredObject, ReconcileContext } from '../context.js';

/**
 * Runs `work` in the lane of SyncResource `name` of Kyma `kyma`. Its group is prefixed, so no SKR object (a Module
 * CR's lane) can share it.
 */
export function inSyncResourceLane<T>(
  ctx: Pick<ReconcileContext, 'namespace' | 'inMirrorLane'>,
  kyma: string,
  name: string,
  work: () => Promise<T>,
): Promise<T> {
  const lane: MirroredObject = {
    group: `kcp:${GROUP}`,
    kind: KINDS.syncResource.kind,
    namespace: ctx.namespace,
    name,
  };
  return ctx.inMirrorLane(`${ctx.namespace}/${kyma}`, lane, work);
}

/**
 * Per reconciler (its KCP client), the newest generation of each SyncResource (by uid) the targeted path applied;
 * one whose deletion it finished counts as newer than any. A full pass read its SyncResources when it started; where
 * the targeted path applied a newer generation meanwhile, the pass reads that SyncResource again rather than put an
 * older spec back into the SKR.
 */
const targetedGenerations = new WeakMap<ClusterClient, Map<string, number>>();

function generationsOf(kcp: ClusterClient): Map<string, number> {
  let generations = targetedGenerations.get(kcp);
  if (!generations) targetedGenerations.set(kcp, (generations = new Map()));
  return generations;
}

/** Records that the targeted path applied this SyncResource as read (a deleted one: newer than any generation). */
export function recordTargetedApply(kcp: ClusterClient, sync: RawSyncResource): void {
  const uid = sync.metadata.uid;
  if (!uid) return;
  const generations = generationsOf(kcp);
  const generation = sync.metadata.deletionTimestamp
    ? Number.MAX_SAFE_INTEGER
    : (sync.metadata.generation ?? 0);
  generations.set(uid, Math.max(generations.get(uid) ?? 0, generation));
}

/** Whether the targeted path applied a newer generation of this SyncResource than the one given. */
export function targetedApplyIsNewer(kcp: ClusterClient, sync: RawSyncResource): boolean {
  const applied = generationsOf(kcp).get(sync.metadata.uid ?? '');
  return applied !== undefined && applied > (sync.metadata.generation ?? 0);
}

/** Forgets a SyncResource that is gone (its uid no longer names one). */
export function forgetTargetedApply(kcp: ClusterClient, uid: string): void {
  generationsOf(kcp).delete(uid);
}
