// Reconcile of one KCP Kyma: finalizer, pause, SKR client, CRDs, the SKR Kyma, modules (resolution, Module
// CRs, ModuleConfig mirrors), SyncResources, then status on both Kymas. Each pass reads both clusters and
// converges; nothing is remembered between passes that the clusters do not hold.
import type { KubernetesObject } from '@kubernetes/client-node';
import {
  DEFAULTS,
  FIELD_MANAGER,
  KINDS,
  LABELS,
  MANAGED_BY,
  type Kyma,
  type KymaModule,
  type KymaModuleStatus,
  type KymaStatus,
  type ModuleConfig,
  type ResourceState,
  splitApiVersion,
} from '@skr-watcher/api';
import {
  applyCustomStatus,
  createIfAbsent,
  deleteIfExists,
  getCustomObject,
  getOrUndefined,
  isConflict,
  isNotFound,
  isUnreachable,
  KubeRequestError,
  readObject,
  type ClusterClient,
  type CustomObjectRef,
} from '@skr-watcher/kube';
import { apiVersionOf, refOf, type ReconcileContext } from './context.js';
import { ensureSkrCrds, forgetCrdCheck } from './crds.js';
import { addFinalizer } from './finalizers.js';
import { isModuleFailure, resolveModule } from './modules.js';
import { deleteModuleConfig, mirrorModuleCr, moduleConfigsOf, readModuleConfig } from './module-config.js';
import { parseKyma } from './shapes.js';
import { reconcileSkrWebhook, type SkrWebhookOutcome } from './registration.js';
import {
  CONDITIONS,
  conditionsFor,
  isResourceState,
  kymaStatusChanged,
  summarize,
  worstState,
} from './status.js';
import { reconcileSyncResource, syncResourcesOf, type SyncResourceOutcome } from './sync-resource.js';

export interface KymaOutcome {
  state: ResourceState | undefined;
  requeueAfterMs: number | undefined;
}

/** Where the SKR Kyma lives: `kyma-system/default`, or `spec.sync.namespace`. */
export function skrKymaRef(kyma: Kyma): CustomObjectRef {
  return refOf('kyma', kyma.spec.sync?.namespace || DEFAULTS.skrNamespace, DEFAULTS.skrKymaName);
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

export async function reconcileLiveKyma(ctx: ReconcileContext, kyma: Kyma): Promise<KymaOutcome> {
  const kymaName = kyma.metadata.name;
  const kymaNamespace = kyma.metadata.namespace ?? ctx.namespace;
  const log = ctx.logger.child({ kyma: `${kymaNamespace}/${kymaName}` });
  await addFinalizer(ctx, refOfKyma(ctx, kyma), kyma.metadata);

  const failSkr = async (failure: SkrFailure): Promise<never> => {
    const status = kymaStatus(ctx, kyma.status, 'Error', kyma.status?.modules ?? [], [
      { type: CONDITIONS.skrConnected, ok: false, reason: failure.reason, message: failure.message },
    ]);
    if (kymaStatusChanged(kyma.status, status))
      await writeKymaStatus(ctx, ctx.kcp, refOfKyma(ctx, kyma), status);
    await ctx.events.warning(eventTarget(ctx, kyma), failure.reason, failure.message);
    throw new Error(`reconcile Kyma ${kymaNamespace}/${kymaName}: ${failure.message}`, { cause: failure });
  };

  // KCP reads that do not depend on the SKR start now and are awaited where needed.
  const configsRead = moduleConfigsOf(ctx, kymaName);
  const syncsRead = syncResourcesOf(ctx, kymaName);
  configsRead.catch(() => undefined);
  syncsRead.catch(() => undefined);

  let lookup;
  try {
    lookup = await ctx.skrClients.forKyma(kymaName);
  } catch (error) {
    // Reading the Secret is a KCP call: its failures back off like any other KCP failure.
    if (error instanceof KubeRequestError) throw error;
    return failSkr(new SkrFailure('KubeconfigInvalid', messageOf(error), { cause: error }));
  }
  if (!lookup) {
    return failSkr(
      new SkrFailure(
        'KubeconfigMissing',
        `no Secret in ${ctx.namespace} labelled ${LABELS.kymaName}=${kymaName} with key ${DEFAULTS.kubeconfigSecretKey}`,
      ),
    );
  }
  const skr = lookup.client;
  let skrKyma: Kyma;
  let modules: KymaModuleStatus[];
  const syncOutcomes: SyncResourceOutcome[] = [];
  let webhook: SkrWebhookOutcome | undefined;
  try {
    try {
      const installed = await ensureSkrCrds(skr, ctx.crdDir);
      if (installed.length > 0) log.info({ crds: installed }, 'installed CRDs in the SKR');
      skrKyma = await ensureSkrKyma(ctx, kyma, skr);
    } catch (error) {
      if (isNotFound(error)) forgetCrdCheck(skr);
      throw new SkrFailure(isUnreachable(error) ? 'SKRUnreachable' : 'SKRKymaFailed', messageOf(error), {
        cause: error,
      });
    }
    modules = await reconcileModules(ctx, kyma, skrKyma, skr, await configsRead);
    for (const sync of await syncsRead) {
      syncOutcomes.push(await reconcileSyncResource(ctx, skr, sync));
    }
    if (ctx.registration) {
      webhook = await reconcileSkrWebhook(ctx, ctx.registration, kyma, skr, skrKymaRef(kyma), modules);
    }
  } catch (error) {
    if (error instanceof SkrFailure) return failSkr(error);
    // Only SKR calls get as far as timing out here in practice; a KCP that stopped answering fails the status write too.
    if (isUnreachable(error))
      return failSkr(new SkrFailure('SKRUnreachable', messageOf(error), { cause: error }));
    throw error; // a KCP failure: back off
  }

  const moduleFailures = modules.filter((module) => module.state !== 'Ready');
  const syncFailures = syncOutcomes.flatMap((outcome) => outcome.failures);
  const state = worstState([
    ...modules.map((m) => m.state),
    ...syncOutcomes.map((o) => o.state),
    ...(webhook ? [webhook.state] : []),
  ]);
  const status = kymaStatus(ctx, kyma.status, state, modules, [
    { type: CONDITIONS.skrConnected, ok: true, reason: 'Connected', message: `SKR API server ${skr.server}` },
    moduleFailures.length === 0
      ? {
          type: CONDITIONS.modulesReady,
          ok: true,
          reason: 'Ready',
          message: `${modules.length} module(s) ready`,
        }
      : {
          type: CONDITIONS.modulesReady,
          ok: false,
          reason: 'ModulesNotReady',
          message: summarize(moduleFailures.map((m) => ({ name: m.name, message: m.message }))),
        },
    syncFailures.length === 0
      ? {
          type: CONDITIONS.syncResourcesApplied,
          ok: true,
          reason: 'Applied',
          message: `${syncOutcomes.length} SyncResource(s) applied`,
        }
      : {
          type: CONDITIONS.syncResourcesApplied,
          ok: false,
          reason: 'ItemsFailed',
          message: summarize(syncFailures),
        },
    ...(webhook ? [webhook.condition] : []),
  ]);
  if (kymaStatusChanged(kyma.status, status)) {
    await writeKymaStatus(ctx, ctx.kcp, refOfKyma(ctx, kyma), status);
    log.info({ state, modules: modules.length }, 'Kyma status changed');
    if (state === 'Error') {
      const failures = [...moduleFailures.filter((m) => m.state === 'Error'), ...syncFailures];
      await ctx.events.warning(eventTarget(ctx, kyma), 'ReconcileFailed', summarize(failures));
    }
  }
  if (kymaStatusChanged(skrKyma.status, status)) {
    try {
      await writeKymaStatus(ctx, skr, skrKymaRef(kyma), status);
    } catch (error) {
      if (isUnreachable(error)) throw error;
      log.warn({ err: error }, 'could not write the SKR Kyma status');
    }
  }
  const requeueAfterMs = ctx.requeue[state === 'Deleting' ? 'Processing' : state];
  // A webhook probe that is out is looked at again when its answer is due.
  return { state, requeueAfterMs: Math.min(requeueAfterMs, webhook?.requeueAfterMs ?? Infinity) };
}

/** Like Promise.all, but waits for every promise, so no work of this pass runs on after it has failed. */
async function settleAll<T>(promises: Promise<T>[]): Promise<T[]> {
  const results = await Promise.allSettled(promises);
  const failed = results.find((result) => result.status === 'rejected');
  if (failed) throw failed.reason;
  return results.map((result) => (result as PromiseFulfilledResult<T>).value);
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

export function refOfKyma(ctx: ReconcileContext, kyma: Kyma): CustomObjectRef {
  return refOf('kyma', kyma.metadata.namespace ?? ctx.namespace, kyma.metadata.name);
}

export function eventTarget(ctx: ReconcileContext, kyma: Kyma) {
  return {
    namespace: kyma.metadata.namespace ?? ctx.namespace,
    name: kyma.metadata.name,
    ...(kyma.metadata.uid ? { uid: kyma.metadata.uid } : {}),
  };
}

export function kymaStatus(
  ctx: ReconcileContext,
  previous: KymaStatus | undefined,
  state: ResourceState,
  modules: KymaModuleStatus[],
  conditions: Parameters<typeof conditionsFor>[0],
): KymaStatus {
  const now = ctx.clock();
  // Conditions not given this time (e.g. ModulesReady when the SKR was unreachable) keep their last value.
  // Only our own condition types: applying another controller's condition would make us co-own it.
  const ours = new Set<string>(Object.values(CONDITIONS));
  const kept = (previous?.conditions ?? []).filter(
    (c) => ours.has(c.type) && !conditions.some((input) => input.type === c.type),
  );
  return {
    state,
    modules,
    conditions: [...conditionsFor(conditions, previous?.conditions, now), ...kept],
    lastOperation: { operation: `reconciled: ${state}`, lastUpdateTime: now.toISOString() },
  };
}

export async function writeKymaStatus(
  ctx: ReconcileContext,
  cluster: ClusterClient,
  ref: CustomObjectRef,
  status: KymaStatus,
): Promise<void> {
  await applyCustomStatus(
    cluster.custom,
    ref,
    {
      apiVersion: apiVersionOf('kyma'),
      kind: KINDS.kyma.kind,
      metadata: { name: ref.name, namespace: ref.namespace },
      status,
    },
    { fieldManager: FIELD_MANAGER, force: true },
  );
}

/**
 * The SKR Kyma, created from the KCP Kyma's spec when absent. After that its spec.modules is the user's
 * source of truth: the agent reads it for resolution and never writes the SKR Kyma's spec again.
 */
async function ensureSkrKyma(ctx: ReconcileContext, kyma: Kyma, skr: ClusterClient): Promise<Kyma> {
  const ref = skrKymaRef(kyma);
  const what = `Kyma ${ref.namespace}/${ref.name} in ${skr.name}`;
  const existing = await getCustomObject(skr.custom, ref);
  if (existing !== undefined) return parseKyma(existing, what);

  const namespace = await getOrUndefined(`read Namespace ${ref.namespace} in ${skr.name}`, () =>
    skr.core.readNamespace({ name: ref.namespace }),
  );
  if (!namespace) {
    try {
      await skr.core.createNamespace({
        body: { metadata: { name: ref.namespace, labels: { [LABELS.managedBy]: MANAGED_BY } } },
      });
    } catch (error) {
      if (!isConflict(error))
        throw new KubeRequestError(`create Namespace ${ref.namespace} in ${skr.name}`, error);
    }
  }
  const body = {
    apiVersion: apiVersionOf('kyma'),
    kind: KINDS.kyma.kind,
    metadata: {
      name: ref.name,
      namespace: ref.namespace,
      labels: {
        [LABELS.managedBy]: MANAGED_BY,
        [LABELS.watchedBy]: DEFAULTS.manager,
        [LABELS.kymaName]: kyma.metadata.name,
      },
    },
    spec: {
      ...(kyma.spec.channel ? { channel: kyma.spec.channel } : {}),
      modules: kyma.spec.modules ?? [],
    },
  };
  try {
    const created = await skr.custom.createNamespacedCustomObject({ ...ref, body });
    ctx.logger.info(
      { kyma: kyma.metadata.name, skrKyma: `${ref.namespace}/${ref.name}` },
      'created the SKR Kyma',
    );
    return parseKyma(created, what);
  } catch (error) {
    if (!isConflict(error)) throw new KubeRequestError(`create ${what}`, error);
    return parseKyma(await getCustomObject(skr.custom, ref), what);
  }
}

/** Identity of a Module CR as recorded in a Kyma module status or a ModuleConfig. */
interface ModuleCrRef {
  apiVersion: string;
  kind: string;
  name: string;
  namespace?: string;
}

function recordedModuleCr(
  status: KymaModuleStatus | undefined,
  config: ModuleConfig | undefined,
): ModuleCrRef | undefined {
  if (config) {
    const { apiVersion, kind, metadata } = config.spec.resource;
    return {
      apiVersion,
      kind,
      name: metadata.name,
      ...(metadata.namespace ? { namespace: metadata.namespace } : {}),
    };
  }
  const resource = status?.resource;
  if (!resource?.kind || !resource.name) return undefined;
  return {
    apiVersion: resource.group ? `${resource.group}/${resource.version}` : resource.version,
    kind: resource.kind,
    name: resource.name,
    ...(resource.namespace ? { namespace: resource.namespace } : {}),
  };
}

async function reconcileModules(
  ctx: ReconcileContext,
  kyma: Kyma,
  skrKyma: Kyma,
  skr: ClusterClient,
  configs: Map<string, ModuleConfig>,
): Promise<KymaModuleStatus[]> {
  const kymaName = kyma.metadata.name;
  const wanted = skrKyma.spec.modules ?? [];
  const channel = skrKyma.spec.channel ?? kyma.spec.channel;
  const skrNamespace = skrKymaRef(kyma).namespace;
  // Modules are independent of each other: one round trip of latency for all of them, not one each.
  const statuses = await settleAll(
    wanted.map((module) => reconcileModule(ctx, kymaName, module, channel, skrNamespace, skr)),
  );

  // Modules no longer wanted: their ModuleConfig goes, and a Module CR the agent created goes with it.
  const wantedNames = new Set(wanted.map((module) => module.name));
  const previousStatus = new Map((kyma.status?.modules ?? []).map((module) => [module.name, module]));
  const dropped = new Set(
    [...configs.keys(), ...previousStatus.keys()].filter((name) => !wantedNames.has(name)),
  );
  for (const name of dropped) {
    const config = configs.get(name);
    const moduleCr = recordedModuleCr(previousStatus.get(name), config);
    if (moduleCr) {
      const current = await readObject(skr.objects, moduleCr);
      if (current?.metadata?.labels?.[LABELS.managedBy] === MANAGED_BY)
        await deleteIfExists(skr.objects, moduleCr);
    }
    await deleteModuleConfig(ctx, kymaName, name, config);
    ctx.logger.info({ kyma: kymaName, module: name }, 'module disabled; ModuleConfig removed');
  }
  return statuses;
}

async function reconcileModule(
  ctx: ReconcileContext,
  kyma: string,
  module: KymaModule,
  kymaChannel: string | undefined,
  skrNamespace: string,
  skr: ClusterClient,
): Promise<KymaModuleStatus> {
  // Read fresh (not from a list that may lag our own last write): whether to write depends on it.
  const configRead = readModuleConfig(ctx, kyma, module.name);
  configRead.catch(() => undefined);
  const resolved = await resolveModule(ctx, module, kymaChannel, skrNamespace);
  if (isModuleFailure(resolved)) {
    // The mirror of an existing Module CR stays: a catalog problem in KCP is no reason to lose user data.
    return { name: module.name, state: 'Error', message: `${resolved.reason}: ${resolved.message}` };
  }
  const { group, version } = splitApiVersion(resolved.resource.apiVersion);
  const base: KymaModuleStatus = {
    name: module.name,
    ...(resolved.channel ? { channel: resolved.channel } : {}),
    version: resolved.version,
    template: resolved.template.metadata.name,
    state: 'Ready',
    resource: {
      group,
      version,
      kind: resolved.resource.kind,
      name: resolved.resource.name,
      namespace: resolved.resource.namespace,
    },
  };
  let moduleCr: (KubernetesObject & { spec?: unknown; status?: unknown }) | undefined;
  try {
    moduleCr = (await readObject(skr.objects, resolved.resource)) as
      (KubernetesObject & { spec?: unknown; status?: unknown }) | undefined;
    if (!moduleCr) {
      if ((module.customResourcePolicy ?? 'CreateAndDelete') === 'Ignore') {
        if (await configRead) await deleteModuleConfig(ctx, kyma, module.name);
        return {
          ...base,
          state: 'Warning',
          message: `Module CR ${resolved.resource.kind} ${resolved.resource.namespace}/${resolved.resource.name} absent; customResourcePolicy Ignore leaves it to the user`,
        };
      }
      const data = resolved.template.spec.data!;
      const body = {
        apiVersion: data.apiVersion,
        kind: data.kind,
        metadata: {
          name: resolved.resource.name,
          namespace: resolved.resource.namespace,
          labels: { [LABELS.managedBy]: MANAGED_BY, [LABELS.watchedBy]: DEFAULTS.manager },
        },
        ...(data.spec ? { spec: structuredClone(data.spec) } : {}),
      };
      moduleCr =
        (await createIfAbsent(skr.objects, body, FIELD_MANAGER)) ??
        (await readObject(skr.objects, resolved.resource));
      if (!moduleCr) throw new Error(`Module CR ${resolved.resource.name} vanished right after its creation`);
      ctx.logger.info(
        { kyma, module: module.name, gvk: `${data.apiVersion}/${data.kind}` },
        'created Module CR from template',
      );
    }
  } catch (error) {
    // An SKR answer about this module only (e.g. its CRD is not installed) fails the module; no answer fails the pass.
    if (isUnreachable(error) || !(error instanceof KubeRequestError)) throw error;
    return { ...base, state: 'Error', message: error.message };
  }
  const crState = (moduleCr.status as { state?: unknown } | undefined)?.state;
  const state: ResourceState = isResourceState(crState) ? crState : 'Ready';
  await mirrorModuleCr(ctx, kyma, module.name, moduleCr, state, await configRead);
  return { ...base, state, ...(state !== 'Ready' ? { message: `Module CR state ${state}` } : {}) };
}
