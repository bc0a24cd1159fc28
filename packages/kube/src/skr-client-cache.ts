// The SKR clients of one process, one per Kyma, built from the Kyma's kubeconfig Secret in KCP and reused while that
// Secret is unchanged.
import type { V1Secret } from '@kubernetes/client-node';
import { DEFAULTS, LABELS, LIMITS } from '@skr-watcher/api';
import type { Logger } from '@skr-watcher/telemetry';
import { KubeRequestError, isNotFound } from './apply.js';
import { createClusterClient, type ClusterClient, type RunHooks } from './cluster-client.js';
import { kubeConfigFromYaml } from './kubeconfig.js';
import type { KubeRequestMetrics } from './request-metrics.js';

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
  /** Told of every SKR answer: the scheduler of the work that makes the requests (see ClusterClientOptions.runs). */
  runs?: RunHooks;
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
      ...(options.runs ? { runs: options.runs } : {}),
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
