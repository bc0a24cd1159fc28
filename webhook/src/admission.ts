// Which admitted writes KCP must hear about (DESIGN 4.1), and the v2 event that tells it.
import {
  ANNOTATIONS,
  watchEventFor,
  type AdmissionReview,
  type EmbeddedObject,
  type WatchEventV2,
} from '@skr-watcher/api';

/** Metadata fields that change on every write without the user changing anything. */
const VOLATILE_METADATA = new Set(['resourceVersion', 'managedFields', 'generation']);

/**
 * The v2 event for a relevant change, or undefined when KCP need not hear about it:
 * CREATE and DELETE always; UPDATE of the status subresource when status differs; other UPDATEs when
 * spec differs (or the object has no spec and anything but volatile metadata differs), or when
 * deletionTimestamp was just set, or the KCP agent's watcher-probe annotation changed. CONNECT, dry runs and
 * no-op updates never.
 */
export function isRelevantChange(review: AdmissionReview): WatchEventV2 | undefined {
  const request = review.request;
  // A dry run persists nothing, so there is nothing for KCP to look at.
  if (request.dryRun === true) return undefined;
  let subject: EmbeddedObject | null | undefined;
  switch (request.operation) {
    case 'CREATE':
      subject = request.object;
      break;
    case 'DELETE':
      subject = request.oldObject ?? request.object;
      break;
    case 'UPDATE':
      if (!isRelevantUpdate(request.object, request.oldObject, request.subResource)) return undefined;
      subject = request.object;
      break;
    default:
      return undefined;
  }
  const name = subject?.metadata?.name || request.name;
  if (!name) return undefined;
  const namespace = subject?.metadata?.namespace ?? request.namespace ?? '';
  return watchEventFor({ namespace, name }, request.kind);
}

function isRelevantUpdate(
  object: EmbeddedObject | null | undefined,
  oldObject: EmbeddedObject | null | undefined,
  subResource: string | undefined,
): boolean {
  // Without both sides there is nothing to compare: tell KCP rather than risk losing a change.
  if (!object || !oldObject) return true;
  if (object.metadata?.deletionTimestamp && !oldObject.metadata?.deletionTimestamp) return true;
  // The KCP agent probes a quiet SKR with this annotation; the probe must come back as an event.
  if (probeOf(object) !== probeOf(oldObject)) return true;
  if (subResource === 'status') return !sameJson(object['status'], oldObject['status']);
  const hasSpec = object['spec'] !== undefined || oldObject['spec'] !== undefined;
  if (hasSpec) return !sameJson(object['spec'], oldObject['spec']);
  return !sameObjectWithoutSpec(object, oldObject);
}

function probeOf(object: EmbeddedObject): unknown {
  const annotations = object.metadata?.['annotations'];
  return typeof annotations === 'object' && annotations !== null
    ? (annotations as Record<string, unknown>)[ANNOTATIONS.watcherProbe]
    : undefined;
}

/** Objects without spec: everything but status and volatile metadata counts as user intent. */
function sameObjectWithoutSpec(a: EmbeddedObject, b: EmbeddedObject): boolean {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  for (const key of keys) {
    if (key === 'status') continue;
    if (key === 'metadata') {
      if (!sameMetadata(a.metadata, b.metadata)) return false;
    } else if (!sameJson(a[key], b[key])) return false;
  }
  return true;
}

function sameMetadata(
  a: Record<string, unknown> | undefined,
  b: Record<string, unknown> | undefined,
): boolean {
  const left = a ?? {};
  const right = b ?? {};
  const keys = new Set([...Object.keys(left), ...Object.keys(right)]);
  for (const key of keys) {
    if (VOLATILE_METADATA.has(key)) continue;
    if (!sameJson(left[key], right[key])) return false;
  }
  return true;
}

/** Structural equality of decoded JSON values; object key order does not matter. */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a !== 'object' || typeof b !== 'object' || a === null || b === null) return false;
  if (Array.isArray(a)) {
    if (!Array.isArray(b) || a.length !== b.length) return false;
    for (let i = 0; i < a.length; i++) if (!sameJson(a[i], b[i])) return false;
    return true;
  }
  if (Array.isArray(b)) return false;
  const left = a as Record<string, unknown>;
  const right = b as Record<string, unknown>;
  let count = 0;
  for (const key in left) {
    if (!Object.hasOwn(left, key)) continue;
    count++;
    if (!Object.hasOwn(right, key) || !sameJson(left[key], right[key])) return false;
  }
  for (const key in right) if (Object.hasOwn(right, key)) count--;
  return count === 0;
}
