// The Kymas of the namespace as assignment sees them: name, runtime-id and owner label of each, from a watch of their
// metadata only (thousands of Kymas on every replica), with an index by runtime-id for the listener.
import type { KubeConfig } from '@kubernetes/client-node';
import { GROUP, KINDS, LABELS } from '@skr-watcher/api';
import { ResilientInformer, customResourceSource, metadataOnly, objectKey } from '@skr-watcher/kube';
import type { Logger, Registry } from '@skr-watcher/telemetry';
import { bucketOf } from './ring.js';

/** What the assignment keeps of every Kyma in the namespace: identity, runtime-id and owner, nothing else. */
export interface KymaOwnership {
  metadata: { name: string; namespace?: string; resourceVersion?: string; labels?: Record<string, string> };
  /**
   * bucketOf(name), hashed once as the Kyma is cached: every assignment pass (one per batch of label changes during a
   * takeover, and the sweep every second) places every Kyma, and an MD5 per Kyma per pass was most of a pass's cost.
   */
  bucket: number;
}

const RUNTIME_ID_INDEX = 'runtime-id';

/** Of a Kyma's metadata, the fields assignment reads, and its bucket. */
export function ownershipOf(kyma: Pick<KymaOwnership, 'metadata'>): KymaOwnership {
  const labels = kyma.metadata.labels ?? {};
  const kept: Record<string, string> = {};
  for (const key of [LABELS.runtimeId, LABELS.shardOwner]) if (labels[key]) kept[key] = labels[key];
  return {
    metadata: {
      name: kyma.metadata.name,
      namespace: kyma.metadata.namespace,
      resourceVersion: kyma.metadata.resourceVersion,
      labels: kept,
    },
    bucket: bucketOf(kyma.metadata.name),
  };
}

/** The replica the Kyma's owner label names, if any. */
export function ownerOf(kyma: KymaOwnership | undefined): string | undefined {
  return kyma?.metadata.labels?.[LABELS.shardOwner] || undefined;
}

export interface KymaOwnersOptions {
  kubeConfig: KubeConfig;
  namespace: string;
  resyncMs?: number | undefined;
  logger?: Logger | undefined;
  registry?: Registry | undefined;
}

/** The informer of every Kyma's ownership in the namespace, indexed by runtime-id; not started. */
export function watchKymaOwners(options: KymaOwnersOptions): ResilientInformer<KymaOwnership> {
  const kymas = new ResilientInformer<KymaOwnership>({
    kubeConfig: options.kubeConfig,
    source: metadataOnly<KymaOwnership>(
      options.kubeConfig,
      customResourceSource(options.kubeConfig, {
        group: GROUP,
        version: KINDS.kyma.version,
        plural: KINDS.kyma.plural,
        namespace: options.namespace,
      }),
    ),
    resyncMs: options.resyncMs,
    transform: ownershipOf,
    logger: options.logger,
    registry: options.registry,
  });
  kymas.addIndex(RUNTIME_ID_INDEX, (kyma) => {
    const runtimeId = kyma.metadata.labels?.[LABELS.runtimeId];
    return runtimeId ? [runtimeId] : [];
  });
  return kymas;
}

/** The Kyma labelled with `runtimeId`, the first by key when several are; `namespace` for one cached without. */
export function kymaOfRuntimeId(
  kymas: Pick<ResilientInformer<KymaOwnership>, 'byIndex' | 'get'>,
  runtimeId: string,
  namespace: string,
): { namespace: string; name: string } | undefined {
  const first = kymas.byIndex(RUNTIME_ID_INDEX, runtimeId).map(objectKey).sort()[0];
  if (!first) return undefined;
  const kyma = kymas.get(first) as KymaOwnership;
  return { namespace: kyma.metadata.namespace ?? namespace, name: kyma.metadata.name };
}
