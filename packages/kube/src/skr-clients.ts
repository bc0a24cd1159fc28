// Clients for many clusters in one process: one pooled connection agent per cluster, a bound on every
// request, and a cache of SKR clients keyed by the kubeconfig Secret they were built from.
import {
  ApiextensionsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  HttpMethod,
  KubeConfig,
  KubernetesObjectApi,
  Observable,
  RequestContext,
  ServerConfiguration,
  createConfiguration,
  type Configuration,
  type HttpLibrary,
  type ResponseContext,
  type SecurityAuthentication,
} from '@kubernetes/client-node';
import { DEFAULTS, LABELS } from '@skr-watcher/api';
import type { Logger } from '@skr-watcher/telemetry';
import { KubeRequestError } from './apply.js';

type Dispatcher = NonNullable<ReturnType<RequestContext['getDispatcher']>>;

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
  readonly objects: KubernetesObjectApi;
  /** TLS connections this client has opened so far; steady under load when connections are reused. */
  connectionsOpened(): number;
  /** Closes the pooled connections; requests in flight get a short grace period to finish. */
  close(): Promise<void>;
}

export interface ClusterClientOptions {
  name?: string;
  /** Every request is aborted after this long, so an unreachable cluster cannot hang a caller. */
  timeoutMs?: number;
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
  const name = options.name ?? cluster.name;

  // Let client-node build its dispatcher once (it knows proxies, CAs, client certificates), then keep it.
  const probe = new RequestContext(cluster.server, HttpMethod.GET);
  await kubeConfig.applySecurityAuthentication(probe);
  const dispatcher: Dispatcher | undefined = probe.getDispatcher();
  let connections = 0;
  dispatcher?.on('connect', () => {
    connections += 1;
  });

  const auth: SecurityAuthentication = {
    getName: () => 'pooled kubeconfig authentication',
    async applySecurityAuthentication(context) {
      // Headers (tokens, exec plugins, impersonation) are refreshed per request; the connection pool is not.
      await kubeConfig.applySecurityAuthentication(context);
      if (dispatcher) context.setDispatcher(dispatcher);
    },
  };
  const timeoutMs = options.timeoutMs;
  const configuration: Configuration = createConfiguration({
    baseServer: new ServerConfiguration(cluster.server, {}),
    httpApi: retryingTooManyRequests(createConfiguration().httpApi),
    authMethods: { default: auth },
    promiseMiddleware: [
      {
        pre: async (context) => {
          context.setHeaderParam('User-Agent', 'skr-watcher');
          if (timeoutMs !== undefined && !context.getSignal())
            context.setSignal(AbortSignal.timeout(timeoutMs));
          return context;
        },
        post: async (response) => response,
      },
    ],
  });
  // Namespaced objects given without a namespace go to `default`, as kubectl does.
  const objects = new KubernetesObjectApi(configuration);
  let closed = false;
  return {
    name,
    server: cluster.server,
    core: new CoreV1Api(configuration),
    custom: new CustomObjectsApi(configuration),
    apiextensions: new ApiextensionsV1Api(configuration),
    objects,
    connectionsOpened: () => connections,
    async close() {
      if (closed || !dispatcher) return;
      closed = true;
      // Graceful first; a connection stuck in a handshake with a silent server would hold close() for undici's
      // 10 s connect timeout, so what is left after the grace period is destroyed.
      let timer: NodeJS.Timeout | undefined;
      const grace = new Promise<'late'>((resolve) => {
        timer = setTimeout(() => resolve('late'), CLOSE_GRACE_MS);
      });
      const outcome = await Promise.race([dispatcher.close().then(() => 'closed' as const), grace]);
      clearTimeout(timer);
      if (outcome === 'late') await dispatcher.destroy();
    },
  };
}

const TOO_MANY_REQUESTS_ATTEMPTS = 5;
const CLOSE_GRACE_MS = 1_000;
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

/** Loads and checks a kubeconfig held in memory (e.g. a Secret's `config` key). */
export function kubeConfigFromYaml(yaml: string, source: string): KubeConfig {
  const kubeConfig = new KubeConfig();
  try {
    kubeConfig.loadFromString(yaml);
  } catch (cause) {
    throw new Error(`${source}: not a kubeconfig`, { cause });
  }
  const cluster = kubeConfig.getCurrentCluster();
  if (!cluster) throw new Error(`${source}: kubeconfig has no current context with a cluster`);
  let url: URL;
  try {
    url = new URL(cluster.server);
  } catch (cause) {
    throw new Error(`${source}: cluster server ${JSON.stringify(cluster.server)} is not a URL`, { cause });
  }
  if (url.protocol !== 'https:')
    throw new Error(`${source}: cluster server must be https, got ${url.protocol}`);
  return kubeConfig;
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
  logger?: Logger;
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

interface CacheEntry {
  key: string;
  skr: SkrClient;
}

export function createSkrClients(options: SkrClientsOptions): SkrClients {
  const entries = new Map<string, CacheEntry>();
  // One build per Kyma at a time, so two callers never create (and leak) two pools for one Secret.
  const building = new Map<string, Promise<SkrClient | undefined>>();
  const { kcp, namespace, logger } = options;

  async function lookup(kyma: string): Promise<SkrClient | undefined> {
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
    if (secrets.length === 0) {
      await drop(kyma);
      return undefined;
    }
    if (secrets.length > 1) {
      const names = secrets.map((s) => s.metadata?.name).join(', ');
      throw new Error(
        `Kyma ${namespace}/${kyma}: ${secrets.length} kubeconfig Secrets (${names}); expected one`,
      );
    }
    const secret = secrets[0]!;
    const name = secret.metadata?.name ?? '';
    const resourceVersion = secret.metadata?.resourceVersion ?? '';
    const key = `${secret.metadata?.uid ?? ''}/${resourceVersion}`;
    const cached = entries.get(kyma);
    if (cached?.key === key) return cached.skr;

    const source = `Secret ${namespace}/${name} key ${DEFAULTS.kubeconfigSecretKey}`;
    const yaml = Buffer.from(secret.data?.[DEFAULTS.kubeconfigSecretKey] ?? '', 'base64').toString('utf8');
    const client = await createClusterClient(kubeConfigFromYaml(yaml, source), {
      name: `skr ${kyma}`,
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
