// Upstream lifecycle-manager's purge: a Kyma still there --purge-finalizer-timeout after its deletion began has
// every finalizer stripped from the custom resources left in its SKR, so that a finalizer no controller will ever
// remove (a module's operator is being removed too) cannot hold the deletion up forever. As upstream's: every CRD of
// the SKR in list order, its objects by the storage version, all namespaces; the Kyma CRD of operator.kyma-project.io
// and the CRDs named by --skip-finalizer-purging-for are left alone. It runs once per Kyma: the KCP Kyma is annotated
// when it is done (upstream drops its purge finalizer instead), and a purge that failed is tried again on the next pass.
import { setHeaderOptions, PatchStrategy } from '@kubernetes/client-node';
import { GROUP, isRecord, type Kyma } from '@skr-watcher/api';
import {
  listInPages,
  mergePatchCustomObject,
  metadataOnlyList,
  withContext,
  type ClusterClient,
} from '@skr-watcher/kube';
import { eventTarget, refOf, type ReconcileContext } from '../context.js';
import { PURGE_ERRORS } from './purge-settings.js';

export { PURGE_ERRORS, type PurgeError, type PurgeObserver, type PurgeSettings } from './purge-settings.js';

/** On the KCP Kyma once its SKR was purged: a later pass of the same deletion does not purge again. */
export const PURGED_AT_ANNOTATION = 'operator.kyma-project.io/skr-purged-at';

/** Upstream's default --purge-finalizer-timeout. */
export const DEFAULT_PURGE_TIMEOUT_MS = 5 * 60_000;

/** At most this many objects are named in the Event (all of them are counted, and named in the log line). */
const NAMED_IN_EVENT = 10;

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

interface PurgeableKind {
  crd: string;
  group: string;
  version: string;
  plural: string;
  kind: string;
  namespaced: boolean;
}

interface Purged {
  kind: string;
  namespace?: string;
  name: string;
  finalizers: number;
}

/** Whether --skip-finalizer-purging-for names the CRD: `<plural or singular>.<group>`, or `*.<group>` for any. */
function skipsCrd(
  skipFor: readonly string[],
  kind: Omit<PurgeableKind, 'crd' | 'version'>,
  singular: string,
): boolean {
  return skipFor.some((pattern) => {
    const dot = pattern.indexOf('.');
    if (dot <= 0) return false;
    const name = pattern.slice(0, dot).toLowerCase();
    if (pattern.slice(dot + 1).toLowerCase() !== kind.group.toLowerCase()) return false;
    return name === '*' || name === kind.plural.toLowerCase() || name === singular.toLowerCase();
  });
}

/**
 * Purges the SKR of a Kyma being deleted once its purge is due; a no-op before then, when purging is off, or when this
 * deletion already purged. Never throws: a failed purge is counted, logged and tried again by the next pass, while
 * the deletion goes on as it would without it.
 */
export async function purgeWhenDue(ctx: ReconcileContext, kyma: Kyma, skr: ClusterClient): Promise<void> {
  const settings = ctx.purge;
  const since = Date.parse(kyma.metadata.deletionTimestamp ?? '');
  if (!settings || Number.isNaN(since) || kyma.metadata.annotations?.[PURGED_AT_ANNOTATION]) return;
  if (ctx.clock().getTime() < since + settings.timeoutMs) return;
  const kymaNamespace = kyma.metadata.namespace ?? ctx.namespace;
  const log = ctx.logger.child({ kyma: `${kymaNamespace}/${kyma.metadata.name}`, skr: skr.name });
  const startedAt = performance.now();
  settings.observer?.started();
  const purged: Purged[] = [];
  try {
    for (const kind of await purgeableKinds(skr, settings.skipFor)) await stripFinalizers(skr, kind, purged);
  } catch (error) {
    settings.observer?.failed(kyma, PURGE_ERRORS.cleanup);
    log.warn({ err: error, purged: purged.map(describe) }, 'SKR purge failed; trying again on the next pass');
    return;
  }
  const finalizers = purged.reduce((sum, object) => sum + object.finalizers, 0);
  if (purged.length > 0) {
    const named = purged.slice(0, NAMED_IN_EVENT).map(describe).join(', ');
    const more = purged.length > NAMED_IN_EVENT ? ` and ${purged.length - NAMED_IN_EVENT} more` : '';
    await ctx.events.warning(
      eventTarget(ctx, kyma),
      'SKRPurged',
      `Kyma still deleting ${Math.round(settings.timeoutMs / 1000)} s after its deletion began: ${finalizers} finalizers removed from ${purged.length} objects in the SKR: ${named}${more}`,
    );
  }
  log.warn(
    { objects: purged.length, finalizers, purged: purged.map(describe), timeoutMs: settings.timeoutMs },
    'SKR purged: finalizers removed from the custom resources left in the SKR',
  );
  try {
    await mergePatchCustomObject(ctx.kcp.custom, refOf('kyma', kymaNamespace, kyma.metadata.name), {
      metadata: { annotations: { [PURGED_AT_ANNOTATION]: ctx.clock().toISOString() } },
    });
  } catch (error) {
    settings.observer?.failed(kyma, PURGE_ERRORS.record);
    log.warn({ err: error }, 'SKR purge not recorded on the Kyma; the next pass purges again');
    return;
  }
  settings.observer?.finished(kyma, performance.now() - startedAt);
}

function describe(object: Purged): string {
  return `${object.kind} ${object.namespace ? `${object.namespace}/` : ''}${object.name}`;
}

/** The SKR's CRDs that are purged, in list order, each with its storage version. */
async function purgeableKinds(skr: ClusterClient, skipFor: readonly string[]): Promise<PurgeableKind[]> {
  const crds = await withContext(`list CRDs in ${skr.name}`, () =>
    listInPages(
      (page) =>
        skr.apiextensions.listCustomResourceDefinition({
          limit: page.limit,
          ...(page.continueToken ? { _continue: page.continueToken } : {}),
        }),
      (crd) => crd,
    ),
  );
  const kinds: PurgeableKind[] = [];
  for (const crd of crds) {
    const { group, names, scope, versions } = crd.spec;
    const storage = versions.find((version) => version.storage)?.name;
    // The Kyma's own finalizer is the deletion's business (deletion.ts), as upstream leaves it to its Kyma controller.
    if (!storage || (group === GROUP && names.kind === 'Kyma')) continue;
    const kind = { group, plural: names.plural, kind: names.kind, namespaced: scope === 'Namespaced' };
    if (skipsCrd(skipFor, kind, names.singular ?? '')) continue;
    kinds.push({ ...kind, crd: crd.metadata?.name ?? `${names.plural}.${group}`, version: storage });
  }
  return kinds;
}

async function stripFinalizers(skr: ClusterClient, kind: PurgeableKind, purged: Purged[]): Promise<void> {
  const { group, version, plural } = kind;
  const objects = await withContext(`list ${kind.crd} in ${skr.name}`, () =>
    listInPages(async (page) => {
      // Metadata only: finalizers are all a purge reads.
      const answer = (await skr.custom.listClusterCustomObject(
        {
          group,
          version,
          plural,
          limit: page.limit,
          ...(page.continueToken ? { _continue: page.continueToken } : {}),
        },
        metadataOnlyList,
      )) as { items: unknown[] | null; metadata?: { continue?: string } };
      // An empty PartialObjectMetadataList has `items: null`.
      return { ...answer, items: answer.items ?? [] };
    }, holdingFinalizers),
  );
  for (const object of objects) {
    if (!object) continue;
    const { name, namespace, finalizers } = object;
    const ref = { group, version, plural, namespace: namespace ?? '', name };
    const patch = { metadata: { finalizers: null } };
    await withContext(`purge finalizers of ${kind.crd} ${namespace ?? ''}/${name} in ${skr.name}`, () =>
      kind.namespaced
        ? mergePatchCustomObject(skr.custom, ref, patch)
        : skr.custom.patchClusterCustomObject({ group, version, plural, name, body: patch }, mergePatch),
    );
    purged.push({ kind: kind.kind, ...(namespace ? { namespace } : {}), name, finalizers });
  }
}

/** An object's address and finalizer count, if it holds any finalizer (only those are written). */
function holdingFinalizers(
  item: unknown,
): { name: string; namespace?: string; finalizers: number } | undefined {
  const metadata = isRecord(item) ? item['metadata'] : undefined;
  if (!isRecord(metadata) || typeof metadata['name'] !== 'string') return undefined;
  const finalizers = Array.isArray(metadata['finalizers']) ? metadata['finalizers'].length : 0;
  if (finalizers === 0) return undefined;
  const namespace = typeof metadata['namespace'] === 'string' ? metadata['namespace'] : undefined;
  return { name: metadata['name'], ...(namespace ? { namespace } : {}), finalizers };
}
