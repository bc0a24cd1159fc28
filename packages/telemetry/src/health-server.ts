// Plain-HTTP server for /metrics, /healthz and /readyz only; nothing else is reachable on it.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';

export interface HealthServerOptions {
  host?: string;
  port: number;
  registry: Registry;
  /** Liveness: the process can still do work. */
  healthy?: () => boolean;
  /** Readiness: the process should receive traffic now. */
  ready?: () => boolean;
  /** WebSocket upgrades (e.g. a live event stream); without it upgrades are refused. */
  onUpgrade?: (req: IncomingMessage, socket: Duplex, head: Buffer) => void;
}

export interface HealthServer {
  readonly port: number;
  close(): Promise<void>;
}

export async function startHealthServer(options: HealthServerOptions): Promise<HealthServer> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    const probe = (ok: boolean) => {
      res.writeHead(ok ? 200 : 503, { 'content-type': 'text/plain' });
      res.end(ok ? 'ok\n' : 'not ready\n');
    };
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain' });
      res.end('method not allowed\n');
      return;
    }
    switch (path) {
      case '/healthz':
      case '/livez':
        return probe(options.healthy?.() ?? true);
      case '/readyz':
        return probe(options.ready?.() ?? true);
      case '/metrics':
        options.registry.metrics().then(
          (text) => {
            res.writeHead(200, { 'content-type': options.registry.contentType });
            res.end(text);
          },
          (error: unknown) => {
            res.writeHead(500, { 'content-type': 'text/plain' });
            res.end(`metrics failed: ${String(error)}\n`);
          },
        );
        return;
      default:
        res.writeHead(404, { 'content-type': 'text/plain' });
        res.end('not found\n');
    }
  });
  server.keepAliveTimeout = 5000;
  server.on('upgrade', (req, socket, head) => {
    if (options.onUpgrade) return options.onUpgrade(req, socket, head);
    socket.end('HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\n');
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host ?? '0.0.0.0', () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeIdleConnections();
      }),
  };
}
