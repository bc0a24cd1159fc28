// The agent's trigger side: KCP watches and listener events become Kyma keys in one work queue,
// whose workers run the reconciler. Triggers only enqueue; all convergence happens in reconcile(key).
import { ApiException, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import {
  backoffDelay,
  GROUP,
  KINDS,
  LABELS,
  type Kyma,
  type Manifest,
  type ModuleConfig,
  type ModuleReleaseMeta,
  type ModuleTemplate,
  type SyncResource,
  type Watcher,
  type Clock,
} from '@skr-watcher/api';
import {
  ResilientInformer,
  WorkQueue,
  customResourceSource,
  metadataOnly,
  objectKey,
  secretSource,
  secretVersion,
  type CachedObject,
  type KnownSecret,
  type PartialObjectMetadata,
  type RunPhase,
} from '@skr-watcher/kube';
import { webhookTlsSecretName } from '@skr-watcher/pki';
import { Counter, registeredMetric, type Logger, type Registry } from '@skr-watcher/telemetry';
import { createDependentCache, type DependentScope } from './dependents.js';
import { cachedManifest, cachedModuleConfig, isOwnMirror, type WatchCaches } from './reconcile/index.js';

/** The reconciler as the controller drives it (agent/src/reconcile). */
export interface KymaReconciler {
  /** `phase`: the work queue's view of the run; a sharded replica says when it waits for a pacing slot. */
  reconcile(kymaKey: string, phase?: RunPhase): Promise<{ requeueAfterMs?: number }>;
}

export interface ControllerOptions {
  kcp: KubeConfig;
  namespace: string;
  reconciler: KymaReconciler;
  /**
   * A SyncResource's spec changed while the workers run (the targeted path, agent/src/targeted/router.ts): the
   * router applies it at once and decides whether a full pass follows. Without it the change wakes the full pass.
   */
  onSyncResourceChange?: (kymaKey: string, name: string) => void;
  workers?: number;
  /** Full relist of every watched kind; a Kyma relist reconciles every Kyma. Default 10 min. */
  resyncMs?: number;
  /** Watch only the Kymas this selects (sharding: the ones this replica owns, decision 012). */
  kymaLabelSelector?: string;
  /** Watch only the ModuleConfigs and SyncResources of these buckets (sharding: this replica's, decision 012). */
  dependents?: DependentScope;
  /** Watch Manifests (module installation on, decision 021): a change by someone else wakes their Kyma. */
  manifests?: boolean;
  /** Restart a watch that delivered nothing for this long. Default 120 s. */
  watchdogMs?: number;
  clock?: Clock;
  logger?: Logger;
  registry?: Registry;
}

export interface Controller {
  /** Starts the watches, waits until every cache is filled, then starts the workers. */
  start(): Promise<void>;
  /** Stops the watches and lets the reconciles in flight finish. */
  stop(): Promise<void>;
  /** Wakes the reconciliation of `namespace/name`; `source` labels the trigger metric (default `listener`). */
  enqueue(kymaKey: string, source?: string): void;
  /** A Kyma this replica just took over (sharding): reconciled before routine work, as nobody else reconciles it. */
  enqueueAcquired(kymaKey: string): void;
  /** The Kyma labelled with this runtime-id, from the watch cache; for the listener. */
  resolveKyma(runtimeId: string): { namespace: string; name: string } | undefined;
  readonly queue: WorkQueue;
  /** True once every watch has listed. */
  readonly synced: boolean;
  /** Keys of the Kymas in the cache. */
  kymaKeys(): string[];
  /** The Kyma `namespace/name` as the watch cache has it (maybe a moment old). */
  cachedKyma(kymaKey: string): Kyma | undefined;
  /** The Kyma's one kubeconfig Secret in the watch cache (name, `<uid>/<resourceVersion>`); undefined unless exactly one. */
  kubeconfigSecret(kyma: string): KnownSecret | undefined;
  /** Names of the SyncResources whose spec.kyma is `kyma`, from the watch cache; undefined while it does not cover the Kyma. */
  syncResourceNames(kyma: string): string[] | undefined;
  /** What the ModuleConfig and SyncResource caches hold: objects and the label selectors of their watches. */
  dependentsHeld(): Record<
    'moduleConfigs' | 'syncResources',
    { objects: number; selectors: (string | undefined)[] }
  >;
  /** The catalog, Watchers and each Kyma's ModuleConfigs, for the reconciler to read instead of listing them. */
  readonly caches: WatchCaches;
}

const RUNTIME_ID_INDEX = 'runtime-id';
const SECRET_KYMA_INDEX = 'kyma-name';
const KYMA_NAME_LABEL_SELECTOR = LABELS.kymaName;
/** A kubeconfig Secret is never of the type that requires `tls.crt` and `tls.key`: the webhook certificate's type. */
const NOT_A_TLS_SECRET = 'type!=kubernetes.io/tls';

// Finalizers are left out: adding ours is the reconciler's own write, within a pass that carries on.
function sameLabelsAndAnnotations(a: CachedObject & { metadata?: Kyma['metadata'] }, b: typeof a): boolean {
  const json = (v: unknown) => JSON.stringify(v ?? {});
  return (
    json(a.metadata?.labels) === json(b.metadata?.labels) &&
    json(a.metadata?.annotations) === json(b.metadata?.annotations) &&
    a.metadata?.deletionTimestamp === b.metadata?.deletionTimestamp
  );
}

/** The module names a Kyma refers to, in its spec or its status. */
function modulesOf(kyma: Kyma): Set<string> {
  const names = new Set<string>();
  for (const module of kyma.spec?.modules ?? []) names.add(module.name);
  for (const module of kyma.status?.modules ?? []) names.add(module.name);
  return names;
}

export function createController(options: ControllerOptions): Controller {
  const { kcp, namespace, reconciler } = options;
  const logger = options.logger?.child({ subsystem: 'controller' });
  const informerDefaults = {
    kubeConfig: kcp,
    resyncMs: options.resyncMs,
    watchdogMs: options.watchdogMs,
    clock: options.clock,
    logger,
    registry: options.registry,
  };
  const custom = <T extends CachedObject>(
    kind: { plural: string; version: string },
    labelSelector?: string,
    transform?: (object: T) => T,
  ) =>
    new ResilientInformer<T>({
      ...informerDefaults,
      source: customResourceSource<T>(kcp, {
        group: GROUP,
        version: kind.version,
        plural: kind.plural,
        namespace,
        labelSelector,
      }),
      ...(transform ? { transform } : {}),
    });

  const registry = options.registry;
  const triggers = registry
    ? registeredMetric(
        registry,
        'skr_agent_triggers_total',
        () =>
          new Counter({
            name: 'skr_agent_triggers_total',
            help: 'Kyma keys enqueued, by source (kyma, watcher, moduletemplate, ...; listener; resync).',
            labelNames: ['source'],
            registers: [registry],
          }),
      )
    : undefined;

  const queue = new WorkQueue({
    name: 'kyma',
    workers: options.workers,
    clock: options.clock,
    logger,
    registry: options.registry,
    // The reconciler decides when to look again (its intervals are configured on it, not mapped here).
    process: (key, phase) => reconciler.reconcile(key, phase),
    processLogsFailures: true,
  });

  const kymas = custom<Kyma>(KINDS.kyma, options.kymaLabelSelector);
  kymas.addIndex(RUNTIME_ID_INDEX, (kyma) => {
    const runtimeId = kyma.metadata?.labels?.[LABELS.runtimeId];
    return runtimeId ? [runtimeId] : [];
  });
  const enqueue = (source: string, key: string) => {
    triggers?.inc({ source });
    queue.add(key);
  };
  const enqueueKymaOf = (source: string, kymaName: string | undefined) => {
    if (kymaName) enqueue(source, `${namespace}/${kymaName}`);
  };
  const enqueueAll = (source: string, filter: (kyma: Kyma) => boolean = () => true) => {
    for (const kyma of kymas.list()) if (filter(kyma)) enqueue(source, objectKey(kyma));
  };

  kymas.addHandler({
    onAdd: (kyma) => enqueue('kyma', objectKey(kyma)),
    onUpdate: (previous, kyma) => {
      const resync = previous.metadata.resourceVersion === kyma.metadata.resourceVersion;
      // Status-only writes (our own) do not bump the generation; reacting to them would loop.
      if (
        resync ||
        previous.metadata.generation !== kyma.metadata.generation ||
        !sameLabelsAndAnnotations(previous, kyma)
      ) {
        enqueue(resync ? 'resync' : 'kyma', objectKey(kyma));
      }
    },
    onDelete: (kyma) => enqueue('kyma', objectKey(kyma)),
  });

  // Watchers configure the webhook in every SKR: a change concerns every Kyma.
  const watchers = custom<Watcher>(KINDS.watcher);
  const onSpecChange = <T extends CachedObject & { metadata?: { generation?: number } }>(
    react: (object: T) => void,
  ) => ({
    onAdd: react,
    onUpdate: (previous: T, object: T) => {
      if (previous.metadata?.generation !== object.metadata?.generation) react(object);
    },
    onDelete: react,
  });
  watchers.addHandler(onSpecChange<Watcher>(() => enqueueAll('watcher')));

  // Templates and release metas change what a module resolves to (the Kymas that use the module) and, when the
  // module catalog is copied to SKRs or the module is mandatory, concern every Kyma.
  const byModule = (source: string) => (object: ModuleTemplate | ModuleReleaseMeta) => {
    const moduleName = object.spec?.moduleName;
    enqueueAll(
      source,
      (kyma) =>
        !moduleName ||
        kyma.spec?.sync?.moduleCatalog !== false ||
        Boolean(object.spec?.mandatory) ||
        modulesOf(kyma).has(moduleName),
    );
  };
  const templates = custom<ModuleTemplate>(KINDS.moduleTemplate);
  templates.addHandler(onSpecChange<ModuleTemplate>(byModule('moduletemplate')));
  const releaseMetas = custom<ModuleReleaseMeta>(KINDS.moduleReleaseMeta);
  releaseMetas.addHandler(onSpecChange<ModuleReleaseMeta>(byModule('modulereleasemeta')));

  const kymaNameOf = (object: SyncResource | ModuleConfig) =>
    object.spec?.kyma || object.metadata?.labels?.[LABELS.kymaName];
  // Sharded, the dependents watches hold Kymas this replica is about to get or give away: only its cached ones wake.
  const enqueueDependentKymaOf = (source: string, kymaName: string | undefined) => {
    if (!options.dependents || (kymaName && kymas.get(`${namespace}/${kymaName}`)))
      enqueueKymaOf(source, kymaName);
  };
  const dependentDefaults = {
    kcp,
    namespace,
    logger,
    ...(options.dependents ? { scope: options.dependents } : {}),
  };
  // A SyncResource's spec change goes to the targeted path (the router says what follows it). Until the workers
  // start, the initial lists' adds only enqueue: every Kyma's first pass applies them anyway; so do a Kyma this
  // replica does not hold (sharded) and a SyncResource without a name or Kyma.
  let live = false;
  const syncResourceChanged = (sync: SyncResource) => {
    const kymaName = kymaNameOf(sync);
    const name = sync.metadata?.name;
    const targeted = options.onSyncResourceChange;
    if (
      !targeted ||
      !live ||
      !kymaName ||
      !name ||
      (options.dependents && !kymas.get(`${namespace}/${kymaName}`))
    ) {
      enqueueDependentKymaOf('syncresource', kymaName);
      return;
    }
    triggers?.inc({ source: 'syncresource-targeted' });
    targeted(`${namespace}/${kymaName}`, name);
  };
  // The reconciler asks which SyncResources belong to a Kyma; the cache answers without a list call.
  const syncResources = createDependentCache<SyncResource>({
    ...dependentDefaults,
    kind: KINDS.syncResource,
    watch: (labelSelector) => custom<SyncResource>(KINDS.syncResource, labelSelector),
    kymaOf: kymaNameOf,
    handlers: {
      onAdd: syncResourceChanged,
      onUpdate: (previous, sync) => {
        if (previous.metadata?.generation !== sync.metadata?.generation) syncResourceChanged(sync);
      },
      // Its objects are removed by the finalizer's pass; one deleted without (no agent ran) is the full pass's.
      onDelete: (sync) => enqueueDependentKymaOf('syncresource', kymaNameOf(sync)),
    },
  });
  // A ModuleConfig edited or deleted by hand is put back; on add it is most likely our own write, and an update
  // whose spec hashes to the agent's annotation is our own write too (a reconcile would find nothing to do).
  const moduleConfigs = createDependentCache<ModuleConfig>({
    ...dependentDefaults,
    kind: KINDS.moduleConfig,
    // Kept as the reconciler parses them (decision 021): one copy each, not the object and its parse.
    watch: (labelSelector) => custom<ModuleConfig>(KINDS.moduleConfig, labelSelector, cachedModuleConfig),
    // By label, as the reconciler's list selected them.
    kymaOf: (config) => config.metadata?.labels?.[LABELS.kymaName],
    handlers: {
      onUpdate: (previous, config) => {
        if (previous.metadata?.generation !== config.metadata?.generation && !isOwnMirror(config)) {
          enqueueDependentKymaOf('moduleconfig', kymaNameOf(config));
        }
      },
      onDelete: (config) => enqueueDependentKymaOf('moduleconfig', kymaNameOf(config)),
    },
  });

  // kubeconfig Secrets: the reconciler rebuilds its SKR client when the Secret changes. The API server sends their
  // metadata only (decision 012): the label maps a Secret to its Kyma, uid and resourceVersion tell the
  // reconciler when to read it by name. The Kyma's webhook certificate Secret carries the same label; every agent
  // wrote it as type kubernetes.io/tls (left out by the server) and named it `<kyma>-webhook-tls` (see kubeconfigSecret).
  const secrets = new ResilientInformer<PartialObjectMetadata>({
    ...informerDefaults,
    source: metadataOnly(
      kcp,
      secretSource(kcp, {
        namespace,
        labelSelector: KYMA_NAME_LABEL_SELECTOR,
        fieldSelector: NOT_A_TLS_SECRET,
      }),
    ),
  });
  const secretKymaName = (secret: PartialObjectMetadata) => secret.metadata?.labels?.[LABELS.kymaName];
  secrets.addIndex(SECRET_KYMA_INDEX, (secret) => {
    const kyma = secretKymaName(secret);
    return kyma ? [kyma] : [];
  });
  // Only Kymas in this replica's cache (its own, when sharded) are woken; a Kyma added later is enqueued by its add.
  const enqueueCachedKymaOf = (secret: PartialObjectMetadata) => {
    const kyma = secretKymaName(secret);
    if (kyma && kymas.get(`${namespace}/${kyma}`)) enqueueKymaOf('secret', kyma);
  };
  secrets.addHandler({
    onAdd: enqueueCachedKymaOf,
    onUpdate: (previous, secret) => {
      if (previous.metadata?.resourceVersion !== secret.metadata?.resourceVersion)
        enqueueCachedKymaOf(secret);
    },
    onDelete: enqueueCachedKymaOf,
  });

  const informers: ResilientInformer<CachedObject>[] = [
    kymas,
    watchers,
    templates,
    releaseMetas,
    secrets,
  ] as ResilientInformer<CachedObject>[];
  // Manifests: the Kyma's pass writes them; a change it did not make (deleted by hand, a finalizer gone, a spec
  // edited, skip-reconciliation set) wakes the Kyma. Status writes (the pass's own) change no generation.
  const manifests = options.manifests
    ? createDependentCache<Manifest>({
        ...dependentDefaults,
        kind: KINDS.manifest,
        watch: (labelSelector) => custom<Manifest>(KINDS.manifest, labelSelector, cachedManifest),
        kymaOf: (manifest) => manifest.metadata?.labels?.[LABELS.kymaName],
        handlers: {
          onUpdate: (previous, manifest) => {
            if (
              previous.metadata?.generation !== manifest.metadata?.generation ||
              !sameLabelsAndAnnotations(previous, manifest) ||
              JSON.stringify(previous.metadata?.finalizers) !== JSON.stringify(manifest.metadata?.finalizers)
            )
              enqueueDependentKymaOf('manifest', manifest.metadata?.labels?.[LABELS.kymaName]);
          },
          onDelete: (manifest) =>
            enqueueDependentKymaOf('manifest', manifest.metadata?.labels?.[LABELS.kymaName]),
        },
      })
    : undefined;
  const dependents = [syncResources, moduleConfigs, ...(manifests ? [manifests] : [])];
  let warnedAmbiguous = new Set<string>();

  const whenSynced = <T>(informer: ResilientInformer<T & CachedObject>, read: () => T[]) =>
    informer.hasSynced ? read() : undefined;
  return {
    queue,
    caches: {
      moduleTemplates: () => whenSynced(templates, () => templates.list()),
      moduleReleaseMetas: () => whenSynced(releaseMetas, () => releaseMetas.list()),
      watchers: () => whenSynced(watchers, () => watchers.list()),
      moduleConfigs: (kyma) => moduleConfigs.ofKyma(kyma),
      ...(manifests ? { manifests: (kyma: string) => manifests.ofKyma(kyma) } : {}),
      kyma: (kymaKey) => kymas.get(kymaKey),
    },
    get synced() {
      return [...informers, ...dependents].every((informer) => informer.hasSynced);
    },
    async start() {
      await ensureReadable(kcp, namespace, logger);
      for (const informer of [...informers, ...dependents]) informer.start();
      await Promise.all([...informers, ...dependents].map((informer) => informer.waitForSync()));
      logger?.info(
        { kymas: kymas.keys().length, workers: options.workers ?? 4 },
        'caches synced; starting workers',
      );
      queue.start();
      live = true;
    },
    async stop() {
      await Promise.all([...informers, ...dependents].map((informer) => informer.stop()));
      live = false;
      await queue.stop();
      warnedAmbiguous = new Set();
    },
    enqueue(kymaKey, source = 'listener') {
      enqueue(source, kymaKey);
    },
    enqueueAcquired(kymaKey) {
      triggers?.inc({ source: 'acquired' });
      queue.addUrgent(kymaKey);
    },
    resolveKyma(runtimeId) {
      const matches = kymas.byIndex(RUNTIME_ID_INDEX, runtimeId);
      if (matches.length === 0) return undefined;
      const sorted = matches.map(objectKey).sort();
      if (sorted.length > 1 && !warnedAmbiguous.has(runtimeId)) {
        warnedAmbiguous.add(runtimeId);
        logger?.warn(
          { runtimeId, kymas: sorted },
          'several Kymas carry one runtime-id; events wake the first',
        );
      }
      const first = matches.find((kyma) => objectKey(kyma) === sorted[0]) as Kyma;
      return { namespace: first.metadata.namespace ?? namespace, name: first.metadata.name };
    },
    kymaKeys: () => kymas.keys(),
    cachedKyma: (kymaKey) => kymas.get(kymaKey),
    kubeconfigSecret(kyma) {
      // Only once synced: before that a missing Secret is not proof of anything, and the reconciler reads it.
      if (!secrets.hasSynced) return undefined;
      // The cache holds no data to look for the key `config`: a webhook certificate Secret of another type was
      // never listed, and one made by hand as Opaque is known by its name.
      const found = secrets
        .byIndex(SECRET_KYMA_INDEX, kyma)
        .filter((secret) => secret.metadata?.name !== webhookTlsSecretName(kyma));
      const secret = found.length === 1 ? found[0] : undefined;
      return secret?.metadata?.name
        ? { name: secret.metadata.name, version: secretVersion(secret) }
        : undefined;
    },
    syncResourceNames: (kyma) =>
      syncResources.ofKyma(kyma)?.flatMap((sync) => (sync.metadata?.name ? [sync.metadata.name] : [])),
    dependentsHeld: () => ({ moduleConfigs: moduleConfigs.held(), syncResources: syncResources.held() }),
  };
}

/**
 * Fails early with a clear message when the KCP refuses us (401, 403) or lacks the Kyma CRD (404);
 * waits out an API server that is unreachable or starting (network errors, 429, 5xx) for up to a minute.
 */
async function ensureReadable(kcp: KubeConfig, namespace: string, logger: Logger | undefined): Promise<void> {
  const api = kcp.makeApiClient(CustomObjectsApi);
  const deadline = Date.now() + 60_000;
  for (let attempt = 1; ; attempt++) {
    try {
      await api.listNamespacedCustomObject({
        group: GROUP,
        version: KINDS.kyma.version,
        namespace,
        plural: KINDS.kyma.plural,
        limit: 1,
      });
      return;
    } catch (cause) {
      const code = cause instanceof ApiException ? cause.code : undefined;
      const transient = code === undefined || code === 429 || code >= 500;
      if (!transient || Date.now() > deadline) {
        throw new Error(
          `cannot list Kymas in ${namespace} on ${kcp.getCurrentCluster()?.server ?? 'the KCP'}`,
          { cause },
        );
      }
      logger?.warn({ err: cause, attempt }, 'KCP not reachable yet; retrying');
      // Plain capped doubling (500 ms to 5 s): one process waiting for its KCP.
      await new Promise((resolve) =>
        setTimeout(
          resolve,
          backoffDelay(attempt, 500, 5_000, () => 1),
        ),
      );
    }
  }
}
