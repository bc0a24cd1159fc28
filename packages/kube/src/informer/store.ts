// An informer's cache: objects by key, the indexes over them, the handlers told of every change, and the objects
// this process wrote that are ahead of the watch. It holds no connection; the list/watch loop feeds it.
import type { Logger } from '@skr-watcher/telemetry';
import type { CachedObject, InformerHandlers } from './types.js';

/** `namespace/name`, or `name` for cluster-scoped objects: the key of the cache and of work queues. */
export function objectKey(object: CachedObject): string {
  const name = object.metadata?.name ?? '';
  const namespace = object.metadata?.namespace;
  return namespace ? `${namespace}/${name}` : name;
}

/** An object's resourceVersion as the etcd revision it is; undefined when it is not a number. */
export function revisionOf(object: CachedObject): bigint | undefined {
  const version = object.metadata?.resourceVersion;
  return typeof version === 'string' && /^[0-9]{1,20}$/.test(version) ? BigInt(version) : undefined;
}

export interface StoreOptions {
  /** Names the resource in errors. */
  resource: string;
  /** Where a handler that throws is logged. */
  logger?: Logger;
  /** Told the number of cached objects after every change (the `informer_objects` gauge). */
  onSize?(size: number): void;
}

export class InformerStore<T extends CachedObject> {
  private readonly cache = new Map<string, T>();
  private readonly indexers = new Map<string, (object: T) => string[]>();
  /** index name → index value → object keys */
  private readonly indices = new Map<string, Map<string, Set<string>>>();
  private readonly handlers: InformerHandlers<T>[] = [];
  /**
   * Objects taken from this process's own writes (takeWritten) ahead of their watch event, by key: the
   * resourceVersion written. Older copies from the watch or a relist are not cached over them; the entry goes once
   * the server's copy has caught up.
   */
  private readonly aheadOfWatch = new Map<string, bigint>();

  constructor(private readonly options: StoreOptions) {}

  get size(): number {
    return this.cache.size;
  }

  addHandler(handlers: InformerHandlers<T>): void {
    this.handlers.push(handlers);
  }

  /** Maintains an index from values computed per object (e.g. a label) to the objects, cached ones included. */
  addIndex(name: string, indexer: (object: T) => string[]): void {
    this.indexers.set(name, indexer);
    const index = new Map<string, Set<string>>();
    this.indices.set(name, index);
    for (const [key, object] of this.cache) this.indexObject(name, index, key, object, true);
  }

  get(key: string): T | undefined {
    return this.cache.get(key);
  }

  list(): T[] {
    return [...this.cache.values()];
  }

  keys(): string[] {
    return [...this.cache.keys()];
  }

  byIndex(name: string, value: string): T[] {
    const index = this.indices.get(name);
    if (!index) throw new Error(`informer ${this.options.resource} has no index ${name}`);
    return [...(index.get(value) ?? [])]
      .map((key) => this.cache.get(key))
      .filter((o): o is T => o !== undefined);
  }

  /**
   * Caches an object this process wrote, when it is newer than the cached copy; resourceVersions are compared as
   * the etcd revisions they are, and one that is not a number is not taken. True when it was taken.
   */
  takeWritten(object: T): boolean {
    const key = objectKey(object);
    const written = revisionOf(object);
    const cached = this.cache.get(key);
    if (written === undefined || (cached && !(written > (revisionOf(cached) ?? written)))) return false;
    this.aheadOfWatch.set(key, written);
    this.upsert(key, object);
    return true;
  }

  /** A copy from the watch or a list: not cached over a newer one this process wrote (takeWritten). */
  upsertFromServer(object: T, key = objectKey(object)): void {
    const ahead = this.aheadOfWatch.get(key);
    if (ahead !== undefined) {
      const revision = revisionOf(object);
      if (revision !== undefined && revision < ahead) return;
      this.aheadOfWatch.delete(key);
    }
    this.upsert(key, object);
  }

  /** Drops the cached copy of `object`'s key, if any; onDelete is told `object`. */
  remove(object: T, key = objectKey(object)): void {
    const previous = this.cache.get(key);
    if (!previous) return;
    this.aheadOfWatch.delete(key);
    this.cache.delete(key);
    for (const [name, index] of this.indices) this.indexObject(name, index, key, previous, false);
    this.options.onSize?.(this.cache.size);
    for (const handler of this.handlers) this.callHandler(() => handler.onDelete?.(object));
  }

  /** Makes the cache what a complete list found: objects not listed are removed, listed ones upserted. */
  replaceWith(listed: Map<string, T>): void {
    for (const [key, previous] of [...this.cache]) {
      if (!listed.has(key)) this.remove(previous, key);
    }
    for (const [key, object] of listed) this.upsertFromServer(object, key);
  }

  /** Reports every cached object to onUpdate, previous and current the same object. */
  replay(): void {
    for (const object of [...this.cache.values()]) {
      for (const handler of this.handlers) this.callHandler(() => handler.onUpdate?.(object, object));
    }
  }

  private upsert(key: string, object: T): void {
    const previous = this.cache.get(key);
    this.cache.set(key, object);
    for (const [name, index] of this.indices) {
      if (previous) this.indexObject(name, index, key, previous, false);
      this.indexObject(name, index, key, object, true);
    }
    this.options.onSize?.(this.cache.size);
    for (const handler of this.handlers) {
      this.callHandler(() => (previous ? handler.onUpdate?.(previous, object) : handler.onAdd?.(object)));
    }
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
      this.options.logger?.error({ err: error }, 'informer handler threw');
    }
  }
}
