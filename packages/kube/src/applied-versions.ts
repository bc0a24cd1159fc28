// Skipping server-side applies that would change nothing (decision 016). A no-op apply still costs the API server a
// full decode, merge and managedFields computation and an admission pass; a metadata-only GET costs an etcd read.
// An apply is skipped only when the object, read fresh, is still at the resourceVersion our own last apply of the
// same body produced: any write since (a user's edit, another manager's, a deletion and re-creation) changes the
// resourceVersion, and a deleted object answers 404, so drift is repaired on the pass that sees it.
import { createHash } from 'node:crypto';
import type { KubernetesObject } from '@kubernetes/client-node';
import { applyObject, describeRef, isNotFound, KubeRequestError, type ApplyOptions } from './apply.js';
import type { DiscoveringObjectApi } from './discovering-object-api.js';

/** What our last apply of each object produced, in one cluster: the body's digest and the resourceVersion. */
export class AppliedVersions {
  private readonly applied = new Map<string, { digest: string; resourceVersion: string }>();

  get size(): number {
    return this.applied.size;
  }

  /** @internal */
  lookup(key: string) {
    return this.applied.get(key);
  }

  /** @internal */
  record(key: string, digest: string, resourceVersion: string | undefined): void {
    if (resourceVersion) this.applied.set(key, { digest, resourceVersion });
    else this.applied.delete(key);
  }
}

function keyOf(body: KubernetesObject): string {
  return `${body.apiVersion ?? ''}/${body.kind ?? ''}/${body.metadata?.namespace ?? ''}/${body.metadata?.name ?? ''}`;
}

/**
 * What an apply found: 'unchanged' (skipped), 'applied' (new, or its body changed, or nothing was remembered),
 * 'recreated' (the body we applied last had been deleted), 'restored' (someone else's write had changed what we
 * applied last, and our apply changed it back).
 */
export type ApplyOutcome = 'applied' | 'unchanged' | 'recreated' | 'restored';

/**
 * Server-side apply of `body`, unless a fresh metadata read shows the object unchanged since our last apply of this
 * same body (field manager and force included). 'unchanged' costs one metadata GET; the others a GET and the apply
 * (or only the apply when nothing is remembered).
 */
export async function applyObjectUnlessUnchanged(
  objects: DiscoveringObjectApi,
  body: KubernetesObject,
  options: ApplyOptions,
  applied: AppliedVersions,
): Promise<ApplyOutcome> {
  const key = keyOf(body);
  const digest = createHash('sha256')
    .update(JSON.stringify([options.fieldManager, options.force === true, body]))
    .digest('hex');
  const last = applied.lookup(key);
  let found: 'deleted' | string | undefined;
  if (last?.digest === digest) {
    let current: KubernetesObject | undefined;
    try {
      current = await objects.readMetadata(body);
    } catch (error) {
      if (!isNotFound(error)) throw new KubeRequestError(`read ${describeRef(refFor(body))}`, error);
    }
    if (current?.metadata?.resourceVersion === last.resourceVersion) return 'unchanged';
    found = current ? (current.metadata?.resourceVersion ?? '') : 'deleted';
  }
  const result = await applyObject(objects, body, options);
  const resourceVersion = result.metadata?.resourceVersion;
  applied.record(key, digest, resourceVersion);
  if (found === 'deleted') return 'recreated';
  // An apply that changes nothing keeps the resourceVersion: the other write left our fields as they were.
  if (found !== undefined && resourceVersion !== found) return 'restored';
  return 'applied';
}

function refFor(body: KubernetesObject) {
  return {
    kind: body.kind ?? '',
    name: body.metadata?.name ?? '',
    ...(body.metadata?.namespace ? { namespace: body.metadata.namespace } : {}),
  };
}
