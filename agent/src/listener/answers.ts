// What the listener answers: a JSON `{code, reason, message}` body for every status, the raw answer to malformed
// HTTP, and the 503 for a callback that did not reach its Kyma's owner (with when to send it again).
import { LISTENER_STATUS } from '@skr-watcher/api';

/** Reasons in the style of Kubernetes `Status.reason`, so answers read familiar to operators. */
export const REASONS: Record<number, string> = {
  200: 'Accepted',
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  405: 'MethodNotAllowed',
  408: 'Timeout',
  413: 'RequestEntityTooLarge',
  415: 'UnsupportedMediaType',
  429: 'TooManyRequests',
  431: 'RequestHeaderFieldsTooLarge',
  500: 'InternalError',
  503: 'ServiceUnavailable',
};

/** One answer to a callback. */
export interface Answer {
  code: number;
  message: string;
  /** Close the connection after answering (unauthenticated peer, stale TLS trust, shutdown). */
  close?: boolean;
  /** Extra response headers, e.g. `Allow` on 405. */
  headers?: Record<string, string>;
}

/** Made once: the accepted path is hot (thousands per second). */
const ACCEPTED_BODY = JSON.stringify({
  code: LISTENER_STATUS.accepted,
  reason: REASONS[200],
  message: 'event accepted; the Kyma is queued for reconciliation',
});

/** The JSON body of an answer. */
export function answerBody(answer: Pick<Answer, 'code' | 'message'>): string {
  const { code } = answer;
  return code === LISTENER_STATUS.accepted
    ? ACCEPTED_BODY
    : JSON.stringify({ code, reason: REASONS[code] ?? 'Error', message: answer.message });
}

/**
 * The whole HTTP answer to a request Node could not parse (it never reaches the handler): as Node would answer, but
 * in JSON, and closing the connection. `errorCode` is Node's (`HPE_HEADER_OVERFLOW`, `ERR_HTTP_REQUEST_TIMEOUT`, …).
 */
export function malformedRequestAnswer(errorCode: string | undefined): { code: number; raw: string } {
  const code =
    errorCode === 'HPE_HEADER_OVERFLOW' ? 431 : errorCode === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
  const body = JSON.stringify({
    code,
    reason: REASONS[code],
    message: `malformed HTTP request (${errorCode ?? 'unknown'})`,
  });
  return {
    code,
    raw: `HTTP/1.1 ${code} ${REASONS[code]}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
  };
}

/**
 * What an `enqueue` rejects with when it knows when the event is worth sending again (sharding: the Kyma's owner
 * cannot be reached and its Lease runs for that long yet); any other rejection is answered Retry-After: 1.
 */
export class NotTakenYetError extends Error {
  constructor(
    message: string,
    readonly retryAfterSeconds: number,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'NotTakenYetError';
  }
}

/**
 * The 503 for a callback whose `enqueue` rejected: answered 2xx only once the Kyma's owner has the event, so the
 * webhook sends it again, after the whole seconds a NotTakenYetError says (at least 1), else after 1.
 */
export function undeliveredAnswer(error: unknown): Answer {
  return {
    code: LISTENER_STATUS.unavailable,
    message: `the event did not reach the replica that owns the Kyma: ${error instanceof Error ? error.message : String(error)}; send it again`,
    headers: {
      'retry-after': String(
        error instanceof NotTakenYetError ? Math.max(1, Math.ceil(error.retryAfterSeconds)) : 1,
      ),
    },
  };
}
