// The SKR must serve the Kyma CRD (and the catalog CRDs) before anything is written there. A missing CRD
// is installed from this project's manifests; a client that found them all is remembered until it is rebuilt.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadYaml, type V1CustomResourceDefinition } from '@kubernetes/client-node';
import { GROUP, KINDS } from '@skr-watcher/api';
import { getOrUndefined, isConflict, withContext, type ClusterClient } from '@skr-watcher/kube';

/** manifests/crds of this repository, from src/reconcile or dist/reconcile alike. */
export const DEFAULT_CRD_DIR = fileURLToPath(new URL('../../../manifests/crds/', import.meta.url));

/** CRDs an SKR needs, by file in the CRD directory: the Kyma first, then the module catalog. */
export const SKR_CRDS = [
  { name: `${KINDS.kyma.plural}.${GROUP}`, file: 'kymas.yaml' },
  { name: `${KINDS.moduleTemplate.plural}.${GROUP}`, file: 'moduletemplates.yaml' },
  { name: `${KINDS.moduleReleaseMeta.plural}.${GROUP}`, file: 'modulereleasemetas.yaml' },
] as const;

const ESTABLISH_TIMEOUT_MS = 10_000;

const verified = new WeakSet<ClusterClient>();

/** Forgets that a client's CRDs were found, e.g. after the SKR answered 404 for the Kyma kind. */
export function forgetCrdCheck(skr: ClusterClient): void {
  verified.delete(skr);
}

/** Makes sure the SKR serves the project's CRDs; returns the names it had to install. */
export async function ensureSkrCrds(skr: ClusterClient, crdDir: string = DEFAULT_CRD_DIR): Promise<string[]> {
  if (verified.has(skr)) return [];
  const installed: string[] = [];
  for (const { name, file } of SKR_CRDS) {
    const present = await getOrUndefined(`read CRD ${name} in ${skr.name}`, () =>
      skr.apiextensions.readCustomResourceDefinition({ name }),
    );
    if (present) continue;
    const path = join(crdDir, file);
    // loadYaml maps `x-kubernetes-*` keys to client-node's model; a plain YAML parse would lose them on the wire.
    const body = loadYaml<V1CustomResourceDefinition>(await readFile(path, 'utf8'));
    if (body?.metadata?.name !== name) throw new Error(`${path} does not define CRD ${name}`);
    try {
      await skr.apiextensions.createCustomResourceDefinition({ body });
    } catch (error) {
      if (!isConflict(error)) {
        throw new Error(`install CRD ${name} in ${skr.name}`, { cause: error });
      }
    }
    await waitEstablished(skr, name);
    installed.push(name);
  }
  verified.add(skr);
  return installed;
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
