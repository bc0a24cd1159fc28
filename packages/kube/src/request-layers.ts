// The layers a cluster client's request passes through, each an HttpLibrary around the next: the undici sender with
// its bounded body read, request counting, 429 retries and the per-request time bound.
import {
  Observable,
  ResponseContext,
  type HttpLibrary,
  type RequestContext,
  type ResponseBody,
} from '@kubernetes/client-node';
import { LIMITS } from '@skr-watcher/api';
import { getGlobalDispatcher, type Dispatcher } from 'undici';
import type { ClusterKind, KubeRequestMetrics } from './request-metrics.js';

/**
 * Aborts a request (and the reading of its answer) after `ms`. A timer cleared when the request is done, not
 * AbortSignal.timeout: that one fires anyway, long after the answer came, and its DOMException and abort event
 * were a visible share of the agent's CPU (decision 016).
 */
export function timeBound(inner: HttpLibrary, ms: number): HttpLibrary {
  async function send(request: RequestContext): Promise<ResponseContext> {
    const what = `${request.getHttpMethod()} ${new URL(request.getUrl()).pathname}`;
    const controller = new AbortController();
    const timer = setTimeout(
      () => controller.abort(new DOMException(`${what}: no answer within ${ms} ms`, 'TimeoutError')),
      ms,
    );
    const outer = request.getSignal();
    request.setSignal(outer ? AbortSignal.any([outer, controller.signal]) : controller.signal);
    try {
      return await inner.send(request).toPromise();
    } finally {
      clearTimeout(timer);
    }
  }
  return { send: (request) => new Observable(send(request)) };
}

/**
 * Counts every request sent on the wire (below the retries, so each retry counts: it costs the API server) and the
 * bytes of its answer, which the library below has read whole.
 */
export function counted(inner: HttpLibrary, kind: ClusterKind, counters: KubeRequestMetrics): HttpLibrary {
  async function send(request: RequestContext): Promise<ResponseContext> {
    const method = request.getHttpMethod();
    const url = request.getUrl();
    const contentType = request.getHeaders()['Content-Type'];
    counters.request(kind, method, url, contentType);
    let response: ResponseContext;
    try {
      response = await inner.send(request).toPromise();
    } catch (error) {
      counters.outcome?.(kind, method, url, contentType, 'error');
      throw error;
    }
    counters.outcome?.(kind, method, url, contentType, response.httpStatusCode);
    if (counters.responseBody) {
      counters.responseBody(kind, method, url, contentType, (await response.body.binary()).length);
    }
    return response;
  }
  return { send: (request) => new Observable(send(request)) };
}

const TOO_MANY_REQUESTS_ATTEMPTS = 5;
const RETRY_AFTER_CAP_MS = 2_000;

/**
 * Retries 429 answers after their Retry-After (capped), as client-go does: API servers send them while a
 * fresh CRD's storage initialises and under priority-and-fairness throttling. The request's abort signal
 * still bounds the whole.
 */
export function retryingTooManyRequests(inner: HttpLibrary): HttpLibrary {
  async function send(request: RequestContext): Promise<ResponseContext> {
    for (let attempt = 1; ; attempt++) {
      const response = await inner.send(request).toPromise();
      if (response.httpStatusCode !== 429 || attempt >= TOO_MANY_REQUESTS_ATTEMPTS) return response;
      await response.body.text().catch(() => undefined); // release the connection
      const seconds = Number(response.headers['retry-after']);
      const delay = Math.min(
        Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : 250 * attempt,
        RETRY_AFTER_CAP_MS,
      );
      await new Promise((resolve) => setTimeout(resolve, delay));
      request.getSignal()?.throwIfAborted();
    }
  }
  return { send: (request) => new Observable(send(request)) };
}

/** A response body above the client's bound: the rest was not read and the connection was dropped. */
export class ResponseTooLargeError extends Error {
  readonly limitBytes: number;

  constructor(request: string, limitBytes: number, declaredBytes?: number) {
    super(
      `${request}: response body ${declaredBytes !== undefined ? `of ${declaredBytes} bytes ` : ''}exceeds the ` +
        `limit of ${limitBytes} bytes; not read`,
    );
    this.name = 'ResponseTooLargeError';
    this.limitBytes = limitBytes;
  }
}

export function isResponseTooLarge(error: unknown): boolean {
  for (let current = error, depth = 0; current instanceof Error && depth < 8; depth++) {
    if (current instanceof ResponseTooLargeError) return true;
    current = current.cause;
  }
  return false;
}

/**
 * Sends requests with undici's `Dispatcher.request` instead of client-node's `fetch`: fetch's WHATWG layers (web
 * streams, Headers, Response, a DOMException per abort) cost more agent CPU per request than the request itself
 * (decision 016). The body is read at once, so the connection is free for the next request as soon as the answer
 * is in, and through a counter that stops at `maxBytes` (client-node would buffer any size): a larger body is
 * dropped, which closes its connection, and the call fails. Error answers get at most LIMITS.apiErrorBodyBytes.
 * `onAnswer` is called as each answer's head arrives, before its body is read.
 */
export function dispatchingHttpLibrary(maxBytes: number | undefined, onAnswer?: () => void): HttpLibrary {
  async function send(request: RequestContext): Promise<ResponseContext> {
    const url = new URL(request.getUrl());
    const body = request.getBody();
    if (body !== undefined && typeof body !== 'string')
      throw new Error(`${request.getHttpMethod()} ${url.pathname}: only JSON or YAML text bodies are sent`);
    const dispatcher = (request.getDispatcher() as Dispatcher | undefined) ?? getGlobalDispatcher();
    const signal = request.getSignal();
    const answer = await untilAborted(
      signal,
      dispatcher.request({
        origin: url.origin,
        path: `${url.pathname}${url.search}`,
        method: request.getHttpMethod() as Dispatcher.HttpMethod,
        headers: request.getHeaders(),
        body: body ?? null,
        ...(signal ? { signal } : {}),
      }),
    );
    onAnswer?.();
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(answer.headers)) {
      if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : value;
    }
    const limit =
      answer.statusCode >= 400
        ? Math.min(maxBytes ?? Infinity, LIMITS.apiErrorBodyBytes)
        : (maxBytes ?? Infinity);
    const bytes = await readBounded(
      answer.body,
      limit,
      `${request.getHttpMethod()} ${url.pathname}`,
      headers,
    );
    const responseBody: ResponseBody = {
      binary: async () => bytes,
      text: async () => bytes.toString('utf8'),
      stream: () => null,
    };
    return new ResponseContext(answer.statusCode, headers, responseBody);
  }
  return { send: (request) => new Observable(send(request)) };
}

/**
 * `request`, or the signal's reason as soon as it fires: undici applies an abort only once the request has a
 * connection, and a server that accepts but never finishes the handshake would hold the caller for undici's 10 s
 * connect timeout (fetch gave up at once, and so does this).
 */
function untilAborted<T>(signal: AbortSignal | undefined, request: Promise<T>): Promise<T> {
  if (!signal) return request;
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason as Error);
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
    request.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error as Error);
      },
    );
  });
}

async function readBounded(
  body: Dispatcher.ResponseData['body'],
  limit: number,
  what: string,
  headers: Record<string, string>,
): Promise<Buffer> {
  const declared = Number(headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) {
    body.destroy();
    throw new ResponseTooLargeError(what, limit, declared);
  }
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    total += chunk.byteLength;
    if (total > limit) {
      body.destroy();
      throw new ResponseTooLargeError(what, limit);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, total);
}

/** Runs every request inside `around` (e.g. to tell a scheduler that the request's wait is not its caller's own). */
export function wrappedIn(
  inner: HttpLibrary,
  around: (send: () => Promise<ResponseContext>) => Promise<ResponseContext>,
): HttpLibrary {
  return { send: (request) => new Observable(around(() => inner.send(request).toPromise())) };
}

/**
 * Remembers every error a client's requests end in, so a caller several steps up can tell which cluster failed:
 * a socket error names no host, and a pass that talks to the KCP and an SKR must not blame one for the other.
 */
export function failureRecording(inner: HttpLibrary): {
  library: HttpLibrary;
  failed(error: unknown): boolean;
} {
  const failures = new WeakSet<object>();
  const library = wrappedIn(inner, async (send) => {
    try {
      return await send();
    } catch (error) {
      if (typeof error === 'object' && error !== null) failures.add(error);
      throw error;
    }
  });
  function failed(error: unknown): boolean {
    for (
      let current = error, depth = 0;
      typeof current === 'object' && current !== null && depth < 8;
      depth++
    ) {
      if (failures.has(current)) return true;
      current = current instanceof Error ? current.cause : undefined;
    }
    return false;
  }
  return { library, failed };
}
