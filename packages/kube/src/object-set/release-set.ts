// Handing a set over: its objects stay in the cluster, only the label that says "kept by a manager" goes. For a
// module turned unmanaged (upstream strips the same label), so that nothing selecting by it, the SKR webhook's
// drift rule included, treats the objects as the agent's any more.
import { PatchStrategy, type KubernetesObject } from '@kubernetes/client-node';
import { isNotFound, withContext } from '../apply.js';
import type { ClusterClient } from '../cluster-client.js';
import { mapLimited } from './concurrency.js';
import { apiVersionOfSynced, describeSynced, uniqueSynced, type SyncedObject } from './inventory.js';

/**
 * Removes `label` from every object of `objects` that still exists: a JSON merge patch setting it to null (RFC
 * 7386), a few at a time; an object already gone is skipped. Answers how many were patched; fails on the first
 * other error, so the caller keeps its inventory and tries again later.
 */
export async function releaseObjects(
  skr: ClusterClient,
  objects: readonly SyncedObject[],
  label: string,
  concurrency = 4,
): Promise<number> {
  const patched = await mapLimited(uniqueSynced(objects), concurrency, async (object) => {
    const patch = {
      apiVersion: apiVersionOfSynced(object),
      kind: object.kind,
      metadata: {
        name: object.name,
        ...(object.namespace ? { namespace: object.namespace } : {}),
        labels: { [label]: null },
      },
    } as unknown as KubernetesObject;
    try {
      await withContext(`remove label ${label} from ${describeSynced(object)}`, () =>
        skr.objects.patch(patch, undefined, undefined, undefined, undefined, PatchStrategy.MergePatch),
      );
      return true;
    } catch (error) {
      if (isNotFound(error)) return false;
      throw error;
    }
  });
  return patched.filter(Boolean).length;
}
