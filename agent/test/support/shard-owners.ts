// Which replica owns each Kyma of a KCP namespace, as the Kymas' owner labels say (decision 012).
import { CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { GROUP, KINDS, LABELS, type Kyma } from '@skr-watcher/api';

/** Kyma name → the replica its `skr-agent-shard` label names (undefined: not owned yet). */
export async function shardOwners(
  kcp: KubeConfig,
  namespace: string,
): Promise<Map<string, string | undefined>> {
  const list = (await kcp.makeApiClient(CustomObjectsApi).listNamespacedCustomObject({
    group: GROUP,
    version: KINDS.kyma.version,
    plural: KINDS.kyma.plural,
    namespace,
  })) as { items: Kyma[] };
  return new Map(list.items.map((k) => [k.metadata.name, k.metadata.labels?.[LABELS.shardOwner]]));
}
