// The module catalog in the SKR: the ModuleTemplates and ModuleReleaseMetas a Kyma may use are copied into
// its SKR (next to the SKR Kyma), so SKR-side tools can list the modules on offer, and copies no longer
// visible are removed. What a Kyma may see follows resolution's rules (beta, internal, kymaSelector);
// mandatory modules and templates labelled `sync=false` stay out, and a ModuleReleaseMeta lists only the channels
// whose template the Kyma may see, as upstream narrows them.
import { createHash } from 'node:crypto';
import {
  FIELD_MANAGER,
  isRecord,
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
import { apiVersionOf, refOf, type ReconcileContext } from '../context.js';
import { releaseMetaRefusal, templateRefusal } from './resolution.js';
import { CONDITIONS, summarize, type ConditionInput } from '../status.js';

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

/** A copy as a pass decides on it: from its metadata only. */
interface PresentCopy {
  digest: string | undefined;
  resourceVersion: string | undefined;
  /** Another field manager owns spec fields: someone edited the spec, whatever the digest annotation says. */
  specEdited: boolean;
}

/**
 * Whether a manager other than the agent owns fields under `spec`: a copy is only ever written by the agent, so such
 * an entry is an edit (`kubectl edit`, a patch) that may have left the digest annotation as it was.
 */
function specEditedByOthers(managedFields: unknown): boolean {
  if (!Array.isArray(managedFields)) return false;
  return managedFields.some((entry: unknown) => {
    if (!isRecord(entry) || entry['manager'] === FIELD_MANAGER) return false;
    const fields = entry['fieldsV1'];
    return isRecord(fields) && 'f:spec' in fields;
  });
}

/**
 * The copies the agent made in an SKR, metadata only: a copy is decided on by its name, digest annotation and who
 * owns its spec fields (managedFields), while a real ModuleTemplate's spec (descriptor, default CR) is kilobytes the
 * API server would encode and the agent parse on every pass.
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
  const metadata = listedMetadata(answer, `${plural} list`);
  // listedMetadata validated every item and keeps their order; managedFields are read from the answer itself.
  const items = (answer as { items: { metadata: { managedFields?: unknown } }[] | null }).items ?? [];
  const present = new Map<string, PresentCopy>();
  metadata.forEach((meta, i) =>
    present.set(meta.name, {
      digest: meta.annotations?.[CATALOG_DIGEST_ANNOTATION],
      resourceVersion: meta.resourceVersion,
      specEdited: specEditedByOthers(items[i]?.metadata.managedFields),
    }),
  );
  return present;
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
  const parsed = <T>(
    items: readonly unknown[],
    slot: string,
    parse: (item: unknown) => { success: boolean; data?: T },
  ) =>
    items.flatMap((item) => {
      const result = parsedOnce(item, slot, parse);
      return result.success && result.data !== undefined ? [result.data] : [];
    });
  return {
    templates: parsed(templates, 'ModuleTemplate safeParse', (item) => moduleTemplateSchema.safeParse(item)),
    metas: parsed(metas, 'ModuleReleaseMeta safeParse', (item) => moduleReleaseMetaSchema.safeParse(item)),
  };
}

/** The ModuleReleaseMetas of mandatory modules. */
export function mandatoryModules(catalog: Catalog): ModuleReleaseMeta[] {
  return catalog.metas.filter((meta) => meta.spec.mandatory !== undefined);
}

/** The ModuleTemplate a channel's version resolves to: `<module>-<version>`, as resolution names it. */
function moduleTemplateName(module: string, version: string): string {
  return `${module}-${version}`;
}

/**
 * What of the catalog this Kyma may see, as upstream narrows it: the templates it may use (not mandatory, not
 * `sync=false`, admitted by their beta and internal labels, of a module whose ModuleReleaseMeta it may see), and each
 * such ModuleReleaseMeta with only the channels whose version's template is among them; one left without a channel
 * is not offered at all.
 */
export function visibleCatalog(kyma: Kyma, catalog: Catalog): Catalog {
  const admitted = catalog.metas.filter(
    (meta) => !meta.spec.mandatory && !releaseMetaRefusal(kyma, meta, meta.metadata.name),
  );
  const hiddenModules = new Set(
    catalog.metas.filter((meta) => !admitted.includes(meta)).map((meta) => meta.spec.moduleName),
  );
  const templates = catalog.templates.filter(
    (template) =>
      template.metadata.labels?.[LABELS.sync]?.toLowerCase() !== 'false' &&
      !template.spec.mandatory &&
      !hiddenModules.has(template.spec.moduleName ?? '') &&
      !templateRefusal(kyma, template, template.metadata.name),
  );
  const templateNames = new Set(templates.map((template) => template.metadata.name));
  const metas = admitted.flatMap((meta) => {
    const channels = meta.spec.channels ?? [];
    const offered = channels.filter(({ version }) =>
      templateNames.has(moduleTemplateName(meta.spec.moduleName, version)),
    );
    if (offered.length === 0) return [];
    // The same object when nothing was cut: its spec digest is computed once (specDigests).
    return offered.length === channels.length
      ? [meta]
      : [{ ...meta, spec: { ...meta.spec, channels: offered } }];
  });
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
  const present = await listCopies(skr, kind, namespace);
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
    const copy = present.get(source.metadata.name);
    const ref = refOf(kind, namespace, source.metadata.name);
    if (copy?.specEdited) {
      // An apply would take back the fields the agent sets and leave the ones the edit added (owned by the editor):
      // the copy is replaced whole, at the version listed (a conflict is retried next pass). Its managedFields are
      // reset too (`[{}]` clears them): an editor that set a field to the value the agent sets keeps owning it
      // through a replace, and the next pass would replace again.
      const body = copyOf(kind, source, namespace, digest);
      const metadata = { ...body.metadata, resourceVersion: copy.resourceVersion, managedFields: [{}] };
      await attempt(source.metadata.name, () =>
        withContext(`replace ${KINDS[kind].kind} ${namespace}/${ref.name} in ${skr.name}`, () =>
          skr.custom.replaceNamespacedCustomObject({
            ...ref,
            body: { ...body, metadata },
            fieldManager: FIELD_MANAGER,
          }),
        ),
      );
      continue;
    }
    if (copy?.digest === digest) continue;
    await attempt(source.metadata.name, () =>
      applyCustomObject(skr.custom, ref, copyOf(kind, source, namespace, digest), {
        fieldManager: FIELD_MANAGER,
        force: true,
      }),
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
