// What the SKR webhook configuration is made from: the Watcher CRs in KCP and the Module CRs' resources in the SKR.
import type { V1CustomResourceDefinition } from '@kubernetes/client-node';
import {
  GROUP,
  KINDS,
  listItems,
  splitApiVersion,
  watcherSchema,
  type GroupVersionResource,
  type Watcher,
} from '@skr-watcher/api';
import { listInPages, type ClusterClient } from '@skr-watcher/kube';

/** The live Watchers of a namespace; one that does not parse is left out, so it cannot break the others. */
export async function listWatchers(kcp: ClusterClient, namespace: string): Promise<Watcher[]> {
  const { plural, version } = KINDS.watcher;
  let list: unknown;
  try {
    list = await kcp.custom.listNamespacedCustomObject({ group: GROUP, version, namespace, plural });
  } catch (cause) {
    throw new Error(`list Watchers in ${namespace}`, { cause });
  }
  return listItems(list, `Watcher list ${namespace}`).flatMap((item) => {
    const parsed = watcherSchema.safeParse(item);
    return parsed.success && !parsed.data.metadata.deletionTimestamp ? [parsed.data] : [];
  });
}

interface CrdNames {
  group: string;
  kind: string;
  plural: string;
  served: string[];
}

/** Resolves Module CR kinds to resources through the SKR's CRDs (Module CRs are always custom resources). */
export async function resolveModuleResources(
  skr: ClusterClient,
  kinds: { apiVersion: string; kind: string }[],
): Promise<{ resolved: GroupVersionResource[]; unresolved: string[] }> {
  if (kinds.length === 0) return { resolved: [], unresolved: [] };
  // Paged, and only the names kept: an SKR with hundreds of large CRDs must not be held in memory at once.
  let crds: CrdNames[];
  try {
    crds = await listInPages(
      async ({ limit, continueToken }) => {
        const page = await skr.apiextensions.listCustomResourceDefinition({
          limit,
          ...(continueToken ? { _continue: continueToken } : {}),
        });
        return { items: page.items, metadata: { continue: page.metadata?._continue ?? '' } };
      },
      (crd: V1CustomResourceDefinition): CrdNames => ({
        group: crd.spec.group,
        kind: crd.spec.names.kind,
        plural: crd.spec.names.plural,
        served: crd.spec.versions.filter((v) => v.served).map((v) => v.name),
      }),
    );
  } catch (cause) {
    throw new Error('list CRDs in the SKR', { cause });
  }
  const resolved: GroupVersionResource[] = [];
  const unresolved: string[] = [];
  for (const { apiVersion, kind } of kinds) {
    const { group, version } = splitApiVersion(apiVersion);
    const crd = crds.find((c) => c.group === group && c.kind === kind && c.served.includes(version));
    if (crd) resolved.push({ group, version, resource: crd.plural });
    else unresolved.push(`${kind}.${apiVersion}`);
  }
  return { resolved, unresolved };
}
