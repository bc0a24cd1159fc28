// The wiring of the reconcile layer, as controller-runtime's manager is: it builds the KCP client, the SKR client
// cache, the metrics, the PKI watch, the Kyma versions known and the mirror lanes once, and hands them to the
// Kyma reconciler (reconcile/reconciler.ts) and the targeted paths (targeted/paths.ts), which keep nothing of their
// own. `skr-agent run` (work.ts) and `skr-agent reconcile --once` start one:
//
//   const manager = createManager({ kcp, namespace: 'kcp-system', logger, registry });
//   const { requeueAfterMs } = await manager.reconciler.reconcile('kcp-system/my-kyma'); // throws → back off
//   await manager.close();
import type { KubeConfig } from '@kubernetes/client-node';
import {
  DEFAULTS,
  DEFAULT_REQUEUE_INTERVALS,
  SYNC_RESOURCE_ALLOWED,
  type Kyma,
  type RequeueIntervals,
} from '@skr-watcher/api';
import {
  createClusterClient,
  createSkrClients,
  kubeRequestMetrics,
  type ClusterClient,
  type KnownSecret,
  type SkrClients,
  workQueueRunHooks,
} from '@skr-watcher/kube';
import { Gauge, registeredMetric, silentLogger, type Logger, type Registry } from '@skr-watcher/telemetry';
import { watchPkiSecrets, type PkiCache } from '../registration/index.js';
import {
  parseKymaKey,
  type ModuleInstallation,
  type ReconcileContext,
  type RegistrationSettings,
  type SyncResourceNames,
  type SyncResourcePolicy,
  type WatchCaches,
} from '../reconcile/context.js';
import { DEFAULT_CRD_DIR } from '../reconcile/kyma/crds.js';
import { DEFAULT_FULL_REAPPLY_MS, FullPasses } from '../reconcile/kyma/pass-inputs.js';
import { createEventRecorder } from '../reconcile/events.js';
import { KymaReads } from '../reconcile/kyma-reads.js';
import { passMetricsIn } from '../reconcile/metrics.js';
import { MirrorLanes, mirrorLaneKey } from '../reconcile/modules/mirror-lanes.js';
import { createKymaReconciler, type Reconciler } from '../reconcile/reconciler.js';
import type { PurgeSettings } from '../reconcile/kyma/purge.js';
import { createDriftReverter } from '../targeted/drift.js';
import { targetedMetricsIn } from '../targeted/metrics.js';
import { createTargetedPaths, type TargetedPaths } from '../targeted/paths.js';

export interface ManagerOptions {
  /** KCP access (@kubernetes/client-node). */
  kcp: KubeConfig;
  /** KCP namespace of Kymas, templates and secrets (default kcp-system). */
  namespace: string;
  logger?: Logger;
  /** Where reconcile metrics are registered. */
  registry?: Registry;
  clock?: () => Date;
  /** Bound on every SKR request, so an unreachable SKR does not hang a worker (default 10 s). */
  skrTimeoutMs?: number;
  /** After this long unreachable, deletion gives up on the SKR side, emits an Event, removes the finalizer (default 10 min). */
  deletionTimeoutMs?: number;
  /** Upstream's purge: finalizers left in the SKR stripped once a deletion has waited this long; off when undefined. */
  purge?: PurgeSettings;
  /** Bound on every KCP request (default DEFAULT_KCP_TIMEOUT_MS). */
  kcpTimeoutMs?: number;
  /**
   * Every SKR request of one reconcile is aborted once this has passed (default DEFAULT_RECONCILE_DEADLINE_MS):
   * a slow SKR costs its own reconcile a bounded time, however many calls it makes.
   */
  reconcileDeadlineMs?: number;
  /** Kinds and namespaces SyncResource items may touch in SKRs (default SYNC_RESOURCE_ALLOWED). */
  syncResourcePolicy?: SyncResourcePolicy;
  /** Directory of the CRD manifests installed in SKRs that lack them (default: this repository's manifests/crds). */
  crdDir?: string;
  /**
   * The next look at a Kyma by the state its pass ended in (default REQUEUE_MS). Other requeues (a webhook
   * probe's answer is due) are returned as they are, so a flag for one state never changes them.
   */
  requeue?: Partial<RequeueIntervals>;
  /** Install and watch the webhook in every SKR, so no SKR needs it set up by hand; off when undefined. */
  registration?: RegistrationSettings;
  /**
   * Names of the SyncResources whose spec.kyma is `kyma`, e.g. from an informer's index. Without it every
   * reconcile lists all SyncResources of the namespace (from the API server's watch cache), which grows with
   * their number. Staleness is fine: each named SyncResource is read fresh, and a missing name is picked up
   * on the next pass. An undefined answer (a sharded replica's cache does not cover the Kyma) lists them too.
   */
  syncResourceNames?: (namespace: string, kyma: string) => SyncResourceNames | Promise<SyncResourceNames>;
  /** A Kyma's kubeconfig Secret (name, `<uid>/<resourceVersion>`) from a watch cache: unchanged, it is not read again. */
  kubeconfigSecret?: (kyma: string) => KnownSecret | undefined;
  /**
   * The Kyma `namespace/name` from a watch cache. A targeted mirror takes the module its status names as a guess, to
   * read that ModuleConfig alongside the fresh Kyma read instead of after it; the fresh read still decides.
   */
  cachedKyma?: (kymaKey: string) => Kyma | undefined;
  /** The catalog, Watchers and ModuleConfigs from the caller's watches, instead of a list of each per pass. */
  caches?: WatchCaches;
  /**
   * Module installation from an OCI registry (--oci-registry-host): one Manifest per module of every Kyma, its
   * manifests applied into the SKR (decision 021). Undefined: no Manifests, Module CRs from the template's spec.data.
   */
  modules?: ModuleInstallation;
  /** The first window between two targeted reverts of one installed object (default DRIFT_PACING.initialMs); 0: none. */
  driftRevertBackoffMs?: number;
  /** A Kyma whose inputs did not change is re-applied whole this often (pass-inputs.ts); 0: on every pass. */
  fullReapplyMs?: number;
}

export interface Manager {
  /** The level-triggered pass of one Kyma. */
  reconciler: Reconciler;
  /** The "do it now" paths (targeted/router.ts decides what follows them). */
  targeted: TargetedPaths;
  /**
   * This replica just took the Kyma over (sharding): its next pass reads it from the API server, since another
   * replica may have written it after this replica's Kyma watch last showed it.
   */
  acquired(kymaKey: string): void;
  /** The Kyma's next pass re-applies everything: a callback said something its inputs do not show may have changed. */
  distrust(kymaKey: string): void;
  /** Closes the pooled connections to KCP and every SKR, and the PKI watch it started. */
  close(): Promise<void>;
}

export const DEFAULT_SKR_TIMEOUT_MS = 10_000;
/**
 * A KCP request sent while the KCP's etcd was away can hang on after etcd is back; bounded like an SKR request, the
 * pass fails and runs again within seconds instead of holding the Kyma until the reconcile deadline.
 */
export const DEFAULT_KCP_TIMEOUT_MS = 10_000;
/** Three SKR request timeouts: a healthy SKR's reconcile takes well under a second. */
export const DEFAULT_RECONCILE_DEADLINE_MS = 30_000;
export const DEFAULT_DELETION_TIMEOUT_MS = 10 * 60_000;

export function createManager(options: ManagerOptions): Manager {
  const logger = options.logger ?? silentLogger();
  const namespace = options.namespace || DEFAULTS.kcpNamespace;
  // A targeted mirror and the full reconcile's mirror step of the same Module CR run one at a time, each reading
  // the Module CR inside its lane, so a pass that read it before an edit never writes over the targeted mirror.
  // Nothing else of a full reconcile holds a mirror up (decision 010).
  const lanes = new MirrorLanes();
  const kymas = new KymaReads(namespace, options.caches?.kyma);
  // Run by a controller only: its watch caches make the inputs cheap to read, and its callbacks are what can put a
  // Kyma's inputs in doubt. `reconcile --once` and tests without caches run every pass in full.
  const fullPasses =
    options.caches && options.fullReapplyMs !== 0
      ? new FullPasses(options.fullReapplyMs ?? DEFAULT_FULL_REAPPLY_MS)
      : undefined;
  const keyOf = (kymaKey: string) => {
    const { namespace: kymaNamespace, name } = parseKymaKey(kymaKey, namespace);
    return `${kymaNamespace}/${name}`;
  };
  const pki = pkiWatch(options, namespace, logger);
  const clients = buildClients(options, namespace, logger, lanes, pki);
  // A failed construction surfaces on the next reconcile; keep it from being an unhandled rejection meanwhile.
  clients.catch(() => undefined);
  const context = async () => (await clients).ctx;
  return {
    reconciler: createKymaReconciler({
      context,
      kymas,
      lanes,
      namespace,
      logger,
      deadlineMs: options.reconcileDeadlineMs ?? DEFAULT_RECONCILE_DEADLINE_MS,
      ...optional('metrics', passMetricsIn(options.registry)),
      ...optional('fullPasses', fullPasses),
    }),
    targeted: createTargetedPaths({
      context,
      kymas,
      lanes,
      revertDrift: createDriftReverter(options.registry, {
        ...(options.driftRevertBackoffMs === undefined
          ? {}
          : { pacing: { initialMs: options.driftRevertBackoffMs } }),
      }),
      namespace,
      logger,
      ...optional('cachedKyma', options.cachedKyma),
      ...optional('metrics', targetedMetricsIn(options.registry)),
    }),
    acquired(kymaKey) {
      try {
        const { namespace: kymaNamespace, name } = parseKymaKey(kymaKey, namespace);
        kymas.forget(`${kymaNamespace}/${name}`);
        // Its leaf too: the other replica may have re-issued it after this one last read it.
        pki?.forget(name);
        // And what the other replica's passes changed in the SKR: the first pass here is a full one.
        fullPasses?.distrust(`${kymaNamespace}/${name}`);
      } catch {
        // Not a Kyma key: nothing is known of it.
      }
    },
    distrust(kymaKey) {
      try {
        fullPasses?.distrust(keyOf(kymaKey));
      } catch {
        // Not a Kyma key: nothing is known of it.
      }
    },
    async close() {
      const built = await clients.catch(() => undefined);
      await built?.skrClients.close();
      await built?.kcp.close();
      if (!options.registration?.pki) await pki?.stop();
    },
  };
}

/** `{ [key]: value }` when the value is defined, else nothing (options with exactOptionalPropertyTypes). */
function optional<K extends string, V>(key: K, value: V | undefined): { [P in K]?: V } {
  return (value === undefined ? {} : { [key]: value }) as { [P in K]?: V };
}

/**
 * Run by a controller (it hands over its caches), a pass with registration takes the CA, the bundle and its leaf
 * from watches when it changes nothing; `reconcile --once` reads them (decision 016).
 */
function pkiWatch(options: ManagerOptions, namespace: string, logger: Logger): PkiCache | undefined {
  if (!options.registration || !options.caches) return undefined;
  if (options.registration.pki) return options.registration.pki;
  const pki = watchPkiSecrets({
    kubeConfig: options.kcp,
    namespace,
    logger,
    registry: options.registry,
    ...(options.registration.onTrustChange ? { onTrustChange: options.registration.onTrustChange } : {}),
  });
  pki.start();
  return pki;
}

interface Clients {
  kcp: ClusterClient;
  skrClients: SkrClients;
  ctx: ReconcileContext;
}

/** Client construction is async (the pooled dispatcher); the first reconcile awaits it. */
async function buildClients(
  options: ManagerOptions,
  namespace: string,
  logger: Logger,
  lanes: MirrorLanes,
  pki: PkiCache | undefined,
): Promise<Clients> {
  const clock = options.clock ?? (() => new Date());
  const requestMetrics = options.registry ? kubeRequestMetrics(options.registry) : undefined;
  const kcp = await createClusterClient(options.kcp, {
    ...(requestMetrics ? { metrics: { kind: 'kcp' as const, counters: requestMetrics } } : {}),
    name: 'kcp',
    timeoutMs: options.kcpTimeoutMs ?? DEFAULT_KCP_TIMEOUT_MS,
    // Used by every pass without pause: its connections are kept between bursts (a TLS handshake each, otherwise).
    keepAliveMs: 30_000,
    // A KCP slow for every run frees no worker (the work queue's slow runs are for hung SKRs).
    sharedByRuns: true,
    runs: workQueueRunHooks,
    // A replica that loses a Kyma or its membership aborts the run (decision 012): no KCP write after that.
    boundByDeadline: true,
  });
  const skrClients = createSkrClients({
    kcp,
    ...(options.kubeconfigSecret ? { knownSecretOf: options.kubeconfigSecret } : {}),
    namespace,
    timeoutMs: options.skrTimeoutMs ?? DEFAULT_SKR_TIMEOUT_MS,
    logger,
    runs: workQueueRunHooks,
    ...(requestMetrics ? { metrics: requestMetrics } : {}),
  });
  if (options.registry) registerClientGauge(options.registry, skrClients);
  const ctx: ReconcileContext = {
    kcp,
    namespace,
    logger,
    clock,
    events: createEventRecorder(kcp, logger, clock),
    skrClients,
    deletionTimeoutMs: options.deletionTimeoutMs ?? DEFAULT_DELETION_TIMEOUT_MS,
    ...(options.purge ? { purge: options.purge } : {}),
    crdDir: options.crdDir ?? DEFAULT_CRD_DIR,
    requeue: { ...DEFAULT_REQUEUE_INTERVALS, ...options.requeue },
    syncResourcePolicy: options.syncResourcePolicy ?? SYNC_RESOURCE_ALLOWED,
    inMirrorLane: (kymaKey, object, work) => lanes.run(mirrorLaneKey(kymaKey, object), work),
    ...(options.registration ? { registration: { ...options.registration, ...(pki ? { pki } : {}) } } : {}),
    ...(options.syncResourceNames ? { syncResourceNames: options.syncResourceNames } : {}),
    ...(options.caches ? { caches: options.caches } : {}),
    ...(options.modules ? { modules: options.modules } : {}),
  };
  return { kcp, skrClients, ctx };
}

function registerClientGauge(registry: Registry, skrClients: SkrClients): void {
  registeredMetric(
    registry,
    'skr_agent_skr_clients',
    () =>
      new Gauge({
        name: 'skr_agent_skr_clients',
        help: 'SKR clients (one connection pool each) cached by the reconciler.',
        registers: [registry],
        collect() {
          this.set(skrClients.size());
        },
      }),
  );
}
