// What of an object from the API server an informer caches: objects without a name are refused, and the metadata
// nothing reads from a cache (managedFields, kubectl's last-applied-configuration) is dropped.
import type { Logger } from '@skr-watcher/telemetry';
import type { CachedObject } from './types.js';

/** What `kubectl apply` writes: the whole applied object, as JSON. */
const LAST_APPLIED = 'kubectl.kubernetes.io/last-applied-configuration';

/**
 * Validates an object from the wire; objects without a name are logged and skipped. managedFields and kubectl's
 * last-applied-configuration are dropped before anything is cached: nothing reads them from a cache, and they
 * are often the largest part of metadata (the annotation is a copy of the whole applied object: for a kubeconfig
 * Secret applied with kubectl, its data, in every replica's Secret cache; decision 012). `transform` then trims
 * what the caller does not read.
 */
export function acceptObject<T extends CachedObject>(
  raw: unknown,
  transform: (object: T) => T,
  logger?: Logger,
): T | undefined {
  const metadata = (raw as CachedObject | null)?.metadata;
  if (typeof raw !== 'object' || raw === null || typeof metadata?.name !== 'string' || metadata.name === '') {
    logger?.warn('object without metadata.name from the API server; skipped');
    return undefined;
  }
  (raw as { metadata: unknown }).metadata = withoutUnreadFields(metadata);
  return transform(raw as T);
}

/**
 * Copies without them, not `delete`: V8 turns an object a field was deleted from into a hash table, which for
 * a Manifest's metadata holds ~0.8 kB more than the fields (decision 021).
 */
function withoutUnreadFields(metadata: object): Record<string, unknown> {
  const { managedFields: _managedFields, ...withoutManagedFields } = metadata as Record<string, unknown>;
  const annotations = withoutManagedFields['annotations'] as Record<string, string> | undefined;
  if (!annotations || !(LAST_APPLIED in annotations)) return withoutManagedFields;
  const { [LAST_APPLIED]: _lastApplied, ...others } = annotations;
  const { annotations: _annotations, ...rest } = withoutManagedFields;
  return Object.keys(others).length > 0 ? { ...rest, annotations: others } : rest;
}
