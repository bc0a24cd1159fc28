// Which admitted writes KCP must hear about (DESIGN 4.1), and the v2 event that tells it.
import {
  ANNOTATIONS,
  watchEventFor,
  type AdmissionReview,
  type ChangeFingerprint,
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
 * no-op updates never. The event carries the change's fingerprint (uid, generation, previous resourceVersion) so
 * KCP can tell when a read shows it (decision 010).
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
  return watchEventFor({ namespace, name }, request.kind, fingerprintOf(subject, request.oldObject));
}

/**
 * uid and generation of the object as it will be stored (the API server sets both before validating admission
 * runs), and the resourceVersion it had before an UPDATE or DELETE. Values of an unexpected type are left out
 * rather than sent: the fields are hints, the event is what matters.
 */
function fingerprintOf(
  subject: EmbeddedObject | null | undefined,
  oldObject: EmbeddedObject | null | undefined,
): ChangeFingerprint {
  const uid = subject?.metadata?.['uid'];
  const generation = subject?.metadata?.['generation'];
  const previous = oldObject?.metadata?.['resourceVersion'];
  return {
    ...(typeof uid === 'string' && uid.length > 0 && uid.length <= 128 ? { uid } : {}),
    ...(Number.isSafeInteger(generation) && (generation as number) >= 0
      ? { generation: generation as number }
      : {}),
    ...(typeof previous === 'string' && previous.length > 0 && previous.length <= 64
      ? { previousResourceVersion: previous }
      : {}),
  };
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
  // `spec: null` holds no configuration either: such an object's configuration lives in its other fields.
  const hasSpec = isPresent(object['spec']) || isPresent(oldObject['spec']);
  if (hasSpec) return !sameJson(object['spec'], oldObject['spec']);
  return !sameObjectWithoutSpec(object, oldObject);
}

function isPresent(value: unknown): boolean {
  return value !== undefined && value !== null;
}

function probeOf(object: EmbeddedObject): unknown {
  const annotations = object.metadata?.['annotations'];
  return typeof annotations === 'object' && annotations !== null
    ? (annotations as Record<string, unknown>)[ANNOTATIONS.watcherProbe]
    : undefined;
}

/**
 * Objects without spec: everything but volatile metadata counts, status included (written through the main
 * resource, it may be all the configuration such an object has; upstream's webhook sends it too).
 */
function sameObjectWithoutSpec(a: EmbeddedObject, b: EmbeddedObject): boolean {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  for (const key of keys) {
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

/**
 * Structural equality of decoded JSON values; object key order does not matter. Iterative, with its own stack of
 * pairs still to compare: a user may nest a Module CR thousands of levels deep (the API server accepts it), and
 * a recursive walk would overflow the call stack and take the webhook down with it.
 */
export function sameJson(a: unknown, b: unknown): boolean {
  const pending: unknown[] = [a, b];
  while (pending.length > 0) {
    const right = pending.pop();
    const left = pending.pop();
    if (left === right) continue;
    if (typeof left !== 'object' || typeof right !== 'object' || left === null || right === null)
      return false;
    if (Array.isArray(left)) {
      if (!Array.isArray(right) || left.length !== right.length) return false;
      for (let i = 0; i < left.length; i++) pending.push(left[i], right[i]);
      continue;
    }
    if (Array.isArray(right)) return false;
    const l = left as Record<string, unknown>;
    const r = right as Record<string, unknown>;
    let count = 0;
    for (const key in l) {
      if (!Object.hasOwn(l, key)) continue;
      count++;
      if (!Object.hasOwn(r, key)) return false;
      pending.push(l[key], r[key]);
    }
    for (const key in r) if (Object.hasOwn(r, key)) count--;
    if (count !== 0) return false;
  }
  return true;
}
