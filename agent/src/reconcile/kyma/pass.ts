// One reconcile pass of a live KCP Kyma, in order: finalizer, SKR client, CRDs, the SKR Kyma (skr-kyma.ts),
// modules (modules.ts), the module catalog (catalog.ts), SyncResources (sync-resource.ts), the SKR webhook
// (skr-webhook.ts), then status on both Kymas (status.ts). Each pass reads both clusters and converges;
// nothing is remembered between passes that the clusters do not hold.
import {
  DEFAULTS,
  LABELS,
  type Kyma,
  type KymaModuleStatus,
  type KymaStatus,
  type ResourceState,
  type SyncedObject,
} from '@skr-watcher/api';
import { isNotFound, isUnreachable, KubeRequestError } from '@skr-watcher/kube';
import { listWatchers } from '../../registration/index.js';
import { mandatoryModules, readCatalog, syncModuleCatalog } from '../modules/catalog.js';
import { eventTarget, refOfKyma, type ReconcileContext } from '../context.js';
import { ensureSkrCrds, forgetCrdCheck } from './crds.js';
import { addFinalizerAt } from './finalizers.js';
import { moduleConfigsOf } from '../modules/module-config.js';
import { reconcileModules, wantedModules } from '../modules/modules.js';
import { ensureSkrKyma, skrKymaRef, watchedLabels } from './skr-kyma.js';
import { reconcileSkrWebhook, type SkrWebhookOutcome } from './skr-webhook.js';
import {
  CONDITIONS,
  kymaStatus,
  kymaStatusChanged,
  summarize,
  worstState,
  writeKymaStatus,
  type ConditionInput,
} from '../status.js';
import { agentOwnedObjects } from '../agent-owned.js';
import { syncImagePullSecret } from './image-pull-secret.js';
import { leaveDeletedModules } from '../manifests/install.js';
import {
  reconcileSyncResource,
  syncResourcesOf,
  type SyncResourceOutcome,
} from '../sync-resources/sync-resource.js';

export interface KymaOutcome {
  state: ResourceState | undefined;
  requeueAfterMs: number | undefined;
  /**
   * The KCP Kyma's resourceVersion as this pass left it: the answer of its last write of the Kyma, or the version it
   * read when it wrote nothing; undefined when not known (a finalizer conflict made it read the Kyma again).
   */
  resourceVersion: string | undefined;
}

export function isPaused(kyma: Kyma): boolean {
  return kyma.metadata.labels?.[LABELS.skipReconciliation] === 'true';
}

/** A failure of the whole SKR side (unreachable, no credentials, no CRDs): status, Event, then back off. */
class SkrFailure extends Error {
  constructor(
    readonly reason: string,
    message: string,
    options?: { cause: unknown },
  ) {
    super(message, options);
    this.name = 'SkrFailure';
  }
}

/** Modules that count as installed: Ready, or run by the user (Unmanaged), as upstream's Modules condition counts. */
function modulesCondition(modules: KymaModuleStatus[]): ConditionInput {
  const failures = modules.filter((module) => module.state !== 'Ready' && module.state !== 'Unmanaged');
  return failures.length === 0
    ? { type: CONDITIONS.modules, ok: true, reason: 'Ready', message: `${modules.length} module(s) ready` }
    : {
        type: CONDITIONS.modules,
        ok: false,
        reason: 'ModulesNotReady',
        message: summarize(failures.map((m) => ({ name: m.name, message: m.message }))),
      };
}

function syncResourcesCondition(outcomes: SyncResourceOutcome[]): ConditionInput {
  const failures = outcomes.flatMap((outcome) => outcome.failures);
  return failures.length === 0
    ? {
        type: CONDITIONS.syncResourcesApplied,
        ok: true,
        reason: 'Applied',
        message: `${outcomes.length} SyncResource(s) applied`,
      }
    : {
        type: CONDITIONS.syncResourcesApplied,
        ok: false,
        reason: 'ItemsFailed',
        message: summarize(failures),
      };
}

export async function reconcileLiveKyma(ctx: ReconcileContext, kyma: Kyma): Promise<KymaOutcome> {
  const kymaName = kyma.metadata.name;
  const kymaNamespace = kyma.metadata.namespace ?? ctx.namespace;
  const log = ctx.logger.child({ kyma: `${kymaNamespace}/${kymaName}` });
  const kymaRef = refOfKyma(ctx, kyma);
  let resourceVersion = await addFinalizerAt(ctx, kymaRef, kyma.metadata);

  const failSkr = async (failure: SkrFailure): Promise<never> => {
    const status = kymaStatus(ctx, kyma, 'Error', kyma.status?.modules ?? [], [
      { type: CONDITIONS.skrConnected, ok: false, reason: failure.reason, message: failure.message },
    ]);
    if (kymaStatusChanged(kyma.status, status)) await writeKymaStatus(ctx.kcp, kymaRef, status);
    await ctx.events.warning(eventTarget(ctx, kyma), failure.reason, failure.message);
    throw new Error(`reconcile Kyma ${kymaNamespace}/${kymaName}: ${failure.message}`, { cause: failure });
  };

  // KCP reads that do not depend on the SKR start now and are awaited where needed.
  const configsRead = moduleConfigsOf(ctx, kymaName);
  const syncsRead = syncResourcesOf(ctx, kymaName);
  const catalogRead = readCatalog(ctx);
  const watchersRead = listWatchers(ctx.kcp, ctx.namespace, ctx.caches?.watchers());
  for (const read of [configsRead, syncsRead, catalogRead, watchersRead]) read.catch(() => undefined);

  let lookup;
  try {
    lookup = await ctx.skrClients.forKyma(kymaName);
  } catch (error) {
    // Reading the Secret is a KCP call: its failures back off like any other KCP failure.
    if (error instanceof KubeRequestError) throw error;
    return failSkr(new SkrFailure('KubeconfigInvalid', messageOf(error), { cause: error }));
  }
  if (!lookup) {
    await leaveDeletedModules(ctx, eventTarget(ctx, kyma));
    return failSkr(
      new SkrFailure(
        'KubeconfigMissing',
        `no Secret in ${ctx.namespace} labelled ${LABELS.kymaName}=${kymaName} with key ${DEFAULTS.kubeconfigSecretKey}`,
      ),
    );
  }
  const skr = lookup.client;
  const skrRef = skrKymaRef(kyma);
  let skrKyma: Kyma;
  let modules: KymaModuleStatus[];
  const manifestObjects: SyncedObject[] = [];
  let catalog: ConditionInput | undefined;
  let pullSecret: ConditionInput | undefined;
  const syncOutcomes: SyncResourceOutcome[] = [];
  let webhook: SkrWebhookOutcome | undefined;
  try {
    const watchers = await watchersRead;
    const labels = watchedLabels(watchers);
    try {
      const crds = await ensureSkrCrds(skr, ctx.crdDir);
      if (crds.installed.length > 0) log.info({ crds: crds.installed }, 'installed CRDs in the SKR');
      if (crds.updated.length > 0)
        log.info({ crds: crds.updated }, 'updated CRDs an older agent installed in the SKR');
      skrKyma = await ensureSkrKyma(ctx, kyma, skr, labels);
    } catch (error) {
      if (isNotFound(error)) forgetCrdCheck(skr);
      throw new SkrFailure(isUnreachable(error) ? 'SKRUnreachable' : 'SKRKymaFailed', messageOf(error), {
        cause: error,
      });
    }
    const pullSecretName = ctx.modules?.skrImagePullSecret;
    // Before the Manifests: a module's first Pods find the Secret they name.
    if (pullSecretName) pullSecret = await syncImagePullSecret(ctx, skr, skrRef.namespace, pullSecretName);
    const moduleCatalog = await catalogRead;
    modules = await reconcileModules(
      ctx,
      kyma,
      skr,
      wantedModules(skrKyma, mandatoryModules(moduleCatalog)),
      skrKyma.spec.channel ?? kyma.spec.channel,
      skrRef.namespace,
      await configsRead,
      manifestObjects,
    );
    if (kyma.spec.sync?.moduleCatalog !== false)
      catalog = await syncModuleCatalog(kyma, skr, skrRef.namespace, moduleCatalog);
    // What the Kyma's Manifests keep in the SKR is theirs: no SyncResource may touch it.
    const owned = agentOwnedObjects({
      modules,
      manifestObjects,
      ...(pullSecretName ? { imagePullSecret: { name: pullSecretName, namespace: skrRef.namespace } } : {}),
    });
    for (const sync of await syncsRead) {
      syncOutcomes.push(await reconcileSyncResource(ctx, skr, sync, owned));
    }
    if (ctx.registration) {
      webhook = await reconcileSkrWebhook(ctx, ctx.registration, kyma, skr, skrRef, modules, watchers);
    }
  } catch (error) {
    if (error instanceof SkrFailure) return failSkr(error);
    // Only SKR calls get as far as timing out here in practice; a KCP that stopped answering fails the status write too.
    if (isUnreachable(error))
      return failSkr(new SkrFailure('SKRUnreachable', messageOf(error), { cause: error }));
    throw error; // a KCP failure: back off
  }

  const state = worstState([
    // A module being removed keeps the Kyma Processing; Deleting is the Kyma's own deletion.
    ...modules.map((m) => (m.state === 'Deleting' ? 'Processing' : m.state)),
    ...syncOutcomes.map((o) => o.state),
    ...(webhook ? [webhook.state] : []),
    ...(catalog && !catalog.ok ? (['Warning'] as const) : []),
    ...(pullSecret && !pullSecret.ok ? (['Warning'] as const) : []),
  ]);
  const status = kymaStatus(
    ctx,
    kyma,
    state,
    modules,
    [
      {
        type: CONDITIONS.skrConnected,
        ok: true,
        reason: 'Connected',
        message: `SKR API server ${skr.server}`,
      },
      modulesCondition(modules),
      syncResourcesCondition(syncOutcomes),
      ...(catalog ? [catalog] : []),
      ...(pullSecret ? [pullSecret] : []),
      ...(webhook ? [webhook.condition] : []),
    ],
    skrKyma.spec.channel ?? kyma.spec.channel ?? DEFAULTS.channel,
  );
  resourceVersion = await writeStatuses(ctx, kyma, skrKyma, status, skr, resourceVersion);
  if (kymaStatusChanged(kyma.status, status)) {
    log.info({ state, modules: modules.length }, 'Kyma status changed');
    if (state === 'Error') {
      const failures = [
        ...modules.filter((m) => m.state === 'Error'),
        ...syncOutcomes.flatMap((outcome) => outcome.failures),
      ];
      await ctx.events.warning(eventTarget(ctx, kyma), 'ReconcileFailed', summarize(failures));
    }
  }
  const requeueAfterMs = ctx.requeue[state === 'Deleting' ? 'Processing' : state];
  // A webhook probe that is out is looked at again when its answer is due.
  return {
    state,
    requeueAfterMs: Math.min(requeueAfterMs, webhook?.requeueAfterMs ?? Infinity),
    resourceVersion,
  };
}

/**
 * The same status on the KCP Kyma and, best effort, the SKR Kyma; each only when a reader would see a change.
 * Answers the KCP Kyma's resourceVersion after its status write, `before` when it needed none.
 */
async function writeStatuses(
  ctx: ReconcileContext,
  kyma: Kyma,
  skrKyma: Kyma,
  status: KymaStatus,
  skr: Parameters<typeof writeKymaStatus>[0],
  before: string | undefined,
): Promise<string | undefined> {
  const written = kymaStatusChanged(kyma.status, status)
    ? await writeKymaStatus(ctx.kcp, refOfKyma(ctx, kyma), status)
    : before;
  if (!kymaStatusChanged(skrKyma.status, status)) return written;
  try {
    await writeKymaStatus(skr, skrKymaRef(kyma), status);
  } catch (error) {
    if (isUnreachable(error)) throw error;
    ctx.logger.warn({ kyma: kyma.metadata.name, err: error }, 'could not write the SKR Kyma status');
  }
  return written;
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
