// The end of a live Kyma's pass: its state from what the steps found, its conditions, and the one status written to
// the KCP Kyma and (best effort) the SKR Kyma, each only when a reader would see a change.
import type { Kyma, KymaModuleStatus, KymaStatus, ResourceState } from '@skr-watcher/api';
import { isUnreachable, type ClusterClient } from '@skr-watcher/kube';
import { refOfKyma, type ReconcileContext } from '../context.js';
import {
  CONDITIONS,
  kymaStatusChanged,
  summarize,
  worstState,
  writeKymaStatus,
  type ConditionInput,
} from '../status.js';
import type { SyncResourceOutcome } from '../sync-resources/sync-resource.js';
import { skrKymaRef } from './skr-kyma.js';
import type { SkrWebhookOutcome } from './skr-webhook.js';

/** What the steps of a pass that reached the SKR found. */
export interface PassFindings {
  modules: KymaModuleStatus[];
  catalog?: ConditionInput;
  pullSecret?: ConditionInput;
  syncOutcomes: SyncResourceOutcome[];
  webhook?: SkrWebhookOutcome;
}

/** Upstream's words for a Kyma whose kubeconfig Secret is missing (its ErrAccessSecretNotFound). */
const ACCESS_SECRET_NOT_FOUND = 'access secret not found';

/**
 * The module entries of a pass that could not reach the SKR (unreachable, no or broken credentials): each Error with
 * what failed, as upstream marks them, so no entry claims Ready for a cluster nobody can see. A module the user runs
 * stays Unmanaged: that state is what keeps the user's Module CR from being deleted with the module or the Kyma. The
 * next pass that reaches the SKR reports every module afresh.
 */
export function modulesWithoutSkr(
  modules: KymaModuleStatus[],
  failure: { reason: string; message: string },
): KymaModuleStatus[] {
  const message =
    failure.reason === 'KubeconfigMissing'
      ? `${ACCESS_SECRET_NOT_FOUND}: ${failure.message}`
      : failure.message;
  return modules.map((module) =>
    module.state === 'Unmanaged' ? module : { ...module, state: 'Error', message },
  );
}

/** The Kyma's state: the worst of its modules, SyncResources, webhook, and (as Warning) catalog and pull Secret. */
export function stateOf(found: PassFindings): ResourceState {
  return worstState([
    // A module being removed keeps the Kyma Processing; Deleting is the Kyma's own deletion.
    ...found.modules.map((m) => (m.state === 'Deleting' ? 'Processing' : m.state)),
    ...found.syncOutcomes.map((o) => o.state),
    ...(found.webhook ? [found.webhook.state] : []),
    ...(found.catalog && !found.catalog.ok ? (['Warning'] as const) : []),
    ...(found.pullSecret && !found.pullSecret.ok ? (['Warning'] as const) : []),
  ]);
}

export function conditionsOf(found: PassFindings, skr: ClusterClient): ConditionInput[] {
  return [
    { type: CONDITIONS.skrConnected, ok: true, reason: 'Connected', message: `SKR API server ${skr.server}` },
    modulesCondition(found.modules),
    syncResourcesCondition(found.syncOutcomes),
    ...(found.catalog ? [found.catalog] : []),
    ...(found.pullSecret ? [found.pullSecret] : []),
    ...(found.webhook ? [found.webhook.condition] : []),
  ];
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

/**
 * The same status on the KCP Kyma and, best effort, the SKR Kyma; each only when a reader would see a change.
 * Answers the KCP Kyma's resourceVersion after its status write, `before` when it needed none.
 */
export async function writeStatuses(
  ctx: ReconcileContext,
  kyma: Kyma,
  skrKyma: Kyma,
  status: KymaStatus,
  skr: ClusterClient,
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
