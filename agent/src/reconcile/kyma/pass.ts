// One reconcile pass of a live KCP Kyma, as a list of named steps: the finalizer, the SKR client, the SKR side
// (CRDs and the SKR Kyma), then SKR_STEPS in order (the image pull Secret, modules, the module catalog,
// SyncResources, the SKR webhook), then status on both Kymas. Each pass reads both clusters and converges; nothing is
// remembered between passes that the clusters do not hold, but what lets a pass with unchanged inputs rest
// (pass-inputs.ts), which only saves work. A failure of the whole SKR side (unreachable, no
// credentials, no CRDs) ends the pass with `SKRConnected=False`, an Event, and a throw that backs off; a KCP failure
// (recognised by the KCP client itself, whatever socket error it was) throws as it is.
import { DEFAULTS, LABELS, type Kyma, type ResourceState, type SyncedObject } from '@skr-watcher/api';
import { isNotFound, isUnreachable, KubeRequestError, type ClusterClient } from '@skr-watcher/kube';
import { listWatchers } from '../../registration/index.js';
import type { Logger } from '@skr-watcher/telemetry';
import { agentOwnedObjects } from '../agent-owned.js';
import { eventTarget, refOfKyma, type ReconcileContext } from '../context.js';
import { leaveDeletedModules } from '../manifests/install.js';
import { isRefusal, markManifestsRefused } from '../manifests/skr-refused.js';
import { mandatoryModules, readCatalog, syncModuleCatalog } from '../modules/catalog.js';
import { moduleConfigsOf } from '../modules/module-config.js';
import { reconcileModules, wantedModules } from '../modules/modules.js';
import { CONDITIONS, kymaStatus, kymaStatusChanged, summarize, writeKymaStatus } from '../status.js';
import { reconcileSyncResource, syncResourcesOf } from '../sync-resources/sync-resource.js';
import { ensureSkrCrds, forgetCrdCheck } from './crds.js';
import { addFinalizerAt } from './finalizers.js';
import { syncImagePullSecret } from './image-pull-secret.js';
import { conditionsOf, modulesWithoutSkr, stateOf, writeStatuses, type PassFindings } from './pass-status.js';
import { passInputsDigest, statusAtRest, type FullPasses } from './pass-inputs.js';
import { ensureSkrKyma, skrKymaRef, watchedLabels } from './skr-kyma.js';
import { reconcileSkrWebhook, webhookAtRest } from './skr-webhook.js';

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
export class SkrFailure extends Error {
  constructor(
    readonly reason: string,
    message: string,
    options?: { cause: unknown },
  ) {
    super(message, options);
    this.name = 'SkrFailure';
  }
}

/** The pass under way: the Kyma, its log, and the KCP reads started at once (awaited where needed). */
interface LivePass {
  ctx: ReconcileContext;
  kyma: Kyma;
  /** namespace/name */
  key: string;
  log: Logger;
  /** The KCP Kyma's resourceVersion after the finalizer step. */
  resourceVersion: string | undefined;
  reads: {
    configs: ReturnType<typeof moduleConfigsOf>;
    syncs: ReturnType<typeof syncResourcesOf>;
    catalog: ReturnType<typeof readCatalog>;
    watchers: ReturnType<typeof listWatchers>;
  };
}

/** The SKR as the steps after the SKR Kyma see it. */
interface SkrSide {
  skr: ClusterClient;
  skrKyma: Kyma;
  skrNamespace: string;
  watchers: Awaited<LivePass['reads']['watchers']>;
  /** The objects the Kyma's Manifests keep in the SKR, filled by the modules step. */
  manifestObjects: SyncedObject[];
}

interface SkrStep {
  name: string;
  run(pass: LivePass, side: SkrSide, found: PassFindings): Promise<void>;
}

/** The steps run against the SKR once its Kyma is in place, in this order. */
const SKR_STEPS: readonly SkrStep[] = [
  // Before the Manifests: a module's first Pods find the Secret they name.
  { name: 'image pull Secret', run: pullSecretStep },
  { name: 'modules', run: modulesStep },
  { name: 'module catalog', run: catalogStep },
  { name: 'SyncResources', run: syncResourcesStep },
  { name: 'SKR webhook', run: webhookStep },
];

/**
 * One pass of a live Kyma. With `fullPasses`, a pass whose inputs are those of the Kyma's last full pass (within its
 * re-apply interval) and whose webhook is not in doubt leaves the SKR alone after reading the SKR Kyma (pass-inputs.ts).
 */
export async function reconcileLiveKyma(
  ctx: ReconcileContext,
  kyma: Kyma,
  fullPasses?: FullPasses,
): Promise<KymaOutcome> {
  const pass = await beginPass(ctx, kyma);
  const skr = await connectSkr(pass);
  const found: PassFindings = { modules: [], syncOutcomes: [] };
  let side: SkrSide;
  let inputs: string | undefined;
  try {
    side = await ensureSkrSide(pass, skr);
    inputs = fullPasses ? await inputsOf(pass, side) : undefined;
    if (fullPasses && inputs !== undefined) {
      const rested = await restingPass(pass, side, fullPasses, inputs);
      if (rested) return rested;
    }
    for (const step of SKR_STEPS) await step.run(pass, side, found);
  } catch (error) {
    if (error instanceof SkrFailure) return failSkr(pass, error);
    // A KCP request that got no answer (a write that timed out) is the KCP's failure, never the SKR's connection.
    if (pass.ctx.kcp.failedRequest(error)) throw error;
    if (isUnreachable(error))
      return failSkr(pass, new SkrFailure('SKRUnreachable', messageOf(error), { cause: error }));
    throw error; // a KCP failure: back off
  }
  const outcome = await finishPass(pass, side, found);
  // Only a pass that found everything in place, and no webhook object put back (callbacks may have been lost while
  // it was gone), lets the next passes with these inputs rest.
  if (fullPasses && inputs !== undefined && outcome.state === 'Ready' && !found.webhook?.restored)
    fullPasses.record(pass.key, inputs, ctx.clock().getTime());
  return outcome;
}

/** The digest of what the pass has read so far: the KCP reads started at its beginning, and the SKR Kyma. */
async function inputsOf(pass: LivePass, side: SkrSide): Promise<string | undefined> {
  const [catalog, configs, syncs] = await Promise.all([
    pass.reads.catalog,
    pass.reads.configs,
    pass.reads.syncs,
  ]);
  return passInputsDigest(pass.ctx, {
    kyma: pass.kyma,
    skrKyma: side.skrKyma,
    skr: side.skr,
    catalog,
    watchers: side.watchers,
    configs,
    syncs,
  });
}

/**
 * The pass at rest: its inputs are those of the Kyma's last full pass, its status is Ready and the webhook is not in
 * doubt. Nothing is written (but a probe that is due); the Kyma's status stays what that full pass wrote.
 */
async function restingPass(
  pass: LivePass,
  side: SkrSide,
  fullPasses: FullPasses,
  inputs: string,
): Promise<KymaOutcome | undefined> {
  const { ctx, kyma } = pass;
  if (!statusAtRest(kyma) || !fullPasses.covers(pass.key, inputs, ctx.clock().getTime())) return undefined;
  const webhook = ctx.registration
    ? await webhookAtRest(ctx, ctx.registration, kyma, side.skr, skrKymaRef(kyma))
    : { doubt: false as const };
  if (webhook.doubt) {
    fullPasses.distrust(pass.key);
    return undefined;
  }
  pass.log.debug('inputs unchanged since the last full pass: the SKR left as it is');
  return {
    state: 'Ready',
    requeueAfterMs: Math.min(ctx.requeue.Ready, webhook.requeueAfterMs ?? Infinity),
    resourceVersion: pass.resourceVersion,
  };
}

/** Step: our finalizer on the Kyma; the KCP reads that do not depend on the SKR start now. */
async function beginPass(ctx: ReconcileContext, kyma: Kyma): Promise<LivePass> {
  const kymaName = kyma.metadata.name;
  const resourceVersion = await addFinalizerAt(ctx, refOfKyma(ctx, kyma), kyma.metadata);
  const reads = {
    configs: moduleConfigsOf(ctx, kymaName),
    syncs: syncResourcesOf(ctx, kymaName),
    catalog: readCatalog(ctx),
    watchers: listWatchers(ctx.kcp, ctx.namespace, ctx.caches?.watchers()),
  };
  for (const read of Object.values(reads)) (read as Promise<unknown>).catch(() => undefined);
  const key = `${kyma.metadata.namespace ?? ctx.namespace}/${kymaName}`;
  const log = ctx.logger.child({ kyma: key });
  return { ctx, kyma, key, log, resourceVersion, reads };
}

/** Step: the SKR client from the Kyma's kubeconfig Secret. */
async function connectSkr(pass: LivePass): Promise<ClusterClient> {
  const { ctx, kyma } = pass;
  let lookup;
  try {
    lookup = await ctx.skrClients.forKyma(kyma.metadata.name);
  } catch (error) {
    // Reading the Secret is a KCP call: its failures back off like any other KCP failure.
    if (error instanceof KubeRequestError || ctx.kcp.failedRequest(error)) throw error;
    return failSkr(pass, new SkrFailure('KubeconfigInvalid', messageOf(error), { cause: error }));
  }
  if (lookup) return lookup.client;
  await leaveDeletedModules(ctx, eventTarget(ctx, kyma));
  return failSkr(
    pass,
    new SkrFailure(
      'KubeconfigMissing',
      `no Secret in ${ctx.namespace} labelled ${LABELS.kymaName}=${kyma.metadata.name} with key ${DEFAULTS.kubeconfigSecretKey}`,
    ),
  );
}

/** Step: this project's CRDs in the SKR, then the SKR Kyma with the labels the Watchers select. */
async function ensureSkrSide(pass: LivePass, skr: ClusterClient): Promise<SkrSide> {
  const watchers = await pass.reads.watchers;
  try {
    const crds = await ensureSkrCrds(skr, pass.ctx.crdDir);
    if (crds.installed.length > 0) pass.log.info({ crds: crds.installed }, 'installed CRDs in the SKR');
    if (crds.updated.length > 0)
      pass.log.info({ crds: crds.updated }, 'updated CRDs an older agent installed in the SKR');
    const skrKyma = await ensureSkrKyma(pass.ctx, pass.kyma, skr, watchedLabels(watchers));
    return { skr, skrKyma, skrNamespace: skrKymaRef(pass.kyma).namespace, watchers, manifestObjects: [] };
  } catch (error) {
    if (pass.ctx.kcp.failedRequest(error)) throw error;
    if (isNotFound(error)) forgetCrdCheck(skr);
    throw new SkrFailure(isUnreachable(error) ? 'SKRUnreachable' : 'SKRKymaFailed', messageOf(error), {
      cause: error,
    });
  }
}

async function pullSecretStep({ ctx }: LivePass, side: SkrSide, found: PassFindings): Promise<void> {
  const name = ctx.modules?.skrImagePullSecret;
  if (name) found.pullSecret = await syncImagePullSecret(ctx, side.skr, side.skrNamespace, name);
}

async function modulesStep(pass: LivePass, side: SkrSide, found: PassFindings): Promise<void> {
  const { ctx, kyma } = pass;
  found.modules = await reconcileModules(
    { ctx, kyma, skr: side.skr },
    {
      wanted: wantedModules(side.skrKyma, mandatoryModules(await pass.reads.catalog)),
      kymaChannel: side.skrKyma.spec.channel ?? kyma.spec.channel,
      skrNamespace: side.skrNamespace,
      configs: await pass.reads.configs,
      manifestObjects: side.manifestObjects,
    },
  );
}

async function catalogStep(pass: LivePass, side: SkrSide, found: PassFindings): Promise<void> {
  if (pass.kyma.spec.sync?.moduleCatalog === false) return;
  found.catalog = await syncModuleCatalog(pass.kyma, side.skr, side.skrNamespace, await pass.reads.catalog);
}

async function syncResourcesStep(pass: LivePass, side: SkrSide, found: PassFindings): Promise<void> {
  const pullSecretName = pass.ctx.modules?.skrImagePullSecret;
  // What the Kyma's Manifests keep in the SKR is theirs: no SyncResource may touch it.
  const owned = agentOwnedObjects({
    modules: found.modules,
    manifestObjects: side.manifestObjects,
    ...(pullSecretName ? { imagePullSecret: { name: pullSecretName, namespace: side.skrNamespace } } : {}),
  });
  for (const sync of await pass.reads.syncs) {
    found.syncOutcomes.push(await reconcileSyncResource(pass.ctx, side.skr, sync, owned));
  }
}

async function webhookStep({ ctx, kyma }: LivePass, side: SkrSide, found: PassFindings): Promise<void> {
  if (!ctx.registration) return;
  const skrRef = skrKymaRef(kyma);
  found.webhook = await reconcileSkrWebhook(
    ctx,
    ctx.registration,
    kyma,
    side.skr,
    skrRef,
    found.modules,
    side.watchers,
  );
}

/** Step: status on both Kymas, an Event when the Kyma went to Error, and when to look again. */
async function finishPass(pass: LivePass, side: SkrSide, found: PassFindings): Promise<KymaOutcome> {
  const { ctx, kyma } = pass;
  const state = stateOf(found);
  const channel = side.skrKyma.spec.channel ?? kyma.spec.channel ?? DEFAULTS.channel;
  const status = kymaStatus(ctx, kyma, state, found.modules, conditionsOf(found, side.skr), channel);
  const resourceVersion = await writeStatuses(
    ctx,
    kyma,
    side.skrKyma,
    status,
    side.skr,
    pass.resourceVersion,
  );
  if (kymaStatusChanged(kyma.status, status)) {
    pass.log.info({ state, modules: found.modules.length }, 'Kyma status changed');
    if (state === 'Error') {
      const failures = [
        ...found.modules.filter((m) => m.state === 'Error'),
        ...found.syncOutcomes.flatMap((outcome) => outcome.failures),
      ];
      await ctx.events.warning(eventTarget(ctx, kyma), 'ReconcileFailed', summarize(failures));
    }
  }
  const requeueAfterMs = ctx.requeue[state === 'Deleting' ? 'Processing' : state];
  // A webhook probe that is out is looked at again when its answer is due.
  return {
    state,
    requeueAfterMs: Math.min(requeueAfterMs, found.webhook?.requeueAfterMs ?? Infinity),
    resourceVersion,
  };
}

/** Ends the pass on an SKR-side failure: `SKRConnected=False` with its reason, an Event, and a throw. */
async function failSkr({ ctx, kyma, key }: LivePass, failure: SkrFailure): Promise<never> {
  const status = kymaStatus(ctx, kyma, 'Error', modulesWithoutSkr(kyma.status?.modules ?? [], failure), [
    { type: CONDITIONS.skrConnected, ok: false, reason: failure.reason, message: failure.message },
  ]);
  if (kymaStatusChanged(kyma.status, status)) await writeKymaStatus(ctx.kcp, refOfKyma(ctx, kyma), status);
  if (isRefusal(failure.cause)) await markManifestsRefused(ctx, kyma.metadata.name, failure.message);
  await ctx.events.warning(eventTarget(ctx, kyma), failure.reason, failure.message);
  throw new Error(`reconcile Kyma ${key}: ${failure.message}`, { cause: failure });
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
