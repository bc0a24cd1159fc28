// The SKR Kyma: created from the KCP Kyma's spec when absent, then the user's. Its labels are kept at what
// the Watchers of Kymas select, so the SKR webhook sees its edits even when upstream or a user created it.
import {
  DEFAULTS,
  GROUP,
  KINDS,
  LABELS,
  MANAGED_BY,
  type Kyma,
  type Watcher,
  parseKyma,
} from '@skr-watcher/api';
import {
  getCustomObject,
  getOrUndefined,
  isConflict,
  KubeRequestError,
  mergePatchCustomObject,
  type ClusterClient,
  type CustomObjectRef,
} from '@skr-watcher/kube';
import { apiVersionOf, refOf, type ReconcileContext } from '../context.js';

/** Where the SKR Kyma lives: `kyma-system/default`, or `spec.sync.namespace`. */
export function skrKymaRef(kyma: Kyma): CustomObjectRef {
  return refOf('kyma', kyma.spec.sync?.namespace || DEFAULTS.skrNamespace, DEFAULTS.skrKymaName);
}

/**
 * Labels the SKR Kyma must carry for the Watchers of Kymas to select it: the union of their labelsToWatch
 * (by Watcher name, the first one wins a key), or upstream's `watched-by` when no Watcher watches Kymas.
 */
export function watchedLabels(watchers: Watcher[]): Record<string, string> {
  const labels: Record<string, string> = {};
  const ofKymas = watchers
    .filter(
      (w) => w.spec.resourceToWatch.group === GROUP && w.spec.resourceToWatch.resource === KINDS.kyma.plural,
    )
    .sort((a, b) => a.metadata.name.localeCompare(b.metadata.name));
  for (const watcher of ofKymas) {
    for (const [key, value] of Object.entries(watcher.spec.labelsToWatch ?? {})) labels[key] ??= value;
  }
  return Object.keys(labels).length > 0 ? labels : { [LABELS.watchedBy]: DEFAULTS.manager };
}

/**
 * The SKR Kyma, created from the KCP Kyma's spec when absent. After that its spec.modules is the user's
 * source of truth: the agent reads it for resolution and never writes the SKR Kyma's spec again; only the
 * labels the Watchers select are brought back when missing or changed.
 */
export async function ensureSkrKyma(
  ctx: ReconcileContext,
  kyma: Kyma,
  skr: ClusterClient,
  labels: Record<string, string>,
): Promise<Kyma> {
  const ref = skrKymaRef(kyma);
  const what = `Kyma ${ref.namespace}/${ref.name} in ${skr.name}`;
  const existing = await getCustomObject(skr.custom, ref);
  if (existing !== undefined) {
    const skrKyma = parseKyma(existing, what);
    const missing = Object.entries(labels).filter(([key, value]) => skrKyma.metadata.labels?.[key] !== value);
    if (missing.length === 0) return skrKyma;
    await mergePatchCustomObject(skr.custom, ref, { metadata: { labels: Object.fromEntries(missing) } });
    ctx.logger.info(
      {
        kyma: kyma.metadata.name,
        skrKyma: `${ref.namespace}/${ref.name}`,
        labels: Object.fromEntries(missing),
      },
      'labelled the SKR Kyma for the Watchers',
    );
    return {
      ...skrKyma,
      metadata: { ...skrKyma.metadata, labels: { ...skrKyma.metadata.labels, ...labels } },
    };
  }

  const namespace = await getOrUndefined(`read Namespace ${ref.namespace} in ${skr.name}`, () =>
    skr.core.readNamespace({ name: ref.namespace }),
  );
  if (!namespace) {
    try {
      await skr.core.createNamespace({
        body: { metadata: { name: ref.namespace, labels: { [LABELS.managedBy]: MANAGED_BY } } },
      });
    } catch (error) {
      if (!isConflict(error))
        throw new KubeRequestError(`create Namespace ${ref.namespace} in ${skr.name}`, error);
    }
  }
  const body = {
    apiVersion: apiVersionOf('kyma'),
    kind: KINDS.kyma.kind,
    metadata: {
      name: ref.name,
      namespace: ref.namespace,
      labels: { [LABELS.managedBy]: MANAGED_BY, ...labels, [LABELS.kymaName]: kyma.metadata.name },
    },
    spec: {
      ...(kyma.spec.channel ? { channel: kyma.spec.channel } : {}),
      modules: kyma.spec.modules ?? [],
    },
  };
  try {
    const created = await skr.custom.createNamespacedCustomObject({ ...ref, body });
    ctx.logger.info(
      { kyma: kyma.metadata.name, skrKyma: `${ref.namespace}/${ref.name}` },
      'created the SKR Kyma',
    );
    return parseKyma(created, what);
  } catch (error) {
    if (!isConflict(error)) throw new KubeRequestError(`create ${what}`, error);
    return parseKyma(await getCustomObject(skr.custom, ref), what);
  }
}
