// The SKR Kyma: created from the KCP Kyma's spec when absent, then the user's. Its labels are kept at upstream's
// (managed-by and watched-by `kyma`, the KCP Kyma's runtime-id and BTP account labels) and at what the Watchers of
// Kymas select, so upstream's tooling finds it and the SKR webhook sees its edits even when upstream or a user created
// it. The SKR's kyma-system Namespace carries upstream's labels too (decision 027).
import {
  DEFAULTS,
  FIELD_MANAGER,
  GROUP,
  KINDS,
  LABELS,
  MANAGED_BY,
  SKR_UPSTREAM_LABELS,
  type Kyma,
  type Watcher,
  parseKyma,
  byCodeUnit,
} from '@skr-watcher/api';
import {
  getCustomObject,
  getOrUndefined,
  isConflict,
  KubeRequestError,
  withContext,
  type ClusterClient,
  type CustomObjectRef,
} from '@skr-watcher/kube';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { apiVersionOf, refOf, type ReconcileContext } from '../context.js';

/** Where the SKR Kyma lives: `kyma-system/default`, or `spec.sync.namespace`. */
export function skrKymaRef(kyma: Kyma): CustomObjectRef {
  return refOf('kyma', kyma.spec.sync?.namespace || DEFAULTS.skrNamespace, DEFAULTS.skrKymaName);
}

/**
 * Labels the SKR Kyma must carry for the Watchers of Kymas to select it: the union of their labelsToWatch (by Watcher
 * name, the first one wins a key); none when no Watcher watches Kymas.
 */
export function watchedLabels(watchers: Watcher[]): Record<string, string> {
  const labels: Record<string, string> = {};
  const ofKymas = watchers
    .filter(
      (w) => w.spec.resourceToWatch.group === GROUP && w.spec.resourceToWatch.resource === KINDS.kyma.plural,
    )
    .sort((a, b) => byCodeUnit(a.metadata.name, b.metadata.name));
  for (const watcher of ofKymas) {
    for (const [key, value] of Object.entries(watcher.spec.labelsToWatch ?? {})) labels[key] ??= value;
  }
  return labels;
}

/**
 * Every label the agent keeps on the SKR Kyma: upstream's, the KCP Kyma's identity labels upstream copies, then
 * `watched` (what the Watchers select), which wins a key both set: without it the SKR webhook would not see the Kyma.
 */
export function skrKymaLabels(kyma: Kyma, watched: Record<string, string>): Record<string, string> {
  const copied = SKR_UPSTREAM_LABELS.copiedFromKcpKyma.flatMap((key) => {
    const value = kyma.metadata.labels?.[key];
    return value === undefined ? [] : [[key, value] as const];
  });
  return { ...SKR_UPSTREAM_LABELS.kyma, ...Object.fromEntries(copied), ...watched };
}

/** Label writes are JSON merge patches under the agent's field manager: the SKR webhook sees them as its own writes. */
const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/**
 * The SKR Kyma, created from the KCP Kyma's spec when absent. After that its spec.modules is the user's source of
 * truth: the agent reads it for resolution and never writes the SKR Kyma's spec again; only its labels
 * (skrKymaLabels) are brought back when missing or changed.
 */
export async function ensureSkrKyma(
  ctx: ReconcileContext,
  kyma: Kyma,
  skr: ClusterClient,
  watched: Record<string, string>,
): Promise<Kyma> {
  const ref = skrKymaRef(kyma);
  const what = `Kyma ${ref.namespace}/${ref.name} in ${skr.name}`;
  const labels = skrKymaLabels(kyma, watched);
  const existing = await getCustomObject(skr.custom, ref);
  await ensureKymaNamespace(skr, ref.namespace, existing === undefined);
  if (existing !== undefined) {
    const skrKyma = parseKyma(existing, what);
    const missing = Object.entries(labels).filter(([key, value]) => skrKyma.metadata.labels?.[key] !== value);
    if (missing.length === 0) return skrKyma;
    await withContext(`label ${what}`, () =>
      skr.custom.patchNamespacedCustomObject(
        { ...ref, body: { metadata: { labels: Object.fromEntries(missing) } }, fieldManager: FIELD_MANAGER },
        mergePatch,
      ),
    );
    ctx.logger.info(
      {
        kyma: kyma.metadata.name,
        skrKyma: `${ref.namespace}/${ref.name}`,
        labels: Object.fromEntries(missing),
      },
      'labelled the SKR Kyma',
    );
    return {
      ...skrKyma,
      metadata: { ...skrKyma.metadata, labels: { ...skrKyma.metadata.labels, ...labels } },
    };
  }

  const body = {
    apiVersion: apiVersionOf('kyma'),
    kind: KINDS.kyma.kind,
    metadata: {
      name: ref.name,
      namespace: ref.namespace,
      labels: { ...labels, [LABELS.kymaName]: kyma.metadata.name },
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

/** SKR clients whose kyma-system Namespace was found labelled: checked once per client, as its CRDs are. */
const labelledNamespaces = new WeakSet<ClusterClient>();

/**
 * The SKR Kyma's Namespace: created when the SKR Kyma is (`kymaAbsent`) and it is missing. kyma-system carries
 * upstream's labels (SKR_UPSTREAM_LABELS.namespace), looked at once per SKR client, so an SKR set up by an older agent
 * or by upstream gains them without a read on every pass; another namespace (`spec.sync.namespace`) is only created.
 */
async function ensureKymaNamespace(skr: ClusterClient, name: string, kymaAbsent: boolean): Promise<void> {
  const upstream = name === DEFAULTS.skrNamespace;
  if (!kymaAbsent && (!upstream || labelledNamespaces.has(skr))) return;
  const wanted: Record<string, string> = upstream
    ? { ...SKR_UPSTREAM_LABELS.namespace }
    : { [LABELS.managedBy]: MANAGED_BY };
  const present = await getOrUndefined(`read Namespace ${name} in ${skr.name}`, () =>
    skr.core.readNamespace({ name }),
  );
  if (!present) {
    try {
      await skr.core.createNamespace({
        body: { metadata: { name, labels: wanted } },
        fieldManager: FIELD_MANAGER,
      });
    } catch (error) {
      if (!isConflict(error)) throw new KubeRequestError(`create Namespace ${name} in ${skr.name}`, error);
    }
  } else if (upstream) {
    const missing = Object.entries(wanted).filter(
      ([key, value]) => present.metadata?.labels?.[key] !== value,
    );
    if (missing.length > 0)
      await withContext(`label Namespace ${name} in ${skr.name}`, () =>
        skr.core.patchNamespace(
          { name, body: { metadata: { labels: Object.fromEntries(missing) } }, fieldManager: FIELD_MANAGER },
          mergePatch,
        ),
      );
  }
  if (upstream) labelledNamespaces.add(skr);
}
