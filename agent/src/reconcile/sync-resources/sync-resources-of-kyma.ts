// Reading SyncResources from the KCP: those of one Kyma (for its full pass and its deletion) and one by name (for
// the targeted path, and for a full pass that finds the targeted path applied a newer generation). A malformed
// SyncResource is logged and skipped.
import { LABELS, listItems, parseSyncResource, ShapeError, type RawSyncResource } from '@skr-watcher/api';
import { getCustomObject } from '@skr-watcher/kube';
import { bucketOf } from '../../sharding/ring.js';
import { listKcp, refOf, type ReconcileContext } from '../context.js';

/** What reading one SyncResource needs of the reconciler. */
type SyncResourceReader = Pick<ReconcileContext, 'kcp' | 'namespace' | 'logger'>;

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
  const fresh = await Promise.all(names.map((name) => readSyncResource(ctx, name)));
  return fresh.filter((sync): sync is RawSyncResource => sync?.spec.kyma === kyma);
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

/** SyncResource `name` of the KCP namespace, read fresh; undefined when absent or malformed. */
export async function readSyncResource(
  ctx: SyncResourceReader,
  name: string,
): Promise<RawSyncResource | undefined> {
  const raw = await getCustomObject(ctx.kcp.custom, refOf('syncResource', ctx.namespace, name));
  return raw === undefined ? undefined : parseOrWarn(ctx, raw);
}

function parseOrWarn(ctx: Pick<ReconcileContext, 'logger'>, raw: unknown): RawSyncResource | undefined {
  try {
    return parseSyncResource(raw, 'SyncResource');
  } catch (error) {
    if (!(error instanceof ShapeError)) throw error;
    ctx.logger.warn({ err: error }, 'skipping malformed SyncResource');
    return undefined;
  }
}
