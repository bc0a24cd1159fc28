// Server for /metrics, /healthz, /livez and /readyz only; nothing else is reachable on it. Plain HTTP, or HTTPS
// with /metrics behind a bearer-token check (TokenReview + SubjectAccessReview, decision 023); probes stay open.
import { createServer, type Server, type ServerResponse } from 'node:http';
import { createServer as createTlsServer } from 'node:https';
import type { Registry } from 'prom-client';
import { closeGracefully } from './connections.js';
import { createHttpApp, listenOn, reply, type RouteRequest } from './http-app.js';

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
  // A rejected scrape (a failing metric collector) is a 500 with its reason.
  const app = createHttpApp({
    failure: (error) => `metrics failed: ${error instanceof Error ? error.message : String(error)}`,
  });
  const probe =
    (check: (() => boolean) | undefined) =>
    (_request: RouteRequest, response: ServerResponse): void => {
      const ok = check?.() ?? true;
      reply(response, ok ? 200 : 503, ok ? 'ok\n' : 'not ready\n');
    };
  // GET routes answer HEAD too; Node sends no body to a HEAD.
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
        reply(response, status, text, undefined, status === 401 ? { 'WWW-Authenticate': 'Bearer' } : {});
        return;
      }
    }
    const text = await options.registry.metrics();
    reply(response, 200, text, options.registry.contentType);
  });

  const server: Server = options.secure
    ? createTlsServer({ cert: options.secure.certPem, key: options.secure.keyPem }, app.listener)
    : createServer(app.listener);
  server.keepAliveTimeout = 5000;
  const port = await listenOn(server, options.host ?? '0.0.0.0', options.port, 'metrics server');
  return { port, close: () => closeGracefully(server, CLOSE_GRACE_MS) };
}
