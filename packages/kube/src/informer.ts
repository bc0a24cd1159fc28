// A list+watch cache that keeps running: restarts with backoff after errors and closed watches,
// relists on 410 Gone, restarts a watch that goes silent (relisting), and resyncs periodically from its cache.
// resourceVersions are passed back to the server as opaque strings; only observeWritten orders them (as etcd
// revisions, which they are on every API server this runs against), and it takes nothing it cannot order.
import {
  CoreV1Api,
  CustomObjectsApi,
  HttpMethod,
  RequestContext,
  Watch,
  type KubeConfig,
  type V1ObjectMeta,
  type V1Secret,
} from '@kubernetes/client-node';
import { backoffDelay, unrefClock, type Clock, type TimerHandle } from '@skr-watcher/api';
import { Counter, Gauge, registeredMetric, type Logger, type Registry } from '@skr-watcher/telemetry';
import { fetch } from 'undici';
import { PARTIAL_OBJECT_METADATA, PARTIAL_OBJECT_METADATA_LIST } from './metadata-list.js';

/** The least an object must carry to be cached. */
export interface CachedObject {
  metadata?: { name?: string; namespace?: string; resourceVersion?: string; labels?: Record<string, string> };
}

export interface ListPage<T> {
  items: T[];
  metadata?: { resourceVersion?: string; continue?: string };
}

/** An object as a metadata-only list or watch delivers it: no spec, data or status. */
export interface PartialObjectMetadata extends CachedObject {
  apiVersion?: string;
  kind?: string;
  metadata?: V1ObjectMeta;
}

/** Where an informer lists and watches. */
export interface InformerSource<T> {
  /** Names the resource in logs and in the `resource` metric label, e.g. `kymas`. */
  resource: string;
  /** API path of the collection, e.g. `/apis/operator.kyma-project.io/v1beta2/namespaces/kcp-system/kymas`. */
  path: string;
  labelSelector?: string;
  fieldSelector?: string;
  /** The list answers and the watch asks for PartialObjectMetadata (see `metadataOnly`). */
  metadataOnly?: boolean;
  /** Lists one page; `continueToken` comes from the previous page. */
  list(page: { limit: number; continueToken?: string }): Promise<ListPage<T>>;
}

export interface InformerHandlers<T> {
  onAdd?(object: T): void;
  /** Also called for every object on a relist (old and new may then be the same version). */
  onUpdate?(previous: T, object: T): void;
  onDelete?(object: T): void;
}

export interface InformerOptions<T> {
  kubeConfig: KubeConfig;
  source: InformerSource<T>;
  /** Restarts a watch that delivered no event (bookmarks count) for this long. Default 120 s. */
  watchdogMs?: number;
  /**
   * Resync interval: every cached object is then reported to onUpdate again, from the cache. Nothing is listed for
   * it: a list happens at start and when the watch cannot resume (410 Gone, the watchdog). Default 10 min, 0
   * disables.
   */
  resyncMs?: number;
  /** Backoff of restarts after failures. Default 500 ms doubling to 15 s, with jitter. */
  backoffBaseMs?: number;
  backoffMaxMs?: number;
  /** Page size of lists. Default 500. */
  pageSize?: number;
  /** Trims objects before they are cached (e.g. drop Secret data that only the reconciler reads). */
  transform?: (object: T) => T;
  clock?: Clock;
  logger?: Logger;
  registry?: Registry;
}

/** What `kubectl apply` writes: the whole applied object, as JSON. */
const LAST_APPLIED = 'kubectl.kubernetes.io/last-applied-configuration';

type WatchOutcome = 'closed' | 'timeout' | 'gone' | 'watchdog' | 'stopped';

class WatchFailure extends Error {
  constructor(
    message: string,
    readonly code?: number,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** An object's resourceVersion as the etcd revision it is; undefined when it is not a number. */
function revisionOf(object: CachedObject): bigint | undefined {
  const version = object.metadata?.resourceVersion;
  return typeof version === 'string' && /^[0-9]{1,20}$/.test(version) ? BigInt(version) : undefined;
}

/** `namespace/name`, or `name` for cluster-scoped objects: the key of the cache and of work queues. */
export function objectKey(object: CachedObject): string {
  const name = object.metadata?.name ?? '';
  const namespace = object.metadata?.namespace;
  return namespace ? `${namespace}/${name}` : name;
}

function statusCodeOf(error: unknown): number | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const record = error as { statusCode?: unknown; code?: unknown };
  if (typeof record.statusCode === 'number') return record.statusCode;
  if (typeof record.code === 'number') return record.code;
  return undefined;
}

interface InformerMetrics {
  restarts: Counter;
  relists: Counter;
  resyncs: Counter;
  events: Counter;
  objects: Gauge;
}

function informerMetrics(registry: Registry | undefined): InformerMetrics | undefined {
  if (!registry) return undefined;
  const registers = [registry];
  const existing = <M>(name: string, create: () => M): M => registeredMetric(registry, name, create);
  return {
    restarts: existing(
      'informer_watch_restarts_total',
      () =>
        new Counter({
          name: 'informer_watch_restarts_total',
          help: 'Watches restarted, by reason (closed, timeout, gone, watchdog, error).',
          labelNames: ['resource', 'reason'],
          registers,
        }),
    ),
    relists: existing(
      'informer_relists_total',
      () =>
        new Counter({
          name: 'informer_relists_total',
          help: 'Full lists of the resource.',
          labelNames: ['resource'],
          registers,
        }),
    ),
    resyncs: existing(
      'informer_resyncs_total',
      () =>
        new Counter({
          name: 'informer_resyncs_total',
          help: 'Resyncs from the cache: every cached object reported to onUpdate again, without a list.',
          labelNames: ['resource'],
          registers,
        }),
    ),
    events: existing(
      'informer_watch_events_total',
      () =>
        new Counter({
          name: 'informer_watch_events_total',
          help: 'Watch events received, by type.',
          labelNames: ['resource', 'type'],
          registers,
        }),
    ),
    objects: existing(
      'informer_objects',
      () =>
        new Gauge({
          name: 'informer_objects',
          help: 'Objects in the informer cache.',
          labelNames: ['resource'],
          registers,
        }),
    ),
  };
}

export class ResilientInformer<T extends CachedObject> {
  readonly resource: string;
  private readonly kubeConfig: KubeConfig;
  private readonly source: InformerSource<T>;
  private readonly watchdogMs: number;
  private readonly resyncMs: number;
  private readonly backoffBaseMs: number;
  private readonly backoffMaxMs: number;
  private readonly pageSize: number;
  private readonly transform: (object: T) => T;
  private readonly clock: Clock;
  private readonly logger: Logger | undefined;
  private readonly metrics: InformerMetrics | undefined;

  private readonly cache = new Map<string, T>();
  private readonly indexers = new Map<string, (object: T) => string[]>();
  /** index name → index value → object keys */
  private readonly indices = new Map<string, Map<string, Set<string>>>();
  private readonly handlers: InformerHandlers<T>[] = [];
  /**
   * Objects taken from this process's own writes (observeWritten) ahead of their watch event, by key: the
   * resourceVersion written. Older copies from the watch or a relist are not cached over them; the entry goes once
   * the server's copy has caught up.
   */
  private readonly aheadOfWatch = new Map<string, bigint>();
  private resourceVersion = '';
  /** When every object was last reported (a list, or a resync from the cache). */
  private lastResyncAt = 0;
  private synced = false;
  private syncWaiters: (() => void)[] = [];
  private stopped = true;
  private loop: Promise<void> | undefined;
  private abortWatch: (() => void) | undefined;
  private wakeSleep: (() => void) | undefined;
  private consecutiveFailures = 0;

  constructor(options: InformerOptions<T>) {
    this.kubeConfig = options.kubeConfig;
    this.source = options.source;
    this.resource = options.source.resource;
    this.watchdogMs = options.watchdogMs ?? 120_000;
    this.resyncMs = options.resyncMs ?? 600_000;
    this.backoffBaseMs = options.backoffBaseMs ?? 500;
    this.backoffMaxMs = options.backoffMaxMs ?? 15_000;
    this.pageSize = options.pageSize ?? 500;
    this.transform = options.transform ?? ((object) => object);
    this.clock = options.clock ?? unrefClock;
    this.logger = options.logger?.child({ resource: this.resource });
    this.metrics = informerMetrics(options.registry);
  }

  addHandler(handlers: InformerHandlers<T>): void {
    this.handlers.push(handlers);
  }

  /** Maintains an index from values computed per object (e.g. a label) to the objects. Add before start. */
  addIndex(name: string, indexer: (object: T) => string[]): void {
    this.indexers.set(name, indexer);
    const index = new Map<string, Set<string>>();
    this.indices.set(name, index);
    for (const [key, object] of this.cache) this.indexObject(name, index, key, object, true);
  }

  get(key: string): T | undefined {
    return this.cache.get(key);
  }

  /**
   * Takes an object this process just wrote (the API server's answer to its patch, update or create) into the cache
   * now, with the handlers called, instead of when its watch event arrives: on a loaded API server that event can
   * come seconds later, and a caller that must act on its own write (a claimed Kyma) need not wait for it. Taken only
   * when it is newer than the cached copy; resourceVersions are compared as the etcd revisions they are, and one that
   * is not a number is not taken. The watch's own resourceVersion does not move, so no event is skipped.
   */
  observeWritten(raw: unknown): boolean {
    if (this.stopped) return false;
    const object = this.accept(raw);
    if (!object) return false;
    const key = objectKey(object);
    const written = revisionOf(object);
    const cached = this.cache.get(key);
    if (written === undefined || (cached && !(written > (revisionOf(cached) ?? written)))) return false;
    this.aheadOfWatch.set(key, written);
    this.upsert(key, object);
    return true;
  }

  list(): T[] {
    return [...this.cache.values()];
  }

  keys(): string[] {
    return [...this.cache.keys()];
  }

  byIndex(name: string, value: string): T[] {
    const index = this.indices.get(name);
    if (!index) throw new Error(`informer ${this.resource} has no index ${name}`);
    return [...(index.get(value) ?? [])]
      .map((key) => this.cache.get(key))
      .filter((o): o is T => o !== undefined);
  }

  get hasSynced(): boolean {
    return this.synced;
  }

  /** Resolves after the first complete list. */
  waitForSync(): Promise<void> {
    if (this.synced) return Promise.resolve();
    return new Promise((resolve) => this.syncWaiters.push(resolve));
  }

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.abortWatch?.();
    this.wakeSleep?.();
    await this.loop;
    this.loop = undefined;
  }

  private async run(): Promise<void> {
    while (!this.stopped) {
      try {
        if (!this.resourceVersion) await this.relist();
        else if (this.resyncMs > 0 && this.clock.now() - this.lastResyncAt >= this.resyncMs) this.resync();
        const startedAt = this.clock.now();
        const outcome = await this.watchOnce();
        if (outcome === 'stopped') break;
        this.metrics?.restarts.inc({ resource: this.resource, reason: outcome });
        this.logger?.debug({ reason: outcome }, 'watch ended; restarting');
        if (outcome === 'gone') {
          this.logger?.info('resourceVersion expired (410 Gone); relisting');
          this.resourceVersion = '';
        } else if (outcome === 'watchdog') {
          this.logger?.warn(
            { silentForMs: this.watchdogMs },
            'watch delivered nothing; restarting it and relisting',
          );
          this.resourceVersion = '';
        }
        // A watch that ends at once without events is a failure in disguise: back off as for one.
        if (outcome === 'closed' && this.clock.now() - startedAt < 1_000) {
          await this.backoff(new Error('watch closed right after it opened'));
        }
      } catch (error) {
        if (this.stopped) break;
        if (statusCodeOf(error) === 410) {
          this.metrics?.restarts.inc({ resource: this.resource, reason: 'gone' });
          this.resourceVersion = '';
          continue;
        }
        this.metrics?.restarts.inc({ resource: this.resource, reason: 'error' });
        await this.backoff(error);
      }
    }
  }

  /**
   * Reports every cached object to onUpdate (previous and current the same object), as a relist of an unchanged
   * cache would, without one: at thousands of objects a relist per interval and replica was the KCP's largest
   * periodic load, and its second copy of the cache, held until the swap, the agent's memory peak (decision
   * 021). The watch, resumed from its resourceVersion, is what keeps the cache true.
   */
  private resync(): void {
    this.lastResyncAt = this.clock.now();
    this.metrics?.resyncs.inc({ resource: this.resource });
    for (const object of [...this.cache.values()]) {
      for (const handler of this.handlers) this.callHandler(() => handler.onUpdate?.(object, object));
    }
    this.logger?.debug({ objects: this.cache.size }, 'resynced from the cache');
  }

  private async backoff(error: unknown): Promise<void> {
    this.consecutiveFailures++;
    // Jittered: every informer of every replica restarts after the same API server hiccup.
    const delayMs = Math.round(backoffDelay(this.consecutiveFailures, this.backoffBaseMs, this.backoffMaxMs));
    this.logger?.warn(
      { err: error, failures: this.consecutiveFailures, retryInMs: delayMs },
      'list/watch failed; retrying with backoff',
    );
    await new Promise<void>((resolve) => {
      const timer = this.clock.setTimeout(done, delayMs);
      function done() {
        resolve();
      }
      this.wakeSleep = () => {
        this.clock.clearTimeout(timer);
        resolve();
      };
    });
    this.wakeSleep = undefined;
  }

  private async relist(): Promise<void> {
    const listed = new Map<string, T>();
    let continueToken: string | undefined;
    let resourceVersion = '';
    do {
      let page: ListPage<T>;
      try {
        page = await this.source.list({ limit: this.pageSize, continueToken });
      } catch (error) {
        throw new WatchFailure(`list ${this.resource}`, statusCodeOf(error), { cause: error });
      }
      if (!page || !Array.isArray(page.items))
        throw new WatchFailure(`list ${this.resource}: answer has no items`);
      for (const item of page.items) {
        const object = this.accept(item);
        if (object) listed.set(objectKey(object), object);
      }
      // The first page's resourceVersion is the snapshot the later pages belong to.
      if (!continueToken) resourceVersion = page.metadata?.resourceVersion ?? '';
      continueToken = page.metadata?.continue || undefined;
    } while (continueToken && !this.stopped);
    if (this.stopped) return;
    this.metrics?.relists.inc({ resource: this.resource });

    for (const [key, previous] of [...this.cache]) {
      if (!listed.has(key)) this.remove(key, previous);
    }
    for (const [key, object] of listed) this.upsertFromServer(key, object);
    this.resourceVersion = resourceVersion;
    this.lastResyncAt = this.clock.now();
    this.consecutiveFailures = 0;
    this.logger?.debug({ objects: this.cache.size }, 'listed');
    if (!this.synced) {
      this.synced = true;
      for (const resolve of this.syncWaiters) resolve();
      this.syncWaiters = [];
    }
  }

  /**
   * Validates an object from the wire; objects without a name are logged and skipped. managedFields and kubectl's
   * last-applied-configuration are dropped before anything is cached: nothing reads them from a cache, and they
   * are often the largest part of metadata (the annotation is a copy of the whole applied object: for a kubeconfig
   * Secret applied with kubectl, its data, in every replica's Secret cache; decision 012).
   */
  private accept(raw: unknown): T | undefined {
    const metadata = (raw as CachedObject | null)?.metadata;
    if (
      typeof raw !== 'object' ||
      raw === null ||
      typeof metadata?.name !== 'string' ||
      metadata.name === ''
    ) {
      this.logger?.warn('object without metadata.name from the API server; skipped');
      return undefined;
    }
    // Copies without them, not `delete`: V8 turns an object a field was deleted from into a hash table, which for
    // a Manifest's metadata holds ~0.8 kB more than the fields (decision 021).
    const { managedFields: _managedFields, ...withoutManagedFields } = metadata as Record<string, unknown>;
    let kept = withoutManagedFields;
    const annotations = kept['annotations'] as Record<string, string> | undefined;
    if (annotations && LAST_APPLIED in annotations) {
      const { [LAST_APPLIED]: _lastApplied, ...others } = annotations;
      const { annotations: _annotations, ...rest } = kept;
      kept = Object.keys(others).length > 0 ? { ...rest, annotations: others } : rest;
    }
    (raw as { metadata: unknown }).metadata = kept;
    return this.transform(raw as T);
  }

  private watchOnce(): Promise<WatchOutcome> {
    return new Promise<WatchOutcome>((resolve, reject) => {
      let finished = false;
      let controller: AbortController | undefined;
      let watchdog: TimerHandle | undefined;
      let resync: TimerHandle | undefined;
      const finish = (outcome: WatchOutcome | Error) => {
        if (finished) return;
        finished = true;
        if (watchdog !== undefined) this.clock.clearTimeout(watchdog);
        if (resync !== undefined) this.clock.clearTimeout(resync);
        this.abortWatch = undefined;
        controller?.abort();
        if (outcome instanceof Error) reject(outcome);
        else resolve(outcome);
      };
      const armWatchdog = () => {
        if (watchdog !== undefined) this.clock.clearTimeout(watchdog);
        watchdog = this.clock.setTimeout(() => finish('watchdog'), this.watchdogMs);
      };
      this.abortWatch = () => finish('stopped');
      if (this.stopped) return finish('stopped');
      armWatchdog();
      if (this.resyncMs > 0) {
        // A resync is a replay of the cache: the watch goes on meanwhile, and no new one is opened for it.
        const replay = () => {
          this.resync();
          resync = this.clock.setTimeout(replay, this.resyncMs);
        };
        resync = this.clock.setTimeout(
          replay,
          Math.max(0, this.lastResyncAt + this.resyncMs - this.clock.now()),
        );
      }

      const onEvent = (type: string, object: unknown) => {
        if (finished) return;
        armWatchdog();
        this.metrics?.events.inc({ resource: this.resource, type });
        switch (type) {
          case 'ADDED':
          case 'MODIFIED': {
            const accepted = this.accept(object);
            if (!accepted) return;
            this.upsertFromServer(objectKey(accepted), accepted);
            this.noteResourceVersion(accepted);
            this.consecutiveFailures = 0;
            return;
          }
          case 'DELETED': {
            const accepted = this.accept(object);
            if (!accepted) return;
            const key = objectKey(accepted);
            const previous = this.cache.get(key);
            if (previous) this.remove(key, accepted);
            this.noteResourceVersion(accepted);
            return;
          }
          case 'BOOKMARK':
            this.noteResourceVersion(object as CachedObject);
            return;
          case 'ERROR': {
            const code = (object as { code?: unknown } | null)?.code;
            if (code === 410) return finish('gone');
            const message = (object as { message?: unknown } | null)?.message;
            return finish(
              new WatchFailure(
                `watch ${this.resource}: error event ${typeof code === 'number' ? code : ''} ${typeof message === 'string' ? message : ''}`.trim(),
                typeof code === 'number' ? code : undefined,
              ),
            );
          }
          default:
            this.logger?.warn({ type }, 'unknown watch event type; ignored');
        }
      };
      const onDone = (error: unknown) => {
        if (!error) return finish('closed');
        if (statusCodeOf(error) === 410) return finish('gone');
        // client-node aborts a watch that received no bytes for 30 s: a silent connection, not a failure.
        if ((error as { name?: unknown }).name === 'TimeoutError') return finish('timeout');
        if ((error as { name?: unknown }).name === 'AbortError' && finished) return;
        finish(new WatchFailure(`watch ${this.resource}`, statusCodeOf(error), { cause: error }));
      };

      const query: Record<string, string | number | boolean | undefined> = {
        resourceVersion: this.resourceVersion,
        allowWatchBookmarks: true,
        labelSelector: this.source.labelSelector,
        fieldSelector: this.source.fieldSelector,
        // The server closes the watch after 5 to 10 min so connections move between replicas.
        timeoutSeconds: 300 + Math.floor(Math.random() * 300),
      };
      const watch = new Watch(
        this.source.metadataOnly ? accepting(this.kubeConfig, PARTIAL_OBJECT_METADATA) : this.kubeConfig,
      );
      watch.watch(this.source.path, query, onEvent, onDone).then(
        (abort) => {
          controller = abort;
          if (finished) abort.abort();
        },
        (error: unknown) =>
          finish(new WatchFailure(`watch ${this.resource}`, statusCodeOf(error), { cause: error })),
      );
    });
  }

  private noteResourceVersion(object: CachedObject | null | undefined): void {
    const rv = object?.metadata?.resourceVersion;
    if (typeof rv === 'string' && rv !== '') this.resourceVersion = rv;
  }

  private upsert(key: string, object: T): void {
    const previous = this.cache.get(key);
    this.cache.set(key, object);
    for (const [name, index] of this.indices) {
      if (previous) this.indexObject(name, index, key, previous, false);
      this.indexObject(name, index, key, object, true);
    }
    this.metrics?.objects.set({ resource: this.resource }, this.cache.size);
    for (const handler of this.handlers) {
      this.callHandler(() => (previous ? handler.onUpdate?.(previous, object) : handler.onAdd?.(object)));
    }
  }

  /** A copy from the watch or a list: not cached over a newer one this process wrote (observeWritten). */
  private upsertFromServer(key: string, object: T): void {
    const ahead = this.aheadOfWatch.get(key);
    if (ahead !== undefined) {
      const revision = revisionOf(object);
      if (revision !== undefined && revision < ahead) return;
      this.aheadOfWatch.delete(key);
    }
    this.upsert(key, object);
  }

  private remove(key: string, object: T): void {
    this.aheadOfWatch.delete(key);
    const previous = this.cache.get(key);
    this.cache.delete(key);
    for (const [name, index] of this.indices) {
      if (previous) this.indexObject(name, index, key, previous, false);
    }
    this.metrics?.objects.set({ resource: this.resource }, this.cache.size);
    for (const handler of this.handlers) this.callHandler(() => handler.onDelete?.(object));
  }

  private indexObject(name: string, index: Map<string, Set<string>>, key: string, object: T, add: boolean) {
    const indexer = this.indexers.get(name);
    if (!indexer) return;
    for (const value of indexer(object)) {
      let keys = index.get(value);
      if (add) {
        if (!keys) index.set(value, (keys = new Set()));
        keys.add(key);
      } else if (keys) {
        keys.delete(key);
        if (keys.size === 0) index.delete(value);
      }
    }
  }

  private callHandler(call: () => void): void {
    try {
      call();
    } catch (error) {
      // A handler bug must not kill the watch; it is logged with the resource.
      this.logger?.error({ err: error }, 'informer handler threw');
    }
  }
}

/** Lists and watches custom resources of one kind, in one namespace or in all. */
export function customResourceSource<T extends CachedObject>(
  kubeConfig: KubeConfig,
  target: { group: string; version: string; plural: string; namespace?: string; labelSelector?: string },
): InformerSource<T> {
  const api = kubeConfig.makeApiClient(CustomObjectsApi);
  const { group, version, plural, namespace, labelSelector } = target;
  const path = namespace
    ? `/apis/${group}/${version}/namespaces/${namespace}/${plural}`
    : `/apis/${group}/${version}/${plural}`;
  return {
    resource: plural,
    path,
    labelSelector,
    list: async ({ limit, continueToken }) => {
      const page: unknown = namespace
        ? await api.listNamespacedCustomObject({
            group,
            version,
            namespace,
            plural,
            labelSelector,
            limit,
            _continue: continueToken,
          })
        : await api.listClusterCustomObject({
            group,
            version,
            plural,
            labelSelector,
            limit,
            _continue: continueToken,
          });
      return page as ListPage<T>;
    },
  };
}

/** Lists and watches Secrets of one namespace that match a label selector (and a field selector, e.g. on `type`). */
export function secretSource(
  kubeConfig: KubeConfig,
  target: { namespace: string; labelSelector?: string; fieldSelector?: string },
): InformerSource<V1Secret> {
  const api = kubeConfig.makeApiClient(CoreV1Api);
  const { namespace, labelSelector, fieldSelector } = target;
  return {
    resource: 'secrets',
    path: `/api/v1/namespaces/${namespace}/secrets`,
    labelSelector,
    fieldSelector,
    list: async ({ limit, continueToken }) => {
      const page = await api.listNamespacedSecret({
        namespace,
        labelSelector,
        fieldSelector,
        limit,
        _continue: continueToken,
      });
      // client-node's typed V1ListMeta names the token `_continue` (`continue` is a reserved word): without this
      // mapping the relist stopped after its first page, and the cache knew 500 Secrets of a larger namespace.
      const metadata = page.metadata;
      return {
        items: page.items,
        metadata: {
          ...(metadata?.resourceVersion ? { resourceVersion: metadata.resourceVersion } : {}),
          ...(metadata?._continue ? { continue: metadata._continue } : {}),
        },
      };
    },
  };
}

/**
 * `source`'s collection (path and selectors), listed and watched as PartialObjectMetadata: for caches that read
 * names, labels and resourceVersions only (decision 012); client-go's metadata informers ask the same.
 * No spec, status or Secret data travels or is parsed. No plain JSON fallback: a server that cannot convert answers
 * 406, and the informer fails rather than caching whole objects. `T` is what the caller reads of it.
 */
export function metadataOnly<T extends CachedObject = PartialObjectMetadata>(
  kubeConfig: KubeConfig,
  source: Pick<InformerSource<unknown>, 'resource' | 'path' | 'labelSelector' | 'fieldSelector'>,
): InformerSource<T> {
  const { resource, path, labelSelector, fieldSelector } = source;
  return {
    resource,
    path,
    labelSelector,
    fieldSelector,
    metadataOnly: true,
    list: async ({ limit, continueToken }) => {
      const cluster = kubeConfig.getCurrentCluster();
      if (!cluster) throw new Error(`list ${resource}: the kubeconfig has no current cluster`);
      const url = new URL(cluster.server + path);
      const query = { labelSelector, fieldSelector, limit, continue: continueToken };
      for (const [key, value] of Object.entries(query)) {
        if (value !== undefined) url.searchParams.set(key, String(value));
      }
      // As client-node's Watch sends a request: the KubeConfig's authentication and dispatcher (pooled or not).
      const request = new RequestContext(url.toString(), HttpMethod.GET);
      await kubeConfig.applySecurityAuthentication(request);
      request.setHeaderParam('Accept', PARTIAL_OBJECT_METADATA_LIST);
      const response = await fetch(url, {
        headers: request.getHeaders(),
        dispatcher: request.getDispatcher(),
      });
      const body = await response.text();
      if (response.status !== 200) {
        throw new WatchFailure(`HTTP ${response.status}: ${body.slice(0, 512)}`, response.status);
      }
      const page = JSON.parse(body) as { items?: T[] | null; metadata?: ListPage<T>['metadata'] } | null;
      // An empty PartialObjectMetadataList says `"items": null` (Go's nil slice), where a typed list says `[]`.
      return { ...page, items: page?.items ?? [] };
    },
  };
}

/**
 * `kubeConfig` as client-node's Watch uses it (current cluster, request authentication), with `accept` set on every
 * request it authenticates. A view: the KubeConfig itself, and any authentication hook set on it, stay as they are.
 */
function accepting(kubeConfig: KubeConfig, accept: string): KubeConfig {
  const view = Object.create(kubeConfig) as KubeConfig;
  view.applySecurityAuthentication = async (context) => {
    await kubeConfig.applySecurityAuthentication(context);
    context.setHeaderParam('Accept', accept);
  };
  return view;
}
