// The module's default CR in the SKR: its body (the Manifest's spec.resource, watched by the SKR webhook) and
// address, the users' CRs of its kind that block a removal, and the module's state read from it by the template's
// customStateCheck (decision 025).
import type { KubernetesObject } from '@kubernetes/client-node';
import { ANNOTATIONS, DEFAULTS, LABELS, isRecord, type Manifest } from '@skr-watcher/api';
import { KubeRequestError, readObject, type ClusterClient } from '@skr-watcher/kube';
import { checkState, parseStateChecks, type StateCheck } from '../../rollout/custom-state-check.js';
import { hasDefaultCr } from './manifest.js';
import type { StatusInput } from './manifest-status.js';
import { messageOf } from './step-result.js';

/** The default CR as it is created in the SKR: the Manifest's spec.resource, watched by the SKR webhook. */
export function defaultCrBody(manifest: Manifest): KubernetesObject {
  const resource = structuredClone(manifest.spec.resource!) as KubernetesObject & Record<string, unknown>;
  const metadata = { ...(resource.metadata ?? {}) } as Record<string, unknown>;
  metadata['labels'] = {
    ...(isRecord(metadata['labels']) ? metadata['labels'] : {}),
    [LABELS.watchedBy]: DEFAULTS.manager,
  };
  return { ...resource, metadata } as KubernetesObject;
}

export function defaultCrRef(manifest: Manifest) {
  const resource = manifest.spec.resource!;
  return {
    apiVersion: resource.apiVersion,
    kind: resource.kind,
    name: resource.metadata?.name ?? manifest.metadata.name,
    ...(resource.metadata?.namespace ? { namespace: resource.metadata.namespace } : {}),
  };
}

type DefaultCrRef = ReturnType<typeof defaultCrRef>;

interface CrdSpec {
  group?: string;
  names?: { kind?: string };
  versions?: { name: string; served?: boolean; storage?: boolean }[];
}

/**
 * The default CR's address in an API version the SKR serves. A spec written while the removal waits may name a
 * version the SKR's CRD does not serve yet (its new CRD adds it): the object is one whatever version it is read in,
 * so a version the module's CRD (in the Manifest's inventory) serves stands in, its storage version first, as
 * upstream looks CRs up by group and kind over every served version.
 */
export async function servedDefaultCrRef(skr: ClusterClient, manifest: Manifest): Promise<DefaultCrRef> {
  const ref = defaultCrRef(manifest);
  if (await skr.objects.discover(ref.apiVersion, ref.kind)) return ref;
  const slash = ref.apiVersion.indexOf('/');
  const group = slash < 0 ? '' : ref.apiVersion.slice(0, slash);
  const crds = (manifest.status?.synced ?? []).filter(
    (synced) => synced.kind === 'CustomResourceDefinition' && synced.name.endsWith(`.${group}`),
  );
  for (const synced of crds) {
    const crd = await readObject(skr.objects, {
      apiVersion: `${synced.group}/${synced.version}`,
      kind: synced.kind,
      name: synced.name,
    });
    const spec = (crd as { spec?: CrdSpec } | undefined)?.spec;
    if (spec?.group !== group || spec.names?.kind !== ref.kind) continue;
    const served = (spec.versions ?? [])
      .filter((version) => version.served)
      .sort((a, b) => Number(b.storage === true) - Number(a.storage === true));
    if (served[0]) return { ...ref, apiVersion: `${group}/${served[0].name}` };
  }
  return ref;
}

/** CRs of the default CR's kind in any namespace other than the default CR itself: users' CRs, which block removal. */
export async function usersCrs(
  skr: ClusterClient,
  manifest: Manifest,
  ref: DefaultCrRef = defaultCrRef(manifest),
): Promise<string[]> {
  let items: KubernetesObject[];
  try {
    items = (await skr.objects.list(ref.apiVersion, ref.kind)).items;
  } catch (error) {
    // The kind is not served (its CRD is gone): nobody's CRs are left.
    if (
      (error as { code?: number }).code === 404 ||
      /Unrecognized API version and kind/.test(messageOf(error))
    )
      return [];
    throw new KubeRequestError(`list ${ref.kind} in ${skr.name}`, error);
  }
  // A cluster-scoped default CR has no namespace (the API server drops the one its template names): its name is it.
  const isDefault = (object: KubernetesObject) =>
    manifest.spec.customResourcePolicy !== 'Ignore' &&
    object.metadata?.name === ref.name &&
    (object.metadata?.namespace === undefined || object.metadata.namespace === (ref.namespace ?? ''));
  return items
    .filter((object) => !isDefault(object))
    .map(
      (object) =>
        `${object.metadata?.namespace ? `${object.metadata.namespace}/` : ''}${object.metadata?.name}`,
    );
}

/** A module state and the operation text that says why. */
export type StateVerdict = Pick<StatusInput, 'state' | 'operation'>;

/**
 * The module's state from its default CR by the template's customStateCheck (carried in the Manifest's annotation);
 * undefined without one. An unusable check or a missing CR is the module's Error, with the reason.
 */
export async function customState(
  skr: ClusterClient,
  manifest: Manifest,
  now: Date,
): Promise<StateVerdict | undefined> {
  const text = manifest.metadata.annotations?.[ANNOTATIONS.customStateCheck];
  if (!text) return undefined;
  if (!hasDefaultCr(manifest))
    return { state: 'Error', operation: 'customStateCheck is set but the module has no default CR to read' };
  let checks: StateCheck[];
  try {
    checks = parseStateChecks(text);
  } catch (error) {
    return { state: 'Error', operation: messageOf(error) };
  }
  const ref = defaultCrRef(manifest);
  const cr = (await readObject(skr.objects, ref)) as KubernetesObject | undefined;
  if (!cr) return { state: 'Error', operation: `default CR ${ref.kind} ${ref.name} is missing` };
  const created = cr.metadata?.creationTimestamp;
  try {
    const checked = checkState(cr, checks, now, created ? new Date(created) : undefined);
    return { state: checked.state, operation: `customStateCheck: ${checked.reason}` };
  } catch (error) {
    return { state: 'Error', operation: messageOf(error) };
  }
}
