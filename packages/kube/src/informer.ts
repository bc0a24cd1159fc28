// A list+watch cache that keeps running: restarts with backoff after errors and closed watches,
// relists on 410 Gone, restarts a watch that goes silent (relisting), and resyncs periodically from its cache.
// resourceVersions are passed back to the server as opaque strings; only observeWritten orders them (as etcd
// revisions, which they are on every API server this runs against), and it takes nothing it cannot order.
// Its parts are in informer/: the cache (store), one watch (watch), the restart backoff, the sources.
import { Watch, type KubeConfig } from '@kubernetes/client-node';
import { unrefClock, type Clock } from '@skr-watcher/api';
import type { Logger } from '@skr-watcher/telemetry';
import { PARTIAL_OBJECT_METADATA } from './metadata-list.js';
import { acceptObject } from './informer/accept.js';
import { RestartBackoff } from './informer/backoff.js';
import { WatchFailure, statusCodeOf } from './informer/failure.js';
import { informerMetrics, type InformerMetrics } from './informer/metrics.js';
import { InformerStore, objectKey } from './informer/store.js';
import type {
  CachedObject,
  InformerHandlers,
  InformerOptions,
  InformerSource,
  ListPage,
} from './informer/types.js';
import { accepting, openWatch, type WatchOutcome } from './informer/watch.js';

export type {
  CachedObject,
  InformerHandlers,
  InformerOptions,
  InformerSource,
  ListPage,
  PartialObjectMetadata,
} from './informer/types.js';
export { objectKey } from './informer/store.js';
export { customResourceSource, metadataOnly, secretSource } from './informer/sources.js';

/** Silence that restarts a watch, by default (InformerOptions.watchdogMs). */
const DEFAULT_WATCHDOG_MS = 5 * 60_000;
/** How much later than the watchdog client-node's own silence bound ends a watch: the watchdog is the rule. */
const WATCH_SILENCE_MARGIN_MS = 5_000;

/**
 * client-node's Watch with its silence bound set to `silenceMs`. Its default aborts a watch that received no bytes
 * for 30 s, but an API server with nothing to report sends a watch only a bookmark every 1 to 2 min (and one 2 s
 * before its timeoutSeconds): every quiet watch was cut and opened again every 30 s, about 20 watch requests a
 * minute from an idle agent. The bound has no setter; the property is checked, so an upgrade that renames it fails
 * loudly instead of bringing the 30 s back.
 */
function quietTolerant(watcher: Watch, silenceMs: number): Watch {
  if (typeof (watcher as unknown as Record<string, unknown>)['requestTimeoutMs'] !== 'number')
    throw new Error("client-node's Watch has no requestTimeoutMs: its silence bound cannot be set");
  Object.assign(watcher, { requestTimeoutMs: silenceMs });
  return watcher;
}

export class ResilientInformer<T extends CachedObject> {
  readonly resource: string;
  private readonly kubeConfig: KubeConfig;
  private readonly source: InformerSource<T>;
  private readonly watchdogMs: number;
  private readonly resyncMs: number;
  private readonly pageSize: number;
  private readonly transform: (object: T) => T;
  private readonly clock: Clock;
  private readonly logger: Logger | undefined;
  private readonly metrics: InformerMetrics | undefined;
  private readonly store: InformerStore<T>;
  private readonly backoff: RestartBackoff;

  private resourceVersion = '';
  /** When every object was last reported (a list, or a resync from the cache). */
  private lastResyncAt = 0;
  private synced = false;
  private syncWaiters: (() => void)[] = [];
  private stopped = true;
  private loop: Promise<void> | undefined;
  private abortWatch: (() => void) | undefined;

  constructor(options: InformerOptions<T>) {
    this.kubeConfig = options.kubeConfig;
    this.source = options.source;
    this.resource = options.source.resource;
    this.watchdogMs = options.watchdogMs ?? DEFAULT_WATCHDOG_MS;
    this.resyncMs = options.resyncMs ?? 600_000;
    this.pageSize = options.pageSize ?? 500;
    this.transform = options.transform ?? ((object) => object);
    this.clock = options.clock ?? unrefClock;
    this.logger = options.logger?.child({ resource: this.resource });
    this.metrics = informerMetrics(options.registry);
    const objects = this.metrics?.objects;
    this.store = new InformerStore<T>({
      resource: this.resource,
      logger: this.logger,
      onSize: objects && ((size) => objects.set({ resource: this.resource }, size)),
    });
    this.backoff = new RestartBackoff({
      clock: this.clock,
      baseMs: options.backoffBaseMs ?? 500,
      maxMs: options.backoffMaxMs ?? 15_000,
      logger: this.logger,
    });
  }

  addHandler(handlers: InformerHandlers<T>): void {
    this.store.addHandler(handlers);
  }

  /** Maintains an index from values computed per object (e.g. a label) to the objects. Add before start. */
  addIndex(name: string, indexer: (object: T) => string[]): void {
    this.store.addIndex(name, indexer);
  }

  get(key: string): T | undefined {
    return this.store.get(key);
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
    return object ? this.store.takeWritten(object) : false;
  }

  list(): T[] {
    return this.store.list();
  }

  keys(): string[] {
    return this.store.keys();
  }

  byIndex(name: string, value: string): T[] {
    return this.store.byIndex(name, value);
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
    this.backoff.wake();
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
        await this.afterWatch(outcome, startedAt);
      } catch (error) {
        if (this.stopped) break;
        if (statusCodeOf(error) === 410) {
          this.metrics?.restarts.inc({ resource: this.resource, reason: 'gone' });
          this.resourceVersion = '';
          continue;
        }
        this.metrics?.restarts.inc({ resource: this.resource, reason: 'error' });
        await this.backoff.after(error);
      }
    }
  }

  /** What a watch that ended tells the next one: relist after 410 Gone or silence, back off after a failed open. */
  private async afterWatch(outcome: Exclude<WatchOutcome, 'stopped'>, startedAt: number): Promise<void> {
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
      await this.backoff.after(new Error('watch closed right after it opened'));
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
    this.store.replay();
    this.logger?.debug({ objects: this.store.size }, 'resynced from the cache');
  }

  private async relist(): Promise<void> {
    const listed = new Map<string, T>();
    let continueToken: string | undefined;
    let resourceVersion = '';
    do {
      const page = await this.listPage(continueToken);
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

    this.store.replaceWith(listed);
    this.resourceVersion = resourceVersion;
    this.lastResyncAt = this.clock.now();
    this.backoff.reset();
    this.logger?.debug({ objects: this.store.size }, 'listed');
    if (!this.synced) {
      this.synced = true;
      for (const resolve of this.syncWaiters) resolve();
      this.syncWaiters = [];
    }
  }

  private async listPage(continueToken: string | undefined): Promise<ListPage<T>> {
    let page: ListPage<T>;
    try {
      page = await this.source.list({ limit: this.pageSize, continueToken });
    } catch (error) {
      throw new WatchFailure(`list ${this.resource}`, statusCodeOf(error), { cause: error });
    }
    if (!page || !Array.isArray(page.items))
      throw new WatchFailure(`list ${this.resource}: answer has no items`);
    return page;
  }

  private accept(raw: unknown): T | undefined {
    return acceptObject(raw, this.transform, this.logger);
  }

  private async watchOnce(): Promise<WatchOutcome> {
    if (this.stopped) return 'stopped';
    const watcher = quietTolerant(
      new Watch(
        this.source.metadataOnly ? accepting(this.kubeConfig, PARTIAL_OBJECT_METADATA) : this.kubeConfig,
      ),
      this.watchdogMs + WATCH_SILENCE_MARGIN_MS,
    );
    const watch = openWatch(
      watcher,
      {
        resource: this.resource,
        path: this.source.path,
        labelSelector: this.source.labelSelector,
        fieldSelector: this.source.fieldSelector,
        resourceVersion: this.resourceVersion,
      },
      {
        clock: this.clock,
        watchdogMs: this.watchdogMs,
        resync:
          this.resyncMs > 0
            ? {
                firstInMs: Math.max(0, this.lastResyncAt + this.resyncMs - this.clock.now()),
                everyMs: this.resyncMs,
                run: () => this.resync(),
              }
            : undefined,
      },
      (type, object) => this.onWatchEvent(type, object),
    );
    this.abortWatch = watch.stop;
    try {
      return await watch.ended;
    } finally {
      this.abortWatch = undefined;
    }
  }

  /** What an event of the watch does to the cache; ERROR events end the watch (openWatch). */
  private onWatchEvent(type: string, object: unknown): void {
    this.metrics?.events.inc({ resource: this.resource, type });
    switch (type) {
      case 'ADDED':
      case 'MODIFIED': {
        const accepted = this.accept(object);
        if (!accepted) return;
        this.store.upsertFromServer(accepted);
        this.noteResourceVersion(accepted);
        this.backoff.reset();
        return;
      }
      case 'DELETED': {
        const accepted = this.accept(object);
        if (!accepted) return;
        this.store.remove(accepted);
        this.noteResourceVersion(accepted);
        return;
      }
      case 'BOOKMARK':
        this.noteResourceVersion(object as CachedObject);
        return;
      case 'ERROR':
        return;
      default:
        this.logger?.warn({ type }, 'unknown watch event type; ignored');
    }
  }

  private noteResourceVersion(object: CachedObject | null | undefined): void {
    const rv = object?.metadata?.resourceVersion;
    if (typeof rv === 'string' && rv !== '') this.resourceVersion = rv;
  }
}
