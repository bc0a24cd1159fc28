// The controller's caches of a Kyma's dependents (ModuleConfigs, SyncResources). One replica: one watch of the
// whole namespace. Sharded (decision 012): watches selected by the bucket label over the buckets this
// replica needs, so a replica holds about its share, plus one namespace-wide watch of the dependents that lack the
// label (normally none), whose bucket's ring owner puts the label on.
import { CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { GROUP, LABELS, SHARDING } from '@skr-watcher/api';
import {
  mergePatchCustomObject,
  objectKey,
  type CachedObject,
  type InformerHandlers,
  type ResilientInformer,
} from '@skr-watcher/kube';
import type { Logger } from '@skr-watcher/telemetry';
import { limiter } from './sharding/assignment.js';
import { bucketOf } from './sharding/ring.js';

/** What a sharded replica's dependents watches follow (the assignment's view). */
export interface DependentScope {
  /** Buckets whose dependents this replica must see. */
  buckets(): ReadonlySet<number>;
  /** True when this replica is the one to label an unlabelled dependent of `bucket`. */
  labelsBucket(bucket: number): boolean;
  /** Called when either answer may have changed. */
  onChange(listener: () => void): void;
}

export interface DependentCacheOptions<T extends CachedObject> {
  kcp: KubeConfig;
  namespace: string;
  kind: { plural: string; version: string };
  /** A watch of the kind in the namespace, of the objects `labelSelector` selects (all when undefined). */
  watch(labelSelector: string | undefined): ResilientInformer<T>;
  /** The name of the Kyma a dependent belongs to; its bucket is that Kyma's. */
  kymaOf(object: T): string | undefined;
  /** Watch events; a sharded cache leaves out the adds of a merged watch's first list (its objects are known). */
  handlers: InformerHandlers<T>;
  /** Sharded: watch only these buckets' dependents. */
  scope?: DependentScope;
  logger?: Logger;
}

export interface DependentCache<T> {
  start(): void;
  /** Resolves once the first watches listed. */
  waitForSync(): Promise<void>;
  readonly hasSynced: boolean;
  stop(): Promise<void>;
  /** The Kyma's dependents; undefined while no listed watch covers its bucket (the caller lists them itself). */
  ofKyma(kyma: string): T[] | undefined;
  /** Objects held (each once) and the label selectors of the watches: what this replica caches. */
  held(): { objects: number; selectors: (string | undefined)[] };
}

const KYMA_INDEX = 'kyma';
/** Bursts of scope changes (a handover of hundreds of Kymas, label by label) become one look. */
const RESCOPE_DEBOUNCE_MS = 100;

export function createDependentCache<T extends CachedObject>(
  options: DependentCacheOptions<T>,
): DependentCache<T> {
  const { scope, handlers } = options;
  const watch = (labelSelector: string | undefined) => {
    const informer = options.watch(labelSelector);
    informer.addIndex(KYMA_INDEX, (object) => {
      const kyma = options.kymaOf(object);
      return kyma ? [kyma] : [];
    });
    return informer;
  };

  if (!scope) {
    const whole = watch(undefined);
    whole.addHandler(handlers);
    return {
      start: () => whole.start(),
      waitForSync: () => whole.waitForSync(),
      get hasSynced() {
        return whole.hasSynced;
      },
      stop: () => whole.stop(),
      ofKyma: (kyma) => (whole.hasSynced ? whole.byIndex(KYMA_INDEX, kyma) : undefined),
      held: () => ({ objects: whole.keys().length, selectors: [undefined] }),
    };
  }
  return scopedCache(options, scope, watch);
}

interface Segment<T extends CachedObject> {
  buckets: ReadonlySet<number>;
  selector: string;
  informer: ResilientInformer<T>;
}

function scopedCache<T extends CachedObject>(
  options: DependentCacheOptions<T>,
  scope: DependentScope,
  watch: (labelSelector: string | undefined) => ResilientInformer<T>,
): DependentCache<T> {
  const { kcp, namespace, kind, handlers } = options;
  const logger = options.logger?.child({ subsystem: 'dependents', resource: kind.plural });
  const api = kcp.makeApiClient(CustomObjectsApi);
  const bucketOfObject = (object: T) => {
    const kyma = options.kymaOf(object);
    return kyma ? bucketOf(kyma) : undefined;
  };
  const labelled = (object: T, bucket: number) =>
    object.metadata?.labels?.[LABELS.shardBucket] === String(bucket);

  // Labelling: a merge patch of the label alone (module managers own the rest). After an upgrade, a replica's share
  // of every older dependent at once; a write that fails is tried again on the object's next event or resync.
  const patching = new Set<string>();
  const patchLimit = limiter(SHARDING.relabelConcurrency);
  const putLabel = (object: T, bucket: number) => {
    const key = objectKey(object);
    const name = object.metadata?.name;
    if (!name || patching.has(key)) return;
    patching.add(key);
    void patchLimit(() =>
      mergePatchCustomObject(
        api,
        { group: GROUP, version: kind.version, plural: kind.plural, namespace, name },
        { metadata: { labels: { [LABELS.shardBucket]: String(bucket) } } },
      ),
    )
      .then(() => logger?.debug({ name, bucket }, 'bucket label written'))
      .catch((error: unknown) =>
        logger?.debug({ err: error, name }, 'bucket label not written; retried later'),
      )
      .finally(() => patching.delete(key));
  };

  // Without the label (a module manager's SyncResource, an older agent's ModuleConfig): seen by every replica,
  // labelled by the ring's owner of its bucket, one writer per object.
  const unlabelledSelector = `!${LABELS.shardBucket}`;
  const unlabelled = watch(unlabelledSelector);
  const labelIfOurs = (object: T) => {
    const bucket = bucketOfObject(object);
    if (bucket !== undefined && scope.labelsBucket(bucket)) putLabel(object, bucket);
  };
  /** The caller's handlers, then `look` at the object added or updated; an add `skip` says is left out. */
  const relay = (look: (object: T) => void, skip?: (object: T) => boolean): InformerHandlers<T> => ({
    onAdd: (object) => {
      if (skip?.(object)) return;
      handlers.onAdd?.(object);
      look(object);
    },
    onUpdate: (previous, object) => {
      handlers.onUpdate?.(previous, object);
      look(object);
    },
    onDelete: (object) => handlers.onDelete?.(object),
  });
  unlabelled.addHandler(relay(labelIfOurs));

  // Oldest first; each covers a set of buckets. Growth adds one for the new buckets only (a small list, so an
  // acquired Kyma's dependents are cached soon); a merge later replaces them all by one for the buckets needed then.
  let segments: Segment<T>[] = [];
  let stopped = false;
  let everSynced = false;
  let rescopeTimer: NodeJS.Timeout | undefined;
  let mergeTimer: NodeJS.Timeout | undefined;

  const knownElsewhere = (segment: Segment<T>, object: T) =>
    segments.some(
      (other) =>
        other !== segment &&
        other.informer.hasSynced &&
        other.informer.get(objectKey(object))?.metadata?.resourceVersion === object.metadata?.resourceVersion,
    );
  // A label that names another bucket than its Kyma's (spec.kyma changed, a hand edit): whoever holds it fixes it.
  const fixLabel = (object: T) => {
    const bucket = bucketOfObject(object);
    if (bucket !== undefined && !labelled(object, bucket)) putLabel(object, bucket);
  };

  const addSegment = (buckets: ReadonlySet<number>) => {
    const values = [...buckets].sort((a, b) => a - b).join(',');
    const selector = `${LABELS.shardBucket} in (${values})`;
    const segment: Segment<T> = { buckets, selector, informer: watch(selector) };
    segment.informer.addHandler(
      relay(fixLabel, (object) => !segment.informer.hasSynced && knownElsewhere(segment, object)),
    );
    segments.push(segment);
    segment.informer.start();
    logger?.info({ buckets: buckets.size, watches: segments.length }, 'dependents watch started');
    return segment;
  };

  const merge = () => {
    mergeTimer = undefined;
    if (stopped) return;
    const needed = scope.buckets();
    const only = segments.length === 1 ? segments[0] : undefined;
    if (only && only.buckets.size === needed.size && [...needed].every((b) => only.buckets.has(b))) return;
    const before = [...segments];
    const merged = needed.size > 0 ? addSegment(needed) : undefined;
    const retire = async () => {
      if (merged) await merged.informer.waitForSync();
      if (stopped) return;
      segments = segments.filter((segment) => !before.includes(segment));
      await Promise.all(before.map((segment) => segment.informer.stop()));
      logger?.info({ buckets: needed.size, retired: before.length }, 'dependents watches merged');
    };
    retire().catch((error: unknown) => logger?.warn({ err: error }, 'merging dependents watches failed'));
  };

  const rescope = () => {
    rescopeTimer = undefined;
    if (stopped) return;
    const needed = scope.buckets();
    const covered = new Set<number>();
    for (const segment of segments) for (const bucket of segment.buckets) covered.add(bucket);
    const missing = new Set([...needed].filter((bucket) => !covered.has(bucket)));
    if (missing.size > 0) addSegment(missing);
    if (!mergeTimer && (segments.length > 1 || covered.size + missing.size > needed.size)) {
      mergeTimer = setTimeout(merge, SHARDING.bucketConsolidateMs);
      mergeTimer.unref();
    }
    // The ring may have given us buckets whose unlabelled dependents nobody labelled yet.
    for (const object of unlabelled.list()) labelIfOurs(object);
  };

  return {
    start() {
      scope.onChange(() => {
        if (stopped || rescopeTimer) return;
        rescopeTimer = setTimeout(rescope, RESCOPE_DEBOUNCE_MS);
        rescopeTimer.unref();
      });
      unlabelled.start();
      rescope();
    },
    async waitForSync() {
      await unlabelled.waitForSync();
      await Promise.all(segments.map((segment) => segment.informer.waitForSync()));
      everSynced = true;
    },
    get hasSynced() {
      return everSynced && unlabelled.hasSynced;
    },
    async stop() {
      stopped = true;
      clearTimeout(rescopeTimer);
      clearTimeout(mergeTimer);
      await Promise.all([unlabelled, ...segments.map((segment) => segment.informer)].map((i) => i.stop()));
    },
    ofKyma(kyma) {
      if (!unlabelled.hasSynced) return undefined;
      const bucket = bucketOf(kyma);
      const segment = segments.find((s) => s.informer.hasSynced && s.buckets.has(bucket));
      if (!segment) return undefined;
      const found = segment.informer.byIndex(KYMA_INDEX, kyma);
      const loose = unlabelled.byIndex(KYMA_INDEX, kyma);
      if (loose.length === 0) return found;
      // Just labelled: in both for a moment.
      const keys = new Set(found.map(objectKey));
      return [...found, ...loose.filter((object) => !keys.has(objectKey(object)))];
    },
    held() {
      const keys = new Set<string>(unlabelled.keys());
      for (const segment of segments) for (const key of segment.informer.keys()) keys.add(key);
      return {
        objects: keys.size,
        selectors: [unlabelledSelector, ...segments.map((segment) => segment.selector)],
      };
    },
  };
}
