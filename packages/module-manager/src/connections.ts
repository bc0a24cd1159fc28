// One pool of kept-alive connections for all of a manager's requests and watches. client-node 2.0.1 builds a new
// undici Agent, so a new TLS connection, for every request: each SyncResource write and condition write of an edit
// paid a TLS handshake with a client certificate, on the manager's CPU and on the KCP API server's.
import type { KubeConfig, RequestContext } from '@kubernetes/client-node';
import { pooledKubeConfig, type PooledKubeConfig } from '@skr-watcher/kube';

/** Idle connections are kept this long: edits may come seconds apart, and a manager talks to one KCP only. */
const KEEP_ALIVE_MS = 60_000;

export interface KeptConnections {
  /** `source`, but every request and watch made with it shares the pool (built on first use). */
  readonly kubeConfig: KubeConfig;
  /** Closes the pool; the next request builds a new one (a manager started again). */
  close(): Promise<void>;
}

export function keptConnections(
  source: KubeConfig,
  onConnection: (resumed: boolean) => void = () => {},
): KeptConnections {
  let pool: Promise<PooledKubeConfig> | undefined;
  const pooled = () =>
    (pool ??= pooledKubeConfig(source, { keepAliveMs: KEEP_ALIVE_MS, onConnection }).catch(
      (error: unknown) => {
        // Not kept: the next request tries again (the kubeconfig's files may be there by then).
        pool = undefined;
        throw error;
      },
    ));
  // A child of the source object: everything else (server, credentials per request, plugins) stays the source's.
  const kubeConfig = Object.create(source) as KubeConfig;
  kubeConfig.applySecurityAuthentication = async (context: RequestContext) => {
    await (await pooled()).kubeConfig.applySecurityAuthentication(context);
  };
  return {
    kubeConfig,
    async close() {
      const closing = pool;
      pool = undefined;
      await (await closing?.catch(() => undefined))?.close();
    },
  };
}
