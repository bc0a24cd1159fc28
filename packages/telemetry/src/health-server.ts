// Server for /metrics, /healthz, /livez and /readyz only; nothing else is reachable on it. Plain HTTP, or HTTPS
// with /metrics behind a bearer-token check (TokenReview + SubjectAccessReview, decision 023); probes stay open.
import { createServer, type Server } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import type { NextFunction, Request, Response } from 'express';
import type { Registry } from 'prom-client';
import { closeGracefully } from './connections.js';
import { createHttpApp, listenOn, notFound, refuseMethod } from './http-app.js';

export interface HealthServerOptions {
  /** Interface to bind; probes and scrapes come from the kubelet and Prometheus, so all by default. */
  host?: string;
  port: number;
  registry: Registry;
  /** Liveness: the process can still do work. */
  healthy?: () => boolean;
  /** Readiness: the process should receive traffic now. */
  ready?: () => boolean;
  /**
   * Serve HTTPS with this certificate and key, and answer /metrics only to a bearer token `authorize` allows
   * (401 without or with an unknown token, 403 when its user may not GET /metrics, 503 when it cannot be decided).
   */
  secure?: {
    certPem: string;
    keyPem: string;
    authorize(token: string, path: string): Promise<'allowed' | 'unauthenticated' | 'forbidden'>;
  };
}

export interface HealthServer {
  readonly port: number;
  close(): Promise<void>;
}

const PROBE_PATHS = { healthz: '/healthz', livez: '/livez', readyz: '/readyz', metrics: '/metrics' };
/** Probes and scrapes are instant; a scrape in flight at shutdown gets this long to finish. */
const CLOSE_GRACE_MS = 1_000;

export async function startHealthServer(options: HealthServerOptions): Promise<HealthServer> {
  const app = createHttpApp();
  const probe =
    (check: (() => boolean) | undefined) =>
    (_request: unknown, response: Response): void => {
      const ok = check?.() ?? true;
      response
        .status(ok ? 200 : 503)
        .type('text/plain')
        .send(ok ? 'ok\n' : 'not ready\n');
    };
  // GET routes answer HEAD too (express runs the GET handler; Node drops the body).
  app.get([PROBE_PATHS.healthz, PROBE_PATHS.livez], probe(options.healthy));
  app.get(PROBE_PATHS.readyz, probe(options.ready));
  app.get(PROBE_PATHS.metrics, async (request, response) => {
    const secure = options.secure;
    if (secure) {
      const token = /^Bearer (\S+)$/i.exec(request.headers.authorization ?? '')?.[1];
      let access: 'allowed' | 'unauthenticated' | 'forbidden' | 'unknown' = 'unauthenticated';
      if (token) access = await secure.authorize(token, PROBE_PATHS.metrics).catch(() => 'unknown' as const);
      if (access !== 'allowed') {
        const [status, text] =
          access === 'forbidden'
            ? [403, 'forbidden: this user may not get /metrics\n']
            : access === 'unknown'
              ? [503, 'cannot check the token now\n']
              : [401, 'unauthorized: a bearer token is required\n'];
        if (status === 401) response.setHeader('WWW-Authenticate', 'Bearer');
        response.status(status).type('text/plain').send(text);
        return;
      }
    }
    const text = await options.registry.metrics();
    response.status(200).type(options.registry.contentType).send(text);
  });
  app.all(Object.values(PROBE_PATHS), refuseMethod(['GET', 'HEAD']));
  app.use(notFound);
  // Express 5 hands a rejected handler (a failing metric collector) here.
  app.use((error: unknown, _request: Request, response: Response, _next: NextFunction) => {
    if (response.headersSent) {
      response.destroy();
      return;
    }
    response
      .status(500)
      .type('text/plain')
      .send(`metrics failed: ${error instanceof Error ? error.message : String(error)}\n`);
  });

  const server: Server = options.secure
    ? createTlsServer({ cert: options.secure.certPem, key: options.secure.keyPem }, app)
    : createServer(app);
  server.keepAliveTimeout = 5000;
  const port = await listenOn(server, options.host ?? '0.0.0.0', options.port, 'metrics server');
  return { port, close: () => closeGracefully(server, CLOSE_GRACE_MS) };
}
