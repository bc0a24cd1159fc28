// One callback request, checked in the order the listener answers it: path, method and media type before anything
// is read; the runtime-id before the body; then the body as UTF-8 JSON of its contract version, and a v1 owner
// that must name the caller's own Kyma. Each refusal comes with the answer it gets.
import type { IncomingHttpHeaders } from 'node:http';
import {
  LABELS,
  LIMITS,
  LISTENER_STATUS,
  parseEventPath,
  parseWatchEvent,
  type WatchEventV1,
  type WatchEventV2,
} from '@skr-watcher/api';
import type { Answer } from './answers.js';
import { isIdentityEncoding, isJsonMediaType } from './body.js';
import { fingerprintOf, type AcceptedEvent } from './contract.js';

/** After an early answer we read and drop at most this much of a body before cutting the connection. */
export const DISCARD_CAP_BYTES = 1024 * 1024;
/** Kubernetes label values: the runtime-id must be one to be found on a Kyma. */
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])$/;

export type EventTarget = NonNullable<ReturnType<typeof parseEventPath>>;
type Checked<T> = { ok: true; value: T } | { ok: false; answer: Answer };

function pathOf(url: string | undefined): string {
  if (url === undefined) return '';
  const query = url.indexOf('?');
  return query === -1 ? url : url.slice(0, query);
}

export function kymaKeyOf(kyma: { namespace: string; name: string }): string {
  return `${kyma.namespace}/${kyma.name}`;
}

/** What can be refused before the body is read: path (the event's contract and component), method, media type, size. */
export function checkRequestHead(request: {
  url?: string | undefined;
  method?: string | undefined;
  headers: IncomingHttpHeaders;
}): Checked<EventTarget> {
  const target = parseEventPath(pathOf(request.url));
  if (!target) {
    return refuse(LISTENER_STATUS.notFound, 'unknown path; callbacks go to /v2/<component>/event');
  }
  if (request.method !== 'POST') {
    return {
      ok: false,
      answer: {
        code: LISTENER_STATUS.methodNotAllowed,
        message: `method ${request.method ?? '(none)'} is not allowed; use POST`,
        headers: { allow: 'POST' },
      },
    };
  }
  const { headers } = request;
  if (!isJsonMediaType(headers['content-type'])) {
    return refuse(
      LISTENER_STATUS.unsupportedMediaType,
      `content-type must be application/json, got ${JSON.stringify(headers['content-type'] ?? '')}`,
    );
  }
  if (!isIdentityEncoding(headers['content-encoding'])) {
    return refuse(LISTENER_STATUS.unsupportedMediaType, 'content-encoding is not supported; send identity');
  }
  const declaredLength = Number(headers['content-length'] ?? 0);
  if (declaredLength > LIMITS.eventBodyBytes) {
    return {
      ok: false,
      answer: {
        code: LISTENER_STATUS.payloadTooLarge,
        message: `body of ${declaredLength} bytes is over the limit of ${LIMITS.eventBodyBytes}`,
        // Not worth reading a body this large just to keep the connection.
        close: declaredLength > DISCARD_CAP_BYTES,
      },
    };
  }
  return { ok: true, value: target };
}

/** The 403 for a runtime-id that is no label value, so no Kyma can carry it; undefined when it is one. */
export function runtimeIdRefusal(runtimeId: string): Answer | undefined {
  if (LABEL_VALUE.test(runtimeId)) return undefined;
  return {
    code: LISTENER_STATUS.forbidden,
    message: `runtime-id ${JSON.stringify(runtimeId.slice(0, 80))} is not a valid label value, so no Kyma can carry it`,
  };
}

/** The 403 for a runtime-id no Kyma is labelled with. */
export function noKymaAnswer(runtimeId: string): Answer {
  return { code: LISTENER_STATUS.forbidden, message: `no Kyma is labelled ${LABELS.runtimeId}=${runtimeId}` };
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** The body as an event of the target's contract version. */
export function decodeEvent(target: EventTarget, body: Uint8Array): Checked<WatchEventV1 | WatchEventV2> {
  let json: unknown;
  try {
    json = JSON.parse(utf8.decode(body));
  } catch (error) {
    return refuse(
      LISTENER_STATUS.badRequest,
      `body is not UTF-8 JSON: ${error instanceof Error ? error.message : String(error)}`,
    );
  }
  const event = parseWatchEvent(target.version, json);
  if (!event.ok) return refuse(LISTENER_STATUS.badRequest, `invalid ${target.version} event: ${event.error}`);
  return { ok: true, value: event.value };
}

/** `namespace/name` of a v1 event's owner when it is not the caller's Kyma; undefined otherwise (and for v2). */
export function foreignOwnerOf(
  target: EventTarget,
  event: WatchEventV1 | WatchEventV2,
  kyma: { namespace: string; name: string },
): string | undefined {
  if (target.version !== 'v1') return undefined;
  const { owner } = event as WatchEventV1;
  return owner.Namespace !== kyma.namespace || owner.Name !== kyma.name
    ? `${owner.Namespace}/${owner.Name}`
    : undefined;
}

/** The accepted callback as the rest of the agent sees it. */
export function acceptedEventOf(
  runtimeId: string,
  kyma: { namespace: string; name: string },
  target: EventTarget,
  event: WatchEventV1 | WatchEventV2,
  receivedAt: Date,
): AcceptedEvent {
  const { watched, watchedGvk } = event;
  return {
    runtimeId,
    kyma: { namespace: kyma.namespace, name: kyma.name },
    component: target.component,
    contract: target.version,
    watched: { namespace: watched.Namespace, name: watched.Name },
    gvk: { group: watchedGvk.group, version: watchedGvk.version, kind: watchedGvk.kind },
    fingerprint: fingerprintOf(event),
    receivedAt,
  };
}

function refuse(code: number, message: string): { ok: false; answer: Answer } {
  return { ok: false, answer: { code, message } };
}
