// The manager's condition on a ModuleConfig: what became of its SyncResource in the SKR, as the lifecycle
// manager (skr-agent) reported it in SyncResource.status.
import type { Condition, SyncItemStatus } from '@skr-watcher/api';

/** Reasons of the manager's condition; a fixed set, so dashboards and alerts can rely on them. */
export const CONDITION_REASONS = {
  /** Every item is applied in the SKR, for the ModuleConfig generation in observedGeneration. */
  applied: 'Applied',
  /** The SyncResource is written; the lifecycle manager has not reported on this version yet. */
  pending: 'Pending',
  /** Some items were refused (allow-list) or failed; the message lists them. */
  itemsFailed: 'ItemsFailed',
  /** render() threw or returned something unusable; the previous SyncResource is left as it was. */
  renderFailed: 'RenderFailed',
  /** render() returned no objects: there is no SyncResource. */
  nothingToSync: 'NothingToSync',
} as const;
export type ConditionReason = (typeof CONDITION_REASONS)[keyof typeof CONDITION_REASONS];

/** One condition type per manager (`<manager>/Synced`), so managers of one module and the agent never collide. */
export function conditionTypeOf(manager: string): string {
  return `${manager}/Synced`;
}

/** The part of a SyncResource the condition is read from. */
export interface SyncResourceReport {
  metadata: { generation?: number };
  status?: { state?: string; observedGeneration?: number; items?: SyncItemStatus[] };
}

export interface ConditionInput {
  status: Condition['status'];
  reason: ConditionReason;
  message: string;
}

/** Condition messages stay readable; a SyncResource with many failing items is summarised. */
const MAX_LISTED_FAILURES = 10;

/** What the lifecycle manager reported on a SyncResource that carries the current render. */
export function reportOf(sync: SyncResourceReport, syncName: string): ConditionInput {
  const status = sync.status;
  if (status?.observedGeneration === undefined || status.observedGeneration !== sync.metadata.generation) {
    return {
      status: 'Unknown',
      reason: CONDITION_REASONS.pending,
      message: `SyncResource ${syncName} generation ${sync.metadata.generation ?? '?'} written; waiting for the lifecycle manager to apply it`,
    };
  }
  const failed = (status.items ?? []).filter((item) => item.state === 'Error');
  if (failed.length > 0) {
    const listed = failed
      .slice(0, MAX_LISTED_FAILURES)
      .map((item) => `${item.name}: ${item.message ?? 'failed'}`);
    const more =
      failed.length > MAX_LISTED_FAILURES ? [`and ${failed.length - MAX_LISTED_FAILURES} more`] : [];
    return {
      status: 'False',
      reason: CONDITION_REASONS.itemsFailed,
      message: `SyncResource ${syncName}: ${failed.length} of ${status.items?.length ?? 0} item(s) not applied: ${[...listed, ...more].join('; ')}`,
    };
  }
  if (status.state !== 'Ready') {
    return {
      status: 'Unknown',
      reason: CONDITION_REASONS.pending,
      message: `SyncResource ${syncName} is ${status.state ?? 'not reported'}`,
    };
  }
  return {
    status: 'True',
    reason: CONDITION_REASONS.applied,
    message: `SyncResource ${syncName}: ${status.items?.length ?? 0} item(s) applied in the SKR`,
  };
}

/** The condition to write, keeping lastTransitionTime when the status did not change. */
export function nextCondition(
  type: string,
  input: ConditionInput,
  observedGeneration: number | undefined,
  previous: Condition | undefined,
  now: Date,
): Condition {
  return {
    type,
    status: input.status,
    reason: input.reason,
    message: input.message,
    lastTransitionTime:
      previous && previous.status === input.status ? previous.lastTransitionTime : now.toISOString(),
    ...(observedGeneration !== undefined ? { observedGeneration } : {}),
  };
}

/** Whether writing `next` would change what `previous` says (the time alone is no change). */
export function conditionChanged(previous: Condition | undefined, next: Condition): boolean {
  return (
    !previous ||
    previous.status !== next.status ||
    previous.reason !== next.reason ||
    previous.message !== next.message ||
    previous.observedGeneration !== next.observedGeneration
  );
}
