// One connection pool per cluster: client-node 2.0.1 builds a new undici Agent, so a new TLS connection, for
// every request and every watch. The one place that keeps a cluster's Agent and hands it to every request.
import type { AgentOptions } from 'node:https';
import { TLSSocket } from 'node:tls';
import { HttpMethod, RequestContext, type KubeConfig } from '@kubernetes/client-node';
import { Agent, buildConnector } from 'undici';

/** A KubeConfig whose requests and watches share one connection pool. */
export interface PooledKubeConfig {
  readonly kubeConfig: KubeConfig;
  /** TLS connections opened so far; steady when connections are reused. */
  connectionsOpened(): number;
  /** Of those, the ones whose handshake resumed an earlier TLS session (no certificates sent or verified). */
  connectionsResumed(): number;
  /** Closes the pooled connections; requests in flight get a short grace period to finish. */
  close(): Promise<void>;
}

type Dispatcher = NonNullable<ReturnType<RequestContext['getDispatcher']>>;

/**
 * The Agent client-node would build for a direct TLS connection, but speaking HTTP/1.1 only. undici 8 offers h2
 * by default and the API server takes it; under many aborted requests on one session, node's HTTP/2 writer
 * (Http2Session::SendPendingData) was seen looping inside one tick, growing its native outgoing buffer to
 * gigabytes while the event loop never turned (decision 012, "The runaway"). Undefined for proxies and for
 * clusters without TLS options: those keep client-node's own dispatcher.
 *
 * Every new connection offers the cluster's last TLS session ticket, so a reconnect after the idle timeout (an
 * SKR seen once per resync) resumes instead of exchanging and verifying certificates on both sides (decision
 * 016). undici's own session cache holds tickets only weakly, and a ticket is collected within seconds.
 */
async function http1Agent(
  source: KubeConfig,
  onConnection: (resumed: boolean) => void,
  connections: number | undefined,
): Promise<Agent | undefined> {
  const cluster = source.getCurrentCluster();
  const tls: AgentOptions = {};
  await source.applyToHTTPSOptions(tls);
  const options = source.createDispatcherOptions(cluster, {
    ca: tls.ca,
    cert: tls.cert,
    key: tls.key,
    pfx: tls.pfx,
    passphrase: tls.passphrase,
    ...(tls.rejectUnauthorized !== undefined ? { rejectUnauthorized: tls.rejectUnauthorized } : {}),
    ...(tls.servername !== undefined ? { servername: tls.servername } : {}),
  });
  if (options.type !== 'agent') return undefined;
  const connectOptions = { ...options.connect, allowH2: false };
  let ticket: Buffer | undefined;
  const connect: buildConnector.connector = (target, callback) => {
    const connector = buildConnector(ticket ? { ...connectOptions, session: ticket } : connectOptions);
    connector(target, (...args) => {
      const socket = args[1];
      // An http:// server (allowed with insecure-skip-tls-verify) gives a plain socket: no session to keep.
      if (socket instanceof TLSSocket) {
        onConnection(socket.isSessionReused());
        // TLS 1.3 sends tickets after the handshake; the newest one is offered next time.
        socket.on('session', (session: Buffer) => (ticket = session));
      }
      callback(...args);
    });
  };
  return new Agent({ connect, allowH2: false, ...(connections ? { connections } : {}) });
}

const CLOSE_GRACE_MS = 1_000;

/**
 * Derives a KubeConfig that keeps everything else of `source` (credentials are still applied per request, so
 * rotating tokens work) but hands every request the same Agent, for API clients and Watch alike.
 */
export async function pooledKubeConfig(
  source: KubeConfig,
  options: {
    onConnection?: (resumed: boolean) => void;
    /** At most this many connections (undefined: as many as requests in flight). */
    connections?: number;
  } = {},
): Promise<PooledKubeConfig> {
  const cluster = source.getCurrentCluster();
  if (!cluster) throw new Error('kubeconfig has no current cluster');
  // Let client-node build its dispatcher once (it knows proxies, CAs, client certificates), then keep it.
  const probe = new RequestContext(cluster.server, HttpMethod.GET);
  await source.applySecurityAuthentication(probe);
  let connections = 0;
  let resumed = 0;
  const dispatcher: Dispatcher | undefined =
    (await http1Agent(
      source,
      (wasResumed) => {
        if (wasResumed) resumed += 1;
        options.onConnection?.(wasResumed);
      },
      options.connections,
    )) ?? probe.getDispatcher();
  dispatcher?.on('connect', () => {
    connections += 1;
  });
  // A child of the source object: every other method and field is the source's own.
  const pooled = Object.create(source) as KubeConfig;
  pooled.applySecurityAuthentication = async (context: RequestContext) => {
    await source.applySecurityAuthentication(context);
    if (dispatcher) context.setDispatcher(dispatcher);
  };
  let closed = false;
  return {
    kubeConfig: pooled,
    connectionsOpened: () => connections,
    connectionsResumed: () => resumed,
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
