// The callback contract: what an SKR webhook posts to the KCP listener.
import * as z from 'zod/mini';
import './zod-messages.js';

/** Kubernetes object names are DNS subdomains of at most 253 characters. */
const NAME = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;
/** Namespaces are DNS labels of at most 63 characters. */
const NAMESPACE = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
/** API groups are empty (core) or DNS subdomains. */
const GROUP = /^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?)?$/;
/** API versions are DNS labels: CRDs may serve `v1-alpha` as well as `v1beta2`. */
const VERSION = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const KIND = /^[A-Za-z][A-Za-z0-9]{0,62}$/;

const objectKey = z.object({
  // Capitalised keys are the reference system's wire format; keep them.
  Namespace: z.union([
    z.string().check(z.regex(NAMESPACE, 'must be a namespace (DNS label) or empty')),
    z.literal(''),
  ]),
  Name: z.string().check(z.regex(NAME, 'must be a Kubernetes object name')),
});

const gvk = z.object({
  group: z.string().check(z.regex(GROUP, 'must be an API group (DNS subdomain) or empty')),
  version: z.string().check(z.regex(VERSION, 'must be an API version such as v1beta2')),
  kind: z.string().check(z.regex(KIND, 'must be a Kind such as Kyma')),
});

/**
 * What the change was, so KCP can tell whether a read of the object already shows it (decision 010). Our
 * webhook adds these to the v2 body; upstream's listener ignores unknown fields and upstream's webhook sends
 * none, so every field is optional and the wire stays compatible both ways.
 */
const changeFingerprint = {
  /** metadata.uid of the object: a read that shows another uid is another object of the same name. */
  uid: z.optional(z.string().check(z.minLength(1), z.maxLength(128))),
  /** metadata.generation after the change (validating admission sees it already incremented). */
  generation: z.optional(z.int().check(z.gte(0), z.lte(Number.MAX_SAFE_INTEGER))),
  /** metadata.resourceVersion before an UPDATE or DELETE: the change is stored once a read shows another. */
  previousResourceVersion: z.optional(z.string().check(z.minLength(1), z.maxLength(64))),
};

export const watchEventV2Schema = z.object({ watched: objectKey, watchedGvk: gvk, ...changeFingerprint });
export const watchEventV1Schema = z.extend(watchEventV2Schema, { owner: objectKey });

export type WatchEventV2 = z.infer<typeof watchEventV2Schema>;
export type WatchEventV1 = z.infer<typeof watchEventV1Schema>;
export type ContractVersion = 'v1' | 'v2';

export type ParseResult<T> = { ok: true; value: T } | { ok: false; error: string };

/** Turns a Zod error into one line naming every offending field, e.g. `watched.Name: Required`. */
export function describeIssues(error: z.core.$ZodError): string {
  return error.issues
    .slice(0, 5)
    .map((issue) => `${issue.path.length ? issue.path.join('.') : '(body)'}: ${issue.message}`)
    .join('; ');
}

/** Validates an already JSON-decoded callback body against the contract of its path version. */
export function parseWatchEvent(version: 'v1', body: unknown): ParseResult<WatchEventV1>;
export function parseWatchEvent(version: 'v2', body: unknown): ParseResult<WatchEventV2>;
export function parseWatchEvent(
  version: ContractVersion,
  body: unknown,
): ParseResult<WatchEventV1 | WatchEventV2>;
export function parseWatchEvent(
  version: ContractVersion,
  body: unknown,
): ParseResult<WatchEventV1 | WatchEventV2> {
  const schema = version === 'v1' ? watchEventV1Schema : watchEventV2Schema;
  const result = schema.safeParse(body);
  return result.success
    ? { ok: true, value: result.data }
    : { ok: false, error: describeIssues(result.error) };
}

/** The optional fields of a v2 body that say which write an event is about (decision 010). */
export type ChangeFingerprint = Pick<WatchEventV2, 'uid' | 'generation' | 'previousResourceVersion'>;

/** Builds the v2 body for an object; `namespace` is empty for cluster-scoped objects. */
export function watchEventFor(
  object: { namespace: string; name: string },
  watchedGvk: { group: string; version: string; kind: string },
  fingerprint: ChangeFingerprint = {},
): WatchEventV2 {
  return {
    watched: { Namespace: object.namespace, Name: object.name },
    watchedGvk: { group: watchedGvk.group, version: watchedGvk.version, kind: watchedGvk.kind },
    ...(fingerprint.uid !== undefined ? { uid: fingerprint.uid } : {}),
    ...(fingerprint.generation !== undefined ? { generation: fingerprint.generation } : {}),
    ...(fingerprint.previousResourceVersion !== undefined
      ? { previousResourceVersion: fingerprint.previousResourceVersion }
      : {}),
  };
}

/**
 * Whether an object as read shows the write an event is about: same uid, generation at least the event's,
 * resourceVersion moved on from the one before the change. An event without fingerprint fields says nothing,
 * so any read shows it. `object` undefined: the object is absent, which shows every change but a CREATE.
 */
export function showsChange(
  fingerprint: ChangeFingerprint,
  object: { metadata?: { uid?: string; generation?: number; resourceVersion?: string } } | undefined,
): boolean {
  if (object === undefined)
    return fingerprint.uid === undefined || fingerprint.previousResourceVersion !== undefined;
  const metadata = object.metadata ?? {};
  // Another object of the same name: the one the event is about is gone, and the new one has its own events.
  if (fingerprint.uid !== undefined && metadata.uid !== undefined && metadata.uid !== fingerprint.uid)
    return true;
  if (fingerprint.generation !== undefined && (metadata.generation ?? 0) < fingerprint.generation)
    return false;
  if (
    fingerprint.previousResourceVersion !== undefined &&
    metadata.resourceVersion === fingerprint.previousResourceVersion
  )
    return false;
  return true;
}

/** Whether an event carries any fingerprint field, i.e. came from a webhook that says what to expect. */
export function hasFingerprint(fingerprint: ChangeFingerprint): boolean {
  return (
    fingerprint.uid !== undefined ||
    fingerprint.generation !== undefined ||
    fingerprint.previousResourceVersion !== undefined
  );
}

/**
 * The webhook's "look at everything" callback: sent when it starts and after it dropped events,
 * because changes made while it was away or that it lost have no event of their own. An ordinary v2 body naming the
 * webhook's own Deployment and without fingerprint, so upstream's listener takes it as any change (it reconciles the
 * Kyma) and ours as one it cannot narrow down: the full reconcile of the SKR's Kyma.
 */
export const RESYNC_EVENT: WatchEventV2 = {
  watched: { Namespace: 'kyma-system', Name: 'skr-webhook' },
  watchedGvk: { group: 'apps', version: 'v1', kind: 'Deployment' },
};

/**
 * What the agent installs in every SKR for its webhook, as both sides must name it: the webhook watches its own
 * configuration and asks for a resync when it goes, or when a writer other than the registration changed it
 * (an SKR user who deletes or re-points it would silence the webhook).
 */
export const SKR_WEBHOOK_REGISTRATION = {
  /** Name of the ValidatingWebhookConfiguration, Service, Deployment, ServiceAccount and ClusterRole. */
  name: 'skr-webhook',
  /** Field manager of everything the registration applies in an SKR. */
  fieldManager: 'skr-watcher-registration',
} as const;

/** Callback path for a manager and contract version: `/v2/lifecycle-manager/event`. */
export function eventPath(manager: string, version: ContractVersion = 'v2'): string {
  return `/${version}/${manager}/event`;
}

/** Matches `/v1/<component>/event` and `/v2/<component>/event`. */
const EVENT_PATH = /^\/(v1|v2)\/([a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?)\/event$/;

export function parseEventPath(path: string): { version: ContractVersion; component: string } | undefined {
  const match = EVENT_PATH.exec(path);
  if (!match) return undefined;
  return { version: match[1] as ContractVersion, component: match[2] as string };
}

/** How the agent waits for the write a callback announced to be stored (decision 010). */
export const MODULE_MIRROR = {
  /** First re-read after a read that does not show the fingerprint yet: storing takes milliseconds. */
  rereadInitialMs: 2,
  /** Re-reads back off up to this, so a slow API server is not asked hundreds of times. */
  rereadMaxMs: 50,
  /** After this the write is taken as never stored (refused after admission); the full reconcile follows anyway. */
  rereadBoundMs: 1_000,
  /**
   * An event without fingerprint (upstream's webhook) cannot say whether a read shows it: its Kyma is looked at
   * once more this long after, which bounds how long a write stored after the first read goes unmirrored.
   */
  unfingerprintedRecheckMs: 1_000,
  /**
   * After a targeted mirror wrote (or found) the edit, the Kyma's full reconcile (status, every other module) runs
   * this long after, not at once: a burst of edits of one SKR costs one full reconcile per window instead of one per
   * edit, which on a busy agent competed for CPU with the mirrors themselves. Other outcomes reconcile at once.
   */
  fullReconcileAfterMirrorMs: 1_000,
} as const;

/**
 * A callback one agent replica accepted for a Kyma another replica owns, as it forwards it to the owner over the
 * replicas' mutual-TLS peer endpoint (decision 012). The SKR's identity was verified by the accepting replica.
 */
export const forwardedEventSchema = z.object({
  runtimeId: z.string().check(z.minLength(1), z.maxLength(253)),
  kyma: z.object({
    namespace: z.string().check(z.regex(NAMESPACE, 'must be a namespace')),
    name: z.string().check(z.regex(NAME, 'must be a Kubernetes object name')),
  }),
  component: z.string().check(z.regex(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, 'must be a manager name')),
  contract: z.enum(['v1', 'v2']),
  watched: z.object({
    namespace: z.union([z.string().check(z.regex(NAMESPACE, 'must be a namespace or empty')), z.literal('')]),
    name: z.string().check(z.regex(NAME, 'must be a Kubernetes object name')),
  }),
  gvk: gvk,
  fingerprint: z.optional(z.object(changeFingerprint)),
  /** When the accepting replica accepted it (ISO 8601). */
  receivedAt: z.iso.datetime(),
});

export type ForwardedEvent = z.infer<typeof forwardedEventSchema>;

export function parseForwardedEvent(body: unknown): ParseResult<ForwardedEvent> {
  const result = forwardedEventSchema.safeParse(body);
  return result.success
    ? { ok: true, value: result.data }
    : { ok: false, error: describeIssues(result.error) };
}
