// The work of one active replica: the KCP watches and work queue (controller), the reconciler they drive, the
// targeted paths and their router, and the callback listener that wakes single Kymas.
import { watchFile, unwatchFile } from 'node:fs';
import type { KubeConfig } from '@kubernetes/client-node';
import { CALLBACK_BUDGET } from '@skr-watcher/api';
import type { PooledKubeConfig } from '@skr-watcher/kube';
import type { Logger, Registry } from '@skr-watcher/telemetry';
import { readListenerTls, type AgentConfig, type ListenerConfig } from './config.js';
import { createController, type Controller, type KymaReconciler } from './controller.js';
import { reportCertificates } from './certificate-metrics.js';
import { registerFleetMetrics } from './fleet-metrics.js';
import { registerLifecycleManagerMetrics, registerPurgeMetrics } from './lifecycle-manager-metrics.js';
import type { EventStream } from './event-stream.js';
import { ReconcileWakes, startListener, type AcceptedEvent, type Listener } from './listener/index.js';
import { createManager } from './manager/index.js';
import type { Reconciler } from './reconcile/index.js';
import { createTargetedRouter, type TargetedRouter } from './targeted/router.js';
import type { TargetedPaths } from './targeted/paths.js';
import { createRegistryInstallation } from './reconcile/manifests/source.js';
import { watchPolicy } from './rollout/policy-file.js';
import { createWatcherHealth } from './registration/index.js';
import type { Sharding } from './sharding/index.js';

const TLS_POLL_MS = 5_000;

export interface Running {
  stop(): Promise<void>;
}

/** Starts the controller and the listener; returned stop() undoes it in order. */
export async function startWork(
  config: AgentConfig,
  kcp: KubeConfig,
  logger: Logger,
  registry: Registry,
  events: EventStream,
  pool: PooledKubeConfig,
  sharding?: Sharding,
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
  // Module installation (--oci-registry-host, decision 021): one module source for every Kyma of this process.
  const modules = config.modules
    ? await createRegistryInstallation({
        settings: config.modules,
        kcp,
        namespace: config.namespace,
        metrics: registry,
      })
    : undefined;
  if (modules) logger.info({ registry: modules.source.repo }, 'module installation on');
  // Maintenance windows (decision 025): the policy file, read again every 30 s; its reason kept when unreadable.
  const policy = config.modules?.maintenancePolicyDir
    ? await watchPolicy(config.modules.maintenancePolicyDir, {
        registry,
        onError: (error) => logger.warn({ error }, 'maintenance policy not read'),
      })
    : undefined;
  if (modules && config.modules)
    modules.maintenance = {
      policy: () => policy?.current(),
      minWindowMs: config.modules.minMaintenanceWindowMs,
    };
  // Upstream's purge, its metrics among lifecycle-manager's when those are asked for (decision 027).
  const purge = config.purge && {
    ...config.purge,
    ...(config.lifecycleManagerMetrics ? { observer: registerPurgeMetrics(registry) } : {}),
  };
  const manager = createManager({
    kcp,
    ...(purge ? { purge } : {}),
    namespace: config.namespace,
    logger,
    registry,
    syncResourcePolicy: config.syncResourcePolicy,
    // Reconciles only run once the controller exists; its cache knows each Kyma's SyncResources (when sharded, of the
    // buckets it watches; for another the reconciler lists them).
    syncResourceNames: (_namespace, kyma) => controller?.syncResourceNames(kyma),
    // The Secret watch knows each kubeconfig Secret and its version: the reconciler reads it (by name) only when it changed.
    kubeconfigSecret: (kyma) => controller?.kubeconfigSecret(kyma),
    // A targeted mirror reads the ModuleConfig of the module the cached Kyma names alongside the fresh Kyma read.
    cachedKyma: (kymaKey) => controller?.cachedKyma(kymaKey),
    // The catalog, Watchers and ModuleConfigs the controller watches anyway: no list of them per pass.
    caches: {
      moduleTemplates: () => controller?.caches.moduleTemplates(),
      moduleReleaseMetas: () => controller?.caches.moduleReleaseMetas(),
      watchers: () => controller?.caches.watchers(),
      moduleConfigs: (kyma) => controller?.caches.moduleConfigs(kyma),
      // The owned Kymas: a pass takes its Kyma from here at a version it knows, instead of a GET (decision 016).
      kyma: (kymaKey) => controller?.caches.kyma?.(kymaKey),
      ...(modules ? { manifests: (kyma: string) => controller?.caches.manifests?.(kyma) } : {}),
    },
    requeue: config.requeue,
    driftRevertBackoffMs: config.driftRevertBackoffMs,
    fullReapplyMs: config.fullReapplyMs,
    ...(modules ? { modules } : {}),
    ...(config.registration
      ? {
          registration: {
            options: {
              image: config.registration.image,
              kcpAddress: config.registration.kcpAddress,
              kcpServerCn: config.registration.kcpServerCn,
              skrNamespace: config.registration.skrNamespace,
            },
            health: watcherHealth,
            // A rotation step: each webhook gets the new bundle from its Kyma's pass, so every owned Kyma runs one.
            onTrustChange: () => {
              for (const key of controller?.kymaKeys() ?? []) controller?.enqueue(key, 'pki');
            },
          },
        }
      : {}),
  });
  // Fleet gauges read the Kyma cache at scrape time; each reconcile's end says when the next is due (decision 023).
  const ownedKymas = () =>
    controller?.synced
      ? controller.kymaKeys().flatMap((key) => controller?.cachedKyma(key) ?? [])
      : undefined;
  const fleet = registerFleetMetrics(registry, { kymas: ownedKymas });
  // Upstream lifecycle-manager's metrics from the same cache, for alerts written against it (decision 027); a
  // series per Kyma, so only when asked for.
  const lifecycleManager = config.lifecycleManagerMetrics
    ? registerLifecycleManagerMetrics(registry, {
        kymas: ownedKymas,
        releaseMetas: () => controller?.caches.moduleReleaseMetas(),
      })
    : undefined;
  const measured: Reconciler = {
    reconcile: async (key) => {
      try {
        const result = await manager.reconciler.reconcile(key);
        fleet.reconciled(key, result.requeueAfterMs ?? config.resyncMs);
        return result;
      } catch (error) {
        fleet.reconciled(key, config.requeue.Error);
        lifecycleManager?.failed(controller?.cachedKyma(key), error);
        throw error;
      }
    },
  };
  // With sharding, a Kyma is reconciled only while this replica owns it, and a handover waits for the run.
  const reconciler: KymaReconciler = sharding
    ? {
        reconcile: (key, phase) => sharding.guard(key, () => measured.reconcile(key), {}, true, phase),
      }
    : measured;
  const targeted: TargetedPaths = sharding ? ownedOnly(manager.targeted, sharding) : manager.targeted;
  let listener: Listener | undefined;
  let stopTlsWatch: (() => void) | undefined;
  // A Kyma's callbacks start at most one full reconcile per interval, whichever replica took them: a flood from
  // one SKR cannot keep the workers busy.
  const wakes = new ReconcileWakes(CALLBACK_BUDGET.fullReconcileIntervalMs, (key) =>
    controller?.enqueue(key),
  );
  const wake = (key: string) => wakes.request(key);
  const router: TargetedRouter = createTargetedRouter({
    paths: targeted,
    fullPass: {
      now: (key, trigger) => (trigger === 'callback' ? wake(key) : controller?.enqueue(key, trigger)),
      after: (key, ms) => controller?.queue.addAfter(key, ms),
      distrust: (key) => manager.distrust(key),
    },
    logger,
  });
  const stop = async () => {
    stopTlsWatch?.();
    // Reconciles still waiting for a pacing slot are not started: the ones running finish, the rest go to peers.
    sharding?.stopStarting();
    // Stop taking events first, then let the reconciles in flight finish, then drop SKR connections.
    await listener?.close();
    wakes.close();
    await controller?.stop();
    await manager.close();
    await modules?.close();
    policy?.stop();
  };
  try {
    controller = createController({
      kcp: pool.kubeConfig,
      namespace: config.namespace,
      reconciler,
      onSyncResourceChange: (key, name) => router.syncResourceChanged(key, name),
      workers: config.workers,
      resyncMs: config.resyncMs,
      logger,
      registry,
      ...(modules ? { manifests: true } : {}),
      ...(sharding ? { kymaLabelSelector: sharding.kymaLabelSelector, dependents: sharding.dependents } : {}),
    });
    const started = controller;
    sharding?.attach(
      (key, event) => router.callback(key, event),
      (key) => {
        // Another replica may have written it since our Kyma watch last held it: its first pass reads it fresh.
        manager.acquired(key);
        started.enqueueAcquired(key);
      },
    );
    await controller.start();
    if (config.listener) {
      const onAccepted = (event: AcceptedEvent) => {
        watcherHealth?.recordEvent(event.runtimeId, event.receivedAt);
        events.publish(event);
      };
      const serving = await startConfiguredListener(
        config.listener,
        controller,
        logger,
        registry,
        onAccepted,
        router,
        sharding,
      );
      listener = serving.listener;
      stopTlsWatch = serving.stopTlsWatch;
    }
    return { stop };
  } catch (error) {
    await stop().catch(() => {});
    throw error;
  }
}

/**
 * The targeted paths of a sharded replica: each runs only while this replica owns the Kyma (a handover waits for
 * it), unpaced, since an SKR user waits for it. Not owned here: the router sends the Kyma to its full pass, which
 * the owner runs.
 */
function ownedOnly(paths: TargetedPaths, sharding: Sharding): TargetedPaths {
  return {
    objectChanged: (key, change) =>
      sharding.guard(
        key,
        () => paths.objectChanged(key, change),
        { path: 'mirror' as const, outcome: 'not-a-module' as const, reads: 0 },
        false,
      ),
    syncResourceChanged: (key, name) =>
      sharding.guard(
        key,
        () => paths.syncResourceChanged(key, name),
        { outcome: 'skipped' as const, reason: 'Kyma not owned here' },
        false,
      ),
  };
}

async function startConfiguredListener(
  config: ListenerConfig,
  controller: Controller,
  logger: Logger,
  registry: Registry,
  onAccepted: (event: AcceptedEvent) => void,
  router: TargetedRouter,
  sharding: Sharding | undefined,
): Promise<{ listener: Listener; stopTlsWatch?: () => void }> {
  const common = {
    host: config.address.host,
    port: config.address.port,
    maxConnections: config.maxConnections,
    idleTimeoutMs: config.idleTimeoutMs,
    // Sharded, any replica accepts a callback and hands it to the Kyma's owner (maybe itself).
    resolveKyma: (runtimeId: string) =>
      sharding ? sharding.resolveKyma(runtimeId) : controller.resolveKyma(runtimeId),
    enqueue: (kymaKey: string, event?: AcceptedEvent) =>
      sharding ? sharding.route(kymaKey, event) : router.callback(kymaKey, event),
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
  // The serving certificate as last loaded, for its expiry gauge (decision 023).
  let servingPem = tls.certPem;
  const unreport = reportCertificates(registry, { pem: { listener: () => servingPem } });
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
        servingPem = material.certPem;
        sharding?.updateTls(material);
        logger.info('listener TLS material reloaded');
      })
      .catch((error: unknown) =>
        logger.error({ err: error }, 'listener TLS reload failed; keeping the old material'),
      )
      .finally(() => (reloading = false));
  };
  for (const file of files) watchFile(file, { interval: TLS_POLL_MS, persistent: false }, reload);
  return {
    listener,
    stopTlsWatch: () => {
      unreport();
      files.forEach((file) => unwatchFile(file, reload));
    },
  };
}
