// What an informer caches, where it lists and watches, whom it tells, and how it is configured.
import type { KubeConfig, V1ObjectMeta } from '@kubernetes/client-node';
import type { Clock } from '@skr-watcher/api';
import type { Logger, Registry } from '@skr-watcher/telemetry';

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
  /**
   * Restarts a watch that delivered no event (bookmarks count) for this long. Default 5 min: a quiet collection gets a
   * bookmark every 1 to 2 min (kube-apiserver 1.35: every minute once its watch cache saw an event, about every two
   * before), and the server ends every watch within 10 min anyway.
   */
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
