// Status of the Kymas: the worst state wins, conditions keep their transition time while unchanged, and a
// status is only written when something a reader would see has changed (not on every pass).
import { isDeepStrictEqual } from 'node:util';
import type { Condition, KymaModuleStatus, KymaStatus, ResourceState } from '@skr-watcher/api';

/** Severity order: Error > Warning > Processing > Ready (Deleting is reported on its own). */
const SEVERITY: Record<ResourceState, number> = {
  Ready: 0,
  Processing: 1,
  Warning: 2,
  Error: 3,
  Deleting: 4,
};

export function worstState(states: Iterable<ResourceState>): ResourceState {
  let worst: ResourceState = 'Ready';
  for (const state of states) if (SEVERITY[state] > SEVERITY[worst]) worst = state;
  return worst;
}

export function isResourceState(value: unknown): value is ResourceState {
  return typeof value === 'string' && value in SEVERITY;
}

/** Condition types on the Kyma (KCP and SKR). */
export const CONDITIONS = {
  /** The kubeconfig Secret exists and the SKR answered. */
  skrConnected: 'SKRConnected',
  /** Every module resolved, its Module CR exists and is mirrored into a ModuleConfig. */
  modulesReady: 'ModulesReady',
  /** Every item of every SyncResource of this Kyma is applied. */
  syncResourcesApplied: 'SyncResourcesApplied',
  /** The SKR webhook is installed and its events arrive (set only when registration is on). */
  skrWebhook: 'SKRWebhook',
} as const;

const OWN_CONDITIONS = new Set<string>(Object.values(CONDITIONS));

export interface ConditionInput {
  type: string;
  ok: boolean;
  reason: string;
  message: string;
}

/** Conditions for `inputs`, keeping lastTransitionTime from `previous` where the status did not flip. */
export function conditionsFor(
  inputs: ConditionInput[],
  previous: Condition[] | undefined,
  now: Date,
): Condition[] {
  return inputs.map((input) => {
    const status = input.ok ? 'True' : 'False';
    const before = previous?.find((condition) => condition.type === input.type);
    return {
      type: input.type,
      status,
      reason: input.reason,
      message: input.message,
      lastTransitionTime: before?.status === status ? before.lastTransitionTime : now.toISOString(),
    };
  });
}

/** True when `next` differs from `current` in anything but timestamps and other controllers' conditions. */
export function kymaStatusChanged(current: KymaStatus | undefined, next: KymaStatus): boolean {
  const comparable = (status: KymaStatus | undefined) => ({
    state: status?.state,
    modules: (status?.modules ?? []).map((module: KymaModuleStatus) => ({ ...module })),
    conditions: (status?.conditions ?? [])
      .filter((condition) => OWN_CONDITIONS.has(condition.type))
      .sort((a, b) => a.type.localeCompare(b.type))
      .map(({ type, status: value, reason, message }) => ({
        type,
        status: value,
        reason,
        message,
      })),
  });
  return !isDeepStrictEqual(comparable(current), comparable(next));
}

/** A one-line summary of failures for condition messages and Events. */
export function summarize(failures: { name: string; message?: string | undefined }[], limit = 5): string {
  const shown = failures.slice(0, limit).map((failure) => `${failure.name}: ${failure.message ?? 'failed'}`);
  const more = failures.length > limit ? `; and ${failures.length - limit} more` : '';
  return shown.join('; ') + more;
}
