// What the SKR webhook configuration is made from: the Watcher CRs in KCP and the Module CRs' resources in the SKR.
import type { V1APIResource } from '@kubernetes/client-node';
import {
  GROUP,
  KINDS,
  listItems,
  splitApiVersion,
  watcherSchema,
  type GroupVersionResource,
  type Watcher,
} from '@skr-watcher/api';
import { isNotFound, parsedOnce, type ClusterClient } from '@skr-watcher/kube';

/**
 * The live Watchers of a namespace; one that does not parse is left out, so it cannot break the others. `cached`:
 * the Watchers as a watch cache holds them (each validated once), instead of a list.
 */
export async function listWatchers(
  kcp: ClusterClient,
  namespace: string,
  cached?: readonly unknown[],
): Promise<Watcher[]> {
  const { plural, version } = KINDS.watcher;
  let items: readonly unknown[] | undefined = cached;
  if (!items) {
    let list: unknown;
    try {
      list = await kcp.custom.listNamespacedCustomObject({ group: GROUP, version, namespace, plural });
    } catch (cause) {
      throw new Error(`list Watchers in ${namespace}`, { cause });
    }
    items = listItems(list, `Watcher list ${namespace}`);
  }
  return items.flatMap((item) => {
    const parsed = parsedOnce(item, 'Watcher safeParse', (object) => watcherSchema.safeParse(object));
    return parsed.success && !parsed.data.metadata.deletionTimestamp ? [parsed.data] : [];
  });
}

/**
 * Resolves Module CR kinds to resources through the SKR's discovery (GET /apis/<group>/<version>), which the
 * client caches per group-version and fetches again for a kind it does not know yet: reading the Module CRs has
 * filled it already, so a pass costs no request here. (Listing every CRD each pass cost more CPU than the rest of
 * the pass: CRDs carry their whole OpenAPI schema.)
 */
export async function resolveModuleResources(
  skr: ClusterClient,
  kinds: { apiVersion: string; kind: string }[],
): Promise<{ resolved: GroupVersionResource[]; unresolved: string[] }> {
  const resolved: GroupVersionResource[] = [];
  const unresolved: string[] = [];
  for (const { apiVersion, kind } of kinds) {
    const { group, version } = splitApiVersion(apiVersion);
    let resource: V1APIResource | undefined;
    try {
      resource = await skr.objects.discover(apiVersion, kind);
    } catch (cause) {
      // A group-version the SKR does not serve answers 404: the kind is unknown there, like a missing CRD.
      if (!isNotFound(cause)) throw new Error(`discover ${kind}.${apiVersion} in the SKR`, { cause });
    }
    // Discovery lists subresources (samples/status) with the kind of their parent: the resource is before the slash.
    if (resource) resolved.push({ group, version, resource: resource.name.split('/')[0] as string });
    else unresolved.push(`${kind}.${apiVersion}`);
  }
  return { resolved, unresolved };
}
