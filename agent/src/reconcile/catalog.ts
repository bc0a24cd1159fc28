// The module catalog in the SKR: the ModuleTemplates and ModuleReleaseMetas a Kyma may use are copied into
// its SKR (next to the SKR Kyma), so SKR-side tools can list the modules on offer, and copies no longer
// visible are removed. What a Kyma may see follows resolution's rules (beta, internal, kymaSelector);
// mandatory modules and templates labelled `sync=false` stay out, as upstream keeps them out.
import { createHash } from 'node:crypto';
import {
  FIELD_MANAGER,
  KINDS,
  LABELS,
  listItems,
  MANAGED_BY,
  moduleReleaseMetaSchema,
  moduleTemplateSchema,
  type Kyma,
  type ModuleReleaseMeta,
  type ModuleTemplate,
} from '@skr-watcher/api';
import {
  applyCustomObject,
  deleteCustomObjectIfExists,
  isUnreachable,
  listedMetadata,
  metadataOnlyList,
  parsedOnce,
  withContext,
  type ClusterClient,
} from '@skr-watcher/kube';
import { apiVersionOf, refOf, type ReconcileContext } from './context.js';
import { releaseMetaRefusal, templateRefusal } from './resolution.js';
import { CONDITIONS, summarize, type ConditionInput } from './status.js';

/** On each copy: a digest of what was copied, so an unchanged copy is not written again. */
export const CATALOG_DIGEST_ANNOTATION = 'operator.kyma-project.io/catalog-digest';

export interface Catalog {
  templates: ModuleTemplate[];
  metas: ModuleReleaseMeta[];
}

type CatalogKind = 'moduleTemplate' | 'moduleReleaseMeta';

async function listKind(cluster: ClusterClient, kind: CatalogKind, namespace: string) {
  const { group, version, plural } = refOf(kind, namespace, '');
  const answer = await withContext(`list ${plural} in ${cluster.name} ${namespace}`, () =>
    cluster.custom.listNamespacedCustomObject({ group, version, plural, namespace, resourceVersion: '0' }),
  );
  return listItems(answer, `${plural} list`);
}

/**
 * The copies the agent made in an SKR, metadata only: a copy is decided on by its name and digest annotation, while
 * a real ModuleTemplate's spec (descriptor, default CR) is kilobytes the API server would encode and the agent
 * parse on every pass.
 */
async function listCopies(skr: ClusterClient, kind: CatalogKind, namespace: string) {
  const { group, version, plural } = refOf(kind, namespace, '');
  const answer = await withContext(`list ${plural} in ${skr.name} ${namespace}`, () =>
    skr.custom.listNamespacedCustomObject(
      {
        group,
        version,
        plural,
        namespace,
        labelSelector: `${LABELS.managedBy}=${MANAGED_BY}`,
        // The watch cache, as an informer would read it: a copy that lags by a moment is caught up next pass.
        resourceVersion: '0',
      },
      metadataOnlyList,
    ),
  );
  return listedMetadata(answer, `${plural} list`);
}

/**
 * Every ModuleTemplate and ModuleReleaseMeta of the KCP namespace, from the controller's watch caches when there
 * are some (each object validated once), listed otherwise; one that does not parse is left out.
 */
export async function readCatalog(ctx: ReconcileContext): Promise<Catalog> {
  const [templates, metas] = await Promise.all([
    ctx.caches?.moduleTemplates() ?? listKind(ctx.kcp, 'moduleTemplate', ctx.namespace),
    ctx.caches?.moduleReleaseMetas() ?? listKind(ctx.kcp, 'moduleReleaseMeta', ctx.namespace),
  ]);
  const parsed = <T>(items: readonly unknown[], parse: (item: unknown) => { success: boolean; data?: T }) =>
    items.flatMap((item) => {
      const result = parsedOnce(item, parse);
      return result.success && result.data !== undefined ? [result.data] : [];
    });
  return {
    templates: parsed(templates, (item) => moduleTemplateSchema.safeParse(item)),
    metas: parsed(metas, (item) => moduleReleaseMetaSchema.safeParse(item)),
  };
}

/** The ModuleReleaseMetas of mandatory modules. */
export function mandatoryModules(catalog: Catalog): ModuleReleaseMeta[] {
  return catalog.metas.filter((meta) => meta.spec.mandatory !== undefined);
}

/** What of the catalog this Kyma may see. */
export function visibleCatalog(kyma: Kyma, catalog: Catalog): Catalog {
  const metas = catalog.metas.filter(
    (meta) => !meta.spec.mandatory && !releaseMetaRefusal(kyma, meta, meta.metadata.name),
  );
  const hiddenModules = new Set(
    catalog.metas.filter((meta) => !metas.includes(meta)).map((meta) => meta.spec.moduleName),
  );
  const templates = catalog.templates.filter(
    (template) =>
      template.metadata.labels?.[LABELS.sync]?.toLowerCase() !== 'false' &&
      !template.spec.mandatory &&
      !hiddenModules.has(template.spec.moduleName ?? '') &&
      !templateRefusal(kyma, template, template.metadata.name),
  );
  return { templates, metas };
}

/**
 * The digest of a catalog object's spec, computed once per object: the controller's watch caches hand every pass the
 * same parsed object until it changes (parsedOnce), and a real template's spec is kilobytes to serialise and hash.
 */
const specDigests = new WeakMap<ModuleTemplate | ModuleReleaseMeta, string>();

function digestOf(source: ModuleTemplate | ModuleReleaseMeta): string {
  let digest = specDigests.get(source);
  if (digest === undefined) {
    digest = createHash('sha256').update(JSON.stringify(source.spec)).digest('hex').slice(0, 16);
    specDigests.set(source, digest);
  }
  return digest;
}

function copyOf(
  kind: CatalogKind,
  source: ModuleTemplate | ModuleReleaseMeta,
  namespace: string,
  digest: string,
) {
  return {
    apiVersion: apiVersionOf(kind),
    kind: KINDS[kind].kind,
    metadata: {
      name: source.metadata.name,
      namespace,
      labels: { ...source.metadata.labels, [LABELS.managedBy]: MANAGED_BY },
      annotations: { ...source.metadata.annotations, [CATALOG_DIGEST_ANNOTATION]: digest },
    },
    spec: source.spec,
  };
}

/** Brings the SKR's copies of one kind to `wanted`; returns what failed, by object. */
async function syncKind(
  skr: ClusterClient,
  kind: CatalogKind,
  wanted: (ModuleTemplate | ModuleReleaseMeta)[],
  namespace: string,
): Promise<{ name: string; message: string }[]> {
  const present = new Map<string, string | undefined>();
  for (const copy of await listCopies(skr, kind, namespace))
    present.set(copy.name, copy.annotations?.[CATALOG_DIGEST_ANNOTATION]);
  const failures: { name: string; message: string }[] = [];
  const attempt = async (name: string, write: () => Promise<unknown>) => {
    try {
      await write();
    } catch (error) {
      if (isUnreachable(error)) throw error;
      failures.push({ name: `${KINDS[kind].kind} ${name}`, message: (error as Error).message });
    }
  };
  for (const source of wanted) {
    const digest = digestOf(source);
    if (present.get(source.metadata.name) === digest) continue;
    await attempt(source.metadata.name, () =>
      applyCustomObject(
        skr.custom,
        refOf(kind, namespace, source.metadata.name),
        copyOf(kind, source, namespace, digest),
        { fieldManager: FIELD_MANAGER, force: true },
      ),
    );
  }
  const wantedNames = new Set(wanted.map((source) => source.metadata.name));
  for (const name of present.keys()) {
    if (!wantedNames.has(name))
      await attempt(name, () => deleteCustomObjectIfExists(skr.custom, refOf(kind, namespace, name)));
  }
  return failures;
}

/** Copies the catalog the Kyma may see into the SKR; the outcome is the Kyma's ModuleCatalog condition. */
export async function syncModuleCatalog(
  kyma: Kyma,
  skr: ClusterClient,
  namespace: string,
  catalog: Catalog,
): Promise<ConditionInput> {
  const visible = visibleCatalog(kyma, catalog);
  const failures = [
    ...(await syncKind(skr, 'moduleReleaseMeta', visible.metas, namespace)),
    ...(await syncKind(skr, 'moduleTemplate', visible.templates, namespace)),
  ];
  return failures.length === 0
    ? {
        type: CONDITIONS.moduleCatalog,
        ok: true,
        reason: 'Synchronized',
        message: `${visible.templates.length} ModuleTemplate(s) and ${visible.metas.length} ModuleReleaseMeta(s) in the SKR`,
      }
    : {
        type: CONDITIONS.moduleCatalog,
        ok: false,
        reason: 'CatalogNotSynchronized',
        message: summarize(failures),
      };
}

/** Deletion: every copy the agent made in the SKR. */
export async function removeModuleCatalog(skr: ClusterClient, namespace: string): Promise<void> {
  const failures = [
    ...(await syncKind(skr, 'moduleReleaseMeta', [], namespace)),
    ...(await syncKind(skr, 'moduleTemplate', [], namespace)),
  ];
  if (failures.length > 0)
    throw new Error(`remove the module catalog from ${skr.name}: ${summarize(failures)}`);
}
