// The listener's HTTP(S) server before any request is handled: TLS that asks for a client certificate (refused in
// HTTP, not in the handshake), timeouts for tiny callbacks, bounded connections counted in metrics, the JSON answer
// to malformed HTTP, and listening on its port.
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import { TLS_SERVER_CIPHERS } from '@skr-watcher/api';
import {
  answerAndClose,
  limitConnections,
  tlsConnectionOptions,
  type ConnectionLimits,
  type Logger,
} from '@skr-watcher/telemetry';
import { malformedRequestAnswer } from './answers.js';
import type { ListenerMode } from './contract.js';
import type { ListenerMetrics } from './metrics.js';
import { checkTlsMaterial, type CheckedTls } from './tls-material.js';

export type CallbackServer = ReturnType<typeof createHttpServer> | ReturnType<typeof createHttpsServer>;

export interface CallbackServerOptions {
  mode: ListenerMode;
  limits: ConnectionLimits;
  metrics: ListenerMetrics;
  logger: Logger;
  onRequest: (request: IncomingMessage, response: ServerResponse) => void;
  /** A TLS connection finished its handshake (direct mode). */
  onSecureConnection?: (socket: TLSSocket) => void;
}

/** The TLS settings of new connections, for the server and for `setSecureContext` after a rotation. */
export function secureContextOf(checked: CheckedTls) {
  return { ...checked, minVersion: 'TLSv1.2' as const, ciphers: TLS_SERVER_CIPHERS };
}

export function createCallbackServer(options: CallbackServerOptions): CallbackServer {
  const { mode, limits, metrics, logger, onRequest } = options;
  const server =
    mode.kind === 'direct'
      ? createHttpsServer(
          {
            ...secureContextOf(checkTlsMaterial(mode)),
            ...tlsConnectionOptions(limits),
            requestCert: true,
            // Verified by OpenSSL against the bundle, but refused in HTTP (401 with a reason) rather than
            // with a handshake alert, so an SKR operator can see why (docs/decisions/005).
            rejectUnauthorized: false,
          },
          onRequest,
        )
      : // Room for the gateway's XFCC header, which may carry the URL-encoded certificate (and chain).
        createHttpServer({ maxHeaderSize: 64 * 1024 }, onRequest);
  // Callbacks are tiny: a slow client has no reason to hold a request open for long.
  server.headersTimeout = 10_000;
  server.requestTimeout = 15_000;
  // Webhooks keep connections alive between bursts; idle ones are closed after this.
  server.keepAliveTimeout = 60_000;

  server.on('connection', (socket: Socket) => {
    metrics.connections.inc();
    socket.once('close', () => metrics.connections.dec());
  });
  if (options.onSecureConnection) server.on('secureConnection', options.onSecureConnection);
  limitConnections(server, limits, {
    refused: () => metrics.connectionsRefused.inc(),
    handshakeFailed: (error, socket) =>
      logger.debug({ err: error, peer: socket.remoteAddress }, 'TLS handshake failed'),
  });
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Socket) => {
    // Malformed HTTP never reaches the handler; answer like Node would, but in JSON, and close.
    const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    if (error.code === 'ECONNRESET' || inFlight?.headersSent) {
      socket.destroy();
      return;
    }
    const malformed = malformedRequestAnswer(error.code);
    metrics.requests.inc({ code: String(malformed.code) });
    answerAndClose(socket, malformed.raw);
  });
  return server;
}

/** Listens on `port` (0: any free one) and resolves to the port bound; later server errors are logged. */
export async function listenOn(
  server: CallbackServer,
  port: number,
  host: string | undefined,
  logger: Logger,
): Promise<number> {
  await new Promise<void>((resolve, reject) => {
    const onError = (error: Error): void =>
      reject(new Error(`listener cannot listen on ${host ?? '*'}:${port}`, { cause: error }));
    server.once('error', onError);
    server.listen({ port, ...(host ? { host } : {}) }, () => {
      server.off('error', onError);
      resolve();
    });
  });
  server.on('error', (error) => logger.error({ err: error }, 'listener server error'));
  return (server.address() as AddressInfo).port;
}
