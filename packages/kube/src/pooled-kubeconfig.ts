// One connection pool per cluster: client-node 2.0.1 builds a new undici Agent, so a new TLS connection, for
// every request and every watch. The one place that keeps a cluster's Agent and hands it to every request.
import { createHash } from 'node:crypto';
import type { AgentOptions } from 'node:https';
import { createSecureContext, TLSSocket, type SecureContext, type SecureContextOptions } from 'node:tls';
import { HttpMethod, RequestContext, KubeConfig, type SecurityAuthentication } from '@kubernetes/client-node';
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
  keepAliveMs: number | undefined,
): Promise<Agent | undefined> {
  const cluster = source.getCurrentCluster();
  const tls: AgentOptions = {};
  await source.applyToHTTPSOptions(tls);
  const options = source.createDispatcherOptions(cluster, {
    ca: heldOnce(tls.ca),
    cert: heldOnce(tls.cert),
    key: heldOnce(tls.key),
    pfx: tls.pfx,
    passphrase: tls.passphrase,
    ...(tls.rejectUnauthorized !== undefined ? { rejectUnauthorized: tls.rejectUnauthorized } : {}),
    ...(tls.servername !== undefined ? { servername: ownCopy(tls.servername) } : {}),
  });
  if (options.type !== 'agent') return undefined;
  const connectOptions = { ...options.connect, allowH2: false };
  const contextOptions: SecureContextOptions = {
    ca: connectOptions.ca,
    cert: connectOptions.cert,
    key: connectOptions.key,
    pfx: connectOptions.pfx,
    passphrase: connectOptions.passphrase,
  };
  const contextKey = secureContextKey(contextOptions);
  let ticket: Buffer | undefined;
  const connect: buildConnector.connector = (target, callback) => {
    const secureContext = sharedSecureContext(contextKey, contextOptions);
    const connector = buildConnector({
      ...connectOptions,
      secureContext,
      ...(ticket ? { session: ticket } : {}),
    });
    connector(target, (...args) => {
      const socket = args[1];
      // An http:// server (allowed with insecure-skip-tls-verify) gives a plain socket: no session to keep.
      if (socket instanceof TLSSocket) {
        onConnection(socket.isSessionReused());
        // TLS 1.3 sends tickets after the handshake; the newest one is offered next time.
        socket.on('session', (session: Buffer) => (ticket = ownBytes(session)));
      }
      callback(...args);
    });
  };
  return new Agent({
    connect,
    allowH2: false,
    ...(keepAliveMs ? { keepAliveTimeout: keepAliveMs } : {}),
    ...(connections ? { connections } : {}),
  });
}

/** The digest of what a SecureContext holds: pools of one cluster (or of clusters with one CA and user) share it. */
function secureContextKey(options: SecureContextOptions): string {
  const digest = createHash('sha256');
  for (const part of [options.ca, options.cert, options.key, options.pfx, options.passphrase])
    digest.update(part === undefined ? '\0-' : `\0${part.toString()}`);
  return digest.digest('base64');
}

/** Secure contexts by the digest of what they hold; the least recently used goes first. */
const secureContexts = new Map<string, SecureContext>();
const MAX_SECURE_CONTEXTS = 32;

/**
 * One SecureContext for every connection (and every pool) with the same CA, certificate and key. Without it each
 * connection parsed the CA, certificate and key again (tls.connect builds a context per call): at 200 Kymas that
 * was a tenth of the agent's CPU. Looked up per connection and bounded, because a context costs ~35 kB of native memory and a
 * fleet of SKRs with their own CAs shares none: those build one when they connect, as before, which is rare once
 * connections are kept; no pool holds one.
 */
function sharedSecureContext(key: string, options: SecureContextOptions): SecureContext {
  const known = secureContexts.get(key);
  if (known) {
    secureContexts.delete(key);
    secureContexts.set(key, known);
    return known;
  }
  const context = createSecureContext(options);
  secureContexts.set(key, context);
  if (secureContexts.size > MAX_SECURE_CONTEXTS)
    secureContexts.delete(secureContexts.keys().next().value as string);
  return context;
}

/** PEM bytes held by some client's Agent, by their digest; an entry goes when no Agent holds its bytes. */
const held = new Map<string, WeakRef<Buffer>>();
const unheld = new FinalizationRegistry<string>((digest) => {
  if (held.get(digest)?.deref() === undefined) held.delete(digest);
});

/**
 * The bytes of a CA bundle, certificate or key, held once however many clients use them (in the bench every SKR
 * client of one API server carries the same three; in a fleet SKRs may share a CA) and in a buffer of their own:
 * client-node decodes them into slices of Node's shared 8 kB allocation pool, and a slice kept by a long-lived
 * Agent keeps the whole slab, with whatever garbage was cut from it, alive (decision 012).
 */
function heldOnce<T>(bytes: T): T {
  if (!Buffer.isBuffer(bytes)) return bytes;
  const digest = createHash('sha256').update(bytes).digest('base64');
  const known = held.get(digest)?.deref();
  if (known) return known as T;
  const own = ownBytes(bytes);
  held.set(digest, new WeakRef(own));
  unheld.register(own, digest);
  return own as T;
}

/** `bytes` in memory of their own: a Buffer cut from a larger ArrayBuffer (a pool slab) keeps all of it alive. */
function ownBytes(bytes: Buffer): Buffer {
  if (bytes.byteOffset === 0 && bytes.byteLength === bytes.buffer.byteLength) return bytes;
  const own = Buffer.allocUnsafeSlow(bytes.byteLength);
  bytes.copy(own);
  return own;
}

const CLOSE_GRACE_MS = 1_000;

/** One cluster's pooled connections, without the KubeConfig they were built from. */
interface ConnectionPool {
  /** Undefined for a cluster without TLS options behind no proxy: the default dispatcher is used. */
  readonly dispatcher: Dispatcher | undefined;
  connectionsOpened(): number;
  connectionsResumed(): number;
  close(): Promise<void>;
}

/**
 * Builds the cluster's Agent once. Its closures hold the Agent and counters only, never `source`, so a client
 * that does not need the KubeConfig per request lets it (and the kubeconfig text it came from) go.
 */
async function connectionPool(
  source: KubeConfig,
  probe: RequestContext,
  options: PoolOptions,
): Promise<ConnectionPool> {
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
      options.keepAliveMs,
    )) ?? probe.getDispatcher();
  dispatcher?.on('connect', () => {
    connections += 1;
  });
  let closed = false;
  return {
    dispatcher,
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

interface PoolOptions {
  onConnection?: (resumed: boolean) => void;
  /** At most this many connections (undefined: as many as requests in flight). */
  connections?: number;
  /**
   * How long an idle connection is kept (default undici's 4 s, as the API server sends no Keep-Alive hint). A busy
   * client of one cluster (the KCP) wants longer: 4 s closed its connections between bursts and opened them again.
   */
  keepAliveMs?: number;
}

/** Lets client-node build the request of a cluster once (it knows proxies, CAs, client certificates, plugins). */
async function probeRequest(source: KubeConfig): Promise<RequestContext> {
  const cluster = source.getCurrentCluster();
  if (!cluster) throw new Error('kubeconfig has no current cluster');
  const probe = new RequestContext(cluster.server, HttpMethod.GET);
  await source.applySecurityAuthentication(probe);
  return probe;
}

/**
 * Derives a KubeConfig that keeps everything else of `source` (credentials are still applied per request, so
 * rotating tokens work) but hands every request the same Agent, for API clients and Watch alike.
 */
export async function pooledKubeConfig(
  source: KubeConfig,
  options: PoolOptions = {},
): Promise<PooledKubeConfig> {
  const pool = await connectionPool(source, await probeRequest(source), options);
  return { ...withPool(source, pool.dispatcher), ...counters(pool) };
}

/** The counters and close of a pool, in a scope that holds no KubeConfig. */
function counters(pool: ConnectionPool): Omit<PooledKubeConfig, 'kubeConfig'> {
  return {
    connectionsOpened: pool.connectionsOpened,
    connectionsResumed: pool.connectionsResumed,
    close: pool.close,
  };
}

function withPool(source: KubeConfig, dispatcher: Dispatcher | undefined): { kubeConfig: KubeConfig } {
  // A child of the source object: every other method and field is the source's own.
  const pooled = Object.create(source) as KubeConfig;
  pooled.applySecurityAuthentication = async (context: RequestContext) => {
    await source.applySecurityAuthentication(context);
    if (dispatcher) context.setDispatcher(dispatcher);
  };
  return { kubeConfig: pooled };
}

/** What API clients of one cluster apply to each request, and the pool behind it. */
export interface PooledAuthentication extends Omit<PooledKubeConfig, 'kubeConfig'> {
  readonly auth: SecurityAuthentication;
}

/**
 * Like pooledKubeConfig, for API clients only (not Watch). A user whose credentials are fixed in the kubeconfig
 * (client certificate, token, basic auth; no exec or auth-provider plugin, which may refresh a token) gets its
 * headers computed once: client-node would decode the CA, certificate and key from base64 and build (and drop) an
 * undici Agent on every request, and the KubeConfig, with the kubeconfig text its fields were cut from, would
 * live as long as the client (decision 012). Other users, and a KubeConfig whose own
 * `applySecurityAuthentication` overrides client-node's, keep the per-request path.
 */
export async function pooledAuthentication(
  source: KubeConfig,
  options: PoolOptions = {},
): Promise<PooledAuthentication> {
  const probe = await probeRequest(source);
  const pool = await connectionPool(source, probe, options);
  const user = source.getCurrentUser();
  const pluginless = !user?.exec && !user?.authProvider;
  // A KubeConfig that brings its own per-request authentication (a subclass overriding it) keeps it.
  const clientNodesOwn =
    source.applySecurityAuthentication === KubeConfig.prototype.applySecurityAuthentication;
  return {
    auth:
      pluginless && clientNodesOwn
        ? fixedAuthentication(probe.getHeaders(), pool.dispatcher)
        : withPool(source, pool.dispatcher).kubeConfig,
    ...counters(pool),
  };
}

/** Sets the same headers and Agent on every request; holds copies of the header values only. */
function fixedAuthentication(
  headers: Record<string, string>,
  dispatcher: Dispatcher | undefined,
): SecurityAuthentication {
  // Copies: a value built from a kubeconfig field may be a slice that keeps the whole kubeconfig text alive.
  const fixed = Object.entries(headers).map(([name, value]) => [name, ownCopy(value)] as const);
  return {
    getName: () => 'kubeconfig authentication (fixed credentials, pooled)',
    applySecurityAuthentication(context) {
      for (const [name, value] of fixed) context.setHeaderParam(name, value);
      if (dispatcher) context.setDispatcher(dispatcher);
    },
  };
}

/** A string that shares no memory with `value` (V8 cuts substrings as views of their parent). */
export function ownCopy(value: string): string {
  return Buffer.from(value, 'utf8').toString('utf8');
}
