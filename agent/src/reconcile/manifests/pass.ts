// One pass over a Manifest, as upstream's Manifest controller decides it: left alone (skip-reconciliation), left in
// the SKR (unmanaged), removed (being deleted) or installed; and what the pass finished, for the module operations
// counter. It runs inside its Kyma's pass, with the Kyma's SKR client, so it shares the Kyma's lane and shard.
import { ANNOTATIONS, LABELS, type Manifest } from '@skr-watcher/api';
import type { ClusterClient } from '@skr-watcher/kube';
import type { ModuleInstallation } from '../context.js';
import type { KymaEventTarget } from '../events.js';
import { installModule, type InstallContext, type ModuleObjects } from './install-steps.js';
import { leaveModule, type LeaveContext } from './leave.js';
import { removeModule, type RemovalContext } from './removal-steps.js';
import type { ManifestOutcome } from './step-result.js';

/** What one Manifest's pass uses of the reconcile: what installing, removing and leaving a module each use. */
export type ManifestPassContext = InstallContext & RemovalContext & LeaveContext;

/** What one Manifest's pass uses of module installation: the module's objects and the operations counter. */
export type ManifestInstallation = ModuleObjects & Pick<ModuleInstallation, 'observe'>;

/** One pass over a Manifest: install (or upgrade), or remove when it is being deleted. */
export async function reconcileManifest(
  ctx: ManifestPassContext,
  skr: ClusterClient,
  installation: ManifestInstallation,
  manifest: Manifest,
  kyma: KymaEventTarget,
): Promise<ManifestOutcome> {
  const outcome = await reconcileManifestPass(ctx, skr, installation, manifest, kyma);
  if (installation.observe) observeOutcome(installation.observe, manifest, outcome.manifest);
  return outcome;
}

async function reconcileManifestPass(
  ctx: ManifestPassContext,
  skr: ClusterClient,
  installation: ModuleObjects,
  manifest: Manifest,
  kyma: KymaEventTarget,
): Promise<ManifestOutcome> {
  if (manifest.metadata.labels?.[LABELS.skipReconciliation] === 'true') return { manifest };
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
  if (manifest.metadata.deletionTimestamp) return removeModule(ctx, skr, installation, manifest);
  return installModule(ctx, skr, installation, manifest);
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
