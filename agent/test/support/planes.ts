// Helpers shared by the reconcile suites: addresses of the project's custom objects and reads that wait out
// what a fresh control plane or watch cache needs a moment for.
import { CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { GROUP, KINDS } from '@skr-watcher/api';

export function custom(kc: KubeConfig): CustomObjectsApi {
  return kc.makeApiClient(CustomObjectsApi);
}

/** Address of one of the project's custom objects for CustomObjectsApi. */
export function refTo(kind: keyof typeof KINDS, namespace: string, name: string) {
  const { version, plural } = KINDS[kind];
  return { group: GROUP, version, plural, namespace, name };
}

export const kymaRef = (namespace: string, name: string) => refTo('kyma', namespace, name);

/** A read that answers undefined on 404 and waits out the 429 a fresh CRD answers for a moment. */
export async function getOrUndefined<T>(read: () => Promise<T>): Promise<T | undefined> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await read();
    } catch (error) {
      const code = (error as { code?: number }).code;
      if (code === 404) return undefined;
      // A fresh CRD answers 429 "storage is (re)initializing" for a moment.
      if (code !== 429 || attempt > 20) throw error;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
}

/**
 * The reconciler learns which Secrets and SyncResources exist from the API server's watch cache (as an informer
 * would); a test that creates one and reconciles at once waits until the cache has it, as a watch trigger would.
 */
export async function untilInWatchCache(
  list: () => Promise<{ items: { metadata?: { name?: string } }[] }>,
  name: string,
): Promise<void> {
  for (let attempt = 0; attempt < 250; attempt++) {
    if ((await list()).items.some((item) => item.metadata?.name === name)) return;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`${name} never reached the watch cache`);
}

/** Waits until every kind of the project answers lists on each plane (fresh CRDs answer 429 for a moment). */
export async function untilCrdsServe(planes: KubeConfig[]): Promise<void> {
  for (const kc of planes) {
    for (const kind of Object.keys(KINDS) as (keyof typeof KINDS)[]) {
      const { group, version, plural } = refTo(kind, 'default', '');
      await getOrUndefined(() =>
        custom(kc).listNamespacedCustomObject({ group, version, plural, namespace: 'default' }),
      );
    }
  }
}
