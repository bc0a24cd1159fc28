// A module manager: watches the ModuleConfigs of one module in KCP, renders each with the team's function, and
// keeps one SyncResource per ModuleConfig (server-side apply under the manager's own field manager). The
// lifecycle manager (skr-agent) applies it to the SKR within its allow-list and reports per item in
// SyncResource.status; the manager carries that report onto the ModuleConfig as its own condition.
import { createHash } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import {
  DEFAULTS,
  GROUP,
  KINDS,
  LABELS,
  ShapeError,
  parseModuleConfig,
  type Condition,
  type ModuleConfig,
  type SyncItem,
  type SyncItemStatus,
  type Clock,
} from '@skr-watcher/api';
import {
  ResilientInformer,
  WorkQueue,
  applyCustomObject,
  applyCustomStatus,
  customResourceSource,
  deleteCustomObjectIfExists,
  isNotFound,
  objectKey,
  type CachedObject,
} from '@skr-watcher/kube';
import { silentLogger, type Logger, type Registry } from '@skr-watcher/telemetry';
import { keptConnections } from './connections.js';
import { managerMetrics, type ManagerMetrics } from './metrics.js';
import { RenderError, toSyncItems, type RenderFunction } from './render.js';
import {
  CONDITION_REASONS,
  conditionChanged,
  conditionTypeOf,
  nextCondition,
  reportOf,
  type ConditionInput,
} from './status.js';

export interface ModuleManagerOptions {
  /**
   * The manager's name: its server-side apply field manager, the value of `managed-by` on its SyncResources, and the
   * prefix of its condition type (`<name>/Synced`). A DNS label, stable across versions (ownership follows it).
   */
  name: string;
  /** The module whose ModuleConfigs to watch (their label `operator.kyma-project.io/module-name`). */
  module: string;
  /** Turns one ModuleConfig into the objects to have in its SKR. */
  render: RenderFunction;
  /** The KCP. The manager needs get/list/watch on moduleconfigs, patch on moduleconfigs/status, and
   * get/list/watch/create/patch/delete on syncresources in `namespace`; nothing in any SKR. */
  kubeConfig: KubeConfig;
  /** Where the agent keeps ModuleConfigs and SyncResources. Default `kcp-system`. */
  namespace?: string;
  /** ModuleConfigs reconciled at once. Default 4. */
  workers?: number;
  /** Full relist of both watches (every ModuleConfig looked at again). Default 10 min. */
  resyncMs?: number;
  logger?: Logger;
  registry?: Registry;
  clock?: Clock;
}

export interface ModuleManager {
  readonly name: string;
  readonly module: string;
  /** Starts the watches, waits for their first lists, then starts reconciling. */
  start(): Promise<void>;
  /** Both watches have listed once and the queue runs. */
  ready(): boolean;
  /** Resolves when no ModuleConfig is queued or being reconciled (tests, benchmarks). */
  whenIdle(): Promise<void>;
  /** Stops reconciling (runs in flight finish) and the watches. */
  stop(): Promise<void>;
}

/** The SyncResource of one ModuleConfig as far as the manager reads it. */
interface SyncResourceObject extends CachedObject {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name: string;
    namespace?: string;
    generation?: number;
    resourceVersion?: string;
    deletionTimestamp?: string;
    labels?: Record<string, string>;
    ownerReferences?: { kind?: string; name?: string; uid?: string }[];
  };
  spec?: unknown;
  status?: { state?: string; observedGeneration?: number; items?: SyncItemStatus[] };
}

type RawModuleConfig = CachedObject & {
  metadata: { name: string; namespace?: string; generation?: number; deletionTimestamp?: string };
};

const MAX_NAME = 253;
/** Label values are at most 63 characters; a longer Kyma name is not put in a label. */
const MAX_LABEL_VALUE = 63;
/** A SyncResource still being deleted (the agent removes its objects first) is looked at again after this. */
const DELETING_RECHECK_MS = 1_000;
/**
 * After a SyncResource write the agent usually reports within tens of milliseconds: `Pending` is written only when it
 * has not reported by then, so a healthy edit costs one condition write (`Applied`), not two, and the next edit's
 * SyncResource write does not wait behind a status write. Until then the condition's observedGeneration (older than
 * the ModuleConfig's) says it speaks for an earlier render.
 */
export const PENDING_AFTER_MS = 1_000;
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** `<manager>-<moduleconfig>`, cut with a hash when too long: one per manager and ModuleConfig, found again after restarts. */
export function syncResourceNameOf(manager: string, moduleConfigName: string): string {
  const name = `${manager}-${moduleConfigName}`;
  if (name.length <= MAX_NAME) return name;
  const hash = createHash('sha256').update(name).digest('hex').slice(0, 8);
  return `${name.slice(0, MAX_NAME - hash.length - 1).replace(/[-.]+$/, '')}-${hash}`;
}

function ownerKeyOf(sync: SyncResourceObject): string | undefined {
  const owner = sync.metadata.ownerReferences?.find((ref) => ref.kind === KINDS.moduleConfig.kind);
  return owner?.name ? `${sync.metadata.namespace ?? ''}/${owner.name}` : undefined;
}

function errorText(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** What the last apply of a ModuleConfig's SyncResource returned, until the watch has delivered that version. */
interface Written {
  spec: unknown;
  object: SyncResourceObject;
  seen: boolean;
  /** When the apply returned (the clock's ms): `Pending` waits PENDING_AFTER_MS from here. */
  atMs: number;
}

export function createModuleManager(options: ModuleManagerOptions): ModuleManager {
  const { name: manager, module, render } = options;
  if (!DNS_LABEL.test(manager))
    throw new Error(
      `module manager name ${JSON.stringify(manager)} must be a DNS label (a-z, 0-9, -; 63 at most)`,
    );
  if (!module) throw new Error('module manager: the module name is required');
  const namespace = options.namespace ?? DEFAULTS.kcpNamespace;
  const logger = (options.logger ?? silentLogger()).child({ manager, module });
  const metrics: ManagerMetrics | undefined = options.registry ? managerMetrics(options.registry) : undefined;
  // Every request and both watches over one pool of kept-alive connections (connections.ts).
  const connections = keptConnections(options.kubeConfig, (resumed) =>
    metrics?.connections.inc({ manager, resumed: String(resumed) }),
  );
  const kubeConfig = connections.kubeConfig;
  const custom = kubeConfig.makeApiClient(CustomObjectsApi);
  const conditionType = conditionTypeOf(manager);
  const nowMs = () => options.clock?.now() ?? Date.now();
  const now = () => new Date(nowMs());
  const informerDefaults = {
    kubeConfig,
    logger,
    ...(options.registry ? { registry: options.registry } : {}),
    ...(options.clock ? { clock: options.clock } : {}),
    ...(options.resyncMs !== undefined ? { resyncMs: options.resyncMs } : {}),
  };
  const refOf = (kind: 'moduleConfig' | 'syncResource', name: string) => ({
    group: GROUP,
    version: KINDS[kind].version,
    plural: KINDS[kind].plural,
    namespace,
    name,
  });

  const moduleConfigs = new ResilientInformer<RawModuleConfig>({
    ...informerDefaults,
    source: customResourceSource(kubeConfig, {
      group: GROUP,
      version: KINDS.moduleConfig.version,
      plural: KINDS.moduleConfig.plural,
      namespace,
      labelSelector: `${LABELS.moduleName}=${module}`,
    }),
  });
  const syncResources = new ResilientInformer<SyncResourceObject>({
    ...informerDefaults,
    source: customResourceSource(kubeConfig, {
      group: GROUP,
      version: KINDS.syncResource.version,
      plural: KINDS.syncResource.plural,
      namespace,
      labelSelector: `${LABELS.managedBy}=${manager},${LABELS.moduleName}=${module}`,
    }),
  });
  const written = new Map<string, Written>();
  /** When the watch first brought a ModuleConfig change not yet reconciled (epoch ms), for the apply's log line. */
  const receivedAt = new Map<string, number>();
  const received = (key: string) => {
    if (!receivedAt.has(key)) receivedAt.set(key, Date.now());
    queue.add(key);
  };

  const queue = new WorkQueue({
    name: `module-manager-${manager}`,
    workers: options.workers ?? 4,
    processLogsFailures: true,
    process: async (key) => {
      const started = performance.now();
      try {
        return await reconcile(key);
      } catch (error) {
        metrics?.reconciles.inc({ manager, outcome: 'error' });
        logger.warn({ err: error, moduleConfig: key }, 'reconcile failed; retrying with backoff');
        throw error;
      } finally {
        metrics?.duration.observe({ manager }, (performance.now() - started) / 1000);
      }
    },
    logger,
    ...(options.registry ? { registry: options.registry } : {}),
    ...(options.clock ? { clock: options.clock } : {}),
  });

  moduleConfigs.addHandler({
    onAdd: (config) => received(objectKey(config)),
    onUpdate: (previous, config) => {
      // Status-only writes (the agent's mirror bookkeeping, our own condition) do not change what is rendered.
      const relist = previous.metadata.resourceVersion === config.metadata.resourceVersion;
      if (relist) queue.add(objectKey(config));
      else if (previous.metadata.generation !== config.metadata.generation) received(objectKey(config));
    },
    onDelete: (config) => queue.add(objectKey(config)),
  });
  const onSyncResource = (sync: SyncResourceObject) => {
    const owner = ownerKeyOf(sync);
    if (!owner) return;
    const mine = written.get(owner);
    if (mine && mine.object.metadata.resourceVersion === sync.metadata.resourceVersion) mine.seen = true;
    queue.add(owner);
  };
  syncResources.addHandler({
    onAdd: onSyncResource,
    onUpdate: (_previous, sync) => onSyncResource(sync),
    onDelete: onSyncResource,
  });

  async function reconcile(key: string): Promise<void | { requeueAfterMs: number }> {
    const startedAt = Date.now();
    const changeSeenAt = receivedAt.get(key);
    receivedAt.delete(key);
    const raw = moduleConfigs.get(key);
    const configName = key.slice(key.indexOf('/') + 1);
    const syncName = syncResourceNameOf(manager, configName);
    const cached = syncResources.get(`${namespace}/${syncName}`);
    const log = logger.child({ moduleConfig: configName, syncResource: syncName });

    if (!raw || raw.metadata.deletionTimestamp) {
      written.delete(key);
      if (cached && !cached.metadata.deletionTimestamp)
        await deleteSyncResource(syncName, log, 'ModuleConfig deleted');
      return;
    }
    let config: ModuleConfig;
    try {
      config = parseModuleConfig(raw, `ModuleConfig ${key}`);
    } catch (error) {
      if (!(error instanceof ShapeError)) throw error;
      // The agent writes ModuleConfigs; one it did not write well is not ours to render or to fix.
      log.warn({ err: error }, 'skipping malformed ModuleConfig');
      return;
    }
    const configLog = log.child({ kyma: config.spec.kyma, generation: config.metadata.generation });

    let items: SyncItem[];
    try {
      items = toSyncItems(await render(config));
    } catch (error) {
      metrics?.reconciles.inc({ manager, outcome: 'render_failed' });
      configLog.warn({ err: error }, 'render failed; the SyncResource is left as it was');
      const message = error instanceof RenderError ? error.message : `render() threw: ${errorText(error)}`;
      await writeCondition(
        config,
        { status: 'False', reason: CONDITION_REASONS.renderFailed, message },
        configLog,
      );
      return;
    }

    if (items.length === 0) {
      written.delete(key);
      if (cached && !cached.metadata.deletionTimestamp)
        await deleteSyncResource(syncName, configLog, 'render returned no objects');
      metrics?.reconciles.inc({ manager, outcome: 'unchanged' });
      await writeCondition(
        config,
        { status: 'True', reason: CONDITION_REASONS.nothingToSync, message: 'render() returned no objects' },
        configLog,
      );
      return;
    }

    const desired = desiredSyncResource(config, syncName, items);
    if (cached?.metadata.deletionTimestamp) {
      // Deleted a moment ago (the ModuleConfig went and came back): the agent removes its objects first.
      await writeCondition(
        config,
        {
          status: 'Unknown',
          reason: CONDITION_REASONS.pending,
          message: `SyncResource ${syncName} is still being deleted; it is written again once gone`,
        },
        configLog,
      );
      return { requeueAfterMs: DELETING_RECHECK_MS };
    }
    let current = upToDate(cached, desired) ? cached : undefined;
    const last = written.get(key);
    // The watch has not delivered our last write yet: what it holds is older than the truth.
    if (!current && last && !last.seen && isDeepStrictEqual(last.spec, desired.spec)) current = last.object;
    if (current) {
      metrics?.reconciles.inc({ manager, outcome: 'unchanged' });
      configLog.debug('rendered objects unchanged; SyncResource not written');
    } else {
      current = (await applyCustomObject(custom, refOf('syncResource', syncName), desired, {
        fieldManager: manager,
        force: true,
      })) as SyncResourceObject;
      written.set(key, { spec: desired.spec, object: current, seen: false, atMs: nowMs() });
      metrics?.reconciles.inc({ manager, outcome: 'applied' });
      metrics?.writes.inc({ manager, operation: 'apply' });
      // receivedAt/startedAt/appliedAt (epoch ms): the watch brought the change, the run began, the apply returned
      // (bench:e2e reads them).
      configLog.info(
        {
          items: items.length,
          syncResourceGeneration: current.metadata.generation,
          ...(changeSeenAt !== undefined ? { receivedAt: changeSeenAt } : {}),
          startedAt,
          appliedAt: Date.now(),
        },
        'SyncResource applied',
      );
    }
    const report = reportOf(current, syncName);
    const mine = written.get(key);
    if (
      mine &&
      report.reason === CONDITION_REASONS.pending &&
      mine.object.metadata.generation === current.metadata.generation
    ) {
      // Our own write, not reported on yet: the agent's report (a SyncResource event) usually comes first.
      const waitMs = mine.atMs + PENDING_AFTER_MS - nowMs();
      if (waitMs > 0) return { requeueAfterMs: waitMs };
    }
    // A newer generation arrived meanwhile (its event queued this key again): its run writes the condition; this
    // one's would be stale at once, and the next SyncResource write would wait behind it.
    if (moduleConfigs.get(key)?.metadata.generation !== config.metadata.generation) return;
    await writeCondition(config, report, configLog);
  }

  function desiredSyncResource(config: ModuleConfig, syncName: string, items: SyncItem[]) {
    const kyma = config.spec.kyma;
    return {
      apiVersion: `${GROUP}/${KINDS.syncResource.version}`,
      kind: KINDS.syncResource.kind,
      metadata: {
        name: syncName,
        namespace,
        labels: {
          [LABELS.managedBy]: manager,
          [LABELS.moduleName]: module,
          ...(kyma.length <= MAX_LABEL_VALUE ? { [LABELS.kymaName]: kyma } : {}),
        },
        // Garbage collection removes it with its ModuleConfig even while no manager runs.
        ownerReferences: [
          {
            apiVersion: `${GROUP}/${KINDS.moduleConfig.version}`,
            kind: KINDS.moduleConfig.kind,
            name: config.metadata.name,
            uid: config.metadata.uid ?? '',
          },
        ],
      },
      spec: { kyma, items },
    };
  }

  function upToDate(
    cached: SyncResourceObject | undefined,
    desired: ReturnType<typeof desiredSyncResource>,
  ): cached is SyncResourceObject {
    if (!cached) return false;
    const labelsKept = Object.entries(desired.metadata.labels).every(
      ([label, value]) => cached.metadata.labels?.[label] === value,
    );
    const owner = cached.metadata.ownerReferences?.find((ref) => ref.kind === KINDS.moduleConfig.kind);
    return (
      labelsKept &&
      owner?.uid === desired.metadata.ownerReferences[0]?.uid &&
      isDeepStrictEqual(cached.spec, desired.spec)
    );
  }

  async function deleteSyncResource(syncName: string, log: Logger, why: string): Promise<void> {
    const deleted = await deleteCustomObjectIfExists(custom, refOf('syncResource', syncName));
    if (!deleted) return;
    metrics?.reconciles.inc({ manager, outcome: 'deleted' });
    metrics?.writes.inc({ manager, operation: 'delete' });
    log.info({ reason: why }, 'SyncResource deleted');
  }

  async function writeCondition(config: ModuleConfig, input: ConditionInput, log: Logger): Promise<void> {
    const previous = config.status?.conditions?.find(
      (condition: Condition) => condition.type === conditionType,
    );
    const condition = nextCondition(conditionType, input, config.metadata.generation, previous, now());
    if (!conditionChanged(previous, condition)) return;
    try {
      await applyCustomStatus(
        custom,
        refOf('moduleConfig', config.metadata.name),
        {
          apiVersion: `${GROUP}/${KINDS.moduleConfig.version}`,
          kind: KINDS.moduleConfig.kind,
          metadata: { name: config.metadata.name, namespace },
          status: { conditions: [condition] },
        },
        // Its own field manager: the agent's status fields and other managers' conditions stay theirs.
        { fieldManager: manager, force: true },
      );
    } catch (error) {
      if (isNotFound(error)) return; // gone meanwhile; its delete event follows
      throw error;
    }
    metrics?.statusWrites.inc({ manager, status: condition.status });
    if (condition.status === 'False') log.warn({ reason: condition.reason }, condition.message);
    else log.debug({ reason: condition.reason, status: condition.status }, 'condition written');
  }

  let started = false;
  return {
    name: manager,
    module,
    async start() {
      moduleConfigs.start();
      syncResources.start();
      // Both caches first: a SyncResource that is already right must be seen before it would be written again.
      await Promise.all([moduleConfigs.waitForSync(), syncResources.waitForSync()]);
      // SyncResources whose ModuleConfig went while no manager ran are looked at (and deleted) too.
      for (const sync of syncResources.list()) {
        const owner = ownerKeyOf(sync);
        if (owner) queue.add(owner);
      }
      queue.start();
      started = true;
      logger.info(
        { namespace, moduleConfigs: moduleConfigs.keys().length, syncResources: syncResources.keys().length },
        'module manager started',
      );
    },
    ready: () => started && moduleConfigs.hasSynced && syncResources.hasSynced,
    whenIdle: () => queue.whenIdle(),
    async stop() {
      await queue.stop();
      await Promise.all([moduleConfigs.stop(), syncResources.stop()]);
      await connections.close();
      started = false;
    },
  };
}
