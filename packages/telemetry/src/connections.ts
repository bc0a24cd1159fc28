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
  /** A TLS connection sent nothing within the idle bound and was destroyed before any TLS state was made. */
  silentClosed?(socket: Socket): void;
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
  if ('setSecureContext' in server) startTlsOnFirstBytes(server, limits.idleTimeoutMs, events);
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

/**
 * A TLS server makes OpenSSL state for every connection it accepts, before a byte has arrived. 9,900 connections
 * that never sent a ClientHello took ~16 kB each of the main malloc arena while held, and when they closed at once
 * each one's end-of-stream went through OpenSSL too: the arena grew past 1 GB and glibc kept it (1.1 GB held,
 * 8 MB in use, returned only by malloc_trim; decision 022). So a connection goes to TLS only once its first bytes
 * arrive; until then it is a bare socket, destroyed after `idleTimeoutMs` of silence.
 */
function startTlsOnFirstBytes(server: HttpsServer, idleTimeoutMs: number, events: ConnectionEvents): void {
  // tls.Server's own 'connection' listener, which wraps the socket in a TLSSocket.
  const tlsListeners = (server.listeners('connection') as ((socket: Socket) => void)[]).filter(
    (listener) => listener.name === 'tlsConnectionListener',
  );
  const [startTls] = tlsListeners;
  if (tlsListeners.length !== 1 || !startTls) {
    throw new Error("limitConnections: this Node's TLS server has no single tlsConnectionListener to defer");
  }
  server.removeListener('connection', startTls);
  server.prependListener('connection', (socket: Socket) => {
    const ignoreError = (): void => undefined;
    const silent = (): void => {
      socket.destroy();
      events.silentClosed?.(socket);
    };
    socket.on('error', ignoreError);
    socket.setTimeout(idleTimeoutMs, silent);
    socket.once('data', (first: Buffer) => {
      socket.setTimeout(0);
      socket.off('timeout', silent);
      socket.off('error', ignoreError);
      // Node's TLSSocket feeds bytes already read from the socket to OpenSSL before reading on.
      socket.pause();
      socket.unshift(first);
      startTls.call(server, socket);
    });
  });
}
