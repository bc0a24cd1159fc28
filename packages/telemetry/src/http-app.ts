// The routing every HTTP server of the project shares (decision 011): exact paths, GET and HEAD only, 405 with
// `Allow` for a path served with another method, 404 for the rest, no framework banner. It sits directly on
// node:http: the servers it carries answer a handful of fixed paths, and a framework's parsers, content negotiation
// and mime tables would be loaded into every process for none of them (decision 031).
import type { IncomingHttpHeaders, IncomingMessage, RequestListener, ServerResponse } from 'node:http';
import type { Server as HttpServer } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';

export interface RouteRequest {
  readonly raw: IncomingMessage;
  readonly method: string;
  /** The path as sent, without its query; not decoded, so `/a%2Fb` is one segment and never `/a/b`. */
  readonly path: string;
  readonly query: URLSearchParams;
  /** The `:name` segments of the route, percent-decoded. */
  readonly params: Readonly<Record<string, string>>;
  readonly headers: IncomingHttpHeaders;
}

export type RouteHandler = (request: RouteRequest, response: ServerResponse) => void | Promise<void>;

export interface HttpAppOptions {
  /** Methods the paths answer: GET, and HEAD unless left out here (what a 405 names in `Allow`). */
  methods?: readonly ('GET' | 'HEAD')[];
  /** Headers every answer carries, set before a route runs. */
  headers?: Readonly<Record<string, string>>;
  /** The text of a 500 for a handler that throws, after the headers went out the connection is cut instead. */
  failure?: (error: unknown) => string;
}

export interface HttpApp {
  /** Serves `handler` on each of `paths` (exact; a segment `:name` matches any one segment). */
  get(paths: string | readonly string[], handler: RouteHandler): HttpApp;
  readonly listener: RequestListener;
}

interface Route {
  segments: string[];
  handler: RouteHandler;
}

const TEXT = 'text/plain; charset=utf-8';

/** Answers with `body` and ends the response. */
export function reply(
  response: ServerResponse,
  status: number,
  body: string,
  type = TEXT,
  headers: Readonly<Record<string, string>> = {},
): void {
  response.statusCode = status;
  for (const [name, value] of Object.entries(headers)) response.setHeader(name, value);
  response.setHeader('content-type', type);
  response.setHeader('content-length', Buffer.byteLength(body));
  response.end(body);
}

export function replyJson(response: ServerResponse, status: number, value: unknown): void {
  reply(response, status, JSON.stringify(value), 'application/json; charset=utf-8');
}

/** 404 for every path no route takes. */
export function notFound(request: Pick<RouteRequest, 'path'>, response: ServerResponse): void {
  reply(response, 404, `not found: ${request.path.slice(0, 200)}\n`);
}

/** The params of `segments` against the route's, or undefined when they do not match (or do not decode). */
function match(route: Route, segments: string[]): Record<string, string> | undefined {
  if (route.segments.length !== segments.length) return undefined;
  const params: Record<string, string> = {};
  for (const [at, expected] of route.segments.entries()) {
    const actual = segments[at] as string;
    if (expected.startsWith(':')) {
      if (actual === '') return undefined;
      try {
        params[expected.slice(1)] = decodeURIComponent(actual);
      } catch {
        return undefined;
      }
    } else if (expected !== actual) return undefined;
  }
  return params;
}

export function createHttpApp(options: HttpAppOptions = {}): HttpApp {
  const methods = options.methods ?? ['GET', 'HEAD'];
  const allow = methods.join(', ');
  const routes: Route[] = [];
  const fail = (response: ServerResponse, error: unknown) => {
    if (response.headersSent) {
      response.destroy();
      return;
    }
    const text =
      options.failure?.(error) ?? `internal error: ${error instanceof Error ? error.message : String(error)}`;
    reply(response, 500, `${text}\n`);
  };
  const listener: RequestListener = (raw, response) => {
    const url = raw.url ?? '/';
    const queryAt = url.indexOf('?');
    const path = queryAt === -1 ? url : url.slice(0, queryAt);
    const query = new URLSearchParams(queryAt === -1 ? '' : url.slice(queryAt + 1));
    const segments = path.split('/');
    for (const [name, value] of Object.entries(options.headers ?? {})) response.setHeader(name, value);
    let params: Record<string, string> | undefined;
    const route = routes.find((candidate) => (params = match(candidate, segments)) !== undefined);
    if (!route || !params) {
      notFound({ path }, response);
      return;
    }
    const method = raw.method ?? 'GET';
    if (!(methods as readonly string[]).includes(method)) {
      reply(response, 405, `method ${method} is not allowed on ${path}; use ${allow}\n`, TEXT, { allow });
      return;
    }
    const request: RouteRequest = { raw, method, path, query, params, headers: raw.headers };
    try {
      const done = route.handler(request, response);
      if (done) done.catch((error: unknown) => fail(response, error));
    } catch (error) {
      fail(response, error);
    }
  };
  const app: HttpApp = {
    get(paths, handler) {
      for (const path of typeof paths === 'string' ? [paths] : paths)
        routes.push({ segments: path.split('/'), handler });
      return app;
    },
    listener,
  };
  return app;
}

/**
 * Listens, or rejects with the address that could not be had. `host` undefined = every interface. Resolves
 * with the port (asked as 0 = any free one).
 */
export function listenOn(
  server: HttpServer | HttpsServer,
  host: string | undefined,
  port: number,
  what: string,
): Promise<number> {
  return new Promise<number>((resolve, reject) => {
    const onError = (cause: Error): void =>
      reject(new Error(`${what} cannot listen on ${host ?? '*'}:${port}`, { cause }));
    server.once('error', onError);
    server.listen({ port, ...(host === undefined ? {} : { host }) }, () => {
      server.off('error', onError);
      resolve((server.address() as AddressInfo).port);
    });
  });
}
