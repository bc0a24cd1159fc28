// Transforms: pure functions from one object of a set to the object to apply, run in the order given before
// anything is written. These are upstream lifecycle-manager's for a Manifest's objects (`render/
// default_transforms.go`, `image_pull_secret_transform.go`); a caller picks the ones it wants. A transform that
// cannot do its work throws, which fails that object only.
import { isRecord } from '@skr-watcher/api';
import type { SetMember } from './inventory.js';

export type Transform = (object: SetMember) => SetMember;

/** Label and annotation keys and values upstream puts on every object of a module. */
export const MODULE_OBJECT_METADATA = {
  managedByLabel: 'operator.kyma-project.io/managed-by',
  /** On SKR objects the value is `kyma`, not `lifecycle-manager` (that one is for KCP objects). */
  managedByValue: 'kyma',
  ownedByAnnotation: 'deprecated-operator.kyma-project.io/owned-by',
  componentLabel: 'app.kubernetes.io/component',
  partOfLabel: 'app.kubernetes.io/part-of',
  partOfValue: 'Kyma',
  disclaimerAnnotation: 'operator.kyma-project.io/managed-by-reconciler-disclaimer',
  disclaimer:
    'DO NOT EDIT - This resource is managed by Kyma.\nAny modifications are discarded and the resource is reverted to the original state.',
  /** Set on the manager workload's containers when the SKR image pull secret is used. */
  pullSecretEnv: 'SKR_IMG_PULL_SECRET',
} as const;

/** Runs `transforms` in order on a copy of `object`; the input is never changed. */
export function transformed(object: SetMember, transforms: readonly Transform[]): SetMember {
  let result = structuredClone(object);
  for (const transform of transforms) result = transform(result);
  return result;
}

function withMetadata(
  object: SetMember,
  labels: Record<string, string>,
  annotations: Record<string, string>,
): SetMember {
  return {
    ...object,
    metadata: {
      ...object.metadata,
      labels: { ...object.metadata.labels, ...labels },
      annotations: { ...object.metadata.annotations, ...annotations },
    },
  };
}

/** `managed-by: kyma` and `owned-by: <namespace>/<name>` of the Manifest the object belongs to. */
export function managedByOwnedBy(owner: { namespace: string; name: string }): Transform {
  return (object) =>
    withMetadata(
      object,
      { [MODULE_OBJECT_METADATA.managedByLabel]: MODULE_OBJECT_METADATA.managedByValue },
      { [MODULE_OBJECT_METADATA.ownedByAnnotation]: `${owner.namespace}/${owner.name}` },
    );
}

/** `app.kubernetes.io/component: <manifest name>` and `app.kubernetes.io/part-of: Kyma`. */
export function kymaComponent(manifestName: string): Transform {
  return (object) =>
    withMetadata(
      object,
      {
        [MODULE_OBJECT_METADATA.componentLabel]: manifestName,
        [MODULE_OBJECT_METADATA.partOfLabel]: MODULE_OBJECT_METADATA.partOfValue,
      },
      {},
    );
}

/** The "DO NOT EDIT" annotation. */
export function disclaimer(): Transform {
  return (object) =>
    withMetadata(
      object,
      {},
      { [MODULE_OBJECT_METADATA.disclaimerAnnotation]: MODULE_OBJECT_METADATA.disclaimer },
    );
}

/** The parts of an image reference that matter here; undefined when `text` is not one. */
export interface ImageReference {
  /** Everything before the tag and digest: `[host[:port]/]path/name`. */
  repository: string;
  /** The last path segment. */
  name: string;
  tag: string | undefined;
  digest: string | undefined;
}

const REFERENCE_PART = /^[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*$/;
const TAG = /^[\w][\w.-]{0,127}$/;
const DIGEST = /^[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[a-zA-Z0-9=_-]{32,}$/;
const HOST =
  /^(?:[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)(?:\.[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?)*(?::\d+)?$|^\[[0-9a-fA-F:]+\](?::\d+)?$/;

/** Parses `[host/]path/name[:tag][@digest]` by the distribution reference grammar; undefined when it is not one. */
export function parseImageReference(text: string): ImageReference | undefined {
  if (text.length === 0 || text.length > 4096 || /\s/.test(text)) return undefined;
  const at = text.indexOf('@');
  const digest = at < 0 ? undefined : text.slice(at + 1);
  if (digest !== undefined && !DIGEST.test(digest)) return undefined;
  const named = at < 0 ? text : text.slice(0, at);
  const lastSlash = named.lastIndexOf('/');
  const colon = named.indexOf(':', lastSlash + 1);
  const tag = colon < 0 ? undefined : named.slice(colon + 1);
  if (tag !== undefined && !TAG.test(tag)) return undefined;
  const repository = colon < 0 ? named : named.slice(0, colon);
  const segments = repository.split('/');
  // The first segment is a host when it has a dot or a port, or is localhost (the grammar's rule).
  const first = segments[0] ?? '';
  const hasHost =
    segments.length > 1 && (first.includes('.') || first.includes(':') || first === 'localhost');
  if (hasHost && !HOST.test(first)) return undefined;
  const path = hasHost ? segments.slice(1) : segments;
  if (path.length === 0 || !path.every((segment) => REFERENCE_PART.test(segment))) return undefined;
  return { repository, name: path[path.length - 1] ?? '', tag, digest };
}

/** The key images are matched by in localization: `<last path segment>:<tag>`; undefined without a tag. */
export function localizationKey(reference: ImageReference): string | undefined {
  return reference.tag === undefined ? undefined : `${reference.name}:${reference.tag}`;
}

const LOCALIZED_KINDS = new Set(['Deployment', 'StatefulSet']);

function podSpecOf(object: SetMember): Record<string, unknown> | undefined {
  if (!LOCALIZED_KINDS.has(object.kind) || !object.apiVersion.startsWith('apps/')) return undefined;
  const spec = object['spec'];
  if (!isRecord(spec) || !isRecord(spec['template'])) return undefined;
  const podSpec = spec['template']['spec'];
  return isRecord(podSpec) ? podSpec : undefined;
}

function containersOf(
  podSpec: Record<string, unknown>,
  fields: readonly string[] = ['initContainers', 'containers'],
): Record<string, unknown>[] {
  return fields.flatMap((field) => {
    const list = podSpec[field];
    return Array.isArray(list) ? list.filter(isRecord) : [];
  });
}

/**
 * Image localization from a module's `localizedImages` (the descriptor's ociArtifact references): in Deployments
 * and StatefulSets only, a container's `image` and its env values (`value`, not `valueFrom`) whose
 * `<last path segment>:<tag>` matches a localized reference are replaced by that full reference. A container image
 * that is no image reference fails the object; an env value that is none is left alone (most env values are not).
 */
export function localizeImages(localizedImages: readonly string[]): Transform {
  const byKey = new Map<string, string>();
  for (const localized of localizedImages) {
    const reference = parseImageReference(localized);
    const key = reference && localizationKey(reference);
    if (!key)
      throw new Error(`localized image ${JSON.stringify(localized)} is not an image reference with a tag`);
    if (!byKey.has(key)) byKey.set(key, localized);
  }
  return (object) => {
    const podSpec = podSpecOf(object);
    if (!podSpec || byKey.size === 0) return object;
    for (const container of containersOf(podSpec)) {
      const image = container['image'];
      if (typeof image === 'string') {
        const reference = parseImageReference(image);
        if (!reference)
          throw new Error(
            `${object.kind} ${object.metadata.name}: container image ${JSON.stringify(image)} is not an image reference`,
          );
        const localized = byKey.get(localizationKey(reference) ?? '');
        if (localized) container['image'] = localized;
      }
      const env = container['env'];
      if (!Array.isArray(env)) continue;
      for (const variable of env) {
        if (!isRecord(variable) || typeof variable['value'] !== 'string') continue;
        const reference = parseImageReference(variable['value']);
        const localized = reference && byKey.get(localizationKey(reference) ?? '');
        if (localized) variable['value'] = localized;
      }
    }
    return object;
  };
}

/**
 * The SKR image pull secret (`--skr-image-pull-secret`): `imagePullSecrets: [{name}]` on every Deployment and
 * StatefulSet, and env `SKR_IMG_PULL_SECRET=<name>` on every container of the manager workload (`manager`, by kind
 * and name; every workload when unset, as upstream does without `spec.manager`). A container that already sets
 * that variable fails the object.
 */
export function skrImagePullSecret(secretName: string, manager?: { kind: string; name: string }): Transform {
  return (object) => {
    const podSpec = podSpecOf(object);
    if (!podSpec) return object;
    const secrets = Array.isArray(podSpec['imagePullSecrets']) ? podSpec['imagePullSecrets'] : [];
    if (!secrets.some((entry: unknown) => isRecord(entry) && entry['name'] === secretName))
      podSpec['imagePullSecrets'] = [...secrets, { name: secretName }];
    const isManager = !manager || (manager.kind === object.kind && manager.name === object.metadata.name);
    if (!isManager) return object;
    for (const container of containersOf(podSpec, ['containers'])) {
      const env = Array.isArray(container['env']) ? container['env'] : [];
      if (
        env.some(
          (variable: unknown) =>
            isRecord(variable) && variable['name'] === MODULE_OBJECT_METADATA.pullSecretEnv,
        )
      )
        throw new Error(
          `${object.kind} ${object.metadata.name}: container ${String(container['name'])} already sets ${MODULE_OBJECT_METADATA.pullSecretEnv}`,
        );
      container['env'] = [...env, { name: MODULE_OBJECT_METADATA.pullSecretEnv, value: secretName }];
    }
    return object;
  };
}
