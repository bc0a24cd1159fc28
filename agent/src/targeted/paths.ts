// The "do it now" paths: work a single callback or watch event asks for, done before (and apart from) the Kyma's
// full pass. A callback about one SKR object puts back an object a module installed (drift.ts) or mirrors a Module
// CR into its ModuleConfig (module-mirror.ts); a SyncResource's spec change applies that one SyncResource into its
// SKR. What follows each (a full pass now, later, or none) is the router's decision (router.ts), not theirs.
import { isPaused } from '../reconcile/kyma/pass.js';
import type { ReconcileContext } from '../reconcile/context.js';
import { parseKymaKey } from '../reconcile/context.js';
import type { KymaReads } from '../reconcile/kyma-reads.js';
import type { MirrorLanes, ModuleCrChange, ModuleMirrorResult } from '../reconcile/modules/mirror-lanes.js';
import {
  applyChangedSyncResource,
  type SyncResourceApplyOutcome,
  type SyncResourceApplySteps,
} from '../reconcile/sync-resources/sync-resource.js';
import type { Kyma } from '@skr-watcher/api';
import type { Logger } from '@skr-watcher/telemetry';
import type { DriftOutcome, DriftReverter } from './drift.js';
import type { TargetedMetrics } from './metrics.js';
import { epochMs, mirrorChangedModuleCr, moduleOfChange, type MirrorSteps } from './module-mirror.js';

/** What a callback about one SKR object did: a drift revert, or a Module CR mirror (which may find no module). */
export type ObjectChangeResult =
  { path: 'drift'; outcome: DriftOutcome; reads: number } | ({ path: 'mirror' } & ModuleMirrorResult);

export interface TargetedPaths {
  /**
   * A callback named one SKR object. An object a module installed is put back from its Manifest's set (unless the
   * Kyma is paused); otherwise the Module CR it may be is mirrored into its ModuleConfig, waiting (briefly) for the
   * announced write to be stored. Runs in the object's mirror lane: never beside the full pass's mirror of it.
   */
  objectChanged(kymaKey: string, change: ModuleCrChange): Promise<ObjectChangeResult>;
  /** A SyncResource's spec changed: it alone is applied into its Kyma's SKR now. Waiting changes coalesce. */
  syncResourceChanged(kymaKey: string, name: string): Promise<SyncResourceApplyOutcome>;
}

export interface TargetedDeps {
  context: () => Promise<ReconcileContext>;
  kymas: KymaReads;
  lanes: MirrorLanes;
  revertDrift: DriftReverter;
  /** The Kyma from the watch cache: its status names the module a Module CR belongs to (a guess the read decides). */
  cachedKyma?: (kymaKey: string) => Kyma | undefined;
  namespace: string;
  logger: Logger;
  metrics?: TargetedMetrics;
}

export function createTargetedPaths(deps: TargetedDeps): TargetedPaths {
  const waiting = new WaitingApplies();
  return {
    objectChanged: (kymaKey, announced) => {
      const queuedAt = epochMs();
      return keyed(deps, kymaKey, (key) =>
        deps.lanes.mirror(key, announced, (change, superseded) =>
          objectChanged(deps, key, change, { queuedAt, superseded }),
        ),
      );
    },
    syncResourceChanged: (kymaKey, name) => {
      const queuedAt = epochMs();
      return keyed(deps, kymaKey, (key) =>
        waiting.join(`${key}\0${name}`, (lane) => applyOne(deps, key, name, { queuedAt, ...lane })),
      );
    },
  };
}

/** Runs `work` with the key as namespace/name (a bare name is in the agent's namespace); a bad key rejects. */
function keyed<T>(deps: TargetedDeps, kymaKey: string, work: (key: string) => Promise<T>): Promise<T> {
  try {
    const { namespace, name } = parseKymaKey(kymaKey, deps.namespace);
    return work(`${namespace}/${name}`);
  } catch (error) {
    return Promise.reject(error as Error);
  }
}

async function objectChanged(
  deps: TargetedDeps,
  kymaKey: string,
  change: ModuleCrChange,
  { queuedAt, superseded }: { queuedAt: number; superseded: () => boolean },
): Promise<ObjectChangeResult> {
  const ctx = await deps.context();
  const name = parseKymaKey(kymaKey, deps.namespace).name;
  const cached = deps.cachedKyma?.(kymaKey);
  if (!cached || !isPaused(cached)) {
    const drift = await deps.revertDrift(ctx, name, change);
    if (drift) return { path: 'drift', outcome: drift.outcome, reads: drift.reads };
  }
  const startedAt = epochMs();
  const steps: MirrorSteps = {};
  // As a pass takes it: from the watch cache at the version last read or written here, else a GET.
  const kyma = deps.kymas
    .forPass(ctx, kymaKey)
    .then((read) => (read && !isPaused(read) && !read.metadata.deletionTimestamp ? read : undefined));
  const guess = cached ? moduleOfChange(cached, change) : undefined;
  const result = await mirrorChangedModuleCr(ctx, name, kyma, change, steps, guess, superseded);
  deps.metrics?.mirrors.inc({ outcome: result.outcome });
  deps.metrics?.mirrorReads.observe(result.reads);
  // Timestamps of each step (epoch ms): bench:e2e reads them to say where an edit's milliseconds go.
  deps.logger.debug(
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
  return { path: 'mirror', ...result };
}

async function applyOne(
  deps: TargetedDeps,
  kymaKey: string,
  syncName: string,
  { queuedAt, started, superseded }: { queuedAt: number } & ApplyLane,
): Promise<SyncResourceApplyOutcome> {
  const ctx = await deps.context();
  const name = parseKymaKey(kymaKey, deps.namespace).name;
  const kyma = deps.kymas.forPass(ctx, kymaKey);
  let startedAt: number | undefined;
  const steps: SyncResourceApplySteps = {};
  try {
    const result = await applyChangedSyncResource(
      ctx,
      kyma,
      name,
      syncName,
      () => {
        started();
        startedAt = epochMs();
      },
      steps,
      superseded,
    );
    deps.metrics?.syncApplies.inc({ outcome: result.outcome });
    // Timestamps (epoch ms): bench:e2e reads them to say where a round trip's milliseconds go.
    deps.logger.debug(
      { kyma: kymaKey, syncResource: syncName, ...result, ...steps, queuedAt, startedAt, doneAt: epochMs() },
      'SyncResource applied on its change',
    );
    return result;
  } catch (error) {
    deps.metrics?.syncApplies.inc({ outcome: 'failed' });
    throw error;
  }
}

/** `started`: the apply has its lane (a new change from now on needs a new apply); `superseded`: one waits behind it. */
interface ApplyLane {
  started: () => void;
  superseded: () => boolean;
}

/**
 * Targeted applies queued and not started yet, by key: a change that arrives while one waits joins it (it reads the
 * SyncResource when it starts anyway); from its start, a new change needs a new apply.
 */
class WaitingApplies {
  private readonly waiting = new Map<string, Promise<SyncResourceApplyOutcome>>();

  join(
    key: string,
    apply: (lane: ApplyLane) => Promise<SyncResourceApplyOutcome>,
  ): Promise<SyncResourceApplyOutcome> {
    const queued = this.waiting.get(key);
    if (queued) return queued;
    const entry: { apply?: Promise<SyncResourceApplyOutcome> } = {};
    const leave = () => {
      if (this.waiting.get(key) === entry.apply) this.waiting.delete(key);
    };
    const applying = apply({ started: leave, superseded: () => this.waiting.has(key) }).finally(leave);
    entry.apply = applying;
    this.waiting.set(key, applying);
    return applying;
  }
}
