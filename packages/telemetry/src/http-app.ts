// The express setup every HTTP server of the project shares (decision 011): exact routes, no framework
// banner, 405 with `Allow`, and listen errors with the address in them.
import type { Server as HttpServer } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import express, { type Express, type RequestHandler } from 'express';

/**
 * An express app whose routes match exactly: `/metrics/` and `/METRICS` are not `/metrics`, so a path
 * means one thing to us, to a proxy in front and to a test. No `X-Powered-By` banner for scanners, no
 * ETag work on answers nobody caches.
 */
export function createHttpApp(): Express {
  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');
  app.set('case sensitive routing', true);
  app.set('strict routing', true);
  return app;
}

/** Answers a method a path does not serve: 405 with the `Allow` header RFC 9110 asks for, and a reason. */
export function refuseMethod(allowed: readonly string[]): RequestHandler {
  const allow = allowed.join(', ');
  return (request, response) => {
    response
      .status(405)
      .set('allow', allow)
      .type('text/plain')
      .send(`method ${request.method} is not allowed on ${request.path}; use ${allow}\n`);
  };
}

/** 404 for every path no route took; last in the chain. */
export const notFound: RequestHandler = (request, response) => {
  response
    .status(404)
    .type('text/plain')
    .send(`not found: ${request.path.slice(0, 200)}\n`);
};

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
