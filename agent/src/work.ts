// The work of one active replica: the KCP watches and work queue (controller), the reconciler they drive,
// and the callback listener that wakes single Kymas.
import { watchFile, unwatchFile } from 'node:fs';
import type { KubeConfig } from '@kubernetes/client-node';
import { CALLBACK_BUDGET, MODULE_MIRROR, hasFingerprint } from '@skr-watcher/api';
import type { PooledKubeConfig, RunPhase } from '@skr-watcher/kube';
import type { Logger, Registry } from '@skr-watcher/telemetry';
import { readListenerTls, type AgentConfig, type ListenerConfig } from './config.js';
import { createController, type Controller } from './controller.js';
import { reportCertificates } from './certificate-metrics.js';
import { registerFleetMetrics } from './fleet-metrics.js';
import type { EventStream } from './event-stream.js';
import { ReconcileWakes, startListener, type AcceptedEvent, type Listener } from './listener/index.js';
import { createReconciler, type Reconciler } from './reconcile/index.js';
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
  const unguarded = createReconciler({
    kcp,
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
  const fleet = registerFleetMetrics(registry, {
    kymas: () =>
      controller?.synced
        ? controller.kymaKeys().flatMap((key) => controller?.cachedKyma(key) ?? [])
        : undefined,
  });
  const measured: Reconciler = {
    ...unguarded,
    reconcile: async (key) => {
      try {
        const result = await unguarded.reconcile(key);
        fleet.reconciled(key, result.requeueAfterMs ?? config.resyncMs);
        return result;
      } catch (error) {
        fleet.reconciled(key, config.requeue.Error);
        throw error;
      }
    },
  };
  // With sharding, a Kyma is reconciled only while this replica owns it, and a handover waits for the run.
  const reconciler: Reconciler = sharding
    ? {
        reconcile: (key: string, phase?: RunPhase) =>
          sharding.guard(key, () => measured.reconcile(key), {}, true, phase),
        // A targeted mirror is one small write an SKR user waits for: not paced.
        mirrorModuleCr: (key, change) =>
          sharding.guard(
            key,
            () => unguarded.mirrorModuleCr(key, change),
            { outcome: 'not-a-module' as const, reads: 0 },
            false,
          ),
        // As a mirror: one SyncResource a user's edit waits for, not paced.
        applySyncResource: (key, name) =>
          sharding.guard(
            key,
            () => unguarded.applySyncResource(key, name),
            { outcome: 'skipped' as const, reason: 'Kyma not owned here' },
            false,
          ),
        acquired: (key) => unguarded.acquired(key),
        close: () => unguarded.close(),
      }
    : measured;
  let listener: Listener | undefined;
  let stopTlsWatch: (() => void) | undefined;
  // A Kyma's callbacks start at most one full reconcile per interval, whichever replica took them: a flood from
  // one SKR cannot keep the workers busy.
  const wakes = new ReconcileWakes(CALLBACK_BUDGET.fullReconcileIntervalMs, (key) =>
    controller?.enqueue(key),
  );
  const wake = (key: string) => wakes.request(key);
  const stop = async () => {
    stopTlsWatch?.();
    // Reconciles still waiting for a pacing slot are not started: the ones running finish, the rest go to peers.
    sharding?.stopStarting();
    // Stop taking events first, then let the reconciles in flight finish, then drop SKR connections.
    await listener?.close();
    wakes.close();
    await controller?.stop();
    await reconciler.close();
    await modules?.close();
    policy?.stop();
  };
  try {
    controller = createController({
      kcp: pool.kubeConfig,
      namespace: config.namespace,
      reconciler,
      workers: config.workers,
      resyncMs: config.resyncMs,
      logger,
      registry,
      ...(modules ? { manifests: true } : {}),
      ...(sharding ? { kymaLabelSelector: sharding.kymaLabelSelector, dependents: sharding.dependents } : {}),
    });
    const started = controller;
    sharding?.attach(
      (key, event) => routeCallback(started, reconciler, logger, key, event, wake),
      (key) => {
        // Another replica may have written it since our Kyma watch last held it: its first pass reads it fresh.
        reconciler.acquired(key);
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
        reconciler,
        sharding,
        wake,
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
 * Where a callback goes (decision 010). Validating admission runs before the API server stores the write, so a
 * read right after the callback may not show it yet. An event with a fingerprint takes the targeted path: wait
 * (milliseconds) until the SKR shows the write, mirror a Module CR at once, then the full reconcile: after
 * MODULE_MIRROR.fullReconcileAfterMirrorMs when the mirror took the edit and the Kyma's status does not show the
 * Module CR's state (none when it does), at once otherwise.
 * Without a fingerprint (upstream's webhook) nothing says when the write is in: the full reconcile now and once
 * more a moment later. `wake` starts a full reconcile now (the agent passes ReconcileWakes, so a flood of one Kyma's
 * callbacks costs one per interval; the delayed ones are bounded by the queue, where the earliest schedule wins).
 */
export function routeCallback(
  controller: Pick<Controller, 'enqueue' | 'queue'>,
  reconciler: Pick<Reconciler, 'mirrorModuleCr'>,
  logger: Logger,
  kymaKey: string,
  event: AcceptedEvent | undefined,
  wake: (kymaKey: string) => void = (key) => controller.enqueue(key),
): void {
  if (!event?.fingerprint || !hasFingerprint(event.fingerprint)) {
    wake(kymaKey);
    if (event) controller.queue.addAfter(kymaKey, MODULE_MIRROR.unfingerprintedRecheckMs);
    return;
  }
  const change = {
    gvk: event.gvk,
    namespace: event.watched.namespace,
    name: event.watched.name,
    fingerprint: event.fingerprint,
    receivedAtMs: event.receivedAt.getTime(),
  };
  void reconciler.mirrorModuleCr(kymaKey, change).then(
    ({ outcome, kymaStatusChanged }) => {
      // The edit is in its ModuleConfig: the full reconcile (Kyma status, the other modules) can wait for the
      // window, so a burst of edits costs one, and follows only when the Kyma's status does not show the Module CR's
      // state yet (a spec edit leaves the status as it is: on a busy agent those passes competed with the targeted
      // mirrors and SyncResource applies of the next edits). Anything else (a Kyma edit, a module without
      // ModuleConfig yet, a Module CR gone or never shown) is the full reconcile's job, at once.
      if (outcome === 'mirrored' || outcome === 'unchanged') {
        if (kymaStatusChanged !== false)
          controller.queue.addAfter(kymaKey, MODULE_MIRROR.fullReconcileAfterMirrorMs);
      } else {
        wake(kymaKey);
      }
    },
    (error: unknown) => {
      // The full reconcile retries whatever failed here, with backoff and status.
      logger.debug(
        { err: error, kyma: kymaKey, gvk: event.gvk, name: event.watched.name },
        'targeted mirror failed',
      );
      wake(kymaKey);
    },
  );
}

async function startConfiguredListener(
  config: ListenerConfig,
  controller: Controller,
  logger: Logger,
  registry: Registry,
  onAccepted: (event: AcceptedEvent) => void,
  reconciler: Reconciler,
  sharding: Sharding | undefined,
  wake: (kymaKey: string) => void,
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
      sharding
        ? sharding.route(kymaKey, event)
        : routeCallback(controller, reconciler, logger, kymaKey, event, wake),
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
