// The admission endpoint: answers every valid AdmissionReview with allowed=true at once; what KCP
// must learn goes to the dispatcher after the answer is written.
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import {
  ADMISSION_API_VERSIONS,
  TLS_SERVER_CIPHERS,
  allowedResponse,
  parseAdmissionReview,
  type WatchEventV2,
} from '@skr-watcher/api';
import {
  answerAndClose,
  closeGracefully,
  limitConnections,
  tlsConnectionOptions,
  type ConnectionLimits,
  type Logger,
} from '@skr-watcher/telemetry';
import { isRelevantChange } from './admission.js';
import { LogThrottle } from './log-throttle.js';
import type { AdmissionMetrics } from './metrics.js';
import type { TlsMaterial } from './tls-reload.js';

/** `/validate/<manager>`; the API server may append `?timeout=10s`. */
const VALIDATE_PATH = /^\/validate\/([a-z0-9](?:[-a-z0-9]{0,61}[a-z0-9])?)(?:\?.*)?$/;

export interface AdmissionServerOptions {
  host: string;
  port: number;
  material: TlsMaterial;
  maxBodyBytes: number;
  /**
   * Bytes of request bodies all reviews being read may hold together; a review that would pass it is answered 503
   * at once (the webhook's failurePolicy Ignore lets the write through) so large reviews cannot exhaust memory.
   */
  maxBodyBytesInFlight: number;
  /** Cap on open connections and the bound on silent ones and unfinished TLS handshakes. */
  limits: ConnectionLimits;
  logger: Logger;
  metrics: AdmissionMetrics;
  /** Receives each relevant change, after the answer has been written. */
  onRelevantChange: (manager: string, event: WatchEventV2, uid: string) => void;
}

export interface AdmissionServer {
  readonly port: number;
  /** New handshakes use the new certificate; open connections keep theirs. */
  updateTls(material: TlsMaterial): void;
  /** Stops accepting, lets requests in flight finish for up to `graceMs`, then closes every socket. */
  close(graceMs: number): Promise<void>;
}

function secureOptions(material: TlsMaterial) {
  return {
    cert: material.cert,
    key: material.key,
    minVersion: 'TLSv1.2' as const,
    ciphers: TLS_SERVER_CIPHERS,
    honorCipherOrder: true,
  };
}

/**
 * Before an early answer (404, 405) to a request with a body: the body is not needed, and reading it to keep the
 * connection would let a client that drips it hold the connection for as long as it likes. So the connection
 * closes once the answer is written (Node then destroys the socket, unread bytes and all).
 */
function closeIfBodyFollows(req: IncomingMessage, res: ServerResponse): void {
  const declared = req.headers['content-length'];
  const hasBody =
    req.headers['transfer-encoding'] !== undefined || (declared !== undefined && declared !== '0');
  if (hasBody) res.setHeader('connection', 'close');
  else req.resume();
}

/** As upstream's webhook answers: HTTPS only, and nothing in an answer may load or run anything. */
const SECURITY_HEADERS = {
  'strict-transport-security': 'max-age=31536000; includeSubDomains',
  'content-security-policy': "default-src 'none'; frame-ancestors 'none'",
} as const;

export async function startAdmissionServer(options: AdmissionServerOptions): Promise<AdmissionServer> {
  const { logger, metrics, maxBodyBytes, maxBodyBytesInFlight } = options;
  /** Bytes of request bodies held (reserved) by reviews being read, across all connections. */
  let bodyBytesInFlight = 0;
  const budgetLog = new LogThrottle(logger, 1000);
  const debug = logger.isLevelEnabled('debug');

  const answer = (res: ServerResponse, started: number, code: number, body: string, json: boolean) => {
    res.writeHead(code, {
      ...SECURITY_HEADERS,
      'content-type': json ? 'application/json' : 'text/plain; charset=utf-8',
      'content-length': Buffer.byteLength(body),
    });
    res.end(body);
    metrics.answered(code, (performance.now() - started) / 1000);
  };
  const refuse = (res: ServerResponse, started: number, code: number, reason: string) => {
    answer(res, started, code, `${reason}\n`, false);
  };

  const review = (manager: string, body: Buffer, res: ServerResponse, started: number) => {
    let decoded: unknown;
    try {
      decoded = JSON.parse(body.toString('utf8'));
    } catch (error) {
      metrics.error('bad_json');
      refuse(res, started, 400, `body is not JSON: ${(error as Error).message}`);
      return;
    }
    const parsed = parseAdmissionReview(decoded);
    if (!parsed.ok) {
      metrics.error('invalid_review');
      refuse(
        res,
        started,
        400,
        `not an ${ADMISSION_API_VERSIONS.join(' or ')} AdmissionReview: ${parsed.error}`,
      );
      return;
    }
    const uid = parsed.value.request.uid;
    answer(res, started, 200, allowedResponse(uid, parsed.value.apiVersion), true);

    const event = isRelevantChange(parsed.value, metrics.drift);
    if (!event) return;
    if (debug) {
      logger.debug(
        {
          uid,
          manager,
          operation: parsed.value.request.operation,
          gvk: `${event.watchedGvk.group}/${event.watchedGvk.version}/${event.watchedGvk.kind}`,
          namespace: event.watched.Namespace,
          name: event.watched.Name,
        },
        'relevant change',
      );
    }
    options.onRelevantChange(manager, event, uid);
  };

  const handle = (req: IncomingMessage, res: ServerResponse) => {
    const started = performance.now();
    const match = VALIDATE_PATH.exec(req.url ?? '');
    if (!match) {
      metrics.error('not_found');
      closeIfBodyFollows(req, res);
      refuse(res, started, 404, 'not found: admission reviews go to POST /validate/<manager>');
      return;
    }
    if (req.method !== 'POST') {
      metrics.error('method_not_allowed');
      res.setHeader('allow', 'POST');
      closeIfBodyFollows(req, res);
      refuse(res, started, 405, `method ${req.method} not allowed: use POST`);
      return;
    }
    const manager = match[1] as string;
    const tooLarge = () => {
      metrics.error('too_large');
      // The rest of the body is not read: close the connection after the answer.
      res.setHeader('connection', 'close');
      refuse(res, started, 413, `body larger than ${maxBodyBytes} bytes`);
    };
    const declared = Number(req.headers['content-length']);
    if (declared > maxBodyBytes) {
      tooLarge();
      return;
    }
    // This request's share of the body budget: the declared length up front (the API server always declares
    // it), else what has arrived so far.
    let reserved = 0;
    const reserve = (bytes: number) => {
      if (bodyBytesInFlight + bytes > maxBodyBytesInFlight) return false;
      bodyBytesInFlight += bytes;
      reserved += bytes;
      return true;
    };
    const release = () => {
      bodyBytesInFlight -= reserved;
      reserved = 0;
    };
    const busy = (wanted: number) => {
      metrics.error('over_budget');
      budgetLog.warn(
        'over_budget',
        { manager, bodyBytes: wanted, bodyBytesInFlight, maxBodyBytesInFlight: maxBodyBytesInFlight },
        'admission review refused with 503: the bodies of reviews in flight already hold the memory budget',
      );
      release();
      // The rest of the body is read and thrown away (a declared body is bounded by the body limit), so the client
      // gets the answer rather than a reset; a body of unknown length closes the connection instead.
      if (!(declared > 0)) res.setHeader('connection', 'close');
      refuse(res, started, 503, 'busy: too many large reviews in flight; retry');
    };
    if (declared > 0 && !reserve(declared)) {
      busy(declared);
      req.resume();
      return;
    }
    req.once('close', release);
    const chunks: Buffer[] = [];
    let size = 0;
    let done = false;
    req.on('data', (chunk: Buffer) => {
      if (done) return;
      size += chunk.length;
      if (size > maxBodyBytes) {
        done = true;
        release();
        tooLarge();
        return;
      }
      if (size > reserved && !reserve(size - reserved)) {
        done = true;
        busy(size);
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => {
      if (done) return;
      done = true;
      review(
        manager,
        chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size),
        res,
        started,
      );
      release();
    });
    req.on('error', () => {
      // The client went away; there is nobody to answer.
      done = true;
      release();
    });
  };

  const server: Server = createServer(
    {
      ...secureOptions(options.material),
      ...tlsConnectionOptions(options.limits),
      // Slowloris guards; the API server sends a review in one go.
      requestTimeout: 30_000,
      headersTimeout: 10_000,
    },
    handle,
  );
  // The API server keeps connections open between reviews; keep them longer than its idle timeout.
  server.keepAliveTimeout = 95_000;
  limitConnections(server, options.limits, {
    refused: () => metrics.connectionRefused(),
    handshakeFailed: (error, socket) => {
      if (debug) logger.debug({ err: error, remote: socket.remoteAddress }, 'TLS handshake failed');
    },
  });
  server.on('clientError', (error: Error & { code?: string }, socket) => {
    if (error.code === 'ECONNRESET') socket.destroy();
    else answerAndClose(socket, 'HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n');
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', (cause) =>
      reject(new Error(`listen on ${options.host}:${options.port} for admission reviews`, { cause })),
    );
    server.listen(options.port, options.host, () => resolve());
  });

  return {
    port: (server.address() as AddressInfo).port,
    updateTls(material) {
      server.setSecureContext(secureOptions(material));
    },
    close: (graceMs) => closeGracefully(server, graceMs),
  };
}
