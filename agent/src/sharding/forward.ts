// Forwarding callbacks between agent replicas (decision 012). Any replica's listener may accept an SKR's
// callback; when another replica owns the Kyma, the accepting one posts the already-verified event to the
// owner's peer endpoint, in memory and over one kept-alive connection, instead of writing to the KCP.
// Both ends authenticate with the agent's own certificate (the listener's): the peer's certificate must chain to
// the CA bundle and carry the same subject CN as ours, so an SKR's client certificate (same CA) is refused.
//
// The listener needs nothing of this but an `enqueue` that calls `forward` for Kymas it does not own.
import { X509Certificate } from 'node:crypto';
import { createServer, type Server } from 'node:https';
import { Agent, request } from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { TLSSocket } from 'node:tls';
import { CONNECTION_LIMITS, SHARDING, TLS_SERVER_CIPHERS, parseForwardedEvent } from '@skr-watcher/api';
import {
  Counter,
  Histogram,
  closeGracefully,
  limitConnections,
  tlsConnectionOptions,
  type ConnectionLimits,
  type Logger,
  type Registry,
} from '@skr-watcher/telemetry';
import type { AcceptedEvent, TlsMaterial } from '../listener/index.js';

/** What the owner does with a forwarded event: take it, or say it does not own the Kyma (any more). */
export type Delivery = 'accepted' | 'not-owner';

export interface PeerServerOptions {
  host?: string;
  port: number;
  tls: TlsMaterial;
  /** May wait (briefly: within the forwarder's timeout) to claim a Kyma whose owner is gone. */
  deliver: (event: AcceptedEvent) => Delivery | Promise<Delivery>;
  logger?: Logger;
  registry?: Registry;
  /** Open connections at most (default `CONNECTION_LIMITS.peer`): only replicas call, a few each. */
  maxConnections?: number | undefined;
  /** A connection silent, or in its TLS handshake, this long is cut (default `CONNECTION_LIMITS.peer`). */
  idleTimeoutMs?: number | undefined;
}

export interface PeerServer {
  readonly port: number;
  updateTls(tls: TlsMaterial): void;
  close(): Promise<void>;
}

export interface Forwarder {
  /** Posts the event to the owner at `address` (host:port); rejects with the reason when it was not taken. */
  forward(address: string, event: AcceptedEvent): Promise<void>;
  updateTls(tls: TlsMaterial): void;
  close(): void;
}

/**
 * A forward that reached no process at the peer's address (refused, unreachable, or not connected within the timeout):
 * the owner may be dead, unlike a peer that answered, or took a connection and then did not answer in time.
 */
export class PeerUnreachableError extends Error {
  constructor(address: string, cause: unknown) {
    super(`peer ${address} could not be reached`, { cause });
    this.name = 'PeerUnreachableError';
  }
}

/** Connection errors that say no process took the connection at that address. */
const UNREACHABLE_CODES = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'EHOSTDOWN', 'ETIMEDOUT']);

/** The subject CN of a PEM certificate (the first one of a chain). */
export function commonNameOf(certPem: string): string {
  const subject = new X509Certificate(certPem).subject;
  const cn = subject.split('\n').find((line) => line.startsWith('CN='));
  if (!cn) throw new Error('the agent certificate has no subject CN; peers could not recognise each other');
  return cn.slice(3);
}

const answer = (response: ServerResponse, code: number, reason: string) => {
  response.writeHead(code, { 'content-type': 'application/json', connection: 'keep-alive' });
  response.end(JSON.stringify({ code, reason }));
};

/** Collects at most `limit` bytes; past it the rest is read and dropped (up to 1 MiB) so the 413 gets through. */
function readBody(request: IncomingMessage, limit: number): Promise<Buffer | 'too-large'> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    request.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit + 1024 * 1024) request.destroy();
      else if (size > limit) {
        chunks.length = 0;
        resolve('too-large');
      } else chunks.push(chunk);
    });
    request.on('end', () => resolve(size > limit ? 'too-large' : Buffer.concat(chunks, size)));
    request.on('error', reject);
  });
}

export async function startPeerServer(options: PeerServerOptions): Promise<PeerServer> {
  const logger = options.logger?.child({ subsystem: 'peer-server' });
  let identity = commonNameOf(options.tls.certPem);
  const received = options.registry
    ? new Counter({
        name: 'skr_agent_forwarded_received_total',
        help: 'Callbacks forwarded to this replica by peers, by answer code.',
        labelNames: ['code'],
        registers: [options.registry],
      })
    : undefined;
  const refused = options.registry
    ? new Counter({
        name: 'skr_agent_peer_connections_refused_total',
        help: 'Connections to the peer endpoint closed on accept because it held its maximum.',
        registers: [options.registry],
      })
    : undefined;
  const tlsOptions = (tls: TlsMaterial) => ({
    cert: tls.certPem,
    key: tls.keyPem,
    ca: tls.caBundlePem,
    requestCert: true,
    rejectUnauthorized: true,
    minVersion: 'TLSv1.2' as const,
    ciphers: TLS_SERVER_CIPHERS,
  });
  // The listener's bounds (packages/telemetry): a cap, and silent or half-done handshakes cut.
  const limits: ConnectionLimits = {
    maxConnections: options.maxConnections ?? CONNECTION_LIMITS.peer.maxConnections,
    idleTimeoutMs: options.idleTimeoutMs ?? CONNECTION_LIMITS.peer.idleTimeoutMs,
  };
  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const reply = (code: number, reason: string) => {
      received?.inc({ code: String(code) });
      answer(res, code, reason);
    };
    const peer = (req.socket as TLSSocket).getPeerCertificate();
    if (!peer || peer.subject?.CN !== identity) return reply(403, 'not an agent replica');
    if (req.method !== 'POST' || req.url !== SHARDING.forwardPath) return reply(404, 'unknown path');
    if (!/^application\/json\b/i.test(req.headers['content-type'] ?? '')) return reply(415, 'not JSON');
    const body = await readBody(req, SHARDING.forwardBodyBytes);
    if (body === 'too-large') return reply(413, 'body too large');
    let json: unknown;
    try {
      json = JSON.parse(body.toString('utf8'));
    } catch {
      return reply(400, 'body is not JSON');
    }
    const parsed = parseForwardedEvent(json);
    if (!parsed.ok) return reply(400, parsed.error);
    const { receivedAt, fingerprint, ...rest } = parsed.value;
    const event: AcceptedEvent = {
      ...rest,
      ...(fingerprint ? { fingerprint } : {}),
      receivedAt: new Date(receivedAt),
    };
    const outcome = await options.deliver(event);
    reply(outcome === 'accepted' ? 202 : 409, outcome);
  };
  const server: Server = createServer(
    { ...tlsOptions(options.tls), ...tlsConnectionOptions(limits) },
    (req, res) => {
      handle(req, res).catch((error: unknown) => {
        logger?.error({ err: error }, 'forwarded callback failed');
        if (!res.headersSent) answer(res, 500, 'internal error');
        else res.destroy();
      });
    },
  );
  // Only replicas connect, with one kept-alive connection each; a silent socket is not a replica at work.
  server.keepAliveTimeout = 60_000;
  server.requestTimeout = 10_000;
  server.headersTimeout = 10_000;
  limitConnections(server, limits, {
    refused: () => refused?.inc(),
    handshakeFailed: (error, socket) =>
      logger?.debug({ err: error, peer: socket.remoteAddress }, 'peer TLS handshake failed'),
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : options.port;
  logger?.info({ port }, 'peer endpoint started');
  return {
    port,
    updateTls(tls) {
      identity = commonNameOf(tls.certPem);
      server.setSecureContext(tlsOptions(tls));
    },
    // No grace, as before: open connections are cut at once.
    close: () => closeGracefully(server, 0),
  };
}

export function createForwarder(options: {
  tls: TlsMaterial;
  logger?: Logger;
  registry?: Registry;
}): Forwarder {
  const logger = options.logger?.child({ subsystem: 'forwarder' });
  const metrics = options.registry
    ? {
        sent: new Counter({
          name: 'skr_agent_forwarded_total',
          help: 'Callbacks forwarded to the owning replica, by outcome (accepted, not-owner, failed).',
          labelNames: ['outcome'],
          registers: [options.registry],
        }),
        duration: new Histogram({
          name: 'skr_agent_forward_duration_seconds',
          help: 'Time from sending a forwarded callback to the owner’s answer.',
          buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 2],
          registers: [options.registry],
        }),
      }
    : undefined;
  let identity = commonNameOf(options.tls.certPem);
  const agentFor = (tls: TlsMaterial) =>
    new Agent({
      keepAlive: true,
      maxSockets: 32,
      cert: tls.certPem,
      key: tls.keyPem,
      ca: tls.caBundlePem,
      // Peers are reached by Pod IP, which the certificate does not name: the identity is the subject CN.
      checkServerIdentity: (_host, certificate) =>
        certificate.subject?.CN === identity
          ? undefined
          : new Error(
              `peer certificate CN ${String(certificate.subject?.CN)} is not the agent's (${identity})`,
            ),
    });
  let agent = agentFor(options.tls);

  return {
    forward(address, event) {
      const match = /^(?:\[([^\]]+)\]|([^:]+)):(\d+)$/.exec(address);
      if (!match)
        return Promise.reject(new Error(`peer address ${JSON.stringify(address)} is not host:port`));
      const body = JSON.stringify({ ...event, receivedAt: event.receivedAt.toISOString() });
      const started = process.hrtime.bigint();
      return new Promise<void>((resolve, reject) => {
        const req = request(
          {
            agent,
            host: match[1] ?? match[2],
            port: Number(match[3]),
            method: 'POST',
            path: SHARDING.forwardPath,
            headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
            timeout: SHARDING.forwardTimeoutMs,
          },
          (res) => {
            res.resume();
            res.on('end', () => {
              metrics?.duration.observe(Number(process.hrtime.bigint() - started) / 1e9);
              if (res.statusCode === 202) {
                metrics?.sent.inc({ outcome: 'accepted' });
                resolve();
              } else {
                const outcome = res.statusCode === 409 ? 'not-owner' : 'failed';
                metrics?.sent.inc({ outcome });
                reject(new Error(`peer ${address} answered ${res.statusCode} (${outcome})`));
              }
            });
          },
        );
        let connected = false;
        req.on('socket', (socket) => {
          if (!socket.connecting) connected = true;
          else socket.once('connect', () => (connected = true));
        });
        req.on('timeout', () =>
          req.destroy(new Error(`peer ${address} did not answer within ${SHARDING.forwardTimeoutMs} ms`)),
        );
        req.on('error', (cause: NodeJS.ErrnoException) => {
          metrics?.sent.inc({ outcome: 'failed' });
          reject(
            !connected || UNREACHABLE_CODES.has(cause.code ?? '')
              ? new PeerUnreachableError(address, cause)
              : new Error(`forward to peer ${address}`, { cause }),
          );
        });
        req.end(body);
      });
    },
    updateTls(tls) {
      identity = commonNameOf(tls.certPem);
      const old = agent;
      agent = agentFor(tls);
      old.destroy();
      logger?.info('forwarder TLS material reloaded');
    },
    close() {
      agent.destroy();
    },
  };
}
