// The KCP callback listener: authenticates the SKR, validates its event, wakes its Kyma. This file holds the order of
// the checks and the state of connections; caller-identity.ts, callback-request.ts and answers.ts hold what each
// check decides and answers, callback-server.ts the server itself.
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Server } from 'node:https';
import type { Socket } from 'node:net';
import type { TLSSocket } from 'node:tls';
import {
  CALLBACK_BUDGET,
  CONNECTION_LIMITS,
  KCP_LISTENER_IDENTITY,
  LIMITS,
  LISTENER_STATUS,
} from '@skr-watcher/api';
import {
  Registry,
  closeGracefully,
  silentLogger,
  type ConnectionLimits,
  type Logger,
} from '@skr-watcher/telemetry';
import { answerBody, undeliveredAnswer, type Answer } from './answers.js';
import { discardBody, readLimitedBody } from './body.js';
import {
  DISCARD_CAP_BYTES,
  acceptedEventOf,
  checkRequestHead,
  decodeEvent,
  foreignOwnerOf,
  kymaKeyOf,
  noKymaAnswer,
  runtimeIdRefusal,
} from './callback-request.js';
import { CallbackBudget } from './callback-budget.js';
import { createCallbackServer, listenOn, secureContextOf } from './callback-server.js';
import { certificateIdentity, gatewayIdentity, type Identity } from './caller-identity.js';
import { CoalescingWindow } from './coalescing-window.js';
import type { AcceptedEvent, Listener, ListenerOptions, TlsMaterial } from './contract.js';
import { listenerMetrics, type ListenerMetrics } from './metrics.js';
import { checkTlsMaterial, foreignListenerSubject, issuersOf } from './tls-material.js';
import { trustedProxies, type TrustedProxies } from './trusted-proxies.js';

const XFCC_HEADER = 'x-forwarded-client-cert';

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
  const warnUnlessListenerIdentity = (certPem: string): void => {
    const subject = foreignListenerSubject(certPem);
    if (subject !== undefined) {
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
    const identity = certificateIdentity(
      {
        certificate: socket.getPeerCertificate(),
        authorized: socket.authorized,
        authorizationError: socket.authorizationError,
      },
      acceptedIssuers,
    );
    identities.set(socket, identity);
    return identity;
  }

  const staleTls = (request: IncomingMessage) =>
    mode.kind === 'direct' && generations.get(request.socket) !== tlsGeneration;

  function answer(
    request: IncomingMessage,
    response: ServerResponse,
    startedAt: number,
    result: Answer,
  ): void {
    const body = answerBody(result);
    const close = result.close === true || closing || staleTls(request);
    if (!response.headersSent) {
      response.writeHead(result.code, {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(body),
        ...(close ? { connection: 'close' } : {}),
        ...result.headers,
      });
      response.end(body);
    }
    // Early answers leave body bytes unread; drop them (bounded) so the answer is not lost to a reset.
    discardBody(request, DISCARD_CAP_BYTES);
    const label = String(result.code);
    metrics.requests.inc({ code: label });
    metrics.duration.observe({ code: label }, (performance.now() - startedAt) / 1000);
  }

  async function handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const startedAt = performance.now();
    const receivedAt = new Date();
    const reply = (result: Answer): void => answer(request, response, startedAt, result);
    const peer = request.socket.remoteAddress;

    if (staleTls(request)) {
      // The connection was verified under TLS material that has since been replaced (perhaps a dropped
      // CA). Not answering makes the client retry on a new connection, verified under the current bundle.
      logger.debug({ peer }, 'request on a connection from before the last TLS update; closing it');
      request.socket.destroy();
      return;
    }
    const identity =
      mode.kind === 'direct'
        ? directIdentity(request.socket as TLSSocket)
        : gatewayIdentity(peer, request.headers[XFCC_HEADER], proxies);
    if (!identity.ok) {
      logger.info({ peer, reason: identity.message }, 'callback refused: not authenticated');
      reply({ code: LISTENER_STATUS.unauthenticated, message: identity.message, close: true });
      return;
    }
    const { runtimeId } = identity;

    const head = checkRequestHead(request);
    if (!head.ok) return reply(head.answer);
    const target = head.value;

    // Who the caller is decides before what it says: an identity without a Kyma is refused unread.
    const notLabel = runtimeIdRefusal(runtimeId);
    if (notLabel) {
      logger.warn(
        { runtimeId: runtimeId.slice(0, 80), peer },
        'callback refused: runtime-id is not a label value',
      );
      return reply(notLabel);
    }
    const kyma = options.resolveKyma(runtimeId);
    if (!kyma) {
      logger.warn({ runtimeId, peer }, 'callback refused: no Kyma carries this runtime-id');
      return reply(noKymaAnswer(runtimeId));
    }
    const key = kymaKeyOf(kyma);
    // Before the body is read: a flooding SKR costs a bucket lookup per callback, not a parse and a reconcile.
    const spent = budget?.spend(runtimeId);
    if (spent && !spent.ok) {
      if (debugEnabled) logger.debug({ runtimeId, kyma: key }, 'callback refused: over its budget');
      return reply({
        code: LISTENER_STATUS.tooManyRequests,
        message: `runtime-id ${runtimeId} sends more than ${budget?.perSecond ?? 0} callbacks/s; send again after ${spent.retryAfterSeconds} s`,
        headers: { 'retry-after': String(spent.retryAfterSeconds) },
      });
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
    const event = decodeEvent(target, read.body);
    if (!event.ok) return reply(event.answer);
    const owner = foreignOwnerOf(target, event.value, kyma);
    if (owner !== undefined) {
      logger.warn({ runtimeId, kyma: key, owner, peer }, 'callback refused: v1 owner names another Kyma');
      return reply({
        code: LISTENER_STATUS.forbidden,
        message: `owner ${owner} is not the Kyma of runtime-id ${runtimeId}`,
      });
    }

    const accepted = acceptedEventOf(runtimeId, kyma, target, event.value, receivedAt);
    if (window && !closing) {
      window.hold(key);
    } else {
      try {
        await enqueueNow(key, accepted);
      } catch (error) {
        logger.warn({ err: error, runtimeId, kyma: key }, "callback not delivered to the Kyma's owner");
        return reply(undeliveredAnswer(error));
      }
    }
    metrics.accepted.inc({ contract: target.version });
    if (debugEnabled) {
      const { watched, watchedGvk } = event.value;
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

  const server = createCallbackServer({
    mode,
    limits,
    metrics,
    logger,
    onRequest,
    onSecureConnection: (socket) => generations.set(socket, tlsGeneration),
  });
  const port = await listenOn(server, options.port, options.host, logger);
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
        (server as Server).setSecureContext(secureContextOf(checked));
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
