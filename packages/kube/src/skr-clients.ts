// Clients for many clusters in one process: one pooled connection agent per cluster, a bound on every
// request, and a cache of SKR clients keyed by the kubeconfig Secret they were built from.
import { AsyncLocalStorage } from 'node:async_hooks';
import {
  ApiextensionsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  HttpMethod,
  KubernetesObjectApi,
  Observable,
  ResponseContext,
  ServerConfiguration,
  createConfiguration,
  type Configuration,
  type HttpLibrary,
  type KubeConfig,
  type KubernetesObject,
  type RequestContext,
  type ResponseBody,
  type V1APIResource,
  type V1APIResourceList,
  type V1Secret,
} from '@kubernetes/client-node';
import { DEFAULTS, LABELS, LIMITS, backoffDelay } from '@skr-watcher/api';
import type { Logger } from '@skr-watcher/telemetry';
import { getGlobalDispatcher, type Dispatcher } from 'undici';
import { KubeRequestError, isNotFound, isUnreachable } from './apply.js';
import { sharedDiscovery, type DiscoveryCache } from './discovery.js';
import { kubeConfigFromYaml } from './kubeconfig.js';
import { PARTIAL_OBJECT_METADATA } from './metadata-list.js';
import type { ListPage } from './informer.js';
import { ownCopy, pooledAuthentication } from './pooled-kubeconfig.js';
import type { ClusterKind, KubeRequestMetrics } from './request-metrics.js';
import { noteAnswer, whileSharedClusterWorks } from './workqueue.js';

/**
 * KubernetesObjectApi whose discovery lookups go through a DiscoveryCache shared by every client of the process
 * (discovery.ts): one request per API server and group-version, not one per client and caller.
 */
export class DiscoveringObjectApi extends KubernetesObjectApi {
  constructor(
    configuration: Configuration,
    private readonly server: string,
    private readonly discovery: DiscoveryCache = sharedDiscovery,
  ) {
    super(configuration);
  }

  /** The resource serving `kind` in `apiVersion`; undefined when the server does not serve it. */
  discover(apiVersion: string, kind: string): Promise<V1APIResource | undefined> {
    return this.resource(apiVersion, kind);
  }

  override resource(apiVersion: string, kind: string): Promise<V1APIResource | undefined> {
    return this.discovery.served(this.server, apiVersion, kind, async () => {
      const path = `/${apiVersion.includes('/') ? 'apis' : 'api'}/${apiVersion}`;
      const request = this.configuration.baseServer.makeRequestContext(path, HttpMethod.GET);
      request.setHeaderParam('Accept', 'application/json');
      try {
        return (await this.requestPromise(request, 'V1APIResourceList')) as V1APIResourceList;
      } catch (error) {
        // A group-version the server does not serve: no kind of it is served.
        if (isNotFound(error)) return undefined;
        throw new KubeRequestError(`discovery ${path}`, error);
      }
    }) as Promise<V1APIResource | undefined>;
  }

  /**
   * The object's metadata only (a PartialObjectMetadata, read from etcd like any GET): the API server encodes and
   * sends no spec, data or status. Fails with 404 when the object is absent.
   */
  async readMetadata(spec: KubernetesObject): Promise<KubernetesObject> {
    const request = this.configuration.baseServer.makeRequestContext(
      await this.specUriPath(spec, 'read'),
      HttpMethod.GET,
    );
    request.setHeaderParam('Accept', PARTIAL_OBJECT_METADATA);
    return this.requestPromise(request);
  }
}

/** The API clients of one cluster; they share one connection pool. */
export interface ClusterClient {
  /** A name for logs and errors (never the kubeconfig). */
  readonly name: string;
  /** https://host:port of the API server. */
  readonly server: string;
  readonly core: CoreV1Api;
  readonly custom: CustomObjectsApi;
  readonly apiextensions: ApiextensionsV1Api;
  /** Any kind by apiVersion and kind; discovery answers are cached in this instance. */
  readonly objects: DiscoveringObjectApi;
  /** TLS connections this client has opened so far; steady under load when connections are reused. */
  connectionsOpened(): number;
  /** Of those, the ones that resumed an earlier TLS session. */
  connectionsResumed(): number;
  /** Closes the pooled connections; requests in flight get a short grace period to finish. */
  close(): Promise<void>;
}

export interface ClusterClientOptions {
  name?: string;
  /** Every request is aborted after this long, so an unreachable cluster cannot hang a caller. */
  timeoutMs?: number;
  /**
   * Largest response body read; a larger one is cut off and the request fails with ResponseTooLargeError, so a
   * cluster cannot make this process hold more than this per request in flight. Error answers get at most
   * LIMITS.apiErrorBodyBytes (their text travels into messages and status).
   */
  maxResponseBytes?: number;
  /**
   * Fail fast while the cluster is known unreachable: after CIRCUIT.failuresToOpen requests in a row got no
   * answer, requests fail at once (ECIRCUITOPEN) until a single probe request is let through after a cooldown.
   */
  circuitBreaker?: boolean;
  /** Requests made inside `withinDeadline` or `abortableBy` are also aborted at that deadline or signal. */
  boundByDeadline?: boolean;
  /** Counts this client's requests and TLS connections under `kind` (skr_agent_kube_requests_total, ...). */
  metrics?: { kind: ClusterKind; counters: KubeRequestMetrics };
  /** At most this many connections; further requests wait (default: one per request in flight). */
  maxConnections?: number;
  /** How long an idle connection is kept (default 4 s, undici's). */
  keepAliveMs?: number;
  /**
   * A cluster every work-queue run uses (the KCP): a run waiting on it is not counted slow (workqueue.ts), since
   * its slowness is every run's and freeing workers would only add load to it.
   */
  sharedByRuns?: boolean;
}

/**
 * API clients for the current context of `kubeConfig`. client-node 2.x builds a new undici Agent (so a new
 * TLS connection) for every request; here one Agent per cluster is made once and reused by every request.
 */
export async function createClusterClient(
  kubeConfig: KubeConfig,
  options: ClusterClientOptions = {},
): Promise<ClusterClient> {
  const cluster = kubeConfig.getCurrentCluster();
  if (!cluster)
    throw new Error(`kubeconfig${options.name ? ` of ${options.name}` : ''} has no current cluster`);
  const name = options.name ?? ownCopy(cluster.name);
  // A copy: the client outlives the KubeConfig, whose fields may be slices of the whole kubeconfig text.
  const server = ownCopy(cluster.server);
  const metrics = options.metrics;
  const pool = await pooledAuthentication(kubeConfig, {
    ...(metrics
      ? { onConnection: (resumed: boolean) => metrics.counters.connection(metrics.kind, resumed) }
      : {}),
    ...(options.maxConnections !== undefined ? { connections: options.maxConnections } : {}),
    ...(options.keepAliveMs !== undefined ? { keepAliveMs: options.keepAliveMs } : {}),
  });

  const timeoutMs = options.timeoutMs;
  let httpApi = dispatchingHttpLibrary(options.maxResponseBytes);
  if (metrics) httpApi = counted(httpApi, metrics.kind, metrics.counters);
  httpApi = retryingTooManyRequests(httpApi);
  if (options.circuitBreaker) httpApi = circuitBreaking(httpApi, name);
  // Outermost, so the bound covers retries and a refused circuit alike, as one request's time.
  if (timeoutMs !== undefined) httpApi = timeBound(httpApi, timeoutMs);
  if (options.sharedByRuns) httpApi = holdingRuns(httpApi);
  const boundByDeadline = options.boundByDeadline === true;
  const configuration: Configuration = createConfiguration({
    baseServer: new ServerConfiguration(server, {}),
    httpApi,
    authMethods: { default: pool.auth },
    promiseMiddleware: [
      {
        pre: async (context) => {
          context.setHeaderParam('User-Agent', 'skr-watcher');
          const deadline = boundByDeadline ? deadlines.getStore() : undefined;
          if (deadline && !context.getSignal()) context.setSignal(deadline);
          return context;
        },
        post: async (response) => response,
      },
    ],
  });
  return {
    name,
    server,
    core: new CoreV1Api(configuration),
    custom: new CustomObjectsApi(configuration),
    apiextensions: new ApiextensionsV1Api(configuration),
    // Namespaced objects given without a namespace go to `default`, as kubectl does.
    objects: new DiscoveringObjectApi(configuration, server),
    connectionsOpened: pool.connectionsOpened,
    connectionsResumed: pool.connectionsResumed,
    close: pool.close,
  };
}

/** The deadline of the work this request is part of (a reconcile), if any. */
const deadlines = new AsyncLocalStorage<AbortSignal>();

/** The deadline passed: what requests made within `withinDeadline` are aborted with. */
export class DeadlineExceededError extends Error {
  constructor(what: string, ms: number) {
    super(`${what}: deadline of ${ms} ms passed`);
    // Named like AbortSignal.timeout's reason, so callers treat it as the cluster not answering in time.
    this.name = 'TimeoutError';
  }
}

/**
 * Runs `work` so that every request of a `boundByDeadline` client made inside it, however deep, is aborted
 * once `ms` have passed: one slow cluster costs its own work at most `ms`, whatever the number of calls.
 */
export async function withinDeadline<T>(what: string, ms: number, work: () => Promise<T>): Promise<T> {
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(new DeadlineExceededError(what, ms)), ms);
  timer.unref();
  try {
    return await abortableBy(controller.signal, work);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * Runs `work` so that every request of a `boundByDeadline` client made inside it is aborted when `signal` fires
 * (or an enclosing deadline or signal does): a request not yet sent is never sent, one in flight is dropped.
 */
export function abortableBy<T>(signal: AbortSignal, work: () => Promise<T>): Promise<T> {
  const outer = deadlines.getStore();
  return deadlines.run(outer ? AbortSignal.any([outer, signal]) : signal, work);
}

/** Circuit breaker settings of cluster clients (per cluster). */
export const CIRCUIT = {
  /** Two unanswered requests in a row: one lost connection on a healthy cluster does not open it. */
  failuresToOpen: 2,
  /** First cooldown; doubles while probes keep failing, up to maxOpenMs. */
  openMs: 10_000,
  /** A cluster that comes back is used again within two minutes. */
  maxOpenMs: 120_000,
} as const;

/** A request refused at once because its cluster has not been answering. */
export class CircuitOpenError extends Error {
  /** A network-style code, so isUnreachable() and callers treat it like a refused connection. */
  readonly code = 'ECIRCUITOPEN';

  constructor(cluster: string, retryAt: number) {
    super(
      `${cluster}: not answering; requests are refused until ${new Date(retryAt).toISOString()} (circuit open)`,
    );
    this.name = 'CircuitOpenError';
  }
}

/** Closed → open after CIRCUIT.failuresToOpen unanswered requests → one probe after the cooldown → closed. */
function circuitBreaking(inner: HttpLibrary, cluster: string): HttpLibrary {
  let failures = 0;
  let openUntil = 0;
  /** Probes that failed in a row; each doubles the next cooldown. */
  let failedProbes = 0;
  let probing = false;
  async function send(request: RequestContext): Promise<ResponseContext> {
    const now = Date.now();
    if (openUntil > now || (openUntil > 0 && probing)) throw new CircuitOpenError(cluster, openUntil);
    const probe = openUntil > 0;
    if (probe) probing = true;
    try {
      const response = await inner.send(request).toPromise();
      failures = 0;
      openUntil = 0;
      failedProbes = 0;
      return response;
    } catch (error) {
      // Only silence counts: an HTTP answer, even 5xx, came from a cluster that is there.
      if (isUnreachable(error)) {
        failures += 1;
        if (probe || failures >= CIRCUIT.failuresToOpen) {
          // No jitter: the cooldown gates this process's own requests, not a herd's.
          openUntil = Date.now() + backoffDelay(failedProbes + 1, CIRCUIT.openMs, CIRCUIT.maxOpenMs, () => 1);
          if (probe) failedProbes += 1;
        }
      }
      throw error;
    } finally {
      if (probe) probing = false;
    }
  }
  return { send: (request) => new Observable(send(request)) };
}

/** Requests during which the run that makes them is not slow (whileSharedClusterWorks). */
function holdingRuns(inner: HttpLibrary): HttpLibrary {
  return {
    send: (request) => new Observable(whileSharedClusterWorks(() => inner.send(request).toPromise())),
  };
}

/**
 * Aborts a request (and the reading of its answer) after `ms`. A timer cleared when the request is done, not
 * AbortSignal.timeout: that one fires anyway, long after the answer came, and its DOMException and abort event
 * were a visible share of the agent's CPU (decision 016).
 */
function timeBound(inner: HttpLibrary, ms: number): HttpLibrary {
  async function send(request: RequestContext): Promise<ResponseContext> {
    const what = `${request.getHttpMethod()} ${new URL(request.getUrl()).pathname}`;
    const controller = new AbortController();
    const timer = setTimeout(
      () => controller.abort(new DOMException(`${what}: no answer within ${ms} ms`, 'TimeoutError')),
      ms,
    );
    const outer = request.getSignal();
    request.setSignal(outer ? AbortSignal.any([outer, controller.signal]) : controller.signal);
    try {
      return await inner.send(request).toPromise();
    } finally {
      clearTimeout(timer);
    }
  }
  return { send: (request) => new Observable(send(request)) };
}

/**
 * Counts every request sent on the wire (below the retries, so each retry counts: it costs the API server) and the
 * bytes of its answer, which the library below has read whole.
 */
function counted(inner: HttpLibrary, kind: ClusterKind, counters: KubeRequestMetrics): HttpLibrary {
  async function send(request: RequestContext): Promise<ResponseContext> {
    const method = request.getHttpMethod();
    const url = request.getUrl();
    const contentType = request.getHeaders()['Content-Type'];
    counters.request(kind, method, url, contentType);
    let response: ResponseContext;
    try {
      response = await inner.send(request).toPromise();
    } catch (error) {
      counters.outcome?.(kind, method, url, contentType, 'error');
      throw error;
    }
    counters.outcome?.(kind, method, url, contentType, response.httpStatusCode);
    if (counters.responseBody) {
      counters.responseBody(kind, method, url, contentType, (await response.body.binary()).length);
    }
    return response;
  }
  return { send: (request) => new Observable(send(request)) };
}

const TOO_MANY_REQUESTS_ATTEMPTS = 5;
const RETRY_AFTER_CAP_MS = 2_000;

/**
 * Retries 429 answers after their Retry-After (capped), as client-go does: API servers send them while a
 * fresh CRD's storage initialises and under priority-and-fairness throttling. The request's abort signal
 * still bounds the whole.
 */
function retryingTooManyRequests(inner: HttpLibrary): HttpLibrary {
  async function send(request: RequestContext): Promise<ResponseContext> {
    for (let attempt = 1; ; attempt++) {
      const response = await inner.send(request).toPromise();
      if (response.httpStatusCode !== 429 || attempt >= TOO_MANY_REQUESTS_ATTEMPTS) return response;
      await response.body.text().catch(() => undefined); // release the connection
      const seconds = Number(response.headers['retry-after']);
      const delay = Math.min(
        Number.isFinite(seconds) && seconds > 0 ? seconds * 1000 : 250 * attempt,
        RETRY_AFTER_CAP_MS,
      );
      await new Promise((resolve) => setTimeout(resolve, delay));
      request.getSignal()?.throwIfAborted();
    }
  }
  return { send: (request) => new Observable(send(request)) };
}

/** A response body above the client's bound: the rest was not read and the connection was dropped. */
export class ResponseTooLargeError extends Error {
  readonly limitBytes: number;

  constructor(request: string, limitBytes: number, declaredBytes?: number) {
    super(
      `${request}: response body ${declaredBytes !== undefined ? `of ${declaredBytes} bytes ` : ''}exceeds the ` +
        `limit of ${limitBytes} bytes; not read`,
    );
    this.name = 'ResponseTooLargeError';
    this.limitBytes = limitBytes;
  }
}

export function isResponseTooLarge(error: unknown): boolean {
  for (let current = error, depth = 0; current instanceof Error && depth < 8; depth++) {
    if (current instanceof ResponseTooLargeError) return true;
    current = current.cause;
  }
  return false;
}

/**
 * Sends requests with undici's `Dispatcher.request` instead of client-node's `fetch`: fetch's WHATWG layers (web
 * streams, Headers, Response, a DOMException per abort) cost more agent CPU per request than the request itself
 * (decision 016). The body is read at once, so the connection is free for the next request as soon as the answer
 * is in, and through a counter that stops at `maxBytes` (client-node would buffer any size): a larger body is
 * dropped, which closes its connection, and the call fails. Error answers get at most LIMITS.apiErrorBodyBytes.
 */
function dispatchingHttpLibrary(maxBytes: number | undefined): HttpLibrary {
  async function send(request: RequestContext): Promise<ResponseContext> {
    const url = new URL(request.getUrl());
    const body = request.getBody();
    if (body !== undefined && typeof body !== 'string')
      throw new Error(`${request.getHttpMethod()} ${url.pathname}: only JSON or YAML text bodies are sent`);
    const dispatcher = (request.getDispatcher() as Dispatcher | undefined) ?? getGlobalDispatcher();
    const signal = request.getSignal();
    const answer = await untilAborted(
      signal,
      dispatcher.request({
        origin: url.origin,
        path: `${url.pathname}${url.search}`,
        method: request.getHttpMethod() as Dispatcher.HttpMethod,
        headers: request.getHeaders(),
        body: body ?? null,
        ...(signal ? { signal } : {}),
      }),
    );
    // The run this request is for is working, not waiting on a silent cluster (workqueue.ts).
    noteAnswer();
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(answer.headers)) {
      if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : value;
    }
    const limit =
      answer.statusCode >= 400
        ? Math.min(maxBytes ?? Infinity, LIMITS.apiErrorBodyBytes)
        : (maxBytes ?? Infinity);
    const bytes = await readBounded(
      answer.body,
      limit,
      `${request.getHttpMethod()} ${url.pathname}`,
      headers,
    );
    const responseBody: ResponseBody = {
      binary: async () => bytes,
      text: async () => bytes.toString('utf8'),
      stream: () => null,
    };
    return new ResponseContext(answer.statusCode, headers, responseBody);
  }
  return { send: (request) => new Observable(send(request)) };
}

/**
 * `request`, or the signal's reason as soon as it fires: undici applies an abort only once the request has a
 * connection, and a server that accepts but never finishes the handshake would hold the caller for undici's 10 s
 * connect timeout (fetch gave up at once, and so does this).
 */
function untilAborted<T>(signal: AbortSignal | undefined, request: Promise<T>): Promise<T> {
  if (!signal) return request;
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason as Error);
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
    request.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error as Error);
      },
    );
  });
}

async function readBounded(
  body: Dispatcher.ResponseData['body'],
  limit: number,
  what: string,
  headers: Record<string, string>,
): Promise<Buffer> {
  const declared = Number(headers['content-length']);
  if (Number.isFinite(declared) && declared > limit) {
    body.destroy();
    throw new ResponseTooLargeError(what, limit, declared);
  }
  const chunks: Buffer[] = [];
  let total = 0;
  for await (const chunk of body as AsyncIterable<Buffer>) {
    total += chunk.byteLength;
    if (total > limit) {
      body.destroy();
      throw new ResponseTooLargeError(what, limit);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks, total);
}

/** An SKR's client, and the Secret it was built from. */
export interface SkrClient {
  readonly kyma: string;
  readonly client: ClusterClient;
  readonly secret: { namespace: string; name: string; resourceVersion: string };
}

export interface SkrClientsOptions {
  /** KCP client that reads the kubeconfig Secrets. */
  kcp: ClusterClient;
  /** KCP namespace of the Secrets. */
  namespace: string;
  /** Bound on every SKR request. */
  timeoutMs?: number;
  /** Largest SKR answer read (default LIMITS.skrResponseBytes): an SKR cannot exhaust the agent's memory. */
  maxResponseBytes?: number;
  /**
   * The Kyma's one kubeconfig Secret as a watch cache knows it (undefined: unknown, or not exactly one). While its
   * version equals the cached client's, the Secret is not read again: no request, no kubeconfig bytes per
   * reconcile. When it differs, the Secret is read by name (one object) instead of listed by label: the API
   * server answers a label-selected list by scanning every Secret of the namespace (decision 016).
   */
  knownSecretOf?: (kyma: string) => KnownSecret | undefined;
  logger?: Logger;
  /** Counts the SKR clients' requests and connections as `skr`. */
  metrics?: KubeRequestMetrics;
}

export interface SkrClients {
  /**
   * The SKR client of a Kyma, from the Secret labelled `operator.kyma-project.io/kyma-name=<kyma>` (key
   * `config`). Reused while the Secret's resourceVersion is unchanged; rebuilt (old connections closed) when it
   * changes. Undefined when there is no such Secret.
   */
  forKyma(kyma: string): Promise<SkrClient | undefined>;
  /** Drops and closes the cached client of a Kyma (e.g. after the Kyma is gone). */
  evict(kyma: string): Promise<void>;
  /** Number of cached clients. */
  size(): number;
  close(): Promise<void>;
}

/** A kubeconfig Secret as a watch cache knows it. */
export interface KnownSecret {
  name: string;
  /** `<uid>/<resourceVersion>`. */
  version: string;
}

/** `<uid>/<resourceVersion>` of a Secret: what a cached SKR client was built from. */
export function secretVersion(secret: V1Secret): string {
  return `${secret.metadata?.uid ?? ''}/${secret.metadata?.resourceVersion ?? ''}`;
}

interface CacheEntry {
  key: string;
  skr: SkrClient;
}

export function createSkrClients(options: SkrClientsOptions): SkrClients {
  const entries = new Map<string, CacheEntry>();
  // One build per Kyma at a time, so two callers never create (and leak) two pools for one Secret.
  const building = new Map<string, Promise<SkrClient | undefined>>();
  const { kcp, namespace, logger } = options;

  /** The Secret by name, if it is still this Kyma's kubeconfig Secret; undefined when gone or no longer so. */
  async function readKnown(kyma: string, known: KnownSecret): Promise<V1Secret | undefined> {
    let secret: V1Secret;
    try {
      secret = await kcp.core.readNamespacedSecret({ namespace, name: known.name });
    } catch (cause) {
      if (isNotFound(cause)) return undefined;
      throw new KubeRequestError(`read Secret ${namespace}/${known.name} in ${kcp.name}`, cause);
    }
    const isKubeconfig =
      secret.metadata?.labels?.[LABELS.kymaName] === kyma &&
      secret.data?.[DEFAULTS.kubeconfigSecretKey] !== undefined;
    return isKubeconfig ? secret : undefined;
  }

  /** The Kyma's one kubeconfig Secret by label; undefined when there is none, an error when there are several. */
  async function listOne(kyma: string): Promise<V1Secret | undefined> {
    const labelSelector = `${LABELS.kymaName}=${kyma}`;
    let list;
    try {
      // From the watch cache: a consistent list would wait out our own recent writes; a Secret changed a
      // moment ago is picked up by the next pass (the runtime watches Secrets).
      list = await kcp.core.listNamespacedSecret({ namespace, labelSelector, resourceVersion: '0' });
    } catch (cause) {
      throw new KubeRequestError(`list Secrets ${namespace} -l ${labelSelector} in ${kcp.name}`, cause);
    }
    const secrets = list.items.filter((secret) => secret.data?.[DEFAULTS.kubeconfigSecretKey] !== undefined);
    if (secrets.length > 1) {
      const names = secrets.map((s) => s.metadata?.name).join(', ');
      throw new Error(
        `Kyma ${namespace}/${kyma}: ${secrets.length} kubeconfig Secrets (${names}); expected one`,
      );
    }
    return secrets[0];
  }

  async function lookup(kyma: string): Promise<SkrClient | undefined> {
    const known = options.knownSecretOf?.(kyma);
    const current = entries.get(kyma);
    if (known !== undefined && current?.key === known.version) return current.skr;
    // A GET costs the API server one object; the list (a scan of every Secret of the namespace) only when the
    // watch cache does not know the Kyma's Secret, or the one it knows is gone or relabelled.
    const secret = (known ? await readKnown(kyma, known) : undefined) ?? (await listOne(kyma));
    if (!secret) {
      await drop(kyma);
      return undefined;
    }
    const name = secret.metadata?.name ?? '';
    const resourceVersion = secret.metadata?.resourceVersion ?? '';
    const key = secretVersion(secret);
    const cached = entries.get(kyma);
    if (cached?.key === key) return cached.skr;

    const source = `Secret ${namespace}/${name} key ${DEFAULTS.kubeconfigSecretKey}`;
    const yaml = Buffer.from(secret.data?.[DEFAULTS.kubeconfigSecretKey] ?? '', 'base64').toString('utf8');
    const client = await createClusterClient(kubeConfigFromYaml(yaml, source), {
      name: `skr ${kyma}`,
      maxResponseBytes: options.maxResponseBytes ?? LIMITS.skrResponseBytes,
      circuitBreaker: true,
      boundByDeadline: true,
      maxConnections: LIMITS.skrConnections,
      ...(options.metrics ? { metrics: { kind: 'skr' as const, counters: options.metrics } } : {}),
      ...(options.timeoutMs !== undefined ? { timeoutMs: options.timeoutMs } : {}),
    });
    const skr: SkrClient = { kyma, client, secret: { namespace, name, resourceVersion } };
    entries.set(kyma, { key, skr });
    if (cached) {
      logger?.info({ kyma, secret: name }, 'kubeconfig Secret changed; SKR client rebuilt');
      await cached.skr.client.close();
    }
    return skr;
  }

  async function drop(kyma: string): Promise<void> {
    const cached = entries.get(kyma);
    entries.delete(kyma);
    await cached?.skr.client.close();
  }

  return {
    forKyma(kyma) {
      const inFlight = building.get(kyma);
      if (inFlight) return inFlight;
      const promise = lookup(kyma).finally(() => building.delete(kyma));
      building.set(kyma, promise);
      return promise;
    },
    evict: drop,
    size: () => entries.size,
    async close() {
      const all = [...entries.values()];
      entries.clear();
      await Promise.all(all.map((entry) => entry.skr.client.close()));
    },
  };
}

const FIRST_PAGE_SIZE = 100;

/**
 * Every item of a list, read page by page so no answer grows with the cluster; a page above the client's
 * response bound is asked again at half the size, down to one object. `keep` reduces each item as its page
 * arrives, so what is held is the kept part only.
 */
export async function listInPages<T, K>(
  listPage: (page: { limit: number; continueToken?: string }) => Promise<ListPage<T>>,
  keep: (item: T) => K,
): Promise<K[]> {
  const kept: K[] = [];
  let limit = FIRST_PAGE_SIZE;
  let continueToken: string | undefined;
  for (;;) {
    let page: ListPage<T>;
    try {
      page = await listPage({ limit, ...(continueToken ? { continueToken } : {}) });
    } catch (error) {
      if (!isResponseTooLarge(error) || limit === 1) throw error;
      limit = Math.max(1, Math.floor(limit / 2));
      continue;
    }
    for (const item of page.items) kept.push(keep(item));
    continueToken = page.metadata?.continue || undefined;
    if (!continueToken) break;
  }
  return kept;
}
