// One HTTP exchange with a registry over undici: bounded in time, following redirects only as the redirect policy
// allows (credentials never go to another origin than the one asked), and counted by operation and status.
import { Agent, type Dispatcher } from 'undici';
import { Counter, registeredMetric, type Registry } from '@skr-watcher/telemetry';
import { ModuleSourceError } from './errors.js';
import { classifyNetworkError, header, type Answer } from './registry-answer.js';
import { RedirectPolicy } from './registry-redirect.js';

/** Operations as counted in `skr_agent_oci_registry_requests_total{operation}` (a bounded set). */
export type RegistryOperation = 'token' | 'manifest' | 'blob' | 'tags' | 'catalog' | 'push';

/** What one request carries besides its method and URL. */
export interface RequestOptions {
  accept?: string;
  body?: Buffer;
  contentType?: string;
  authorization?: string | undefined;
}

export interface RegistryExchangeOptions {
  /** Bound of each request from sending to the last byte. */
  timeoutMs: number;
  /** Hosts a redirect may lead to besides the host asked. */
  redirectHosts?: readonly string[] | undefined;
  /** Extra CA certificates (PEM) for the exchange's own pool. */
  ca?: string | undefined;
  /** Where `skr_agent_oci_registry_requests_total` is registered (optional). */
  metrics?: Registry | undefined;
  /** A dispatcher of the caller's (tests, proxies); default: a pool of the exchange's own. */
  dispatcher?: Dispatcher | undefined;
}

export class RegistryExchange {
  /** Requests sent, by operation (what the counter counts, for tests and benchmarks without a registry). */
  readonly sent: Record<RegistryOperation, number> = {
    token: 0,
    manifest: 0,
    blob: 0,
    tags: 0,
    catalog: 0,
    push: 0,
  };
  private readonly timeoutMs: number;
  private readonly redirects: RedirectPolicy;
  private readonly dispatcher: Dispatcher;
  private readonly ownDispatcher: boolean;
  private readonly requests: Counter<'operation' | 'code'> | undefined;

  constructor(options: RegistryExchangeOptions) {
    this.timeoutMs = options.timeoutMs;
    this.redirects = new RedirectPolicy(options.redirectHosts ?? []);
    this.ownDispatcher = options.dispatcher === undefined;
    this.dispatcher =
      options.dispatcher ??
      new Agent({
        connections: 8,
        connectTimeout: Math.min(this.timeoutMs, 10_000),
        headersTimeout: this.timeoutMs,
        bodyTimeout: this.timeoutMs,
        ...(options.ca ? { connect: { ca: options.ca } } : {}),
      });
    this.requests = options.metrics ? requestCounter(options.metrics) : undefined;
  }

  async close(): Promise<void> {
    if (this.ownDispatcher) await this.dispatcher.close();
  }

  /** One HTTP exchange (following redirects, without credentials to another origin), counted. */
  async request(
    operation: RegistryOperation,
    method: Dispatcher.HttpMethod,
    url: string,
    options: RequestOptions,
  ): Promise<Answer> {
    let target = new URL(url);
    const origin = target.origin;
    for (let hop = 0; ; hop++) {
      const authorization = target.origin === origin ? options.authorization : undefined;
      const answer = await this.once(operation, method, target, { ...options, authorization });
      const location = header(answer, 'location');
      if (!this.redirects.follows(method, answer.status, location, hop)) return answer;
      await answer.body.dump();
      target = this.redirects.next(target, {
        location: location!,
        status: answer.status,
        askedHost: new URL(url).host,
        operation,
      });
    }
  }

  private async once(
    operation: RegistryOperation,
    method: Dispatcher.HttpMethod,
    target: URL,
    options: RequestOptions,
  ): Promise<Answer> {
    const headers: Record<string, string> = {};
    if (options.accept) headers['accept'] = options.accept;
    if (options.contentType) headers['content-type'] = options.contentType;
    if (options.authorization) headers['authorization'] = options.authorization;
    let answer: Answer;
    try {
      const response = await this.dispatcher.request({
        origin: target.origin,
        path: `${target.pathname}${target.search}`,
        method,
        headers,
        ...(options.body ? { body: options.body } : {}),
        signal: AbortSignal.timeout(this.timeoutMs),
      });
      answer = { status: response.statusCode, headers: response.headers, body: response.body };
    } catch (error) {
      const { reason, text } = classifyNetworkError(error);
      this.count(operation, reason === 'RegistryTimeout' ? 'timeout' : 'error');
      throw new ModuleSourceError(reason, `registry ${target.host} ${text}`, { cause: error });
    }
    this.count(operation, String(answer.status));
    return answer;
  }

  private count(operation: RegistryOperation, code: string): void {
    this.sent[operation]++;
    this.requests?.inc({ operation, code });
  }
}

function requestCounter(metrics: Registry): Counter<'operation' | 'code'> {
  return registeredMetric(
    metrics,
    'skr_agent_oci_registry_requests_total',
    () =>
      new Counter({
        name: 'skr_agent_oci_registry_requests_total',
        help: 'Requests sent to OCI registries, by operation and HTTP status (or error).',
        labelNames: ['operation', 'code'] as const,
        registers: [metrics],
      }),
  );
}
