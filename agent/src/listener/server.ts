// The KCP callback listener (DESIGN 4.3): authenticates the SKR, validates its event, wakes its Kyma.
import { X509Certificate, createPrivateKey } from 'node:crypto';
import { createServer as createHttpServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { AddressInfo, Socket } from 'node:net';
import type { PeerCertificate, TLSSocket } from 'node:tls';
import {
  CALLBACK_BUDGET,
  CONNECTION_LIMITS,
  KCP_LISTENER_IDENTITY,
  LABELS,
  LIMITS,
  LISTENER_STATUS,
  parseEventPath,
  parseWatchEvent,
  TLS_SERVER_CIPHERS,
  type WatchEventV1,
} from '@skr-watcher/api';
import {
  Registry,
  answerAndClose,
  closeGracefully,
  limitConnections,
  silentLogger,
  tlsConnectionOptions,
  type ConnectionLimits,
  type Logger,
} from '@skr-watcher/telemetry';
import { discardBody, isIdentityEncoding, isJsonMediaType, readLimitedBody } from './body.js';
import { CallbackBudget } from './callback-budget.js';
import { CoalescingWindow } from './coalescing-window.js';
import {
  fingerprintOf,
  type AcceptedEvent,
  type Listener,
  type ListenerOptions,
  type TlsMaterial,
} from './contract.js';
import { listenerMetrics, type ListenerMetrics } from './metrics.js';
import { trustedProxies, type TrustedProxies } from './trusted-proxies.js';
import { runtimeIdFromXfcc } from './xfcc.js';

/** After an early answer we read and drop at most this much of a body before cutting the connection. */
const DISCARD_CAP_BYTES = 1024 * 1024;
/** Kubernetes label values: the runtime-id must be one to be found on a Kyma. */
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])$/;
const XFCC_HEADER = 'x-forwarded-client-cert';

/**
 * What an `enqueue` rejects with when it knows when the event is worth sending again (sharding: the Kyma's owner
 * cannot be reached and its Lease runs for that long yet); any other rejection is answered Retry-After: 1.
 */
export class NotTakenYetError extends Error {
  constructor(
    message: string,
    readonly retryAfterSeconds: number,
    options?: ErrorOptions,
  ) {
    super(message, options);
    this.name = 'NotTakenYetError';
  }
}

/** Reasons in the style of Kubernetes `Status.reason`, so answers read familiar to operators. */
const REASONS: Record<number, string> = {
  200: 'Accepted',
  400: 'BadRequest',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'NotFound',
  405: 'MethodNotAllowed',
  408: 'Timeout',
  413: 'RequestEntityTooLarge',
  415: 'UnsupportedMediaType',
  429: 'TooManyRequests',
  431: 'RequestHeaderFieldsTooLarge',
  500: 'InternalError',
  503: 'ServiceUnavailable',
};

const ACCEPTED_BODY = JSON.stringify({
  code: LISTENER_STATUS.accepted,
  reason: REASONS[200],
  message: 'event accepted; the Kyma is queued for reconciliation',
});

type Identity = { ok: true; runtimeId: string } | { ok: false; message: string };

/** The listener's own certificate (replicas forward with it) is never an SKR's identity (decision 004). */
const listenerIdentityRefused: Identity = {
  ok: false,
  message: `client certificate carries the KCP listener's identity (CN ${KCP_LISTENER_IDENTITY}), not an SKR runtime-id`,
};

interface Answer {
  code: number;
  message: string;
  /** Close the connection after answering (unauthenticated peer, stale TLS trust, shutdown). */
  close?: boolean;
  /** Extra response headers, e.g. `Allow` on 405. */
  headers?: Record<string, string>;
}

/** Validates TLS material up front so a broken rotation fails loudly with context, not in a handshake. */
function checkTlsMaterial(material: TlsMaterial): { cert: string; key: string; ca: string[] } {
  let serving: X509Certificate;
  try {
    serving = new X509Certificate(material.certPem);
  } catch (cause) {
    throw new Error('listener serving certificate is not a PEM X.509 certificate', { cause });
  }
  try {
    if (!serving.checkPrivateKey(createPrivateKey(material.keyPem))) {
      throw new Error(`the key does not belong to the serving certificate (subject ${serving.subject})`);
    }
  } catch (cause) {
    throw new Error('listener serving key is unusable', { cause });
  }
  const blocks =
    material.caBundlePem.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  if (blocks.length === 0) throw new Error('listener CA bundle holds no PEM certificate');
  blocks.forEach((block, index) => {
    let ca: X509Certificate;
    try {
      ca = new X509Certificate(block);
    } catch (cause) {
      throw new Error(`listener CA bundle: certificate ${index + 1} does not parse`, { cause });
    }
    if (!ca.ca) throw new Error(`listener CA bundle: certificate ${index + 1} (${ca.subject}) is not a CA`);
  });
  return { cert: material.certPem, key: material.keyPem, ca: blocks };
}

/** Subjects of the bundle's CAs, e.g. `CN=skr-watcher-ca`, for the 401 reasons. */
function issuersOf(caBlocks: string[]): string {
  return caBlocks.map((block) => new X509Certificate(block).subject.replace(/\n/g, ', ')).join(' or ');
}

function distinguishedName(name: Record<string, unknown> | undefined): string {
  const parts = Object.entries(name ?? {}).map(([key, value]) => `${key}=${String(value)}`);
  return parts.length > 0 ? parts.join(', ') : '(empty)';
}

/**
 * Why OpenSSL refused a client certificate, in words an SKR operator can act on: the 401 body is all it sees.
 * Naming our CAs discloses nothing new: the TLS CertificateRequest already lists them to every client.
 */
function untrustedReason(code: string, peer: PeerCertificate, issuers: string): string {
  switch (code) {
    case 'CERT_HAS_EXPIRED':
      return `client certificate expired at ${peer.valid_to}; the KCP agent renews SKR certificates 30 days before expiry, so the SKR has not loaded its renewed one`;
    case 'CERT_NOT_YET_VALID':
      return `client certificate is not valid before ${peer.valid_from} (are the clocks of SKR and KCP apart?)`;
    case 'INVALID_PURPOSE':
      return 'client certificate is not for client use (no clientAuth extended key usage)';
    case 'UNABLE_TO_VERIFY_LEAF_SIGNATURE':
    case 'UNABLE_TO_GET_ISSUER_CERT':
    case 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY':
    case 'DEPTH_ZERO_SELF_SIGNED_CERT':
    case 'SELF_SIGNED_CERT_IN_CHAIN':
    case 'CERT_SIGNATURE_FAILURE':
      return `client certificate is not trusted: it was issued by ${distinguishedName(peer.issuer as unknown as Record<string, unknown>)}, and the listener accepts certificates issued by ${issuers}`;
    default:
      return `client certificate is not trusted by the KCP CA bundle: ${code}`;
  }
}

function pathOf(url: string | undefined): string {
  if (url === undefined) return '';
  const query = url.indexOf('?');
  return query === -1 ? url : url.slice(0, query);
}

function kymaKeyOf(kyma: { namespace: string; name: string }): string {
  return `${kyma.namespace}/${kyma.name}`;
}

export async function startListener(options: ListenerOptions): Promise<Listener> {
  const logger: Logger = (options.logger ?? silentLogger()).child({ subsystem: 'listener' });
  const metrics: ListenerMetrics = listenerMetrics(options.registry ?? new Registry());
  const mode = options.mode;
  const proxies: TrustedProxies | undefined =
    mode.kind === 'gateway' ? trustedProxies(mode.trustedProxies) : undefined;
  const windowMs = options.coalesceWindowMs ?? 0;
  const graceMs = options.shutdownGraceMs ?? 5_000;
  const limits: ConnectionLimits = {
    maxConnections: options.maxConnections ?? CONNECTION_LIMITS.listener.maxConnections,
    idleTimeoutMs: options.idleTimeoutMs ?? CONNECTION_LIMITS.listener.idleTimeoutMs,
  };
  const utf8 = new TextDecoder('utf-8', { fatal: true });
  const budget =
    options.callbackBudget === false
      ? undefined
      : new CallbackBudget({ ...CALLBACK_BUDGET, ...options.callbackBudget, clock: options.clock });
  // The accepted path is hot (thousands per second): skip building its log object unless it is wanted.
  const debugEnabled = logger.isLevelEnabled('debug');

  // Direct mode: the identity of a TLS connection never changes, so it is worked out once per socket.
  const identities = new WeakMap<Socket, Identity>();
  // Which TLS material a connection was accepted under; connections from before `updateTls` are retired.
  const generations = new WeakMap<Socket, number>();
  let tlsGeneration = 0;
  let closing = false;
  let acceptedIssuers = mode.kind === 'direct' ? issuersOf(checkTlsMaterial(mode).ca) : '';
  // Not fatal (an agent that does not start serves no one), but every SKR webhook refuses such a listener.
  const warnUnlessListenerIdentity = (certPem: string): void => {
    const subject = new X509Certificate(certPem).subject;
    if (!subject.split('\n').includes(`CN=${KCP_LISTENER_IDENTITY}`)) {
      logger.warn(
        { subject },
        `the listener certificate's CN is not ${KCP_LISTENER_IDENTITY}: SKR webhooks will refuse it; re-issue it with skr-certs issue --listener`,
      );
    }
  };
  if (mode.kind === 'direct') warnUnlessListenerIdentity(mode.certPem);

  const enqueueNow = (key: string, event?: AcceptedEvent): void | Promise<void> => {
    const delivered = options.enqueue(key, event);
    metrics.enqueued.inc();
    return delivered;
  };
  const window =
    windowMs > 0
      ? new CoalescingWindow(
          windowMs,
          (key) => {
            try {
              void Promise.resolve(enqueueNow(key)).catch((error: unknown) =>
                logger.warn({ err: error, kyma: key }, 'a held Kyma key did not reach its owner'),
              );
            } catch (error) {
              logger.error({ err: error, kyma: key }, 'enqueue of a held Kyma key failed');
            }
          },
          options.clock,
        )
      : undefined;

  function directIdentity(socket: TLSSocket): Identity {
    const cached = identities.get(socket);
    if (cached) return cached;
    let identity: Identity;
    const certificate = socket.getPeerCertificate();
    if (!certificate || Object.keys(certificate).length === 0) {
      // Go clients (and Node's) send no certificate when none they hold is from the CAs the server names.
      identity = {
        ok: false,
        message: `no client certificate: the listener accepts certificates issued by ${acceptedIssuers}, and the client sent none (a client holding none from these CAs sends none)`,
      };
    } else if (!socket.authorized) {
      const cause: unknown = socket.authorizationError;
      const code =
        typeof cause === 'string'
          ? cause
          : ((cause as NodeJS.ErrnoException | undefined)?.code ?? String(cause));
      identity = { ok: false, message: untrustedReason(code, certificate, acceptedIssuers) };
    } else {
      const cn = certificate.subject?.CN as unknown;
      if (cn === KCP_LISTENER_IDENTITY) identity = listenerIdentityRefused;
      else if (typeof cn === 'string' && cn !== '') identity = { ok: true, runtimeId: cn };
      else if (Array.isArray(cn))
        identity = { ok: false, message: 'client certificate has several subject CNs' };
      else identity = { ok: false, message: 'client certificate has no subject CN (the runtime-id)' };
    }
    identities.set(socket, identity);
    return identity;
  }

  function gatewayIdentity(request: IncomingMessage): Identity {
    const peer = request.socket.remoteAddress;
    if (!proxies?.trusts(peer)) {
      return { ok: false, message: `peer ${peer ?? '(gone)'} is not a trusted proxy` };
    }
    const raw = request.headers[XFCC_HEADER];
    const header = Array.isArray(raw) ? raw.join(',') : raw;
    if (header === undefined || header.trim() === '') {
      return { ok: false, message: 'X-Forwarded-Client-Cert header is missing' };
    }
    const runtimeId = runtimeIdFromXfcc(header);
    if (!runtimeId.ok) return { ok: false, message: `X-Forwarded-Client-Cert: ${runtimeId.error}` };
    if (runtimeId.value === KCP_LISTENER_IDENTITY) return listenerIdentityRefused;
    return { ok: true, runtimeId: runtimeId.value };
  }

  function answer(
    request: IncomingMessage,
    response: ServerResponse,
    startedAt: number,
    result: Answer,
  ): void {
    const { code } = result;
    const body =
      code === LISTENER_STATUS.accepted
        ? ACCEPTED_BODY
        : JSON.stringify({ code, reason: REASONS[code] ?? 'Error', message: result.message });
    const close =
      result.close === true ||
      closing ||
      (mode.kind === 'direct' && generations.get(request.socket) !== tlsGeneration);
    if (!response.headersSent) {
      response.writeHead(code, {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(body),
        ...(close ? { connection: 'close' } : {}),
        ...result.headers,
      });
      response.end(body);
    }
    // Early answers leave body bytes unread; drop them (bounded) so the answer is not lost to a reset.
    discardBody(request, DISCARD_CAP_BYTES);
    const label = String(code);
    metrics.requests.inc({ code: label });
    metrics.duration.observe({ code: label }, (performance.now() - startedAt) / 1000);
  }

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const startedAt = performance.now();
    const receivedAt = new Date();
    const reply = (result: Answer): void => answer(request, response, startedAt, result);
    const peer = request.socket.remoteAddress;

    if (mode.kind === 'direct' && generations.get(request.socket) !== tlsGeneration) {
      // The connection was verified under TLS material that has since been replaced (perhaps a dropped
      // CA). Not answering makes the client retry on a new connection, verified under the current bundle.
      logger.debug({ peer }, 'request on a connection from before the last TLS update; closing it');
      request.socket.destroy();
      return;
    }
    const identity =
      mode.kind === 'direct' ? directIdentity(request.socket as TLSSocket) : gatewayIdentity(request);
    if (!identity.ok) {
      logger.info({ peer, reason: identity.message }, 'callback refused: not authenticated');
      reply({ code: LISTENER_STATUS.unauthenticated, message: identity.message, close: true });
      return;
    }
    const { runtimeId } = identity;

    const target = parseEventPath(pathOf(request.url));
    if (!target) {
      reply({
        code: LISTENER_STATUS.notFound,
        message: 'unknown path; callbacks go to /v2/<component>/event',
      });
      return;
    }
    if (request.method !== 'POST') {
      reply({
        code: LISTENER_STATUS.methodNotAllowed,
        message: `method ${request.method ?? '(none)'} is not allowed; use POST`,
        headers: { allow: 'POST' },
      });
      return;
    }
    if (!isJsonMediaType(request.headers['content-type'])) {
      reply({
        code: LISTENER_STATUS.unsupportedMediaType,
        message: `content-type must be application/json, got ${JSON.stringify(request.headers['content-type'] ?? '')}`,
      });
      return;
    }
    if (!isIdentityEncoding(request.headers['content-encoding'])) {
      reply({
        code: LISTENER_STATUS.unsupportedMediaType,
        message: 'content-encoding is not supported; send identity',
      });
      return;
    }
    const declaredLength = Number(request.headers['content-length'] ?? 0);
    if (declaredLength > LIMITS.eventBodyBytes) {
      reply({
        code: LISTENER_STATUS.payloadTooLarge,
        message: `body of ${declaredLength} bytes is over the limit of ${LIMITS.eventBodyBytes}`,
        // Not worth reading a body this large just to keep the connection.
        close: declaredLength > DISCARD_CAP_BYTES,
      });
      return;
    }

    // Who the caller is decides before what it says: an identity without a Kyma is refused unread.
    if (!LABEL_VALUE.test(runtimeId)) {
      logger.warn(
        { runtimeId: runtimeId.slice(0, 80), peer },
        'callback refused: runtime-id is not a label value',
      );
      reply({
        code: LISTENER_STATUS.forbidden,
        message: `runtime-id ${JSON.stringify(runtimeId.slice(0, 80))} is not a valid label value, so no Kyma can carry it`,
      });
      return;
    }
    const kyma = options.resolveKyma(runtimeId);
    if (!kyma) {
      logger.warn({ runtimeId, peer }, 'callback refused: no Kyma carries this runtime-id');
      reply({
        code: LISTENER_STATUS.forbidden,
        message: `no Kyma is labelled ${LABELS.runtimeId}=${runtimeId}`,
      });
      return;
    }
    // Before the body is read: a flooding SKR costs a bucket lookup per callback, not a parse and a reconcile.
    const spent = budget?.spend(runtimeId);
    if (spent && !spent.ok) {
      if (debugEnabled)
        logger.debug({ runtimeId, kyma: kymaKeyOf(kyma) }, 'callback refused: over its budget');
      reply({
        code: LISTENER_STATUS.tooManyRequests,
        message: `runtime-id ${runtimeId} sends more than ${budget?.perSecond ?? 0} callbacks/s; send again after ${spent.retryAfterSeconds} s`,
        headers: { 'retry-after': String(spent.retryAfterSeconds) },
      });
      return;
    }

    const read = await readLimitedBody(request, LIMITS.eventBodyBytes);
    if (!read.ok) {
      if (read.reason === 'too-large') {
        reply({
          code: LISTENER_STATUS.payloadTooLarge,
          message: `body is over the limit of ${LIMITS.eventBodyBytes} bytes`,
        });
      } else {
        logger.debug({ runtimeId, peer }, 'callback aborted by the client before its body ended');
      }
      return;
    }

    let json: unknown;
    try {
      json = JSON.parse(utf8.decode(read.body));
    } catch (error) {
      reply({
        code: LISTENER_STATUS.badRequest,
        message: `body is not UTF-8 JSON: ${error instanceof Error ? error.message : String(error)}`,
      });
      return;
    }
    const event = parseWatchEvent(target.version, json);
    if (!event.ok) {
      reply({ code: LISTENER_STATUS.badRequest, message: `invalid ${target.version} event: ${event.error}` });
      return;
    }
    const { watched, watchedGvk } = event.value;
    if (target.version === 'v1') {
      const { owner } = event.value as WatchEventV1;
      if (owner.Namespace !== kyma.namespace || owner.Name !== kyma.name) {
        logger.warn(
          { runtimeId, kyma: kymaKeyOf(kyma), owner: `${owner.Namespace}/${owner.Name}`, peer },
          'callback refused: v1 owner names another Kyma',
        );
        reply({
          code: LISTENER_STATUS.forbidden,
          message: `owner ${owner.Namespace}/${owner.Name} is not the Kyma of runtime-id ${runtimeId}`,
        });
        return;
      }
    }

    const key = kymaKeyOf(kyma);
    const accepted: AcceptedEvent = {
      runtimeId,
      kyma: { namespace: kyma.namespace, name: kyma.name },
      component: target.component,
      contract: target.version,
      watched: { namespace: watched.Namespace, name: watched.Name },
      gvk: { group: watchedGvk.group, version: watchedGvk.version, kind: watchedGvk.kind },
      fingerprint: fingerprintOf(event.value),
      receivedAt,
    };
    if (window && !closing) {
      window.hold(key);
    } else {
      try {
        await enqueueNow(key, accepted);
      } catch (error) {
        // Answered 2xx only once the Kyma's owner has the event: a webhook sends a 5xx again (issue 26 item 2).
        logger.warn({ err: error, runtimeId, kyma: key }, "callback not delivered to the Kyma's owner");
        reply({
          code: LISTENER_STATUS.unavailable,
          message: `the event did not reach the replica that owns the Kyma: ${error instanceof Error ? error.message : String(error)}; send it again`,
          headers: {
            'retry-after': String(
              error instanceof NotTakenYetError ? Math.max(1, Math.ceil(error.retryAfterSeconds)) : 1,
            ),
          },
        });
        return;
      }
    }
    metrics.accepted.inc({ contract: target.version });
    if (debugEnabled) {
      logger.debug(
        { runtimeId, kyma: key, gvk: watchedGvk, namespace: watched.Namespace, name: watched.Name },
        'callback accepted',
      );
    }
    if (options.onAccepted) {
      try {
        options.onAccepted(accepted);
      } catch (error) {
        logger.error({ err: error, runtimeId, kyma: key }, 'onAccepted subscriber failed');
      }
    }
    reply({ code: LISTENER_STATUS.accepted, message: '' });
  }

  const onRequest = (request: IncomingMessage, response: ServerResponse): void => {
    handle(request, response).catch((error: unknown) => {
      // A bug or a throwing callback (resolveKyma, enqueue): answer 500, keep serving.
      logger.error(
        { err: error, peer: request.socket.remoteAddress, url: request.url?.slice(0, 200) },
        'listener failed on a request',
      );
      try {
        answer(request, response, performance.now(), {
          code: 500,
          message: 'internal error; the event was not accepted',
        });
      } catch {
        request.socket.destroy();
      }
    });
  };

  const server =
    mode.kind === 'direct'
      ? createHttpsServer(
          {
            ...checkTlsMaterial(mode),
            ...tlsConnectionOptions(limits),
            requestCert: true,
            // Verified by OpenSSL against the bundle, but refused in HTTP (401 with a reason) rather than
            // with a handshake alert, so an SKR operator can see why (docs/decisions/005).
            rejectUnauthorized: false,
            minVersion: 'TLSv1.2',
            ciphers: TLS_SERVER_CIPHERS,
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
  server.on('secureConnection', (socket: TLSSocket) => {
    generations.set(socket, tlsGeneration);
  });
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
    const code =
      error.code === 'HPE_HEADER_OVERFLOW' ? 431 : error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 408 : 400;
    const body = JSON.stringify({
      code,
      reason: REASONS[code],
      message: `malformed HTTP request (${error.code ?? 'unknown'})`,
    });
    metrics.requests.inc({ code: String(code) });
    answerAndClose(
      socket,
      `HTTP/1.1 ${code} ${REASONS[code]}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  });

  await new Promise<void>((resolve, reject) => {
    const onError = (error: Error): void =>
      reject(new Error(`listener cannot listen on ${options.host ?? '*'}:${options.port}`, { cause: error }));
    server.once('error', onError);
    server.listen({ port: options.port, ...(options.host ? { host: options.host } : {}) }, () => {
      server.off('error', onError);
      resolve();
    });
  });
  server.on('error', (error) => logger.error({ err: error }, 'listener server error'));
  const port = (server.address() as AddressInfo).port;
  logger.info(
    { port, host: options.host ?? '*', mode: mode.kind, coalesceWindowMs: windowMs, ...limits },
    'callback listener started',
  );

  let closed: Promise<void> | undefined;
  return {
    port,
    updateTls(material: TlsMaterial): void {
      if (mode.kind !== 'direct') {
        throw new Error('updateTls: the listener runs in gateway mode; the gateway terminates TLS');
      }
      const checked = checkTlsMaterial(material);
      warnUnlessListenerIdentity(material.certPem);
      try {
        (server as ReturnType<typeof createHttpsServer>).setSecureContext({
          ...checked,
          minVersion: 'TLSv1.2',
          ciphers: TLS_SERVER_CIPHERS,
        });
      } catch (cause) {
        throw new Error('listener cannot load the new TLS material', { cause });
      }
      tlsGeneration++;
      acceptedIssuers = issuersOf(checked.ca);
      // Idle kept-alive connections were trusted under the old bundle: make them handshake again.
      server.closeIdleConnections();
      metrics.tlsUpdates.inc();
      logger.info(
        { caCertificates: checked.ca.length, generation: tlsGeneration },
        'listener TLS material updated',
      );
    },
    close(): Promise<void> {
      closing = true;
      closed ??= closeGracefully(server, graceMs).then(() => {
        window?.flush();
        logger.info({ port }, 'callback listener stopped');
      });
      return closed;
    },
  };
}
