/**
 * Lifecycle reconciliation of KCP Kymas (docs/architecture.md). The runtime (informers, work queue, listener,
 * `skr-agent run` and `skr-agent reconcile --once`) only enqueues keys and calls this module:
 *
 *   const reconciler = createReconciler({ kcp, namespace: 'kcp-system', logger, registry });
 *   const { requeueAfterMs } = await reconciler.reconcile('kcp-system/my-kyma'); // throws → back off
 *   await reconciler.close();
 *
 * A reconcile is level-triggered and idempotent: it reads both clusters and converges them. It throws (with
 * context; API errors keep their HTTP `code` somewhere in the `cause` chain, see `apiErrorCode`) only for
 * failures that should back off: KCP errors, an unreachable SKR, a missing or broken kubeconfig Secret.
 * Problems of one module or one SyncResource item are reported in status (and Events) instead.
 *
 * Decisions a caller may rely on:
 * - The SKR Kyma (`kyma-system/default`, or `spec.sync.namespace`) is created from the KCP Kyma's spec once;
 *   after that its `spec.modules` (and `spec.channel`) are the user's source of truth and are used directly for
 *   module resolution. The KCP Kyma's spec is never rewritten (its owner, e.g. provisioning, may re-apply it);
 *   what is in effect is reported in the KCP Kyma's `status.modules` (resolved version, template, state).
 * - Module CRs: created from the template's `spec.data` when absent (customResourcePolicy CreateAndDelete, the
 *   default) and then left to the user; removed when the module is disabled, but only when the agent created
 *   them (label `operator.kyma-project.io/managed-by=skr-watcher`). With policy Ignore nothing is created; with
 *   `managed: false` (state Unmanaged) the Module CR is left to the user and its ModuleConfig removed. Resolution
 *   follows upstream's rules (mandatory, beta/internal, kymaSelector, no downgrade; docs/decisions/009).
 * - ModuleConfig name: `<kyma>-<module>-<8 hex of sha256(kyma, module)>` (see `moduleConfigName`), labelled
 *   with kyma-name and module-name.
 * - SyncResources get our finalizer, so deleting one removes what it applied from the SKR first.
 * - `skip-reconciliation=true` pauses everything, deletion included, and returns no requeue.
 * - Deletion: ModuleConfigs, objects applied from SyncResources, Module CRs, the SKR Kyma and the module catalog
 *   copied into the SKR, then the finalizer.
 *   An unreachable SKR is retried (the call throws) until `deletionTimeoutMs` after the deletionTimestamp, then
 *   given up on with a `SKRCleanupAbandoned` Event; without a kubeconfig Secret the SKR side is skipped at once
 *   (`SKRCleanupSkipped` Event). The SKR's namespace (kyma-system) stays.
 * - Lists (Secrets, ModuleConfigs, SyncResources) are read from the API server's watch cache, like an informer;
 *   an object created a moment before a reconcile may be missed by that pass, and its watch event triggers the
 *   next one. Whatever decides a write is read fresh (docs/decisions/006-server-side-apply.md); the KCP Kyma comes
 *   from the caller's watch cache only at the version this reconciler last read fresh or wrote (decision 016).
 * - State kept between calls, none of which decides what a reconcile writes: the SKR client cache (keyed by the
 *   kubeconfig Secret's uid and resourceVersion, each client with its circuit breaker), the Kyma versions known
 *   (which only choose between the watch cache and a GET), and the lanes that run one
 *   Kyma's reconciles one at a time, and the writes of one ModuleConfig (targeted mirror or full reconcile) one at
 *   a time.
 */
import type { KubeConfig } from '@kubernetes/client-node';
import {
  DEFAULTS,
  DEFAULT_REQUEUE_INTERVALS,
  LABELS,
  REQUEUE_MS,
  SYNC_RESOURCE_ALLOWED,
  type Kyma,
  type RequeueIntervals,
  parseKyma,
} from '@skr-watcher/api';
import {
  createClusterClient,
  createSkrClients,
  getCustomObject,
  kubeRequestMetrics,
  type ClusterClient,
  type KnownSecret,
  type SkrClients,
  withinDeadline,
  workQueueRunHooks,
} from '@skr-watcher/kube';
import {
  Counter,
  Gauge,
  Histogram,
  LATENCY_BUCKETS_SECONDS,
  registeredMetric,
  silentLogger,
  type Logger,
  type Registry,
} from '@skr-watcher/telemetry';
import {
  type ModuleInstallation,
  parseKymaKey,
  refOf,
  resourceVersionOf,
  type ReconcileContext,
  type RegistrationSettings,
  type SyncResourcePolicy,
  type WatchCaches,
  type SyncResourceNames,
} from './context.js';
import { DEFAULT_CRD_DIR } from './kyma/crds.js';
import { deleteKyma } from './kyma/deletion.js';
import { createEventRecorder } from './events.js';
import { createDriftReverter } from '../targeted/drift.js';
import { isPaused, reconcileLiveKyma } from './kyma/pass.js';
import { markOrphanedManifests } from './manifests/install.js';
import {
  MirrorLanes,
  mirrorLaneKey,
  type ModuleCrChange,
  type ModuleMirrorResult,
} from './modules/mirror-lanes.js';
import {
  epochMs,
  mirrorChangedModuleCr,
  moduleOfChange,
  type MirrorSteps,
} from '../targeted/module-mirror.js';
import { watchPkiSecrets } from '../registration/index.js';
import {
  applyChangedSyncResource,
  type SyncResourceApplyOutcome,
  type SyncResourceApplySteps,
} from './sync-resources/sync-resource.js';

export type { ModuleDescription, ModuleInstallation, RegistrationSettings, WatchCaches } from './context.js';
export { MirrorLanes, mirrorLaneKey } from './modules/mirror-lanes.js';
export { cachedModuleConfig, isOwnMirror, moduleConfigName } from './modules/module-config.js';
export { cachedManifest } from './manifests/manifests-of-kyma.js';
export type { ModuleCrChange, ModuleMirrorOutcome, ModuleMirrorResult } from './modules/mirror-lanes.js';
export type { SyncResourceApplyOutcome } from './sync-resources/sync-resource.js';
export { CONDITIONS } from './status.js';
export { SKR_WEBHOOK_CONDITION } from './kyma/skr-webhook.js';

export interface ReconcilerOptions {
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
}

/** When to look again (per state, `ReconcilerOptions.requeue`, or sooner); undefined: wait for the next trigger. */
export interface ReconcileResult {
  requeueAfterMs?: number;
}

export interface Reconciler {
  /** Reconciles the KCP Kyma `namespace/name`. */
  reconcile(kymaKey: string): Promise<ReconcileResult>;
  /**
   * The targeted path (decision 010): mirrors one changed Module CR of the Kyma into its ModuleConfig, waiting
   * (briefly) for the announced write to be stored. Never runs at the same time as a reconcile of that Kyma.
   */
  mirrorModuleCr(kymaKey: string, change: ModuleCrChange): Promise<ModuleMirrorResult>;
  /**
   * The targeted path of a SyncResource: its watch saw a spec change, so that SyncResource alone is applied into
   * its Kyma's SKR now (sync-resource.ts), without a full pass. Changes of one SyncResource that wait coalesce.
   */
  applySyncResource(kymaKey: string, name: string): Promise<SyncResourceApplyOutcome>;
  /**
   * This replica just took the Kyma over (sharding): its next pass reads it from the API server, since another
   * replica may have written it after this replica's Kyma watch last showed it.
   */
  acquired(kymaKey: string): void;
  /** Closes the pooled connections to KCP and every SKR. */
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

interface ReconcileMetrics {
  syncApplies: Counter<'outcome'>;
  total: Counter<'result'>;
  duration: Histogram<'result'>;
  mirrors: Counter<'outcome'>;
  mirrorReads: Histogram;
}

function metricsIn(registry: Registry | undefined): ReconcileMetrics | undefined {
  if (!registry) return undefined;
  const registers = [registry];
  return {
    syncApplies: registeredMetric(
      registry,
      'skr_agent_sync_resource_applies_total',
      () =>
        new Counter({
          name: 'skr_agent_sync_resource_applies_total',
          help: 'SyncResource changes applied on the targeted path, by outcome (applied, skipped, failed).',
          labelNames: ['outcome'],
          registers,
        }),
    ),
    mirrors: registeredMetric(
      registry,
      'skr_agent_module_mirrors_total',
      () =>
        new Counter({
          name: 'skr_agent_module_mirrors_total',
          help: 'Module CR callbacks mirrored on the targeted path, by outcome (mirrored, unchanged, not-a-module, absent, not-shown).',
          labelNames: ['outcome'],
          registers,
        }),
    ),
    mirrorReads: registeredMetric(
      registry,
      'skr_agent_module_mirror_reads',
      () =>
        new Histogram({
          name: 'skr_agent_module_mirror_reads',
          help: 'SKR reads per callback on the targeted path: 1 when the write had landed at the first read, more when not yet.',
          // Whole reads: le="1" counts callbacks that needed no re-read, le="2" at most one.
          buckets: [1, 2, 3, 5, 10, 20, 50],
          registers,
        }),
    ),
    total: registeredMetric(
      registry,
      'skr_agent_reconcile_total',
      () =>
        new Counter({
          name: 'skr_agent_reconcile_total',
          help: 'Kyma reconciles by result (ready, processing, warning, error, deleting, paused, absent, failed).',
          labelNames: ['result'],
          registers,
        }),
    ),
    duration: registeredMetric(
      registry,
      'skr_agent_reconcile_duration_seconds',
      () =>
        new Histogram({
          name: 'skr_agent_reconcile_duration_seconds',
          help: 'Duration of one Kyma reconcile, by result.',
          labelNames: ['result'],
          buckets: LATENCY_BUCKETS_SECONDS,
          registers,
        }),
    ),
  };
}

export function createReconciler(options: ReconcilerOptions): Reconciler {
  const logger = options.logger ?? silentLogger();
  const clock = options.clock ?? (() => new Date());
  const namespace = options.namespace || DEFAULTS.kcpNamespace;
  const metrics = metricsIn(options.registry);
  const revertDrift = createDriftReverter(options.registry);
  // A targeted mirror and the full reconcile's mirror step of the same Module CR run one at a time, each reading
  // the Module CR inside its lane, so a pass that read it before an edit never writes over the targeted mirror.
  // Nothing else of a full reconcile holds a mirror up (decision 010).
  const lanes = new MirrorLanes();
  /** Targeted SyncResource applies queued and not started yet, by Kyma key and name: a later change joins one. */
  const waitingApplies = new Map<string, Promise<SyncResourceApplyOutcome>>();
  // Run by a controller (it hands over its caches), a pass with registration takes the CA, the bundle and its leaf
  // from watches when it changes nothing; `reconcile --once` reads them (decision 016).
  const pki =
    options.registration && options.caches
      ? (options.registration.pki ??
        watchPkiSecrets({
          kubeConfig: options.kcp,
          namespace,
          logger,
          registry: options.registry,
          ...(options.registration.onTrustChange
            ? { onTrustChange: options.registration.onTrustChange }
            : {}),
        }))
      : undefined;
  if (pki && !options.registration?.pki) pki.start();
  // Client construction is async (the pooled dispatcher); the first reconcile awaits it.
  const ready: Promise<{ kcp: ClusterClient; skrClients: SkrClients; ctx: ReconcileContext }> = (async () => {
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
    const registry = options.registry;
    if (registry) {
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
    const ctx: ReconcileContext = {
      kcp,
      namespace,
      logger,
      clock,
      events: createEventRecorder(kcp, logger, clock),
      skrClients,
      deletionTimeoutMs: options.deletionTimeoutMs ?? DEFAULT_DELETION_TIMEOUT_MS,
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
  })();
  // A failed construction surfaces on the next reconcile; keep it from being an unhandled rejection meanwhile.
  ready.catch(() => undefined);

  // Per Kyma (namespace/name), the resourceVersion this reconciler last read from the API server or wrote: a pass
  // takes the Kyma from the controller's watch cache only when the cache holds exactly that version, so it never
  // decides from a copy older than its own last write (decision 016). Only where the pass reads: a
  // missing or other entry costs one GET. An entry goes when the Kyma is gone, deleted, acquired, or a pass fails.
  const known = new Map<string, string>();

  /** The KCP Kyma a pass works from: the watch cache's copy at the known version, else read from etcd. */
  async function kymaForPass(ctx: ReconcileContext, kymaKey: string): Promise<Kyma | undefined> {
    const cached = options.caches?.kyma?.(kymaKey);
    const version = known.get(kymaKey);
    if (cached !== undefined && version !== undefined && resourceVersionOf(cached) === version) {
      const kyma = parseKyma(cached, `Kyma ${kymaKey}`);
      // Deletion decides what goes and drops the finalizer: it reads fresh, whatever the cache shows.
      if (!kyma.metadata.deletionTimestamp) return kyma;
    }
    const { namespace: kymaNamespace, name } = parseKymaKey(kymaKey, namespace);
    const raw = await getCustomObject(ctx.kcp.custom, refOf('kyma', kymaNamespace, name));
    if (raw === undefined) return undefined;
    const kyma = parseKyma(raw, `Kyma ${kymaKey}`);
    if (kyma.metadata.resourceVersion) known.set(kymaKey, kyma.metadata.resourceVersion);
    return kyma;
  }

  /** `seen` learns the Kyma's runtime-id as soon as it is read, so a failure's log line can name it. */
  async function reconcileOnce(
    key: string,
    seen: { runtimeId?: string },
  ): Promise<{ result: ReconcileResult; label: string }> {
    const { ctx } = await ready;
    const { namespace: kymaNamespace, name } = parseKymaKey(key, namespace);
    const kymaKey = `${kymaNamespace}/${name}`;
    try {
      const kyma = await kymaForPass(ctx, kymaKey);
      if (kyma === undefined) {
        known.delete(kymaKey);
        await ctx.skrClients.evict(name);
        const orphaned = await markOrphanedManifests(ctx, kymaNamespace, name);
        if (orphaned > 0)
          logger.warn(
            { kyma: kymaKey, manifests: orphaned },
            'Manifests of a Kyma that is gone marked Error (orphaned)',
          );
        return { result: {}, label: 'absent' };
      }
      seen.runtimeId = kyma.metadata.labels?.[LABELS.runtimeId];
      if (isPaused(kyma)) {
        logger.debug({ kyma: key }, 'reconciliation paused by label');
        return { result: {}, label: 'paused' };
      }
      if (kyma.metadata.deletionTimestamp) {
        known.delete(kymaKey);
        // Mirrors that read the Kyma before its deletionTimestamp finish first, so none writes a ModuleConfig after
        // the deletion removed it; those queued from now on read the timestamp and write nothing.
        await lanes.drain(kymaKey);
        const outcome = await deleteKyma(ctx, kyma);
        return { result: requeue(outcome.requeueAfterMs), label: 'deleting' };
      }
      const outcome = await reconcileLiveKyma(ctx, kyma);
      if (outcome.resourceVersion) known.set(kymaKey, outcome.resourceVersion);
      else known.delete(kymaKey);
      return { result: requeue(outcome.requeueAfterMs), label: (outcome.state ?? 'ready').toLowerCase() };
    } catch (error) {
      // A write may have landed without its answer: the next pass reads the Kyma fresh.
      known.delete(kymaKey);
      throw error;
    }
  }

  return {
    // The work queue never runs one Kyma twice at once; its own lane keeps that true for direct callers too.
    reconcile: (kymaKey) =>
      lanes.run(kymaKey, async () => {
        const started = process.hrtime.bigint();
        const startedAt = epochMs();
        let label = 'failed';
        const seen: { runtimeId?: string } = {};
        try {
          const { result, label: outcome } = await withinDeadline(
            `reconcile ${kymaKey}`,
            options.reconcileDeadlineMs ?? DEFAULT_RECONCILE_DEADLINE_MS,
            () => reconcileOnce(kymaKey, seen),
          );
          label = outcome;
          return result;
        } catch (error) {
          // The one log line of a failed reconcile (the work queue only retries it).
          logger.warn({ kyma: kymaKey, runtimeId: seen.runtimeId, err: error }, 'reconcile failed');
          throw error;
        } finally {
          const seconds = Number(process.hrtime.bigint() - started) / 1e9;
          metrics?.total.inc({ result: label });
          metrics?.duration.observe({ result: label }, seconds);
          logger.debug({ kyma: kymaKey, result: label, startedAt, doneAt: epochMs() }, 'Kyma reconciled');
        }
      }),
    mirrorModuleCr: (kymaKey, announced) => {
      const queuedAt = epochMs();
      let kymaNamespace: string;
      let name: string;
      try {
        ({ namespace: kymaNamespace, name } = parseKymaKey(kymaKey, namespace));
      } catch (error) {
        return Promise.reject(error as Error);
      }
      // The full reconcile names its lanes namespace/name too (modules.ts).
      return lanes.mirror(`${kymaNamespace}/${name}`, announced, async (change, superseded) => {
        const startedAt = epochMs();
        const steps: MirrorSteps = {};
        const { ctx } = await ready;
        const cached = options.cachedKyma?.(`${kymaNamespace}/${name}`);
        // An object a module installed: put back at once (drift.ts) unless the Kyma is paused; the full pass
        // follows at once.
        if (!cached || !isPaused(cached)) {
          const drift = await revertDrift(ctx, name, change);
          if (drift) return { outcome: 'not-a-module' as const, reads: drift.reads };
        }
        // As a pass takes it: from the watch cache at the version last read or written here, else a GET.
        const kyma = kymaForPass(ctx, `${kymaNamespace}/${name}`).then((read) =>
          read && !isPaused(read) && !read.metadata.deletionTimestamp ? read : undefined,
        );
        const guess = cached ? moduleOfChange(cached, change) : undefined;
        const result = await mirrorChangedModuleCr(ctx, name, kyma, change, steps, guess, superseded);
        metrics?.mirrors.inc({ outcome: result.outcome });
        metrics?.mirrorReads.observe(result.reads);
        // Timestamps of each step (epoch ms): bench:e2e reads them to say where an edit's milliseconds go.
        logger.debug(
          {
            kyma: kymaKey,
            gvk: change.gvk,
            namespace: change.namespace,
            name: change.name,
            ...result,
            receivedAt: change.receivedAtMs,
            queuedAt,
            startedAt,
            ...steps,
            doneAt: epochMs(),
          },
          'Module CR mirrored on its callback',
        );
        return result;
      });
    },
    applySyncResource: (kymaKey, syncName) => {
      const queuedAt = epochMs();
      let kymaNamespace: string;
      let name: string;
      try {
        ({ namespace: kymaNamespace, name } = parseKymaKey(kymaKey, namespace));
      } catch (error) {
        return Promise.reject(error as Error);
      }
      const waitingKey = `${kymaNamespace}/${name}\0${syncName}`;
      const waiting = waitingApplies.get(waitingKey);
      if (waiting) return waiting;
      const entry: { apply?: Promise<SyncResourceApplyOutcome> } = {};
      const apply = (async () => {
        const { ctx } = await ready;
        const kyma = kymaForPass(ctx, `${kymaNamespace}/${name}`);
        let startedAt: number | undefined;
        const steps: SyncResourceApplySteps = {};
        try {
          const result = await applyChangedSyncResource(
            ctx,
            kyma,
            name,
            syncName,
            () => {
              // Started: from here a new change needs a new apply.
              waitingApplies.delete(waitingKey);
              startedAt = epochMs();
            },
            steps,
            () => waitingApplies.has(waitingKey),
          );
          metrics?.syncApplies.inc({ outcome: result.outcome });
          // Timestamps (epoch ms): bench:e2e reads them to say where a round trip's milliseconds go.
          logger.debug(
            {
              kyma: kymaKey,
              syncResource: syncName,
              ...result,
              ...steps,
              queuedAt,
              startedAt,
              doneAt: epochMs(),
            },
            'SyncResource applied on its change',
          );
          return result;
        } catch (error) {
          metrics?.syncApplies.inc({ outcome: 'failed' });
          throw error;
        } finally {
          if (waitingApplies.get(waitingKey) === entry.apply) waitingApplies.delete(waitingKey);
        }
      })();
      entry.apply = apply;
      waitingApplies.set(waitingKey, apply);
      return apply;
    },
    acquired(kymaKey) {
      try {
        const { namespace: kymaNamespace, name } = parseKymaKey(kymaKey, namespace);
        known.delete(`${kymaNamespace}/${name}`);
        // Its leaf too: the other replica may have re-issued it after this one last read it.
        pki?.forget(name);
      } catch {
        // Not a Kyma key: nothing is known of it.
      }
    },
    async close() {
      const { kcp, skrClients } = await ready.catch(() => ({ kcp: undefined, skrClients: undefined }));
      await skrClients?.close();
      await kcp?.close();
      if (!options.registration?.pki) await pki?.stop();
    },
  };
}

function requeue(ms: number | undefined): ReconcileResult {
  return ms === undefined ? {} : { requeueAfterMs: ms };
}

export { REQUEUE_MS };
