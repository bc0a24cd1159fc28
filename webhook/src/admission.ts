// Which admitted writes KCP must hear about (as the upstream runtime-watcher decides), and the v2 event
// that tells it.
import {
  ANNOTATIONS,
  watchEventFor,
  type AdmissionReview,
  type ChangeFingerprint,
  type EmbeddedObject,
  type WatchEventV2,
} from '@skr-watcher/api';
import { driftVerdict, isInstalledObject, type DriftVerdict } from './drift.js';
import { sameJson } from './same-json.js';

export { sameJson };

/** Metadata fields that change on every write without the user changing anything. */
const VOLATILE_METADATA = new Set(['resourceVersion', 'managedFields', 'generation']);

/**
 * The v2 event for a relevant change, or undefined when KCP need not hear about it:
 * CREATE and DELETE always; UPDATE of the status subresource when status differs; other UPDATEs when
 * spec differs (or the object has no spec and anything but volatile metadata differs), or when
 * deletionTimestamp was just set, or the KCP agent's watcher-probe annotation changed. CONNECT, dry runs and
 * no-op updates never. Objects a module installed follow drift.ts instead (`onDrift` hears its verdict). The event carries the change's fingerprint (uid, generation, previous resourceVersion) so
 * KCP can tell when a read shows it (decision 010).
 */
export function isRelevantChange(
  review: AdmissionReview,
  onDrift?: (verdict: DriftVerdict) => void,
): WatchEventV2 | undefined {
  const request = review.request;
  // A dry run persists nothing, so there is nothing for KCP to look at.
  if (request.dryRun === true) return undefined;
  // An object a module installed (drift.ts): its own rules, whichever webhook entry selected it.
  const installed = isInstalledObject(request);
  if (installed) {
    const verdict = driftVerdict(request);
    onDrift?.(verdict);
    if (verdict !== 'drift') return undefined;
  }
  let subject: EmbeddedObject | null | undefined;
  switch (request.operation) {
    case 'CREATE':
      subject = request.object;
      break;
    case 'DELETE':
      subject = request.oldObject ?? request.object;
      break;
    case 'UPDATE':
      if (!installed && !isRelevantUpdate(request.object, request.oldObject, request.subResource))
        return undefined;
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
