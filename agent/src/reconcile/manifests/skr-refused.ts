// The Manifests of a Kyma whose SKR refuses the agent (the kubeconfig's identity may only view, or is not let in at
// all): each live one goes Error with the API server's refusal, as upstream's Manifest controller, which reaches the
// SKR on its own, reports it, instead of a Ready nobody can vouch for. The next pass that reaches the SKR installs
// each again, and its status says what it finds.
import { ANNOTATIONS, LABELS } from '@skr-watcher/api';
import { apiErrorCode } from '@skr-watcher/kube';
import type { ReconcileContext } from '../context.js';
import { manifestsOf } from './manifests-of-kyma.js';
import { writeStatus } from './manifest-status.js';

/** Whether the SKR answered the agent's identity with 401 (not let in) or 403 (not allowed). */
export function isRefusal(error: unknown): boolean {
  const code = apiErrorCode(error);
  return code === 401 || code === 403;
}

/**
 * Every live Manifest of `kyma` Error with `message` (written only where a reader would see a change); Manifests
 * being deleted, labelled to be skipped or unmanaged keep their status, as no pass of theirs would write one.
 */
export async function markManifestsRefused(
  ctx: ReconcileContext,
  kyma: string,
  message: string,
): Promise<void> {
  for (const manifest of (await manifestsOf(ctx, kyma)).values()) {
    if (manifest.metadata.deletionTimestamp) continue;
    if (manifest.metadata.labels?.[LABELS.skipReconciliation] === 'true') continue;
    if (manifest.metadata.annotations?.[ANNOTATIONS.isUnmanaged] === 'true') continue;
    await writeStatus(ctx, manifest, {
      state: 'Error',
      operation: message,
      synced: manifest.status?.synced ?? [],
    });
  }
}
