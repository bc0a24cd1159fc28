// The client factory: the API clients of one cluster over one pooled connection agent, with the request layers
// (time bound, circuit breaker, 429 retries, counting, bounded bodies) its options ask for.
import {
  ApiextensionsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  ServerConfiguration,
  createConfiguration,
  type Configuration,
  type KubeConfig,
} from '@kubernetes/client-node';
import { circuitBreaking } from './circuit-breaker.js';
import { currentDeadline } from './deadlines.js';
import { DiscoveringObjectApi } from './discovering-object-api.js';
import { ownCopy, pooledAuthentication } from './pooled-kubeconfig.js';
import type { ClusterKind, KubeRequestMetrics } from './request-metrics.js';
import {
  counted,
  dispatchingHttpLibrary,
  failureRecording,
  retryingTooManyRequests,
  timeBound,
  wrappedIn,
} from './request-layers.js';

/**
 * What a client tells the scheduler of the work its requests are part of (a work queue: workQueueRunHooks). The
 * caller that builds the client passes it in, so clients depend on no scheduler.
 */
export interface RunHooks {
  /** An API server answered a request: the work that made it is progressing, not waiting on a silent cluster. */
  noteAnswer(): void;
  /** Runs a request to a cluster every run shares (`sharedByRuns`): waiting on it is not the run's own slowness. */
  whileSharedClusterWorks<T>(request: () => Promise<T>): Promise<T>;
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
  /** True when `error` (or an error in its cause chain) is what one of this client's requests failed with. */
  failedRequest(error: unknown): boolean;
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
  /** The scheduler of the work these requests are part of (a work queue), told of every answer. */
  runs?: RunHooks;
  /**
   * A cluster every run of `runs` uses (the KCP): a run waiting on it is not counted slow, since its slowness is
   * every run's and freeing workers would only add load to it.
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
  const runs = options.runs;
  let httpApi = dispatchingHttpLibrary(options.maxResponseBytes, runs ? () => runs.noteAnswer() : undefined);
  if (metrics) httpApi = counted(httpApi, metrics.kind, metrics.counters);
  httpApi = retryingTooManyRequests(httpApi);
  if (options.circuitBreaker) httpApi = circuitBreaking(httpApi, name);
  // Outermost, so the bound covers retries and a refused circuit alike, as one request's time.
  if (timeoutMs !== undefined) httpApi = timeBound(httpApi, timeoutMs);
  if (runs && options.sharedByRuns)
    httpApi = wrappedIn(httpApi, (send) => runs.whileSharedClusterWorks(send));
  const recording = failureRecording(httpApi);
  httpApi = recording.library;
  const boundByDeadline = options.boundByDeadline === true;
  const configuration: Configuration = createConfiguration({
    baseServer: new ServerConfiguration(server, {}),
    httpApi,
    authMethods: { default: pool.auth },
    promiseMiddleware: [
      {
        pre: async (context) => {
          context.setHeaderParam('User-Agent', 'skr-watcher');
          const deadline = boundByDeadline ? currentDeadline() : undefined;
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
    failedRequest: recording.failed,
  };
}
