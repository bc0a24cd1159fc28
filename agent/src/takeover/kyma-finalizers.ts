// A KCP Kyma's finalizers change hands with the Kyma: once lifecycle-manager is stopped nothing removes its own
// (its Kyma reconciler's and its purge controller's), so a Kyma deleted after the takeover would wait for them
// forever, and the agent's deletion path runs only for a Kyma that carries the agent's finalizer. The swap is one
// write, checked against the resourceVersion it was read at. A Kyma already being deleted keeps what it has: the
// API server refuses a new finalizer on it, and dropping lifecycle-manager's would delete it without any cleanup.
import { GROUP, KINDS, KYMA_FINALIZER, LIFECYCLE_MANAGER, parseKyma } from '@skr-watcher/api';
import {
  getCustomObject,
  isConflict,
  mergePatchCustomObject,
  type ClusterClient,
  type CustomObjectRef,
} from '@skr-watcher/kube';

const ATTEMPTS = 3;

/** What became of one Kyma's finalizers. */
export type KymaFinalizerSwap = 'swapped' | 'unchanged' | 'deleting' | 'absent';

/**
 * Lifecycle-manager's Kyma finalizers replaced by the agent's; with `handBack`, the agent's replaced by
 * lifecycle-manager's reconciler finalizer (its purge finalizer it adds again itself).
 */
export async function swapKymaFinalizers(
  kcp: ClusterClient,
  namespace: string,
  name: string,
  options: { handBack?: boolean; dryRun?: boolean } = {},
): Promise<KymaFinalizerSwap> {
  const ref: CustomObjectRef = {
    group: GROUP,
    version: KINDS.kyma.version,
    plural: KINDS.kyma.plural,
    namespace,
    name,
  };
  const leaving = options.handBack ? [KYMA_FINALIZER] : LIFECYCLE_MANAGER.kymaFinalizers;
  const arriving = options.handBack ? LIFECYCLE_MANAGER.kymaFinalizers[0]! : KYMA_FINALIZER;
  for (let attempt = 1; ; attempt++) {
    const read = await getCustomObject(kcp.custom, ref);
    if (read === undefined) return 'absent';
    const kyma = parseKyma(read, `Kyma ${namespace}/${name}`);
    const finalizers = kyma.metadata.finalizers ?? [];
    if (!finalizers.some((finalizer) => leaving.includes(finalizer))) return 'unchanged';
    if (kyma.metadata.deletionTimestamp) return 'deleting';
    if (options.dryRun) return 'swapped';
    const kept = finalizers.filter((finalizer) => !leaving.includes(finalizer));
    const next = kept.includes(arriving) ? kept : [...kept, arriving];
    try {
      await mergePatchCustomObject(kcp.custom, ref, {
        metadata: { finalizers: next, resourceVersion: kyma.metadata.resourceVersion },
      });
      return 'swapped';
    } catch (error) {
      if (!isConflict(error) || attempt >= ATTEMPTS) throw error;
    }
  }
}
