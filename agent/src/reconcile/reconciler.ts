// The Kyma reconciler: `reconcile(key) → { requeueAfterMs }`, level-triggered and idempotent, in
// controller-runtime's shape. It reads both clusters and converges them through the steps of reconcile/kyma (a
// live Kyma's pass) or its deletion; it throws (with context; API errors keep their HTTP `code` in the `cause`
// chain) only for failures that should back off: KCP errors, an unreachable SKR, a missing or broken kubeconfig
// Secret. Problems of one module or one SyncResource item are reported in status and Events instead.
//
// It keeps nothing between calls: the clients, the Kyma versions known (kyma-reads.ts), the last full passes
// (kyma/pass-inputs.ts), the mirror lanes and the metrics are built by the wiring (agent/src/manager) and passed in.
import { LABELS, type Kyma } from '@skr-watcher/api';
import { withinDeadline } from '@skr-watcher/kube';
import type { Logger } from '@skr-watcher/telemetry';
import { parseKymaKey, type ReconcileContext } from './context.js';
import { deleteKyma } from './kyma/deletion.js';
import { isPaused, reconcileLiveKyma } from './kyma/pass.js';
import type { FullPasses } from './kyma/pass-inputs.js';
import type { KymaReads } from './kyma-reads.js';
import { markOrphanedManifests } from './manifests/install.js';
import type { MirrorLanes } from './modules/mirror-lanes.js';
import type { PassMetrics } from './metrics.js';

/** When to look again (per state, or sooner); undefined: wait for the next trigger. */
export interface ReconcileResult {
  requeueAfterMs?: number;
}

export interface Reconciler {
  /** Reconciles the KCP Kyma `namespace/name`; throws for what should back off. */
  reconcile(kymaKey: string): Promise<ReconcileResult>;
}

/** What one pass needs, all built by the wiring. */
export interface ReconcilerDeps {
  /** The clients and settings every step reads; resolves once the pooled clients are built. */
  context: () => Promise<ReconcileContext>;
  kymas: KymaReads;
  /** One Kyma's passes run one at a time; a deletion waits for the Kyma's targeted mirrors. */
  lanes: MirrorLanes;
  namespace: string;
  logger: Logger;
  /** Every SKR request of one pass is aborted once this has passed. */
  deadlineMs: number;
  metrics?: PassMetrics;
  /** The last full pass of each Kyma: a pass with the same inputs leaves the SKR alone; none: every pass is full. */
  fullPasses?: FullPasses;
}

/** Epoch milliseconds, comparable with other processes' log lines. */
const epochMs = (): number => Date.now();

export function createKymaReconciler(deps: ReconcilerDeps): Reconciler {
  return {
    // The work queue never runs one Kyma twice at once; its lane keeps that true for direct callers too.
    reconcile: (kymaKey) => deps.lanes.run(kymaKey, () => measuredPass(deps, kymaKey)),
  };
}

async function measuredPass(deps: ReconcilerDeps, kymaKey: string): Promise<ReconcileResult> {
  const started = process.hrtime.bigint();
  const startedAt = epochMs();
  let label = 'failed';
  const seen: { runtimeId?: string } = {};
  try {
    const { result, label: outcome } = await withinDeadline(`reconcile ${kymaKey}`, deps.deadlineMs, () =>
      pass(deps, kymaKey, seen),
    );
    label = outcome;
    return result;
  } catch (error) {
    // The one log line of a failed reconcile (the work queue only retries it).
    deps.logger.warn({ kyma: kymaKey, runtimeId: seen.runtimeId, err: error }, 'reconcile failed');
    throw error;
  } finally {
    deps.metrics?.observe(label, Number(process.hrtime.bigint() - started) / 1e9);
    deps.logger.debug({ kyma: kymaKey, result: label, startedAt, doneAt: epochMs() }, 'Kyma reconciled');
  }
}

/** `seen` learns the Kyma's runtime-id as soon as it is read, so a failure's log line can name it. */
async function pass(
  deps: ReconcilerDeps,
  key: string,
  seen: { runtimeId?: string },
): Promise<{ result: ReconcileResult; label: string }> {
  const ctx = await deps.context();
  const { namespace, name } = parseKymaKey(key, deps.namespace);
  const kymaKey = `${namespace}/${name}`;
  try {
    const kyma = await deps.kymas.forPass(ctx, kymaKey);
    if (kyma === undefined) return await kymaGone(deps, ctx, kymaKey, namespace, name);
    seen.runtimeId = kyma.metadata.labels?.[LABELS.runtimeId];
    if (isPaused(kyma)) {
      deps.logger.debug({ kyma: key }, 'reconciliation paused by label');
      return { result: {}, label: 'paused' };
    }
    if (kyma.metadata.deletionTimestamp) return await deleting(deps, ctx, kymaKey, kyma);
    const outcome = await reconcileLiveKyma(ctx, kyma, deps.fullPasses);
    deps.kymas.remember(kymaKey, outcome.resourceVersion);
    return { result: requeue(outcome.requeueAfterMs), label: (outcome.state ?? 'ready').toLowerCase() };
  } catch (error) {
    // A write may have landed without its answer: the next pass reads the Kyma fresh.
    deps.kymas.forget(kymaKey);
    throw error;
  }
}

/** The Kyma is gone: its SKR client goes, and Manifests left behind say so. */
async function kymaGone(
  deps: ReconcilerDeps,
  ctx: ReconcileContext,
  kymaKey: string,
  namespace: string,
  name: string,
): Promise<{ result: ReconcileResult; label: string }> {
  deps.kymas.forget(kymaKey);
  deps.fullPasses?.distrust(kymaKey);
  await ctx.skrClients.evict(name);
  const orphaned = await markOrphanedManifests(ctx, namespace, name);
  if (orphaned > 0)
    deps.logger.warn(
      { kyma: kymaKey, manifests: orphaned },
      'Manifests of a Kyma that is gone marked Error (orphaned)',
    );
  return { result: {}, label: 'absent' };
}

async function deleting(
  deps: ReconcilerDeps,
  ctx: ReconcileContext,
  kymaKey: string,
  kyma: Kyma,
): Promise<{ result: ReconcileResult; label: string }> {
  deps.kymas.forget(kymaKey);
  deps.fullPasses?.distrust(kymaKey);
  // Mirrors that read the Kyma before its deletionTimestamp finish first, so none writes a ModuleConfig after the
  // deletion removed it; those queued from now on read the timestamp and write nothing.
  await deps.lanes.drain(kymaKey);
  const outcome = await deleteKyma(ctx, kyma);
  return { result: requeue(outcome.requeueAfterMs), label: 'deleting' };
}

function requeue(ms: number | undefined): ReconcileResult {
  return ms === undefined ? {} : { requeueAfterMs: ms };
}
