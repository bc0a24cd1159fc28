// The SKR webhook as a library: tests and the demo run it in-process; main.ts wraps it as a binary.
import {
  createLogger,
  createRegistry,
  registerBuildInfo,
  startHealthServer,
  type HealthServer,
  type Logger,
  type Registry,
} from '@skr-watcher/telemetry';
import { buildInfo } from '@skr-watcher/api';
import { CONFIG_DEFAULTS, dispatchSettings, type WebhookConfig } from './config.js';
import type { DispatchStats } from './dispatch/index.js';
import { DispatchThread } from './dispatch/thread.js';
import { parseKcpAddress } from './kcp-client.js';
import { createWebhookMetrics } from './metrics.js';
import { startAdmissionServer, type AdmissionServer } from './server.js';
import { CertificateWatcher, readTlsMaterialPatiently, runtimeIdOf } from './tls-reload.js';
import { ConfigurationWatch } from './configuration-watch.js';

export { isRelevantChange, sameJson } from './admission.js';
export { Dispatcher, dispatchKey } from './dispatch/index.js';
export type {
  DeliveryOutcome,
  DispatchObserver,
  DispatchStats,
  DropReason,
  SendEvent,
} from './dispatch/index.js';
export { webhookCommand, CONFIG_DEFAULTS, dispatchSettings } from './config.js';
export type { WebhookConfig } from './config.js';
export { parseKcpAddress } from './kcp-client.js';
export { readTlsMaterial } from './tls-reload.js';
export type { TlsFiles, TlsMaterial } from './tls-reload.js';

/** Required: the TLS files and the KCP address; everything else defaults as in `CONFIG_DEFAULTS`. */
export type WebhookOptions = Pick<WebhookConfig, 'tlsCertFile' | 'tlsKeyFile' | 'caCertFile' | 'kcpAddr'> &
  Partial<WebhookConfig> & {
    logger?: Logger;
    registry?: Registry;
    /** How long start-up waits for certificate files that do not load yet (mid-swap); default 10 s. */
    startupCertWaitMs?: number;
  };

export interface RunningWebhook {
  readonly webhookPort: number;
  readonly metricsPort: number;
  /**
   * Counters of the dispatcher, for tests and the demo. The dispatch thread reports them every second; they are
   * exact after `queueDepth()` or `close()` resolves.
   */
  readonly dispatchStats: DispatchStats;
  /** Objects with an undelivered event, once the dispatch thread has taken every change answered so far. */
  queueDepth(): Promise<number>;
  /** Re-reads the certificate files now (file watches do this on their own); true if they changed. */
  reloadCertificates(): Promise<boolean>;
  /** Stops accepting reviews, delivers what is queued for up to `shutdownDrainMs`, then stops. */
  close(): Promise<void>;
}

export async function startWebhook(options: WebhookOptions): Promise<RunningWebhook> {
  const config: WebhookConfig = {
    ...CONFIG_DEFAULTS,
    ...stripUndefined(options),
    tlsCertFile: options.tlsCertFile,
    tlsKeyFile: options.tlsKeyFile,
    caCertFile: options.caCertFile,
    kcpAddr: options.kcpAddr,
  };
  const registry = options.registry ?? createRegistry();
  registerBuildInfo(registry, 'skr_webhook', buildInfo());
  const metrics = createWebhookMetrics(registry);
  const files = { certFile: config.tlsCertFile, keyFile: config.tlsKeyFile, caFile: config.caCertFile };
  // At start the files may be mid-swap (a Secret volume update): retry briefly before giving up.
  const material = await readTlsMaterialPatiently(files, options.startupCertWaitMs ?? 10_000);
  // Every line names the SKR it comes from, so logs collected from many SKRs can be told apart and matched to the
  // listener's (which logs the same runtime-id). A renewed certificate keeps the CN.
  const runtimeId = runtimeIdOf(material.cert);
  const logger = (options.logger ?? createLogger('skr-webhook')).child(runtimeId ? { runtimeId } : {});
  const address = parseKcpAddress(config.kcpAddr);

  // Callbacks run on a thread of their own, so admission answers never wait behind them (decision 015).
  const dispatch = await DispatchThread.start({
    address,
    material,
    ...dispatchSettings(config),
    logger,
    observer: metrics.dispatch,
  });

  metrics.refreshDispatchBeforeScrape(() => dispatch.depth());

  let admission: AdmissionServer | undefined;
  let health: HealthServer | undefined;
  let ready = false;
  try {
    admission = await startAdmissionServer({
      host: config.host,
      port: config.webhookPort,
      material,
      maxBodyBytes: config.maxBodyBytes,
      maxBodyBytesInFlight: config.maxBodyBytesInFlight,
      limits: { maxConnections: config.maxConnections, idleTimeoutMs: config.idleTimeoutMs },
      logger,
      metrics: metrics.admission,
      onRelevantChange: (manager, event, uid) => dispatch.enqueue(manager, event, uid),
    });
    health = await startHealthServer({
      host: config.host,
      port: config.metricsPort,
      registry,
      ready: () => ready,
    }).catch((cause: unknown) => {
      throw new Error(`listen on ${config.host}:${config.metricsPort} for metrics`, { cause });
    });
  } catch (error) {
    await admission?.close(0);
    await dispatch.drain(0);
    throw error;
  }
  const server = admission;
  const healthServer = health;

  const watcher = new CertificateWatcher({
    files,
    initial: material,
    logger,
    pollMs: config.certPollMs,
    onFailure: () => metrics.tlsReloaded('failed'),
    onChange: (next) => {
      try {
        server.updateTls(next);
        dispatch.updateTls(next);
        metrics.tlsReloaded('applied');
      } catch (error) {
        metrics.tlsReloaded('failed');
        logger.error({ err: error }, 'new certificates could not be applied; keeping the current ones');
      }
    },
  });
  watcher.start();
  const configurationWatch = watchOwnConfiguration(config, logger, (why) => dispatch.resync(why));
  configurationWatch?.start();
  ready = true;
  logger.info(
    {
      webhookPort: server.port,
      metricsPort: healthServer.port,
      kcp: `${address.host}:${address.port}`,
      workers: config.workers,
      queueSize: config.queueSize,
    },
    'skr-webhook started',
  );

  let closing: Promise<void> | undefined;
  return {
    webhookPort: server.port,
    metricsPort: healthServer.port,
    dispatchStats: dispatch.stats,
    queueDepth: () => dispatch.depth(),
    reloadCertificates: () => watcher.reload(),
    close: () => {
      closing ??= (async () => {
        ready = false;
        watcher.close();
        await configurationWatch?.close();
        await server.close(Math.min(5_000, config.shutdownDrainMs));
        const left = await dispatch.depth();
        if (left > 0)
          logger.info({ queued: left, drainMs: config.shutdownDrainMs }, 'delivering queued events');
        await dispatch.drain(config.shutdownDrainMs);
        await healthServer.close();
        logger.info(dispatch.stats, 'skr-webhook stopped');
      })();
      return closing;
    },
  };
}

/** The watch of the webhook's own configuration, or undefined when off or when no SKR API server is known. */
function watchOwnConfiguration(
  config: WebhookConfig,
  logger: Logger,
  onTampered: (why: string) => void,
): ConfigurationWatch | undefined {
  if (config.watchConfiguration === 'none') return undefined;
  let apiServer: URL;
  if (config.skrApiServer === 'in-cluster') {
    const host = process.env['KUBERNETES_SERVICE_HOST'];
    if (!host) {
      logger.info(
        'not watching the webhook configuration: not in a Pod (no KUBERNETES_SERVICE_HOST) and no --skr-api-server',
      );
      return undefined;
    }
    const port = process.env['KUBERNETES_SERVICE_PORT'] ?? '443';
    apiServer = new URL(`https://${host.includes(':') ? `[${host}]` : host}:${port}`);
  } else {
    apiServer = new URL(config.skrApiServer);
  }
  logger.info(
    { configuration: config.watchConfiguration, apiServer: apiServer.origin },
    'watching the webhook configuration',
  );
  return new ConfigurationWatch({
    apiServer,
    tokenFile: config.skrTokenFile,
    caFile: config.skrCaFile,
    name: config.watchConfiguration,
    logger,
    onTampered,
  });
}

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}
