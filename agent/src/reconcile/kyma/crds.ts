// The SKR must serve the Kyma CRD (and the catalog CRDs) in this project's version before anything is written
// there. A missing CRD is installed from this project's manifests; one this project installed earlier (labelled
// managed-by skr-watcher) whose digest differs is replaced, so an SKR set up by an older agent gains the fields
// added since (otherwise the API server would prune them, e.g. `managed: false`). A CRD someone else installed
// (upstream lifecycle-manager, a platform's own tooling) is left alone. A client whose CRDs were checked is
// remembered until it is rebuilt: a new agent version checks every SKR once. The check reads metadata only (labels,
// annotations, resourceVersion decide it): a full CRD is tens of kB of schema and managedFields that the API server
// encodes and the agent parses into client-node's model, on every new SKR client, i.e. for every Kyma a replica
// takes over (decisions 012, 016). One list, from the watch cache, finds the CRDs this project installed; only a CRD
// it lacks (missing, someone else's, or not in the cache yet) is read by name.
import { createHash } from 'node:crypto';
import { existsSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadYaml, setHeaderOptions, type V1CustomResourceDefinition } from '@kubernetes/client-node';
import { GROUP, KINDS, LABELS, MANAGED_BY } from '@skr-watcher/api';
import {
  PARTIAL_OBJECT_METADATA,
  getOrUndefined,
  isConflict,
  listedMetadata,
  metadataOnlyList,
  withContext,
  type ClusterClient,
} from '@skr-watcher/kube';

/**
 * manifests/crds of this repository (or of the image, which keeps the repository's layout): the nearest such
 * directory above this module, so src/, dist/ and the bundle in dist/bundle/ find the same one.
 */
export const DEFAULT_CRD_DIR = nearestCrdDir(fileURLToPath(new URL('.', import.meta.url)));

function nearestCrdDir(from: string): string {
  for (let dir = from; ; dir = dirname(dir)) {
    const candidate = join(dir, 'manifests', 'crds');
    if (existsSync(join(candidate, 'kymas.yaml'))) return `${candidate}/`;
    if (dirname(dir) === dir) return join(from, 'manifests', 'crds') + '/';
  }
}

/** CRDs an SKR needs, by file in the CRD directory: the Kyma first, then the module catalog. */
export const SKR_CRDS = [
  { name: `${KINDS.kyma.plural}.${GROUP}`, file: 'kymas.yaml' },
  { name: `${KINDS.moduleTemplate.plural}.${GROUP}`, file: 'moduletemplates.yaml' },
  { name: `${KINDS.moduleReleaseMeta.plural}.${GROUP}`, file: 'modulereleasemetas.yaml' },
] as const;

/** On each CRD the agent installs: a digest of the manifest it came from. */
export const CRD_DIGEST_ANNOTATION = 'operator.kyma-project.io/crd-digest';

const ESTABLISH_TIMEOUT_MS = 10_000;

/** A CRD read as PartialObjectMetadata: no spec, no status ('append' keeps the client's deadline middleware). */
const metadataOnly = setHeaderOptions('Accept', PARTIAL_OBJECT_METADATA);

/** What a check changed in the SKR, by CRD name. */
export interface CrdCheck {
  installed: string[];
  updated: string[];
}

const verified = new WeakSet<ClusterClient>();

/** Forgets that a client's CRDs were found, e.g. after the SKR answered 404 for the Kyma kind. */
export function forgetCrdCheck(skr: ClusterClient): void {
  verified.delete(skr);
}

/** What the check decides on: a CRD's labels, annotations and resourceVersion. */
interface CrdMetadata {
  labels?: Record<string, string> | undefined;
  annotations?: Record<string, string> | undefined;
  resourceVersion?: string | undefined;
}

/** Makes sure the SKR serves the project's CRDs in this version. */
export async function ensureSkrCrds(skr: ClusterClient, crdDir: string = DEFAULT_CRD_DIR): Promise<CrdCheck> {
  const check: CrdCheck = { installed: [], updated: [] };
  if (verified.has(skr)) return check;
  const ours = await crdsInstalledByUs(skr);
  for (const { name, file } of SKR_CRDS) {
    const present = ours.get(name) ?? (await readCrdMetadata(skr, name));
    const outcome = await bringUpToDate(skr, name, join(crdDir, file), present);
    if (outcome === 'unchanged') continue;
    await waitEstablished(skr, name);
    check[outcome].push(name);
  }
  verified.add(skr);
  return check;
}

/** A CRD's metadata, read by name from etcd; undefined when the SKR has none of that name. */
async function readCrdMetadata(skr: ClusterClient, name: string): Promise<CrdMetadata | undefined> {
  const crd = await getOrUndefined(`read CRD ${name} in ${skr.name}`, () =>
    skr.apiextensions.readCustomResourceDefinition({ name }, metadataOnly),
  );
  return crd?.metadata;
}

/**
 * Installs the CRD of `path` when the SKR lacks it, replaces one of ours whose digest differs; leaves someone else's
 * and a current one alone (`unchanged`). Many Kymas share one SKR API server, so other passes check the same CRD at the
 * same moment: a replace that meets a conflict (another pass replaced it first, or the watch cache's copy was behind)
 * reads the CRD from etcd and compares once more, instead of failing the pass; a second conflict fails it.
 */
async function bringUpToDate(
  skr: ClusterClient,
  name: string,
  path: string,
  present: CrdMetadata | undefined,
  compared = 1,
): Promise<'unchanged' | keyof CrdCheck> {
  if (present && present.labels?.[LABELS.managedBy] !== MANAGED_BY) return 'unchanged';
  if (present?.annotations?.[CRD_DIGEST_ANNOTATION] === (await crdManifest(path)).digest) return 'unchanged';
  const wanted = await crdBody(path, name);
  if (!present) {
    try {
      await skr.apiextensions.createCustomResourceDefinition({ body: wanted });
    } catch (error) {
      // Another pass (or agent) installed it first.
      if (!isConflict(error)) throw new Error(`install CRD ${name} in ${skr.name}`, { cause: error });
    }
    return 'installed';
  }
  // A replace, not an apply: the older copy may carry fields this version dropped.
  wanted.metadata = { ...wanted.metadata, resourceVersion: present.resourceVersion };
  try {
    await withContext(`update CRD ${name} in ${skr.name}`, () =>
      skr.apiextensions.replaceCustomResourceDefinition({ name, body: wanted }),
    );
    return 'updated';
  } catch (error) {
    if (compared > 1 || !isConflict(error)) throw error;
  }
  return bringUpToDate(skr, name, path, await readCrdMetadata(skr, name), compared + 1);
}

/**
 * The CRDs labelled managed-by skr-watcher, by name: one list from the watch cache (which scans the SKR's CRDs, in
 * memory, for the label) instead of a GET from etcd per CRD, each decoding a whole CRD to send its metadata.
 */
async function crdsInstalledByUs(skr: ClusterClient): Promise<Map<string, CrdMetadata>> {
  const answer = await withContext(`list CRDs in ${skr.name}`, () =>
    skr.apiextensions.listCustomResourceDefinition(
      { labelSelector: `${LABELS.managedBy}=${MANAGED_BY}`, resourceVersion: '0' },
      metadataOnlyList,
    ),
  );
  return new Map(listedMetadata(answer, 'CRD list').map((crd) => [crd.name, crd]));
}

/** A CRD manifest's text and digest, read once per process: the files ship with the agent and change with it. */
const manifests = new Map<string, Promise<{ text: string; digest: string }>>();

function crdManifest(path: string): Promise<{ text: string; digest: string }> {
  let manifest = manifests.get(path);
  if (!manifest) {
    manifest = readFile(path, 'utf8').then((text) => ({
      text,
      digest: createHash('sha256').update(text).digest('hex').slice(0, 16),
    }));
    // A failed read is tried again by the next check.
    manifest.catch(() => manifests.delete(path));
    manifests.set(path, manifest);
  }
  return manifest;
}

/** The CRD of `path` to write, stamped with the digest of the file (a fresh object: the caller sets its version). */
async function crdBody(path: string, name: string): Promise<V1CustomResourceDefinition> {
  const { text, digest } = await crdManifest(path);
  // loadYaml maps `x-kubernetes-*` keys to client-node's model; a plain YAML parse would lose them on the wire.
  const body = loadYaml<V1CustomResourceDefinition>(text);
  if (body?.metadata?.name !== name) throw new Error(`${path} does not define CRD ${name}`);
  body.metadata.annotations = { ...body.metadata.annotations, [CRD_DIGEST_ANNOTATION]: digest };
  return body;
}

async function waitEstablished(skr: ClusterClient, name: string): Promise<void> {
  const deadline = Date.now() + ESTABLISH_TIMEOUT_MS;
  for (;;) {
    const crd = await withContext(`read CRD ${name} in ${skr.name}`, () =>
      skr.apiextensions.readCustomResourceDefinition({ name }),
    );
    if (crd.status?.conditions?.some((c) => c.type === 'Established' && c.status === 'True')) return;
    if (Date.now() > deadline) throw new Error(`CRD ${name} in ${skr.name} not Established after 10 s`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
