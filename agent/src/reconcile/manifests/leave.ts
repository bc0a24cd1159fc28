// Leaving a module in the SKR: its objects stay (without the managed-by label when the SKR is reachable) and its
// Manifest goes, with an Event on the Kyma that says why: the module is unmanaged, or the SKR has no credentials.
import { LABELS, type Manifest } from '@skr-watcher/api';
import {
  deleteCustomObjectIfExists,
  MODULE_OBJECT_METADATA,
  releaseObjects,
  withContext,
  type ClusterClient,
} from '@skr-watcher/kube';
import type { Logger } from '@skr-watcher/telemetry';
import type { EventRecorder, KymaEventTarget } from '../events.js';
import { releaseManifest } from './finalizers.js';
import { refOfManifest, type ManifestStore } from './manifest.js';

/** What leaving a module uses: the Manifest's store, the Kyma's Events and the log. */
export interface LeaveContext extends ManifestStore {
  events: Pick<EventRecorder, 'normal'>;
  logger: Pick<Logger, 'info'>;
}

/**
 * The module's SKR objects stay where they are and the Manifest goes (its finalizers dropped, then deleted), with an
 * Event on the Kyma that says so: an unmanaged module (the user runs it now) or an SKR without credentials. Given
 * the SKR (`skr`), the objects first lose the managed-by label, as upstream does for an unmanaged module.
 */
export async function leaveModule(
  ctx: LeaveContext,
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
