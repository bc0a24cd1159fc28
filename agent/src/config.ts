// The agent's configuration: parsed from command-line flags, validated, with the contract defaults.
import { readFile } from 'node:fs/promises';
import { KubeConfig } from '@kubernetes/client-node';
import { Option } from 'commander';
import {
  CONNECTION_LIMITS,
  DEFAULTS,
  SYNC_RESOURCE_ALLOWED,
  TIMER_MAX_MS,
  parseDuration,
  type RequeueIntervals,
} from '@skr-watcher/api';
import { defaultShardIdentity, validShardIdentity } from './sharding/membership.js';

export interface Address {
  /** undefined = all interfaces */
  host?: string;
  port: number;
}

export type ListenerConfig = (
  | { kind: 'direct'; address: Address; certFile: string; keyFile: string; caBundleFile: string }
  | { kind: 'gateway'; address: Address; trustedProxies: string[] }
) & { maxConnections: number; idleTimeoutMs: number };

export interface AgentConfig {
  kubeconfig?: string;
  namespace: string;
  /** undefined: no listener (events then come only from watches and requeues). */
  listener?: ListenerConfig;
  metricsAddress: Address;
  /** The live event stream (`/events`); loopback unless asked otherwise (decision 011). */
  eventsAddress: Address;
  /** lifecycle-manager's per-Kyma metric families beside this project's own (decision 027). */
  lifecycleManagerMetrics: boolean;
  leaderElection?: { leaseName: string; leaseNamespace: string; identity: string };
  /** Several replicas, each owning a share of the Kymas (decision 012); undefined: one replica owns all. */
  sharding?: ShardingConfig;
  /** Lease timing of leader election and of sharding membership. */
  leaseTiming: { leaseDurationMs: number; renewDeadlineMs: number; retryPeriodMs: number };
  workers: number;
  requeue: RequeueIntervals;
  /** Full relist of every watched kind; every Kyma is reconciled then. */
  resyncMs: number;
  /** The first window between two targeted reverts of one installed object (doubling up to 5 min); 0: no pacing. */
  driftRevertBackoffMs: number;
  /** A Kyma whose inputs did not change is re-applied whole this often; in between its passes leave the SKR alone. */
  fullReapplyMs: number;
  /** What SyncResource items may touch in SKRs. */
  syncResourcePolicy: { kinds: string[]; namespaces: string[] };
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  /** Module installation from an OCI registry (decision 021); undefined without --oci-registry-host. */
  modules?: ModulesConfig;
  /** Upstream's purge of SKRs whose Kyma deletion finalizers hold up (on unless --enable-purge-finalizer=false). */
  purge?: { timeoutMs: number; skipFor: string[] };
  /** Automatic webhook registration in every SKR; undefined when off. */
  registration?: {
    image: string;
    kcpAddress: string;
    /** CN SKR webhooks require of the KCP server's certificate; unset: the webhook's default (the listener's). */
    kcpServerCn?: string;
    skrNamespace: string;
    probeAfterMs: number;
    probeTimeoutMs: number;
  };
}

/** Where modules are pulled from (upstream lifecycle-manager's flags) and how much of them is kept in memory. */
export interface ModulesConfig {
  /** Directory holding the maintenance policy (`policy.json`); unset: upgrades that need downtime are an Error. */
  maintenancePolicyDir?: string;
  /** An open window counts only with this much of it left (upstream's --min-maintenance-window-size). */
  minMaintenanceWindowMs: number;
  /** Registry host, optionally with a path; `http://` means plain HTTP. */
  registryHost: string;
  /** Appended to the host with one `/` (upstream's string concatenation). */
  repositorySubpath?: string;
  /** A kubernetes.io/dockerconfigjson Secret in the agent's namespace with the registry's credentials. */
  credSecret?: string;
  /**
   * A Secret in the agent's namespace copied into every SKR's sync namespace and named in the pod specs of every
   * module (upstream's --skr-image-pull-secret): the images of modules come from a registry that needs it.
   */
  skrImagePullSecret?: string;
  /** Bound in bytes on the content-addressed cache of descriptors and layers, shared by all Kymas. */
  cacheBytes: number;
  /** Hosts a registry redirect may lead to besides the registry's (its blob storage). */
  redirectHosts?: string[];
  /**
   * Upstream's --restricted-default-modules: modules offered only to the Kymas their ModuleReleaseMeta's kymaSelector
   * selects (to none without one), and removed from a Kyma it stops selecting.
   */
  restrictedModules?: string[];
}

/** Default bound of the module cache: a few hundred raw manifests of tens of kB each. */
export const DEFAULT_MODULE_CACHE_BYTES = 32 * 1024 * 1024;

export interface ShardingConfig {
  ring: string;
  /** This replica in Leases and owner labels; a DNS label, new for every process. */
  identity: string;
  leaseNamespace: string;
  /** Where peers forward callbacks for Kymas this replica owns; needs the listener's TLS material. */
  peer?: { address: Address; advertise?: string };
  /** Test hook: append every reconcile's start and end to this file. */
  journalFile?: string;
}

export class ConfigError extends Error {}

/** `:8082`, `0.0.0.0:8082`, `127.0.0.1:0` or `[::1]:8082`. */
export function parseAddress(flag: string, value: string): Address {
  const match = /^(?:\[([0-9a-fA-F:.]+)\]|([^:[\]]*)):(\d{1,5})$/.exec(value.trim());
  const port = Number(match?.[3]);
  if (!match || !Number.isInteger(port) || port < 0 || port > 65_535) {
    throw new ConfigError(
      `${flag}: expected [host]:port (e.g. :8082 or 127.0.0.1:8082), got ${JSON.stringify(value)}`,
    );
  }
  const host = match[1] ?? match[2];
  return host ? { host, port } : { port };
}

/** A duration flag (grammar: `parseDuration` in packages/api); at most what a Node timer can wait. */
export function parseDurationFlag(flag: string, value: string): number {
  try {
    return parseDuration(value.trim(), TIMER_MAX_MS);
  } catch (error) {
    // The message is the whole story (the printer would repeat a cause's message).
    throw new ConfigError(`${flag}: ${(error as Error).message}`);
  }
}

export function parsePositiveInt(flag: string, value: string, max = 1_000): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 1 || n > max)
    throw new ConfigError(`${flag}: expected an integer 1..${max}, got ${JSON.stringify(value)}`);
  return n;
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

/** `--log-level` of every command, with the command's default. */
export function logLevelOption(defaultLevel: AgentConfig['logLevel']): Option {
  return new Option('--log-level <level>', 'log level').choices(LOG_LEVELS).default(defaultLevel);
}

export function parseLogLevel(value: string): AgentConfig['logLevel'] {
  const level = LOG_LEVELS.find((l) => l === value);
  if (!level)
    throw new ConfigError(
      `--log-level: expected one of ${LOG_LEVELS.join(', ')}, got ${JSON.stringify(value)}`,
    );
  return level;
}

/** Flags of `skr-agent run` as commander hands them over. */
export interface RunFlags {
  kubeconfig?: string;
  namespace: string;
  listener: boolean;
  listenAddress: string;
  listenerMaxConnections?: string;
  listenerIdleTimeout?: string;
  tlsCert?: string;
  tlsKey?: string;
  caBundle?: string;
  gatewayMode?: boolean;
  trustedProxies?: string;
  metricsAddress: string;
  eventsAddress: string;
  lifecycleManagerMetrics?: boolean;
  leaderElect?: boolean;
  leaseName: string;
  leaseNamespace?: string;
  leaderIdentity?: string;
  shard?: boolean;
  shardRing: string;
  shardIdentity?: string;
  peerAddress: string;
  peerAdvertiseAddress?: string;
  leaseDuration: string;
  renewDeadline: string;
  retryPeriod: string;
  reconcileJournal?: string;
  workers: string;
  requeueReady: string;
  requeueProcessing: string;
  requeueWarning: string;
  requeueError: string;
  resyncInterval: string;
  driftRevertBackoff: string;
  fullReapplyInterval: string;
  syncResourceKinds?: string;
  syncResourceNamespaces?: string;
  logLevel: string;
  registerSkrWebhook?: boolean;
  skrWebhookImage: string;
  skrWebhookKcpAddress?: string;
  skrWebhookKcpServerCn?: string;
  skrWebhookNamespace: string;
  watcherProbeAfter: string;
  watcherProbeTimeout: string;
  ociRegistryHost?: string;
  modulesRepositorySubpath?: string;
  ociRegistryCredSecret?: string;
  ociRegistryRedirectHosts?: string;
  skrImagePullSecret?: string;
  moduleCacheBytes?: string;
  maintenancePolicyPath?: string;
  minMaintenanceWindowSize?: string;
  restrictedDefaultModules?: string;
  /** Commander gives `true` for the bare flag, the text for `--enable-purge-finalizer=false`. */
  enablePurgeFinalizer?: boolean | string;
  purgeFinalizerTimeout?: string;
  skipFinalizerPurgingFor?: string;
}

export function agentConfigFromFlags(flags: RunFlags, env: NodeJS.ProcessEnv = process.env): AgentConfig {
  const namespace = flags.namespace || DEFAULTS.kcpNamespace;
  let listener: ListenerConfig | undefined;
  if (flags.listener) {
    const address = parseAddress('--listen-address', flags.listenAddress);
    const limits = {
      maxConnections: flags.listenerMaxConnections
        ? parsePositiveInt('--listener-max-connections', flags.listenerMaxConnections, 1_000_000)
        : CONNECTION_LIMITS.listener.maxConnections,
      idleTimeoutMs: flags.listenerIdleTimeout
        ? parseDurationFlag('--listener-idle-timeout', flags.listenerIdleTimeout)
        : CONNECTION_LIMITS.listener.idleTimeoutMs,
    };
    if (flags.gatewayMode) {
      const trustedProxies = (flags.trustedProxies ?? '')
        .split(',')
        .map((p) => p.trim())
        .filter(Boolean);
      if (trustedProxies.length === 0) {
        throw new ConfigError(
          '--gateway-mode needs --trusted-proxies (IPs or CIDRs of the gateway that terminates mTLS)',
        );
      }
      listener = { kind: 'gateway', address, trustedProxies, ...limits };
    } else {
      const missing = (['tlsCert', 'tlsKey', 'caBundle'] as const).filter((k) => !flags[k]);
      if (missing.length > 0) {
        throw new ConfigError(
          `the listener needs --tls-cert, --tls-key and --ca-bundle (missing ${missing
            .map((k) => `--${k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`)
            .join(', ')}); use --gateway-mode behind a mesh gateway, or --no-listener`,
        );
      }
      listener = {
        kind: 'direct',
        address,
        certFile: flags.tlsCert as string,
        keyFile: flags.tlsKey as string,
        caBundleFile: flags.caBundle as string,
        ...limits,
      };
    }
  }
  const identity =
    flags.leaderIdentity ||
    `${env['HOSTNAME'] || 'skr-agent'}_${process.pid}_${Math.random().toString(36).slice(2, 8)}`;
  if (flags.shard && flags.leaderElect) {
    throw new ConfigError('--shard and --leader-elect exclude each other: with --shard every replica works');
  }
  const leaseTiming = {
    leaseDurationMs: parseDurationFlag('--lease-duration', flags.leaseDuration),
    renewDeadlineMs: parseDurationFlag('--renew-deadline', flags.renewDeadline),
    retryPeriodMs: parseDurationFlag('--retry-period', flags.retryPeriod),
  };
  if (!(
    leaseTiming.retryPeriodMs < leaseTiming.renewDeadlineMs &&
    leaseTiming.renewDeadlineMs < leaseTiming.leaseDurationMs
  )) {
    throw new ConfigError('Lease timing needs --retry-period < --renew-deadline < --lease-duration');
  }
  return {
    kubeconfig: flags.kubeconfig,
    namespace,
    listener,
    metricsAddress: parseAddress('--metrics-address', flags.metricsAddress),
    eventsAddress: parseAddress('--events-address', flags.eventsAddress),
    lifecycleManagerMetrics: flags.lifecycleManagerMetrics === true,
    leaderElection: flags.leaderElect
      ? { leaseName: flags.leaseName, leaseNamespace: flags.leaseNamespace || namespace, identity }
      : undefined,
    sharding: flags.shard ? shardingFromFlags(flags, namespace, listener, env) : undefined,
    leaseTiming,
    workers: parsePositiveInt('--workers', flags.workers),
    requeue: {
      Ready: parseDurationFlag('--requeue-ready', flags.requeueReady),
      Processing: parseDurationFlag('--requeue-processing', flags.requeueProcessing),
      Warning: parseDurationFlag('--requeue-warning', flags.requeueWarning),
      Error: parseDurationFlag('--requeue-error', flags.requeueError),
    },
    resyncMs: parseDurationFlag('--resync-interval', flags.resyncInterval),
    driftRevertBackoffMs: parseDurationFlag('--drift-revert-backoff', flags.driftRevertBackoff),
    fullReapplyMs: parseDurationFlag('--full-reapply-interval', flags.fullReapplyInterval),
    syncResourcePolicy: {
      kinds: parseList(flags.syncResourceKinds, SYNC_RESOURCE_ALLOWED.kinds),
      namespaces: parseList(flags.syncResourceNamespaces, SYNC_RESOURCE_ALLOWED.namespaces),
    },
    logLevel: parseLogLevel(flags.logLevel),
    registration: flags.registerSkrWebhook ? registrationFromFlags(flags) : undefined,
    modules: modulesFromFlags(flags),
    purge: purgeFromFlags(flags),
  };
}

/** Upstream's purge flags, its defaults: on, 5m, nothing skipped. */
function purgeFromFlags(flags: RunFlags): AgentConfig['purge'] {
  const enabled = String(flags.enablePurgeFinalizer ?? true);
  if (enabled !== 'true' && enabled !== 'false')
    throw new ConfigError(`--enable-purge-finalizer: expected true or false, got ${JSON.stringify(enabled)}`);
  if (enabled === 'false') return undefined;
  const skipFor = parseList(flags.skipFinalizerPurgingFor, []);
  const notCrd = skipFor.find((entry) => !/^(\*|[a-z0-9-]+)\.[a-z0-9.-]+$/i.test(entry));
  if (notCrd)
    throw new ConfigError(
      `--skip-finalizer-purging-for: expected <plural>.<group>, <singular>.<group> or *.<group>, comma-separated, got ${JSON.stringify(notCrd)}`,
    );
  return {
    timeoutMs: parseDurationFlag('--purge-finalizer-timeout', flags.purgeFinalizerTimeout ?? '5m'),
    skipFor,
  };
}

function modulesFromFlags(flags: RunFlags): ModulesConfig | undefined {
  const host = flags.ociRegistryHost?.trim();
  if (!host) {
    const stray = (
      [
        'modulesRepositorySubpath',
        'ociRegistryCredSecret',
        'ociRegistryRedirectHosts',
        'skrImagePullSecret',
        'moduleCacheBytes',
        'restrictedDefaultModules',
      ] as const
    ).find((key) => flags[key]);
    if (stray)
      throw new ConfigError(
        `--${stray.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)} needs --oci-registry-host (module installation is off without it)`,
      );
    return undefined;
  }
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(host) && !/^https?:\/\//i.test(host))
    throw new ConfigError(
      `--oci-registry-host: expected host[:port][/path] or http(s)://..., got ${JSON.stringify(host)}`,
    );
  const redirectHosts = (flags.ociRegistryRedirectHosts ?? '')
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry !== '');
  const notHost = redirectHosts.find((entry) => !/^[a-z0-9.-]+(:\d+)?$/i.test(entry));
  if (notHost)
    throw new ConfigError(
      `--oci-registry-redirect-hosts: expected host[:port], comma-separated, got ${JSON.stringify(notHost)}`,
    );
  const restrictedModules = parseList(flags.restrictedDefaultModules, []);
  const notModule = restrictedModules.find((name) => !/^[a-z]([-a-z0-9]*[a-z0-9])?$/.test(name));
  if (notModule)
    throw new ConfigError(
      `--restricted-default-modules: expected module names, comma-separated, got ${JSON.stringify(notModule)}`,
    );
  const policyDir = flags.maintenancePolicyPath?.trim();
  const pullSecret = flags.skrImagePullSecret?.trim();
  if (pullSecret && !/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/.test(pullSecret))
    throw new ConfigError(
      `--skr-image-pull-secret: expected a Secret name (lower-case DNS subdomain), got ${JSON.stringify(pullSecret)}`,
    );
  return {
    ...(policyDir ? { maintenancePolicyDir: policyDir } : {}),
    minMaintenanceWindowMs: parseDurationFlag(
      '--min-maintenance-window-size',
      flags.minMaintenanceWindowSize ?? '20m',
    ),
    registryHost: host,
    ...(flags.modulesRepositorySubpath ? { repositorySubpath: flags.modulesRepositorySubpath } : {}),
    ...(flags.ociRegistryCredSecret ? { credSecret: flags.ociRegistryCredSecret } : {}),
    ...(redirectHosts.length > 0 ? { redirectHosts } : {}),
    ...(pullSecret ? { skrImagePullSecret: pullSecret } : {}),
    ...(restrictedModules.length > 0 ? { restrictedModules } : {}),
    cacheBytes: flags.moduleCacheBytes
      ? parsePositiveInt('--module-cache-bytes', flags.moduleCacheBytes, 4 * 1024 * 1024 * 1024)
      : DEFAULT_MODULE_CACHE_BYTES,
  };
}

function shardingFromFlags(
  flags: RunFlags,
  namespace: string,
  listener: ListenerConfig | undefined,
  env: NodeJS.ProcessEnv,
): ShardingConfig {
  const identity = flags.shardIdentity || defaultShardIdentity(env['HOSTNAME']);
  if (!validShardIdentity(identity)) {
    throw new ConfigError(
      `--shard-identity: expected a DNS label of at most 63 characters (a-z, 0-9, '-'), got ${JSON.stringify(identity)}`,
    );
  }
  if (!validShardIdentity(flags.shardRing)) {
    throw new ConfigError(`--shard-ring: expected a DNS label, got ${JSON.stringify(flags.shardRing)}`);
  }
  // Forwarding authenticates with the listener's certificate; without one, callbacks reach only the owner.
  const address = parseAddress('--peer-address', flags.peerAddress);
  const advertise =
    flags.peerAdvertiseAddress || (env['POD_IP'] ? `${env['POD_IP']}:${address.port}` : undefined);
  if (advertise) parseAddress('--peer-advertise-address', advertise);
  return {
    ring: flags.shardRing,
    identity,
    leaseNamespace: flags.leaseNamespace || namespace,
    ...(listener?.kind === 'direct' ? { peer: { address, ...(advertise ? { advertise } : {}) } } : {}),
    ...(flags.reconcileJournal ? { journalFile: flags.reconcileJournal } : {}),
  };
}

/** A comma-separated list; empty entries are dropped. */
function parseList(value: string | undefined, fallback: readonly string[]): string[] {
  if (value === undefined) return [...fallback];
  return value
    .split(',')
    .map((entry) => entry.trim())
    .filter((entry) => entry.length > 0);
}

function registrationFromFlags(flags: RunFlags): NonNullable<AgentConfig['registration']> {
  if (!flags.skrWebhookKcpAddress) {
    throw new ConfigError(
      '--register-skr-webhook needs --skr-webhook-kcp-address (host:port of this listener as SKR webhooks reach it)',
    );
  }
  parseAddress('--skr-webhook-kcp-address', flags.skrWebhookKcpAddress);
  return {
    image: flags.skrWebhookImage,
    kcpAddress: flags.skrWebhookKcpAddress,
    ...(flags.skrWebhookKcpServerCn ? { kcpServerCn: flags.skrWebhookKcpServerCn } : {}),
    skrNamespace: flags.skrWebhookNamespace || DEFAULTS.skrNamespace,
    probeAfterMs: parseDurationFlag('--watcher-probe-after', flags.watcherProbeAfter),
    probeTimeoutMs: parseDurationFlag('--watcher-probe-timeout', flags.watcherProbeTimeout),
  };
}

/** The KCP kubeconfig: the flag, else $KUBECONFIG / ~/.kube/config, else the in-cluster service account. */
export function loadKcpKubeConfig(path: string | undefined): KubeConfig {
  const kubeConfig = new KubeConfig();
  try {
    if (path) kubeConfig.loadFromFile(path);
    else kubeConfig.loadFromDefault();
  } catch (cause) {
    throw new ConfigError(`cannot load the KCP kubeconfig${path ? ` from ${path}` : ''}`, { cause });
  }
  if (!kubeConfig.getCurrentCluster()) {
    throw new ConfigError(`the KCP kubeconfig${path ? ` ${path}` : ''} has no current cluster`);
  }
  return kubeConfig;
}

/** Reads the listener's certificate, key and CA bundle; errors name the file. */
export async function readListenerTls(config: Extract<ListenerConfig, { kind: 'direct' }>) {
  const read = async (flag: string, file: string) => {
    try {
      const text = await readFile(file, 'utf8');
      if (!text.includes('-----BEGIN')) throw new Error('no PEM block in the file');
      return text;
    } catch (cause) {
      throw new ConfigError(`${flag} ${file}: cannot read a PEM file`, { cause });
    }
  };
  const [certPem, keyPem, caBundlePem] = await Promise.all([
    read('--tls-cert', config.certFile),
    read('--tls-key', config.keyFile),
    read('--ca-bundle', config.caBundleFile),
  ]);
  return { certPem, keyPem, caBundlePem };
}
