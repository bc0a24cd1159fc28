// What every server of the project does with its connections: a cap on how many are open, a bound on
// silent connections and unfinished TLS handshakes, answers that close malformed connections, and a
// graceful close. One home, so the listener, the webhook and the metrics server cannot drift apart.
import type { Server as HttpServer } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import type { Socket } from 'node:net';
import type { Duplex } from 'node:stream';
import type { TLSSocket } from 'node:tls';

export interface ConnectionLimits {
  /** Open connections at most; the kernel accepts more, Node closes them at once. */
  maxConnections: number;
  /** A TLS handshake not finished, or a request that stays silent, this long is cut. */
  idleTimeoutMs: number;
}

export interface ConnectionEvents {
  /** A connection over `maxConnections` was closed on accept. */
  refused?(): void;
  /** A TLS handshake failed or timed out; its socket is already destroyed. */
  handshakeFailed?(error: Error, socket: TLSSocket): void;
}

/** Options for `https.createServer`: the handshake bound can only be given at creation. */
export function tlsConnectionOptions(limits: ConnectionLimits): { handshakeTimeout: number } {
  return { handshakeTimeout: limits.idleTimeoutMs };
}

/**
 * Applies the cap and the idle bound to a server (after creation, before listen). For TLS servers the
 * handshake bound comes from `tlsConnectionOptions` at creation; here every socket whose handshake fails
 * or times out is destroyed: once a server listens for `tlsClientError`, Node leaves that to the
 * listener, and a socket left alone stays open (then in CLOSE-WAIT) with its descriptor for good.
 */
export function limitConnections(
  server: HttpServer | HttpsServer,
  limits: ConnectionLimits,
  events: ConnectionEvents = {},
): void {
  server.maxConnections = limits.maxConnections;
  server.on('drop', () => events.refused?.());
  // Between requests `keepAliveTimeout` rules; during a request, silence this long ends the connection.
  server.timeout = limits.idleTimeoutMs;
  server.on('tlsClientError', (error: Error, socket: TLSSocket) => {
    socket.destroy();
    events.handshakeFailed?.(error, socket);
  });
}

/**
 * Answers a connection whose HTTP could not be parsed with `response` (a complete HTTP/1.1 message) and
 * closes it once the answer is written. HTTP servers are half-open: `end()` alone would wait for the
 * peer to close its side, which a hostile peer never does.
 */
export function answerAndClose(socket: Duplex, response: string): void {
  if (!socket.writable) {
    socket.destroy();
    return;
  }
  socket.end(response);
  (socket as Socket).destroySoon?.();
}

/**
 * Stops accepting, lets requests in flight finish for up to `graceMs`, then cuts every connection. Idle
 * kept-alive connections are closed at once, so a peer sends its next request to another replica.
 */
export function closeGracefully(server: HttpServer | HttpsServer, graceMs: number): Promise<void> {
  return new Promise<void>((resolve) => {
    const force = setTimeout(() => server.closeAllConnections(), graceMs);
    force.unref();
    server.close(() => {
      clearTimeout(force);
      resolve();
    });
    server.closeIdleConnections();
  });
}
