// Status of the Kymas: the worst state wins, conditions keep their transition time while unchanged, and a
// status is only written when something a reader would see has changed (not on every pass). The shape is
// upstream lifecycle-manager's (tracking objects, activeChannel, its condition types), so tools written for
// it read ours the same way.
import { isDeepStrictEqual } from 'node:util';
import {
  FIELD_MANAGER,
  KINDS,
  type Condition,
  type Kyma,
  type KymaModuleStatus,
  type KymaStatus,
  type ModuleState,
  type ResourceState,
  byCodeUnit,
} from '@skr-watcher/api';
import { applyCustomStatus, type ClusterClient, type CustomObjectRef } from '@skr-watcher/kube';
import { apiVersionOf, resourceVersionOf, type ReconcileContext } from './context.js';

/** Severity order: Error > Warning > Processing > Ready (Deleting is reported on its own). */
const SEVERITY: Record<ModuleState, number> = {
  Ready: 0,
  // The user runs an unmanaged module; for the Kyma it is as good as Ready, as upstream counts it.
  Unmanaged: 0,
  Processing: 1,
  Warning: 2,
  Error: 3,
  Deleting: 4,
};

export function worstState(states: Iterable<ModuleState>): ResourceState {
  let worst: ResourceState = 'Ready';
  for (const state of states) if (SEVERITY[state] > SEVERITY[worst]) worst = state as ResourceState;
  return worst;
}

export function isResourceState(value: unknown): value is ResourceState {
  return typeof value === 'string' && value in SEVERITY && value !== 'Unmanaged';
}

/** Condition types on the Kyma (KCP and SKR): upstream's where it has one, ours where it has none. */
export const CONDITIONS = {
  /** Upstream's: every module resolved, its Module CR exists and is mirrored into a ModuleConfig. */
  modules: 'Modules',
  /** Upstream's: the module catalog the Kyma may use is copied into the SKR. */
  moduleCatalog: 'ModuleCatalog',
  /** Upstream's: the SKR webhook is installed and its events arrive (set only when registration is on). */
  skrWebhook: 'SKRWebhook',
  /** Ours: the kubeconfig Secret exists and the SKR answered. */
  skrConnected: 'SKRConnected',
  /** Ours: every item of every SyncResource of this Kyma is applied. */
  syncResourcesApplied: 'SyncResourcesApplied',
  /** Ours, with --skr-image-pull-secret: the module images' pull Secret is copied into the SKR. */
  imagePullSecret: 'SKRImagePullSecret',
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
  observedGeneration: number | undefined,
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
      ...(observedGeneration === undefined ? {} : { observedGeneration }),
    };
  });
}

/**
 * The Kyma status of this pass. Conditions not given this time (e.g. Modules when the SKR was unreachable)
 * keep their last value; only our own condition types, since applying another controller's condition would
 * make us co-own it.
 */
export function kymaStatus(
  ctx: ReconcileContext,
  kyma: Kyma,
  state: ResourceState,
  modules: KymaModuleStatus[],
  conditions: ConditionInput[],
  activeChannel: string | undefined = kyma.status?.activeChannel,
): KymaStatus {
  const now = ctx.clock();
  const previous = kyma.status;
  const kept = (previous?.conditions ?? []).filter(
    (c) => OWN_CONDITIONS.has(c.type) && !conditions.some((input) => input.type === c.type),
  );
  return {
    state,
    modules,
    conditions: [...conditionsFor(conditions, previous?.conditions, now, kyma.metadata.generation), ...kept],
    lastOperation: { operation: `reconciled: ${state}`, lastUpdateTime: now.toISOString() },
    ...(activeChannel ? { activeChannel } : {}),
  };
}

/** True when `next` differs from `current` in anything but timestamps and other controllers' conditions. */
export function kymaStatusChanged(current: KymaStatus | undefined, next: KymaStatus): boolean {
  const comparable = (status: KymaStatus | undefined) => ({
    state: status?.state,
    activeChannel: status?.activeChannel,
    // As JSON: an absent field and one set to undefined read the same; the CRD defaults maintenance to false.
    modules: JSON.parse(
      JSON.stringify(
        (status?.modules ?? []).map((module) => ({ ...module, maintenance: module.maintenance ?? false })),
      ),
    ) as unknown,
    conditions: (status?.conditions ?? [])
      .filter((condition) => OWN_CONDITIONS.has(condition.type))
      .sort((a, b) => byCodeUnit(a.type, b.type))
      .map(({ type, status: value, reason, message, observedGeneration }) => ({
        type,
        status: value,
        reason,
        message,
        observedGeneration,
      })),
  });
  return !isDeepStrictEqual(comparable(current), comparable(next));
}

/** Applies the status; answers the resourceVersion the write left the Kyma at (undefined if the answer has none). */
export async function writeKymaStatus(
  cluster: ClusterClient,
  ref: CustomObjectRef,
  status: KymaStatus,
): Promise<string | undefined> {
  const written = await applyCustomStatus(
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
  return resourceVersionOf(written);
}

/** A one-line summary of failures for condition messages and Events. */
export function summarize(failures: { name: string; message?: string | undefined }[], limit = 5): string {
  const shown = failures.slice(0, limit).map((failure) => `${failure.name}: ${failure.message ?? 'failed'}`);
  const more = failures.length > limit ? `; and ${failures.length - limit} more` : '';
  return shown.join('; ') + more;
}

/** A module no catalog knows: its ModuleReleaseMeta was never found, so nothing of it was ever resolved. */
export function isUnknownModule(status: KymaModuleStatus): boolean {
  return (
    status.template === undefined &&
    status.version === undefined &&
    (status.message ?? '').startsWith('ModuleReleaseMetaNotFound')
  );
}

/** The label value of `skr_agent_modules` for every module no catalog knows. */
export const UNKNOWN_MODULE_LABEL = '(unknown)';
