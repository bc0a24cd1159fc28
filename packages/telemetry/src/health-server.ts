// Plain-HTTP server for /metrics, /healthz, /livez and /readyz only; nothing else is reachable on it.
import { createServer, type Server } from 'node:http';
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
  app.get(PROBE_PATHS.metrics, async (_request, response) => {
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

  const server: Server = createServer(app);
  server.keepAliveTimeout = 5000;
  const port = await listenOn(server, options.host ?? '0.0.0.0', options.port, 'metrics server');
  return { port, close: () => closeGracefully(server, CLOSE_GRACE_MS) };
}
