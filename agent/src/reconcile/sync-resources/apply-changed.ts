// The targeted path of a SyncResource: one changed SyncResource is applied into its Kyma's SKR at once, when its
// watch reports a spec change, under the guard of the full pass; the Kyma's full pass follows later (its status,
// every other SyncResource). It runs in the SyncResource's lane, so it never applies at the same time as the pass.
import { isDeepStrictEqual } from 'node:util';
import { LABELS, type Kyma, type RawSyncResource, type ResourceState } from '@skr-watcher/api';
import type { ClusterClient } from '@skr-watcher/kube';
import { agentOwnedObjects, type AgentOwnedObjects } from '../agent-owned.js';
import type { ReconcileContext } from '../context.js';
import { manifestsOf } from '../manifests/manifests-of-kyma.js';
import { applySyncResource } from './apply-sync-resource.js';
import { failuresOf, type SyncResourceFailure, type SyncResourceOutcome } from './item-status.js';
import { inSyncResourceLane, recordTargetedApply } from './lane.js';
import { readSyncResource } from './sync-resources-of-kyma.js';

/** What the targeted path did with one SyncResource change. */
export type SyncResourceApplyOutcome =
  /**
   * Applied (or found in place); `state` is the SyncResource's. `kymaStatusChanged`: what the Kyma's status says of
   * it (its state, its failed items, that it exists) may differ now, so the Kyma's full pass has something to write.
   */
  | { outcome: 'applied'; state: ResourceState; kymaStatusChanged: boolean }
  /** Nothing to do here: the SyncResource is gone or names another Kyma, or the Kyma is absent, paused or deleting,
   * or has no SKR credentials: the full pass decides. */
  | SkippedApply;

type SkippedApply = { outcome: 'skipped'; reason: string };

/** When the steps of one targeted apply ended (epoch ms), for the debug log bench:e2e reads. */
export interface SyncResourceApplySteps {
  /** The SyncResource generation applied. */
  generation?: number;
  /** The objects were applied in the SKR (the change is visible there from here); the status write follows. */
  skrAppliedAt?: number;
}

/** What the targeted path applies: the Kyma as read now, its SyncResource, its SKR. */
interface ApplyTarget {
  kyma: Kyma;
  kymaName: string;
  sync: RawSyncResource;
  skr: ClusterClient;
}

/**
 * The targeted path: one SyncResource of `kymaName` changed, so it alone is applied into the Kyma's SKR now, under
 * the same guard as in the full pass (allow-list; the agent's own objects: the Module CRs the Kyma's last status
 * names and its Manifests' objects), its status written; the Kyma's full pass follows later (its status, every other
 * SyncResource). `kyma` is the KCP Kyma as read now (undefined: absent); `started` is called once the apply has its
 * lane (it reads everything after).
 */
export function applyChangedSyncResource(
  ctx: ReconcileContext,
  kyma: Promise<Kyma | undefined>,
  kymaName: string,
  name: string,
  started: () => void = () => {},
  steps: SyncResourceApplySteps = {},
  superseded: () => boolean = () => false,
): Promise<SyncResourceApplyOutcome> {
  kyma.catch(() => undefined);
  return inSyncResourceLane(ctx, kymaName, name, async () => {
    started();
    const syncRead = readSyncResource(ctx, name);
    syncRead.catch(() => undefined);
    const target = await targetOf(ctx, await kyma, kymaName, syncRead);
    if ('outcome' in target) return target;
    return applyTarget(ctx, target, steps, superseded);
  });
}

/** The Kyma, SyncResource and SKR to apply to, or why the change is left to the full pass. */
async function targetOf(
  ctx: Pick<ReconcileContext, 'skrClients'>,
  kyma: Kyma | undefined,
  kymaName: string,
  syncRead: Promise<RawSyncResource | undefined>,
): Promise<ApplyTarget | SkippedApply> {
  if (!kyma) return skipped('Kyma absent');
  if (kyma.metadata.labels?.[LABELS.skipReconciliation] === 'true') return skipped('Kyma paused');
  if (kyma.metadata.deletionTimestamp) return skipped('Kyma deleting');
  const sync = await syncRead;
  if (!sync) return skipped('SyncResource absent');
  if (sync.spec.kyma !== kymaName) return skipped('SyncResource of another Kyma');
  const lookup = await ctx.skrClients.forKyma(kymaName);
  if (!lookup) return skipped('no kubeconfig Secret');
  return { kyma, kymaName, sync, skr: lookup.client };
}

function skipped(reason: string): SkippedApply {
  return { outcome: 'skipped', reason };
}

async function applyTarget(
  ctx: ReconcileContext,
  target: ApplyTarget,
  steps: SyncResourceApplySteps,
  superseded: () => boolean,
): Promise<SyncResourceApplyOutcome> {
  const { sync } = target;
  const owned = await ownedObjectsOf(ctx, target.kyma, target.kymaName);
  steps.generation = sync.metadata.generation;
  const outcome = await applySyncResource(ctx, target.skr, sync, owned, {
    onApplied: () => {
      steps.skrAppliedAt = Date.now();
    },
    statusLeftToNext: superseded,
  });
  recordTargetedApply(ctx.kcp, sync);
  return { outcome: 'applied', state: outcome.state, kymaStatusChanged: kymaStatusChanged(sync, outcome) };
}

/** The guard of the full pass: the Module CRs (from the Kyma's last status) and the Kyma's Manifests' objects. */
async function ownedObjectsOf(
  ctx: ReconcileContext,
  kyma: Kyma,
  kymaName: string,
): Promise<AgentOwnedObjects> {
  const manifests = ctx.modules ? await manifestsOf(ctx, kymaName) : undefined;
  return agentOwnedObjects({
    modules: kyma.status?.modules ?? [],
    manifestObjects: [...(manifests?.values() ?? [])].flatMap((manifest) => manifest.status?.synced ?? []),
  });
}

/**
 * The Kyma's status counts its SyncResources and names their state and failed items: unchanged, a full pass would
 * write nothing for this change (a first apply and a deletion change the count).
 */
function kymaStatusChanged(sync: RawSyncResource, outcome: SyncResourceOutcome): boolean {
  return (
    sync.status?.state === undefined ||
    sync.metadata.deletionTimestamp !== undefined ||
    sync.status.state !== outcome.state ||
    !isDeepStrictEqual(
      failureLines(failuresOf(sync.metadata.name, sync.status.items)),
      failureLines(outcome.failures),
    )
  );
}

function failureLines(failures: SyncResourceFailure[]): string[] {
  return failures.map((failure) => `${failure.name}: ${failure.message}`);
}
