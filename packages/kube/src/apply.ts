// Server-side apply and the small reads and deletes every reconciler needs, over client-node's
// KubernetesObjectApi (any kind, discovery cached per client) and CustomObjectsApi (our CRDs, plain JSON).
import {
  ApiException,
  loadYaml,
  PatchStrategy,
  setHeaderOptions,
  type CustomObjectsApi,
  type KubernetesObject,
  type KubernetesObjectApi,
} from '@kubernetes/client-node';

/** Where a custom object lives: enough to address it and its /status subresource. */
export interface CustomObjectRef {
  group: string;
  version: string;
  plural: string;
  namespace: string;
  name: string;
}

/** An object addressed by apiVersion, kind, name and (for namespaced kinds) namespace. */
export interface ObjectRef {
  apiVersion: string;
  kind: string;
  name: string;
  namespace?: string;
}

export interface ApplyOptions {
  fieldManager: string;
  /** Take over fields another manager owns; right where this manager is the source of truth. */
  force?: boolean;
}

/**
 * A failed call to an API server, with the object it was about. `code` is the HTTP status (undefined for
 * network errors and timeouts), so callers branch on it and never on message text.
 */
export class KubeRequestError extends Error {
  readonly code: number | undefined;
  /** The `reason` of the API server's Status answer, e.g. `NotFound`, `Conflict`, `Invalid`. */
  readonly reason: string | undefined;

  constructor(action: string, cause: unknown) {
    const code = apiErrorCode(cause);
    const status = statusOf(cause);
    const detail = status?.message ?? (cause instanceof Error ? cause.message : String(cause));
    super(`${action}: ${code !== undefined ? `HTTP ${code}: ` : ''}${detail}`, { cause });
    this.name = 'KubeRequestError';
    this.code = code;
    this.reason = status?.reason ?? (cause instanceof KubeRequestError ? cause.reason : undefined);
  }
}

/** The HTTP status of an API error, looking through `cause` chains; undefined for anything else. */
export function apiErrorCode(error: unknown): number | undefined {
  for (let current = error, depth = 0; current !== undefined && depth < 8; depth++) {
    if (current instanceof ApiException) return current.code;
    if (current instanceof KubeRequestError) return current.code;
    current = current instanceof Error ? current.cause : undefined;
  }
  return undefined;
}

export function isNotFound(error: unknown): boolean {
  return apiErrorCode(error) === 404;
}

export function isConflict(error: unknown): boolean {
  return apiErrorCode(error) === 409;
}

/**
 * Timeouts, refused or reset connections, DNS and TLS failures: the request got no answer from an API server.
 * Recognised by the error's name (TimeoutError, AbortError) or its string `code` (ECONNREFUSED, UND_ERR_*,
 * ERR_TLS_*, …) anywhere in the cause chain; an HTTP answer (numeric code) is never "unreachable".
 */
export function isUnreachable(error: unknown): boolean {
  if (apiErrorCode(error) !== undefined) return false;
  for (let current = error, depth = 0; current instanceof Error && depth < 8; depth++) {
    // A module registry's failure (@skr-watcher/oci), whatever socket error caused it, is not the cluster's.
    if (current.name === 'ModuleSourceError') return false;
    if (current.name === 'TimeoutError' || current.name === 'AbortError') return true;
    const code = (current as { code?: unknown }).code;
    if (
      typeof code === 'string' &&
      /^(E[A-Z]+|UND_ERR_[A-Z_]+|ERR_TLS_[A-Z_]+|ERR_SSL_[A-Z_]+|[A-Z_]*CERT[A-Z_]*)$/.test(code)
    ) {
      return true;
    }
    current = current.cause;
  }
  return false;
}

function statusOf(error: unknown): { message?: string; reason?: string } | undefined {
  if (!(error instanceof ApiException)) return undefined;
  let body: unknown = error.body;
  if (typeof body === 'string') {
    const text = body;
    try {
      body = JSON.parse(text);
    } catch {
      return text.length > 0 ? { message: text.slice(0, 512) } : undefined;
    }
  }
  if (typeof body !== 'object' || body === null) return undefined;
  const { message, reason } = body as Record<string, unknown>;
  return {
    ...(typeof message === 'string' ? { message } : {}),
    ...(typeof reason === 'string' ? { reason } : {}),
  };
}

/** `namespace/name`, or `name` for cluster-scoped objects; for messages. */
export function describeRef(ref: { kind?: string; name: string; namespace?: string | undefined }): string {
  const where = ref.namespace ? `${ref.namespace}/${ref.name}` : ref.name;
  return ref.kind ? `${ref.kind} ${where}` : where;
}

/** Runs a request and wraps its failure with what it was doing; API errors keep their code. */
export async function withContext<T>(action: string, request: () => Promise<T>): Promise<T> {
  try {
    return await request();
  } catch (error) {
    throw new KubeRequestError(action, error);
  }
}

/** The object, or undefined when the API server answers 404. */
export async function getOrUndefined<T>(action: string, read: () => Promise<T>): Promise<T | undefined> {
  try {
    return await read();
  } catch (error) {
    if (isNotFound(error)) return undefined;
    throw new KubeRequestError(action, error);
  }
}

function objectOf(ref: ObjectRef): KubernetesObject & { metadata: { name: string; namespace?: string } } {
  return {
    apiVersion: ref.apiVersion,
    kind: ref.kind,
    metadata: { name: ref.name, ...(ref.namespace ? { namespace: ref.namespace } : {}) },
  };
}

function refOf(body: KubernetesObject): ObjectRef {
  const name = body.metadata?.name;
  if (!body.apiVersion || !body.kind || !name)
    throw new Error('an object needs apiVersion, kind and metadata.name');
  return {
    apiVersion: body.apiVersion,
    kind: body.kind,
    name,
    ...(body.metadata?.namespace ? { namespace: body.metadata.namespace } : {}),
  };
}

/** Reads any object; undefined when it (or its kind) does not exist. */
export async function readObject(
  objects: KubernetesObjectApi,
  ref: ObjectRef,
): Promise<KubernetesObject | undefined> {
  try {
    return await objects.read(objectOf(ref));
  } catch (error) {
    if (isNotFound(error) || isUnknownKind(error)) return undefined;
    throw new KubeRequestError(`read ${describeRef(ref)}`, error);
  }
}

/**
 * The body as KubernetesObjectApi must be handed it. It serializes a kind it has a model for by the model's property
 * names, so plain JSON keys that differ from them are dropped on the way out: in a CRD's schema
 * `x-kubernetes-preserve-unknown-fields`, `x-kubernetes-int-or-string`, `$ref`, `default` (a module's CRD would lose
 * them and the API server would prune its CRs' fields). Only CRDs carry such keys; they go through client-node's own
 * deserializer first.
 */
export function asClientModel<T extends KubernetesObject>(body: T): T {
  if (body.kind !== 'CustomResourceDefinition' || !body.apiVersion?.startsWith('apiextensions.k8s.io/'))
    return body;
  return loadYaml<T>(JSON.stringify(body));
}

/** Server-side apply of any object (Content-Type application/apply-patch+yaml). */
export function applyObject<T extends KubernetesObject>(
  objects: KubernetesObjectApi,
  body: T,
  options: ApplyOptions,
): Promise<KubernetesObject> {
  const ref = refOf(body);
  return withContext(`apply ${describeRef(ref)}`, () =>
    objects.patch(
      asClientModel(body),
      undefined,
      undefined,
      options.fieldManager,
      options.force,
      PatchStrategy.ServerSideApply,
    ),
  );
}

/** Creates any object; undefined when it already exists (409), which callers treat as "someone was first". */
export async function createIfAbsent<T extends KubernetesObject>(
  objects: KubernetesObjectApi,
  body: T,
  fieldManager: string,
): Promise<KubernetesObject | undefined> {
  const ref = refOf(body);
  try {
    return await objects.create(asClientModel(body), undefined, undefined, fieldManager);
  } catch (error) {
    if (isConflict(error)) return undefined;
    throw new KubeRequestError(`create ${describeRef(ref)}`, error);
  }
}

/** Deletes any object; false when it was already gone (404, including an unknown kind). */
export async function deleteIfExists(objects: KubernetesObjectApi, ref: ObjectRef): Promise<boolean> {
  try {
    await objects.delete(objectOf(ref));
    return true;
  } catch (error) {
    if (isNotFound(error) || isUnknownKind(error)) return false;
    throw new KubeRequestError(`delete ${describeRef(ref)}`, error);
  }
}

/** KubernetesObjectApi answers a kind the server does not serve with a plain Error before any request. */
export function isUnknownKind(error: unknown): boolean {
  return (
    error instanceof Error &&
    apiErrorCode(error) === undefined &&
    /^Unrecognized API version and kind/.test(error.message)
  );
}

const applyHeaders = setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply);
const mergePatchHeaders = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

function customAction(verb: string, ref: CustomObjectRef, sub = ''): string {
  return `${verb} ${ref.plural}.${ref.group} ${ref.namespace}/${ref.name}${sub}`;
}

/** A custom object as plain JSON, or undefined on 404. */
export function getCustomObject(custom: CustomObjectsApi, ref: CustomObjectRef): Promise<unknown> {
  return getOrUndefined(customAction('get', ref), () => custom.getNamespacedCustomObject(ref));
}

/** Server-side apply of a custom object's main resource (status is ignored there by the API server). */
export function applyCustomObject(
  custom: CustomObjectsApi,
  ref: CustomObjectRef,
  body: object,
  options: ApplyOptions,
): Promise<unknown> {
  return withContext(customAction('apply', ref), () =>
    custom.patchNamespacedCustomObject(
      { ...ref, body, fieldManager: options.fieldManager, ...(options.force ? { force: true } : {}) },
      applyHeaders,
    ),
  );
}

/** Server-side apply through the /status subresource; `body` carries apiVersion, kind, metadata.name and status. */
export function applyCustomStatus(
  custom: CustomObjectsApi,
  ref: CustomObjectRef,
  body: object,
  options: ApplyOptions,
): Promise<unknown> {
  return withContext(customAction('apply', ref, '/status'), () =>
    custom.patchNamespacedCustomObjectStatus(
      { ...ref, body, fieldManager: options.fieldManager, ...(options.force ? { force: true } : {}) },
      applyHeaders,
    ),
  );
}

/** JSON merge patch of a custom object; put metadata.resourceVersion in the patch for optimistic concurrency. */
export function mergePatchCustomObject(
  custom: CustomObjectsApi,
  ref: CustomObjectRef,
  patch: object,
): Promise<unknown> {
  return withContext(customAction('patch', ref), () =>
    custom.patchNamespacedCustomObject({ ...ref, body: patch }, mergePatchHeaders),
  );
}

/** Deletes a custom object; false when it was already gone. */
export async function deleteCustomObjectIfExists(
  custom: CustomObjectsApi,
  ref: CustomObjectRef,
): Promise<boolean> {
  try {
    await custom.deleteNamespacedCustomObject(ref);
    return true;
  } catch (error) {
    if (isNotFound(error)) return false;
    throw new KubeRequestError(customAction('delete', ref), error);
  }
}

/** Metadata the API server owns; an object copied to another cluster (or into a spec) must not carry it. */
const SERVER_OWNED_METADATA = [
  'uid',
  'resourceVersion',
  'creationTimestamp',
  'generation',
  'managedFields',
  'ownerReferences',
  'deletionTimestamp',
  'deletionGracePeriodSeconds',
  'selfLink',
] as const;

/**
 * A copy of `object` fit to be written elsewhere: server-owned metadata (uid, resourceVersion,
 * creationTimestamp, generation, managedFields, ownerReferences, deletion fields) and status removed.
 */
export function mirrorable<T extends { metadata?: object; status?: unknown }>(object: T): Omit<T, 'status'> {
  const { status: _status, ...rest } = structuredClone(object);
  if (rest.metadata) {
    const metadata = rest.metadata as Record<string, unknown>;
    for (const key of SERVER_OWNED_METADATA) delete metadata[key];
  }
  return rest;
}
