// skr-agent run: watch KCP, serve the callback listener and reconcile Kymas until SIGTERM, alone or as one
// of several replicas behind a Lease.
import { getHeapStatistics } from 'node:v8';
import { Command } from 'commander';
import {
  CONNECTION_LIMITS,
  DEFAULTS,
  REQUEUE_MS,
  buildInfo,
  SHARDING,
  SYNC_RESOURCE_ALLOWED,
  formatDuration,
} from '@skr-watcher/api';
import { createLeaderElector, pooledKubeConfig, type LeaderElector } from '@skr-watcher/kube';
import {
  createLogger,
  createRegistry,
  createShutdown,
  registerBuildInfo,
  startHealthServer,
} from '@skr-watcher/telemetry';
import { Option } from 'commander';
import { LEADER_ELECTION_DEFAULTS } from '@skr-watcher/kube';
import {
  agentConfigFromFlags,
  loadKcpKubeConfig,
  parseAddress,
  logLevelOption,
  readListenerTls,
  type RunFlags,
} from '../config.js';
import { metricsSecurity, type MetricsSecurityFlags } from '../metrics-security.js';
import { EVENT_STREAM_ADDRESS, createEventStream, serveEventStream } from '../event-stream.js';
import { startSharding, type Sharding } from '../sharding/index.js';
import { startWork, type Running } from '../work.js';

/** `--console-address`: the read-only fleet console (agent/src/console), off without it. */
interface ConsoleFlags {
  consoleAddress?: string;
}

async function run(flags: RunFlags & MetricsSecurityFlags & ConsoleFlags): Promise<void> {
  const config = agentConfigFromFlags(flags);
  const logger = createLogger('skr-agent', config.logLevel);
  const registry = createRegistry();
  registerBuildInfo(registry, 'skr_agent', buildInfo());
  const kcp = loadKcpKubeConfig(config.kubeconfig);
  // One connection pool for the watches and the Lease: client-node alone opens a connection per request.
  const pool = await pooledKubeConfig(kcp);
  const shutdown = createShutdown({ logger });
  let work: Running | undefined;
  let ready = false;
  const events = createEventStream();

  const secure = await metricsSecurity(flags, pool.kubeConfig);
  const health = await startHealthServer({
    host: config.metricsAddress.host,
    port: config.metricsAddress.port,
    registry,
    ready: () => ready,
    ...(secure ? { secure } : {}),
  });
  const eventServer = await serveEventStream(events, config.eventsAddress);
  if (flags.consoleAddress) {
    const address = parseAddress('--console-address', flags.consoleAddress);
    // Imported only here, so an agent without the console holds none of its code or state.
    const { startConsole } = await import('../console/index.js');
    const fleetConsole = await startConsole({
      ...address,
      namespace: config.namespace,
      kubeConfig: pool.kubeConfig,
      events,
      logger,
    });
    shutdown.add('console', () => fleetConsole.close());
  }
  logger.info(
    {
      metricsPort: health.port,
      metricsSecure: Boolean(secure),
      eventsPort: eventServer.port,
      namespace: config.namespace,
      leaderElection: !!config.leaderElection,
      shard: config.sharding?.identity,
      // V8's old-space cap as this process got it (manifests/kcp derives it from the container's memory limit).
      heapLimitMb: Math.round(getHeapStatistics().heap_size_limit / 1048576),
    },
    'skr-agent starting',
  );
  shutdown.add('health server', async () => {
    await events.close();
    await eventServer.close();
    await health.close();
  });
  let sharding: Sharding | undefined;
  // Set below when --leader-elect; the shutdown step registered first must see it.
  const lease: { elector?: LeaderElector } = {};
  shutdown.add('agent', async () => {
    ready = false;
    await work?.stop();
    work = undefined;
    // Release the Lease last, after the in-flight reconciles finished, so a standby takes over at once.
    await lease.elector?.stop();
    // Sharded: hand the Kymas to peers and release our Lease, after our last reconcile finished.
    await sharding?.leave();
    await pool.close();
  });
  const begin = async () => {
    work = await startWork(config, kcp, logger, registry, events, pool, sharding);
    ready = true;
  };

  if (config.sharding) {
    sharding = await startSharding({
      config: config.sharding,
      timing: config.leaseTiming,
      namespace: config.namespace,
      resyncMs: config.resyncMs,
      kubeConfig: pool.kubeConfig,
      ...(config.listener?.kind === 'direct' ? { tls: await readListenerTls(config.listener) } : {}),
      onLost: () => {
        // A peer fenced our Lease (it may reconcile our Kymas now), or work of ours was still running when peers
        // may: exiting is the one way to stop every request in flight at once; the Deployment starts a fresh one.
        process.exit(1);
      },
      logger,
      registry,
    });
    await begin();
    return;
  }
  if (!config.leaderElection) {
    await begin();
    return;
  }
  const elector = createLeaderElector({
    kubeConfig: pool.kubeConfig,
    namespace: config.leaderElection.leaseNamespace,
    name: config.leaderElection.leaseName,
    identity: config.leaderElection.identity,
    ...config.leaseTiming,
    logger,
    registry,
    // Which replica works, in every replica's log (a standby says whom it waits for).
    onNewLeader: (holder) => logger.info({ leader: holder }, 'leader observed'),
    onStartedLeading: () =>
      begin().catch((error: unknown) => {
        logger.fatal({ err: error }, 'could not start after becoming leader');
        void shutdown.run('start failed').then(() => process.exit(1));
      }),
    onStoppedLeading: (reason) => {
      if (reason !== 'lost') return;
      // Another replica may be reconciling already: stop at once and let the Deployment restart us.
      void shutdown.run('lost the leader Lease').then(() => process.exit(1));
    },
  });
  lease.elector = elector;
  void elector.run();
}

export function runCommand(): Command {
  return new Command('run')
    .description('watch KCP, serve the SKR callback listener, reconcile Kymas until SIGTERM')
    .option('--kubeconfig <path>', 'KCP kubeconfig (default: $KUBECONFIG, ~/.kube/config, then in-cluster)')
    .option(
      '--namespace <ns>',
      'KCP namespace of Kymas, templates, ModuleConfigs, SyncResources, Secrets',
      DEFAULTS.kcpNamespace,
    )
    .option('--listen-address <[host]:port>', 'callback listener address', ':8082')
    .option('--no-listener', 'do not serve the callback listener (watches and requeues only)')
    .option(
      '--listener-max-connections <n>',
      'connections the listener holds at most; more are closed on accept',
      String(CONNECTION_LIMITS.listener.maxConnections),
    )
    .option(
      '--listener-idle-timeout <duration>',
      'the listener cuts a TLS handshake not finished, or a request silent, this long',
      `${CONNECTION_LIMITS.listener.idleTimeoutMs / 1000}s`,
    )
    .option('--tls-cert <file>', 'listener serving certificate (PEM); reloaded when it changes')
    .option('--tls-key <file>', 'listener private key (PEM); reloaded when it changes')
    .option(
      '--ca-bundle <file>',
      'CA bundle that SKR client certificates must chain to (PEM); reloaded when it changes',
    )
    .option(
      '--gateway-mode',
      'plain HTTP behind a mesh gateway that terminates mTLS (identity from X-Forwarded-Client-Cert)',
    )
    .option(
      '--trusted-proxies <list>',
      'comma-separated IPs/CIDRs allowed to send X-Forwarded-Client-Cert (gateway mode)',
    )
    .option(
      '--metrics-address <[host]:port>',
      'address of /metrics, /healthz and /readyz (plain HTTP unless --metrics-secure; kubelet probes and Prometheus need it off loopback)',
      ':8080',
    )
    .option(
      '--metrics-secure',
      '/metrics over HTTPS, only for a bearer token whose user may GET /metrics (TokenReview + SubjectAccessReview on the KCP); probes stay open',
    )
    .option(
      '--metrics-tls-cert <file>',
      'serving certificate of --metrics-secure (PEM; default: one made at start and signed by itself)',
    )
    .option('--metrics-tls-key <file>', 'private key of --metrics-tls-cert (PEM)')
    .option(
      '--lifecycle-manager-metrics',
      "also export lifecycle-manager's per-Kyma metrics (lifecycle_mgr_kyma_state, lifecycle_mgr_module_state, …) under its names and labels, for alerts written against it; a series per Kyma, module and state",
    )
    .option(
      '--events-address <[host]:port>',
      'address of the live event stream (ws://…/events, plain HTTP, no authentication: it names runtime-ids and objects, so loopback by default; reach it with kubectl port-forward)',
      EVENT_STREAM_ADDRESS,
    )
    .option(
      '--console-address <[host]:port>',
      'serve the read-only fleet console here (plain HTTP; every request needs a bearer token allowed to get Kymas in --namespace, checked by TokenReview + SubjectAccessReview); off without it',
    )
    .option('--leader-elect', 'run as one of several replicas; only the holder of the Lease works')
    .option('--lease-name <name>', 'name of the coordination.k8s.io Lease', 'skr-agent-leader')
    .option('--lease-namespace <ns>', 'namespace of the Lease (default: --namespace)')
    .option(
      '--leader-identity <id>',
      'identity in the Lease, unique per replica: a live Lease under this identity that another process holds is treated as foreign (default: $HOSTNAME_<pid>_<random>)',
    )
    .option(
      '--shard',
      'run as one of several replicas that share the Kymas: each holds its own Lease, owns the Kymas the hash ring gives it (label operator.kyma-project.io/skr-agent-shard) and forwards callbacks for the others to their owner; excludes --leader-elect',
    )
    .option(
      '--shard-ring <name>',
      'replicas with the same ring share the Kymas of --namespace',
      SHARDING.ring,
    )
    .option(
      '--shard-identity <id>',
      'this replica in Leases and owner labels, a DNS label unique per process (default: $HOSTNAME-<random>)',
    )
    .option(
      '--peer-address <[host]:port>',
      'mutual-TLS endpoint where peers forward callbacks for Kymas this replica owns (listener certificate)',
      ':8083',
    )
    .option(
      '--peer-advertise-address <host:port>',
      'how peers reach --peer-address, written on our Lease (default: $POD_IP:<port>, else 127.0.0.1:<port>)',
    )
    .option(
      '--lease-duration <duration>',
      'a replica (or leader) that has not renewed its Lease for this long is gone',
      formatDuration(LEADER_ELECTION_DEFAULTS.leaseDurationMs),
    )
    .option(
      '--renew-deadline <duration>',
      'a leader that could not renew for this long exits; a --shard replica starts no work until it renews (and exits if a peer took over meanwhile)',
      formatDuration(LEADER_ELECTION_DEFAULTS.renewDeadlineMs),
    )
    .option(
      '--retry-period <duration>',
      'interval of Lease renewals and of reading the peers',
      formatDuration(LEADER_ELECTION_DEFAULTS.retryPeriodMs),
    )
    .addOption(
      new Option('--reconcile-journal <file>', 'test hook: append reconcile starts and ends').hideHelp(),
    )
    .option('--workers <n>', 'Kymas reconciled in parallel', '4')
    .option('--requeue-ready <duration>', 'requeue of a Ready Kyma', formatDuration(REQUEUE_MS.Ready))
    .option(
      '--requeue-processing <duration>',
      'requeue of a Processing Kyma',
      formatDuration(REQUEUE_MS.Processing),
    )
    .option(
      '--requeue-warning <duration>',
      'requeue of a Kyma in Warning',
      formatDuration(REQUEUE_MS.Warning),
    )
    .option(
      '--requeue-error <duration>',
      `requeue of a Kyma in Error (failures back off ${formatDuration(REQUEUE_MS.backoffBase)} to ${formatDuration(REQUEUE_MS.backoffMax)})`,
      formatDuration(REQUEUE_MS.Error),
    )
    .option('--resync-interval <duration>', 'full relist of every watched kind; reconciles every Kyma', '10m')
    .option(
      '--drift-revert-backoff <duration>',
      'first window between two targeted reverts of one installed object, doubling up to 5m (0: every write put back at once)',
      '1s',
    )
    .option(
      '--full-reapply-interval <duration>',
      'a Kyma whose inputs did not change is re-applied whole this often; in between its passes leave the SKR alone (0: every pass re-applies)',
      '1h',
    )
    .option(
      '--sync-resource-kinds <list>',
      'kinds SyncResource items may apply or delete in SKRs (Kind or Kind.group, comma-separated)',
      SYNC_RESOURCE_ALLOWED.kinds.join(','),
    )
    .option(
      '--sync-resource-namespaces <list>',
      'SKR namespaces SyncResource items may touch (comma-separated); cluster-scoped objects are refused',
      SYNC_RESOURCE_ALLOWED.namespaces.join(','),
    )
    .option(
      '--register-skr-webhook',
      'install and maintain the webhook in every SKR (certificate, Secret, configuration, Deployment)',
    )
    .option(
      '--skr-webhook-image <image>',
      'image of the in-cluster SKR webhook',
      'ghcr.io/example/skr-watcher:0.1.0',
    )
    .option('--skr-webhook-kcp-address <host:port>', 'address of this listener as SKR webhooks reach it')
    .option(
      '--skr-webhook-kcp-server-cn <cn>',
      "CN the webhooks require of the KCP server's certificate (default: the listener's, skr-agent-listener); " +
        "'*' for a gateway with a certificate of its own (host name still checked)",
    )
    .option('--skr-webhook-namespace <ns>', 'namespace of the webhook in every SKR', DEFAULTS.skrNamespace)
    .option('--watcher-probe-after <duration>', 'probe an SKR whose webhook has been quiet this long', '5m')
    .option('--watcher-probe-timeout <duration>', 'a probe must come back as an event within this', '30s')
    .option(
      '--oci-registry-host <host>',
      'install modules from this OCI registry (host[:port][/path]; http:// = plain HTTP): one Manifest per module of every Kyma, applied into its SKR; off without it',
    )
    .option(
      '--modules-repository-subpath <path>',
      'path in the registry below which component-descriptors/ lies',
    )
    .option(
      '--oci-registry-cred-secret <name>',
      'kubernetes.io/dockerconfigjson Secret (in --namespace, one auths entry) with the registry credentials',
    )
    .option(
      '--oci-registry-redirect-hosts <hosts>',
      "comma-separated host[:port] a registry redirect may lead to (its blob storage); the registry's own host only without it",
    )
    .option(
      '--skr-image-pull-secret <name>',
      "Secret (in --namespace) copied into every SKR's kyma-system (the SKR Kyma's namespace) and set as imagePullSecrets of every module workload, with SKR_IMG_PULL_SECRET on its manager",
    )
    .option(
      '--restricted-default-modules <modules>',
      "comma-separated modules offered only to the Kymas their ModuleReleaseMeta's kymaSelector selects (to none without one); a Kyma it stops selecting loses the module. With deployer listed, the deployer module's Secrets annotated operator.kyma-project.io/inject-data-from-kcp take the data of the Secret of their name in --namespace",
    )
    .option(
      '--module-cache-bytes <bytes>',
      'bound on the in-memory cache of module descriptors and raw manifests (default 32 MiB)',
    )
    .option(
      '--maintenance-policy-path <dir>',
      "directory with the maintenance policy (policy.json, upstream's format); upgrades that need downtime wait for the Kyma's window (default: $MAINTENANCE_POLICY_PATH)",
      process.env['MAINTENANCE_POLICY_PATH'],
    )
    .option(
      '--min-maintenance-window-size <duration>',
      'an open maintenance window counts only with this much of it left',
      '20m',
    )
    .option(
      '--enable-purge-finalizer [bool]',
      "lifecycle-manager's purge: a Kyma still deleting --purge-finalizer-timeout after its deletion began has the finalizers of every custom resource left in its SKR removed (=false: never)",
      true,
    )
    .option(
      '--purge-finalizer-timeout <duration>',
      "how long a Kyma's deletion may wait on finalizers in its SKR before they are purged",
      '5m',
    )
    .option(
      '--skip-finalizer-purging-for <crds>',
      'comma-separated CRDs whose objects a purge leaves alone: <plural>.<group>, <singular>.<group> or *.<group>',
    )
    .addOption(logLevelOption('info'))
    .action(async (flags: RunFlags & MetricsSecurityFlags & ConsoleFlags) => {
      await run(flags);
    });
}
