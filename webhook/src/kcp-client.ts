// One callback to the KCP listener over mutual TLS and kept-alive connections (decision 005).
import { Agent, request, type RequestOptions } from 'node:https';
import { checkServerIdentity, createSecureContext, type PeerCertificate } from 'node:tls';
import { eventPath, KCP_LISTENER_IDENTITY, type WatchEventV2 } from '@skr-watcher/api';
import type { DeliveryOutcome } from './dispatch/outcome.js';
import type { TlsMaterial } from './tls-reload.js';

export interface KcpAddress {
  host: string;
  port: number;
}

/** Parses `host:port` or `[ipv6]:port`, as `KCP_ADDR` carries it. */
export function parseKcpAddress(addr: string): KcpAddress {
  const match = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(addr.trim());
  const port = Number(match?.[2]);
  if (!match || !(port >= 1 && port <= 65535)) {
    throw new Error(`KCP address "${addr}" must be host:port, e.g. skr-events.kcp.example.com:443`);
  }
  const host = (match[1] as string).replace(/^\[(.*)\]$/, '$1');
  return { host, port };
}

export interface KcpClientOptions {
  address: KcpAddress;
  material: TlsMaterial;
  /** Sockets kept per agent; matches the number of dispatch workers. */
  maxSockets: number;
  timeoutMs: number;
  /** CN the server's certificate must carry besides naming the host (default: the listener's); `*`: any. */
  serverCommonName?: string;
}

/**
 * Statuses that say "later" rather than "never", though they are 4xx. 401 is among them: during a CA rotation
 * the listener may not have loaded the new bundle yet when this webhook already presents a new certificate;
 * the event's max age still bounds how long a certificate that is never trusted is retried.
 */
const RETRYABLE_4XX = new Set([401, 408, 429]);

/** A Retry-After longer than this is taken as this: an event's max age, not the server, bounds how long it waits. */
const RETRY_AFTER_CAP_MS = 5 * 60_000;

/**
 * Retry-After in milliseconds: delay-seconds or an HTTP date (RFC 9110 10.2.3); undefined when absent or unreadable.
 * Sent by the KCP listener with 503 (the Kyma's owner did not take the event yet) and 429 (the SKR sends too much).
 */
export function retryAfterOf(header: string | undefined, now = Date.now()): number | undefined {
  if (header === undefined) return undefined;
  const text = header.trim();
  let ms: number;
  if (/^\d+$/.test(text)) ms = Number(text) * 1000;
  else {
    // An HTTP date names its weekday and month; Date.parse would take '-5' for a year.
    const at = /^[A-Za-z]{3}, /.test(text) ? Date.parse(text) : NaN;
    if (Number.isNaN(at)) return undefined;
    ms = Math.max(0, at - now);
  }
  return Math.min(ms, RETRY_AFTER_CAP_MS);
}

export class KcpClient {
  private agent: Agent;
  private readonly retired = new Set<Agent>();
  private readonly retireTimers = new Set<NodeJS.Timeout>();

  constructor(private readonly options: KcpClientOptions) {
    this.agent = this.createAgent(options.material);
  }

  /**
   * New connections use new material; requests in flight finish on the old agent, whose sockets
   * are closed once they are idle or the request timeout has surely passed.
   */
  updateTls(material: TlsMaterial): void {
    const old = this.agent;
    this.agent = this.createAgent(material);
    this.retired.add(old);
    // Idle kept-alive sockets would otherwise keep the old client certificate in use.
    for (const sockets of Object.values(old.freeSockets))
      for (const socket of sockets ?? []) socket.destroy();
    const timer = setTimeout(() => {
      this.retireTimers.delete(timer);
      this.retired.delete(old);
      old.destroy();
    }, this.options.timeoutMs + 1000);
    timer.unref();
    this.retireTimers.add(timer);
  }

  send = (manager: string, event: WatchEventV2): Promise<DeliveryOutcome> => {
    const body = JSON.stringify(event);
    const options: RequestOptions = {
      host: this.options.address.host,
      port: this.options.address.port,
      method: 'POST',
      path: eventPath(manager, 'v2'),
      agent: this.agent,
      timeout: this.options.timeoutMs,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    };
    return new Promise<DeliveryOutcome>((resolve) => {
      const req = request(options, (res) => {
        const status = res.statusCode ?? 0;
        res.on('error', (error) =>
          resolve({ result: 'retry', reason: `response: ${error.message}`, status }),
        );
        if (status >= 200 && status < 300) {
          // The hot path: the body of an accepted event is not read, only drained.
          res.on('end', () => resolve({ result: 'delivered', status }));
          res.resume();
          return;
        }
        let reason = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          // Keep a little of the answer for the log line; the rest is read only to free the socket.
          if (reason.length < 200) reason += chunk.slice(0, 200 - reason.length);
        });
        res.on('end', () => {
          const why = `HTTP ${status} ${reason.trim()}`;
          const retryAfterMs = retryAfterOf(res.headers['retry-after']);
          if (status >= 500 || RETRYABLE_4XX.has(status) || status < 200)
            resolve({
              result: 'retry',
              reason: why,
              status,
              ...(retryAfterMs !== undefined ? { retryAfterMs } : {}),
            });
          else resolve({ result: 'rejected', reason: why, status });
        });
      });
      req.on('timeout', () => {
        req.destroy(new Error(`no answer from KCP within ${this.options.timeoutMs} ms`));
      });
      req.on('error', (error: NodeJS.ErrnoException) => {
        resolve({ result: 'retry', reason: error.code ? `${error.code}: ${error.message}` : error.message });
      });
      req.end(body);
    });
  };

  close(): void {
    for (const timer of this.retireTimers) clearTimeout(timer);
    this.retireTimers.clear();
    for (const agent of this.retired) agent.destroy();
    this.retired.clear();
    this.agent.destroy();
  }

  private createAgent(material: TlsMaterial): Agent {
    return new Agent({
      keepAlive: true,
      maxSockets: this.options.maxSockets,
      // One context per material: otherwise every new connection (each retry while KCP is down)
      // parses the key and the bundle again, which costs milliseconds of CPU.
      secureContext: createSecureContext({
        cert: material.cert,
        key: material.key,
        ca: material.ca,
        minVersion: 'TLSv1.2',
      }),
      minVersion: 'TLSv1.2',
      checkServerIdentity: (host, certificate) =>
        checkListenerIdentity(host, certificate, this.options.serverCommonName),
    });
  }
}

/**
 * The KCP CA signs SKR leaves too, and those may name this address (127.0.0.1 in local mode): besides the host
 * name, the server must present the listener's reserved identity, which no SKR leaf carries (decision 004).
 * `*` waives the CN for a KCP whose gateway has a certificate of its own; the host name is still checked.
 */
export function checkListenerIdentity(
  host: string,
  certificate: PeerCertificate,
  expectedCn: string = KCP_LISTENER_IDENTITY,
): Error | undefined {
  const mismatch = checkServerIdentity(host, certificate);
  if (mismatch) return mismatch;
  const cn: unknown = certificate.subject?.CN;
  if (expectedCn === '*' || cn === expectedCn) return undefined;
  return Object.assign(
    new Error(
      `the server at ${host} is not the KCP listener: its certificate's CN is ${JSON.stringify(cn ?? null)}, not ${expectedCn} (--kcp-server-cn)`,
    ),
    { code: 'ERR_KCP_LISTENER_IDENTITY' },
  );
}
