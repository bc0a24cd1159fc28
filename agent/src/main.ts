#!/usr/bin/env node
// skr-agent: the KCP agent. `run` serves the callback listener and reconciles Kymas (optionally as
// one of several replicas behind a Lease); `reconcile --once` runs one reconciliation and exits.
import { watchFile, unwatchFile } from 'node:fs';
import { Command, Option } from 'commander';
import { CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { DEFAULTS, GROUP, KINDS, type Kyma } from '@skr-watcher/api';
import {
  createLeaderElector,
  pooledKubeConfig,
  type LeaderElector,
  type PooledKubeConfig,
} from '@skr-watcher/kube';
import {
  createLogger,
  createRegistry,
  createShutdown,
  startHealthServer,
  type Logger,
  type Registry,
} from '@skr-watcher/telemetry';
import {
  ConfigError,
  agentConfigFromFlags,
  loadKcpKubeConfig,
  parseAddress,
  parseDuration,
  parseLogLevel,
  readListenerTls,
  type AgentConfig,
  type ListenerConfig,
  type RunFlags,
} from './config.js';
import { createController, type Controller } from './controller.js';
import {
  createEventStream,
  EVENT_STREAM_PATH,
  formatStreamedEvent,
  tailEvents,
  type EventStream,
} from './event-stream.js';
import { startListener, type AcceptedEvent, type Listener } from './listener/index.js';
import { createReconciler } from './reconcile/index.js';
import { createWatcherHealth } from './registration/index.js';

const TLS_POLL_MS = 5_000;

interface Running {
  stop(): Promise<void>;
}

/** Starts the controller and the listener; returned stop() undoes it in order. */
async function startWork(
  config: AgentConfig,
  kcp: KubeConfig,
  logger: Logger,
  registry: Registry,
  events: EventStream,
  pool: PooledKubeConfig,
): Promise<Running> {
  // The reconciler keeps its own pooled KCP client; the watches share `pool`.
  // Broken-watcher detection needs to know when each SKR last called back: the listener tells it.
  const watcherHealth = config.registration
    ? createWatcherHealth({
        quietAfterMs: config.registration.probeAfterMs,
        probeTimeoutMs: config.registration.probeTimeoutMs,
      })
    : undefined;
  let controller: Controller | undefined;
  const reconciler = createReconciler({
    kcp,
    namespace: config.namespace,
    logger,
    registry,
    // Reconciles only run once the controller exists; its cache knows each Kyma's SyncResources.
    syncResourceNames: (_namespace, kyma) => controller?.syncResourceNames(kyma) ?? [],
    ...(config.registration
      ? {
          registration: {
            options: {
              image: config.registration.image,
              kcpAddress: config.registration.kcpAddress,
              skrNamespace: config.registration.skrNamespace,
            },
            health: watcherHealth,
          },
        }
      : {}),
  });
  let listener: Listener | undefined;
  let stopTlsWatch: (() => void) | undefined;
  const stop = async () => {
    stopTlsWatch?.();
    // Stop taking events first, then let the reconciles in flight finish, then drop SKR connections.
    await listener?.close();
    await controller?.stop();
    await reconciler.close();
  };
  try {
    controller = createController({
      kcp: pool.kubeConfig,
      namespace: config.namespace,
      reconciler,
      workers: config.workers,
      requeue: config.requeue,
      resyncMs: config.resyncMs,
      logger,
      registry,
    });
    await controller.start();
    if (config.listener) {
      const onAccepted = (event: AcceptedEvent) => {
        watcherHealth?.recordEvent(event.runtimeId, event.receivedAt);
        events.publish(event);
      };
      const started = await startConfiguredListener(
        config.listener,
        controller,
        logger,
        registry,
        onAccepted,
        config.callbackRecheckMs,
      );
      listener = started.listener;
      stopTlsWatch = started.stopTlsWatch;
    }
    return { stop };
  } catch (error) {
    await stop().catch(() => {});
    throw error;
  }
}

async function startConfiguredListener(
  config: ListenerConfig,
  controller: Controller,
  logger: Logger,
  registry: Registry,
  onAccepted: (event: AcceptedEvent) => void,
  recheckMs: number,
): Promise<{ listener: Listener; stopTlsWatch?: () => void }> {
  const common = {
    host: config.address.host,
    port: config.address.port,
    resolveKyma: (runtimeId: string) => controller.resolveKyma(runtimeId),
    enqueue: (kymaKey: string) => {
      controller.enqueue(kymaKey);
      // Validating admission runs before the API server stores the write, so a fast reconcile can read the
      // object just before the change lands; one more look a little later makes sure it is not missed.
      if (recheckMs > 0) controller.queue.addAfter(kymaKey, recheckMs);
    },
    // Accepted callbacks are streamed to viewers of GET /events on the metrics port.
    onAccepted,
    logger,
    registry,
  };
  if (config.kind === 'gateway') {
    const listener = await startListener({
      ...common,
      mode: { kind: 'gateway', trustedProxies: config.trustedProxies },
    });
    logger.info({ port: listener.port, mode: 'gateway' }, 'listener started');
    return { listener };
  }
  const tls = await readListenerTls(config);
  const listener = await startListener({ ...common, mode: { kind: 'direct', ...tls } });
  logger.info({ port: listener.port, mode: 'direct' }, 'listener started');
  // Mounted Secrets change by symlink swap; polling the files catches that where fs.watch may not.
  const files = [config.certFile, config.keyFile, config.caBundleFile];
  let reloading = false;
  const reload = () => {
    if (reloading) return;
    reloading = true;
    readListenerTls(config)
      .then((material) => {
        listener.updateTls(material);
        logger.info('listener TLS material reloaded');
      })
      .catch((error: unknown) =>
        logger.error({ err: error }, 'listener TLS reload failed; keeping the old material'),
      )
      .finally(() => (reloading = false));
  };
  for (const file of files) watchFile(file, { interval: TLS_POLL_MS, persistent: false }, reload);
  return { listener, stopTlsWatch: () => files.forEach((file) => unwatchFile(file, reload)) };
}

async function run(flags: RunFlags): Promise<void> {
  const config = agentConfigFromFlags(flags);
  const logger = createLogger('skr-agent', config.logLevel);
  const registry = createRegistry();
  const kcp = loadKcpKubeConfig(config.kubeconfig);
  // One connection pool for the watches and the Lease: client-node alone opens a connection per request.
  const pool = await pooledKubeConfig(kcp);
  const shutdown = createShutdown({ logger });
  let work: Running | undefined;
  let ready = false;
  const events = createEventStream();

  const health = await startHealthServer({
    host: config.metricsAddress.host,
    port: config.metricsAddress.port,
    registry,
    ready: () => ready,
    onUpgrade: (req, socket, head) => events.handleUpgrade(req, socket, head),
  });
  logger.info(
    { metricsPort: health.port, namespace: config.namespace, leaderElection: !!config.leaderElection },
    'skr-agent starting',
  );
  shutdown.add('health server', async () => {
    await events.close();
    await health.close();
  });
  shutdown.add('agent', async () => {
    ready = false;
    await work?.stop();
    work = undefined;
    // Release the Lease last, after the in-flight reconciles finished, so a standby takes over at once.
    await elector?.stop();
    await pool.close();
  });

  const begin = async () => {
    work = await startWork(config, kcp, logger, registry, events, pool);
    ready = true;
  };
  const elector: LeaderElector | undefined =
    config.leaderElection &&
    createLeaderElector({
      kubeConfig: pool.kubeConfig,
      namespace: config.leaderElection.leaseNamespace,
      name: config.leaderElection.leaseName,
      identity: config.leaderElection.identity,
      logger,
      registry,
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

  if (!elector) {
    await begin();
    return;
  }
  void elector.run();
}

async function reconcileOnce(flags: {
  kubeconfig?: string;
  namespace: string;
  kyma: string;
  once?: boolean;
  wait: string;
  logLevel: string;
}): Promise<number> {
  const logger = createLogger('skr-agent', parseLogLevel(flags.logLevel));
  const waitMs = parseDuration('--wait', flags.wait);
  const kcp = loadKcpKubeConfig(flags.kubeconfig);
  const namespace = flags.namespace || DEFAULTS.kcpNamespace;
  const key = `${namespace}/${flags.kyma}`;
  const reconciler = createReconciler({ kcp, namespace, logger });
  const api = kcp.makeApiClient(CustomObjectsApi);
  const deadline = Date.now() + waitMs;
  let state = 'Unknown';
  try {
    for (;;) {
      let requeueAfterMs: number | undefined;
      try {
        requeueAfterMs = (await reconciler.reconcile(key)).requeueAfterMs;
      } catch (error) {
        logger.error({ err: error, kyma: key }, 'reconcile failed');
      }
      const kyma = (await api.getNamespacedCustomObject({
        group: GROUP,
        version: KINDS.kyma.version,
        namespace,
        plural: KINDS.kyma.plural,
        name: flags.kyma,
      })) as Kyma;
      state = kyma.status?.state ?? 'Unknown';
      const left = deadline - Date.now();
      if (state === 'Ready' || left <= 0) {
        process.stdout.write(
          `${JSON.stringify({ kyma: key, state, modules: (kyma.status?.modules ?? []).map((m) => ({ name: m.name, state: m.state, message: m.message })) })}\n`,
        );
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, Math.min(requeueAfterMs ?? 1_000, 2_000, left)));
    }
  } finally {
    await reconciler.close();
  }
  return state === 'Ready' ? 0 : 1;
}

function program(): Command {
  const cli = new Command('skr-agent')
    .description(
      'KCP agent of skr-watcher: callback listener and lifecycle reconciliation of Kymas and their SKRs',
    )
    .showHelpAfterError();

  cli
    .command('run')
    .description('watch KCP, serve the SKR callback listener, reconcile Kymas until SIGTERM')
    .option('--kubeconfig <path>', 'KCP kubeconfig (default: $KUBECONFIG, ~/.kube/config, then in-cluster)')
    .option(
      '--namespace <ns>',
      'KCP namespace of Kymas, templates, ModuleConfigs, SyncResources, Secrets',
      DEFAULTS.kcpNamespace,
    )
    .option('--listen-address <[host]:port>', 'callback listener address', ':8082')
    .option('--no-listener', 'do not serve the callback listener (watches and requeues only)')
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
      'address of /metrics, /healthz and /readyz (plain HTTP)',
      ':8080',
    )
    .option('--leader-elect', 'run as one of several replicas; only the holder of the Lease works')
    .option('--lease-name <name>', 'name of the coordination.k8s.io Lease', 'skr-agent-leader')
    .option('--lease-namespace <ns>', 'namespace of the Lease (default: --namespace)')
    .option('--leader-identity <id>', 'identity in the Lease (default: $HOSTNAME_<pid>_<random>)')
    .option('--workers <n>', 'Kymas reconciled in parallel', '4')
    .option('--requeue-ready <duration>', 'requeue of a Ready Kyma', '5m')
    .option('--requeue-processing <duration>', 'requeue of a Processing Kyma', '5s')
    .option('--requeue-warning <duration>', 'requeue of a Kyma in Warning', '30s')
    .option('--requeue-error <duration>', 'requeue of a Kyma in Error (failures back off 5 s to 30 s)', '2s')
    .option('--resync-interval <duration>', 'full relist of every watched kind; reconciles every Kyma', '10m')
    .option(
      '--callback-recheck-after <duration>',
      'after a callback, look at its Kyma once more this much later (admission runs before the write is stored); 0 disables',
      '2s',
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
    .option('--skr-webhook-namespace <ns>', 'namespace of the webhook in every SKR', DEFAULTS.skrNamespace)
    .option('--watcher-probe-after <duration>', 'probe an SKR whose webhook has been quiet this long', '5m')
    .option('--watcher-probe-timeout <duration>', 'a probe must come back as an event within this', '30s')
    .addOption(
      new Option('--log-level <level>', 'log level')
        .choices(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
        .default('info'),
    )
    .action(async (flags: RunFlags) => {
      await run(flags);
    });

  cli
    .command('reconcile')
    .description('reconcile one Kyma without servers; exits 0 only if the Kyma ends Ready')
    .requiredOption('--kyma <name>', 'name of the KCP Kyma')
    .option('--once', 'run the reconciliation once (the only mode; kept for clarity in scripts)')
    .option('--kubeconfig <path>', 'KCP kubeconfig (default: $KUBECONFIG, ~/.kube/config, then in-cluster)')
    .option('--namespace <ns>', 'KCP namespace of the Kyma', DEFAULTS.kcpNamespace)
    .option('--wait <duration>', 'repeat while the Kyma is not Ready, up to this long (0 = one pass)', '0')
    .addOption(
      new Option('--log-level <level>', 'log level')
        .choices(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'])
        .default('warn'),
    )
    .action(async (flags: Parameters<typeof reconcileOnce>[0]) => {
      process.exitCode = await reconcileOnce(flags);
    });
  cli
    .command('events')
    .description('tail the callbacks the agent accepts: time, runtime-id, kind, namespace/name')
    .option('--address <host:port>', "the agent's metrics address", '127.0.0.1:8080')
    .option('-o, --output <format>', 'text or json (one object per line)', 'text')
    .action(async (flags: { address: string; output: string }) => {
      if (flags.output !== 'text' && flags.output !== 'json') {
        throw new ConfigError(`--output: expected text or json, got ${JSON.stringify(flags.output)}`);
      }
      const address = parseAddress('--address', flags.address);
      const url = `ws://${address.host ?? '127.0.0.1'}:${address.port}${EVENT_STREAM_PATH}`;
      const abort = new AbortController();
      process.once('SIGINT', () => abort.abort());
      process.once('SIGTERM', () => abort.abort());
      await tailEvents(
        url,
        (event) =>
          process.stdout.write(
            `${flags.output === 'json' ? JSON.stringify(event) : formatStreamedEvent(event)}\n`,
          ),
        { signal: abort.signal, onOpen: () => process.stderr.write(`watching ${url} (Ctrl-C stops)\n`) },
      );
    });
  return cli;
}

program()
  .parseAsync(process.argv)
  .catch((error: unknown) => {
    if (error instanceof ConfigError) {
      process.stderr.write(
        `skr-agent: ${error.message}${error.cause ? `: ${String((error.cause as Error).message ?? error.cause)}` : ''}\n`,
      );
      process.exit(2);
    }
    process.stderr.write(`skr-agent: ${error instanceof Error ? error.message : String(error)}\n`);
    if (error instanceof Error && error.cause)
      process.stderr.write(`  cause: ${String((error.cause as Error).message ?? error.cause)}\n`);
    process.exit(1);
  });
