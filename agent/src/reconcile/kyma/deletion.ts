// Deletion of a Kyma behind its finalizer, in order and idempotent: ModuleConfigs (KCP), objects applied from
// SyncResources, Module CRs (not those of unmanaged modules), the SKR Kyma, the module catalog copies and the image
// pull Secret copy, the SKR webhook (when registration is on), then the finalizer. An SKR that stays unreachable
// for deletionTimeoutMs after the deletion began is given up on: Event, finalizer removed anyway. Until then the Kyma
// is Error, as upstream's is while its SKR cannot be cleaned (deprovisioning often removes the cluster first). Without
// a kubeconfig Secret there is nothing to wait for: the SKR side is skipped at once, with an Event.
import { KYMA_FINALIZER, LABELS, type Kyma } from '@skr-watcher/api';
import {
  deleteCustomObjectIfExists,
  deleteIfExists,
  type ClusterClient,
  type ObjectRef,
} from '@skr-watcher/kube';
import { removeModuleCatalog } from '../modules/catalog.js';
import { eventTarget, refOf, type ReconcileContext } from '../context.js';
import { dropFinalizer } from './finalizers.js';
import { removeImagePullSecret } from './image-pull-secret.js';
import { purgeWhenDue } from './purge.js';
import { removeModulesOfKyma } from '../manifests/install.js';
import { moduleConfigsOf } from '../modules/module-config.js';
import { recordedModuleCr } from '../modules/modules.js';
import { skrKymaRef } from './skr-kyma.js';
import { removeSkrWebhook } from './skr-webhook.js';
import { CONDITIONS, kymaStatus, kymaStatusChanged, writeKymaStatus } from '../status.js';
import { removeAppliedObjects, removeFinalizer, syncResourcesOf } from '../sync-resources/sync-resource.js';

/** The SKRConnected reason of a deletion whose SKR side failed and is retried. */
const SKR_CLEANUP_FAILED = 'SKRCleanupFailed';

export interface DeletionOutcome {
  requeueAfterMs: number | undefined;
}

export async function deleteKyma(ctx: ReconcileContext, kyma: Kyma): Promise<DeletionOutcome> {
  const kymaName = kyma.metadata.name;
  const kymaNamespace = kyma.metadata.namespace ?? ctx.namespace;
  const log = ctx.logger.child({ kyma: `${kymaNamespace}/${kymaName}` });
  if (!(kyma.metadata.finalizers ?? []).includes(KYMA_FINALIZER)) {
    await ctx.skrClients.evict(kymaName);
    return { requeueAfterMs: undefined };
  }
  const kymaRef = refOf('kyma', kymaNamespace, kymaName);
  // A failed SKR cleanup stays visible (Error) until a step that reaches the SKR says otherwise, instead of flapping
  // back to Deleting at the start of every retry.
  if (!skrCleanupFailed(kyma)) {
    const deleting = kymaStatus(ctx, kyma, 'Deleting', kyma.status?.modules ?? [], []);
    if (kymaStatusChanged(kyma.status, deleting)) await writeKymaStatus(ctx.kcp, kymaRef, deleting);
  }

  // Gather every Module CR identity before the ModuleConfigs that record them are gone; the user keeps the
  // Module CRs of unmanaged modules. Listed from etcd: a watch cache may not yet hold one the last pass wrote.
  const configs = await moduleConfigsOf(ctx, kymaName, 'consistent');
  const moduleCrs = new Map<string, ObjectRef>();
  for (const config of configs.values()) addRef(moduleCrs, recordedModuleCr(undefined, config));
  for (const module of kyma.status?.modules ?? []) {
    if (module.state !== 'Unmanaged') addRef(moduleCrs, recordedModuleCr(module, undefined));
  }

  // 1. ModuleConfigs: KCP only, always possible.
  for (const config of configs.values()) {
    await deleteCustomObjectIfExists(
      ctx.kcp.custom,
      refOf('moduleConfig', ctx.namespace, config.metadata.name),
    );
  }

  // 2.-4. The SKR side.
  const syncs = await syncResourcesOf(ctx, kymaName);
  let skrError: unknown;
  // Without credentials there is nothing to wait for (deprovisioning often deletes the Secret first).
  let noCredentials = false;
  try {
    const lookup = await ctx.skrClients.forKyma(kymaName);
    if (!lookup) {
      noCredentials = true;
      throw new Error(`no kubeconfig Secret labelled ${LABELS.kymaName}=${kymaName} in ${ctx.namespace}`);
    }
    // Past --purge-finalizer-timeout, finalizers left in the SKR no longer hold the deletion up (purge.ts).
    await purgeWhenDue(ctx, kyma, lookup.client);
    // With module installation, the modules go first, each by its Manifest in upstream's order; users' CRs of a
    // module's kind hold the Kyma's deletion up, as upstream's do.
    const modules = await removeModulesOfKyma(ctx, eventTarget(ctx, kyma), lookup.client);
    if (!modules.finished) {
      const status = kymaStatus(ctx, kyma, 'Deleting', kyma.status?.modules ?? [], [
        {
          type: CONDITIONS.modules,
          ok: false,
          reason: 'ModulesBeingRemoved',
          message: modules.message ?? '',
        },
      ]);
      if (kymaStatusChanged(kyma.status, status)) await writeKymaStatus(ctx.kcp, kymaRef, status);
      return { requeueAfterMs: ctx.requeue.Processing };
    }
    await cleanUpSkr(ctx, lookup.client, kyma, syncs, [...moduleCrs.values()]);
  } catch (error) {
    skrError = error;
  }

  if (skrError !== undefined) {
    const message = skrError instanceof Error ? skrError.message : String(skrError);
    const since = Date.parse(kyma.metadata.deletionTimestamp ?? '');
    const waited = Number.isNaN(since) ? 0 : ctx.clock().getTime() - since;
    if (!noCredentials && waited < ctx.deletionTimeoutMs) {
      const status = kymaStatus(ctx, kyma, 'Error', kyma.status?.modules ?? [], [
        { type: CONDITIONS.skrConnected, ok: false, reason: SKR_CLEANUP_FAILED, message },
      ]);
      if (kymaStatusChanged(kyma.status, status)) await writeKymaStatus(ctx.kcp, kymaRef, status);
      throw new Error(`delete Kyma ${kymaNamespace}/${kymaName}: SKR cleanup failed (retrying)`, {
        cause: skrError,
      });
    }
    await ctx.events.warning(
      eventTarget(ctx, kyma),
      noCredentials ? 'SKRCleanupSkipped' : 'SKRCleanupAbandoned',
      noCredentials
        ? `SKR cleanup skipped; objects may remain in the SKR: ${message}`
        : `SKR cleanup gave up after ${Math.round(waited / 1000)} s; objects may remain in the SKR: ${message}`,
    );
    log.warn({ err: skrError, waitedMs: waited }, 'SKR cleanup abandoned; removing the finalizer anyway');
    // The Manifests' finalizers too: their modules stay in the SKR.
    await removeModulesOfKyma(ctx, eventTarget(ctx, kyma), undefined);
    // Our finalizers on the SyncResources must not outlive the Kyma.
    for (const sync of syncs) await removeFinalizer(ctx, sync);
    // The certificate in KCP goes even when the SKR cannot be cleaned.
    if (ctx.registration) await removeSkrWebhook(ctx, ctx.registration, kyma, undefined);
  }

  // 6. The finalizer, last; the API server then removes the Kyma.
  await dropFinalizer(ctx, kymaRef, kyma.metadata);
  await ctx.skrClients.evict(kymaName);
  log.info({ skrCleanedUp: skrError === undefined }, 'Kyma deleted');
  return { requeueAfterMs: undefined };
}

/** The last pass could not clean the SKR (the Kyma is Error for it). */
function skrCleanupFailed(kyma: Kyma): boolean {
  return (
    kyma.status?.state === 'Error' &&
    (kyma.status.conditions ?? []).some(
      (condition) =>
        condition.type === CONDITIONS.skrConnected &&
        condition.status === 'False' &&
        condition.reason === SKR_CLEANUP_FAILED,
    )
  );
}

function addRef(refs: Map<string, ObjectRef>, ref: ObjectRef | undefined): void {
  if (ref) refs.set(JSON.stringify([ref.apiVersion, ref.kind, ref.namespace ?? '', ref.name]), ref);
}

async function cleanUpSkr(
  ctx: ReconcileContext,
  skr: ClusterClient,
  kyma: Kyma,
  syncs: Awaited<ReturnType<typeof syncResourcesOf>>,
  moduleCrs: ObjectRef[],
): Promise<void> {
  // 2. Objects applied from SyncResources; the SyncResources themselves belong to module managers and stay.
  for (const sync of syncs) {
    await removeAppliedObjects(ctx, skr, sync);
    await removeFinalizer(ctx, sync);
  }
  // 3. Module CRs.
  for (const ref of moduleCrs) await deleteIfExists(skr.objects, ref);
  // 4. The SKR Kyma and the module catalog copied next to it.
  const skrKyma = skrKymaRef(kyma);
  await deleteCustomObjectIfExists(skr.custom, skrKyma);
  await removeModuleCatalog(skr, skrKyma.namespace);
  // The copy of --skr-image-pull-secret next to it: the module workloads that named it are gone.
  const pullSecret = ctx.modules?.skrImagePullSecret;
  if (pullSecret) await removeImagePullSecret(skr, skrKyma.namespace, pullSecret);
  // 5. The webhook, its Secret and deployment, and the certificate in KCP.
  if (ctx.registration) await removeSkrWebhook(ctx, ctx.registration, kyma, skr);
}
