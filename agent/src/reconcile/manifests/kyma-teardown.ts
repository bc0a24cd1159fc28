// All of a Kyma's Manifests at once, read consistently from etcd: removed with their modules when the Kyma is
// deleted, left in the SKR when it has no credentials, and marked orphaned when the Kyma is gone without its deletion.
import { isRecord, LABELS, parseManifest, type Manifest } from '@skr-watcher/api';
import { deleteCustomObjectIfExists, getCustomObject, type ClusterClient } from '@skr-watcher/kube';
import { listKcp, type ReconcileContext } from '../context.js';
import type { KymaEventTarget } from '../events.js';
import { leaveModule } from './leave.js';
import { refOfManifest } from './manifest.js';
import { writeStatus } from './manifest-status.js';
import { reconcileManifest } from './pass.js';

/** Every Manifest of the Kyma, read from etcd (deletion decides from it). */
async function manifestsOfKymaFromEtcd(ctx: ReconcileContext, kyma: string): Promise<Manifest[]> {
  const list = await listKcp(ctx, 'manifest', `${LABELS.kymaName}=${kyma}`, 'consistent');
  const items = isRecord(list) && Array.isArray(list['items']) ? (list['items'] as unknown[]) : [];
  return items.map((item) => parseManifest(item, 'Manifest'));
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
  for (const manifest of await manifestsOfKymaFromEtcd(ctx, kyma)) {
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
  for (let manifest of await manifestsOfKymaFromEtcd(ctx, kyma.name)) {
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
  for (const manifest of await manifestsOfKymaFromEtcd(ctx, kyma.name)) {
    if (manifest.metadata.deletionTimestamp)
      await leaveModule(ctx, manifest, kyma, 'ModuleCleanupSkipped', 'no kubeconfig Secret for the SKR');
  }
}
