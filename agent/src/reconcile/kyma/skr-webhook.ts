// The SKR webhook as one step of a Kyma's reconcile: calls ../registration (certificate, Secret, webhook
// configuration) and broken-watcher detection, and reports both as the Kyma's SKRWebhook condition.
import {
  ANNOTATIONS,
  LABELS,
  trackedObject,
  type Kyma,
  type KymaModuleStatus,
  type ResourceState,
  type Watcher,
} from '@skr-watcher/api';
import { mergePatchCustomObject, type ClusterClient } from '@skr-watcher/kube';
import { registerSkrWebhook, unregisterSkrWebhook } from '../../registration/index.js';
import type { ReconcileContext, RegistrationSettings } from '../context.js';
import { CONDITIONS, type ConditionInput } from '../status.js';

export const SKR_WEBHOOK_CONDITION = CONDITIONS.skrWebhook;

export interface SkrWebhookOutcome {
  condition: ConditionInput;
  /** Warning when the webhook is missing or broken; Ready otherwise. */
  state: ResourceState;
  /** Look again this soon (a probe is out). */
  requeueAfterMs?: number;
  /** This pass put back webhook objects someone deleted or changed: callbacks may have been lost meanwhile. */
  restored?: boolean;
}

export async function reconcileSkrWebhook(
  ctx: ReconcileContext,
  settings: RegistrationSettings,
  kyma: Kyma,
  skr: ClusterClient,
  skrKymaRef: Parameters<typeof mergePatchCustomObject>[1],
  modules: KymaModuleStatus[],
  watchers: Watcher[],
): Promise<SkrWebhookOutcome> {
  const now = ctx.clock();
  const moduleKinds = modules.flatMap((module) => {
    const moduleCr = trackedObject(module.resource);
    return moduleCr ? [{ apiVersion: moduleCr.apiVersion, kind: moduleCr.kind }] : [];
  });
  const result = await registerSkrWebhook({
    kcp: ctx.kcp,
    namespace: ctx.namespace,
    kyma,
    skr,
    moduleKinds,
    options: settings.options,
    now,
    watchers,
    ...(settings.pki ? { pki: settings.pki } : {}),
    // Module objects are watched for drift only where the agent installs them (decision 021).
    installedObjects: ctx.modules !== undefined,
  });
  if (result.issued) {
    ctx.logger.info(
      { kyma: kyma.metadata.name, reason: result.issued },
      'issued the SKR webhook certificate',
    );
  }
  if (!result.ok) {
    return {
      condition: { type: SKR_WEBHOOK_CONDITION, ok: false, reason: result.reason, message: result.message },
      state: 'Warning',
    };
  }

  const runtimeId = kyma.metadata.labels?.[LABELS.runtimeId] ?? '';
  const verdict = settings.health?.assess(runtimeId, now) ?? { kind: 'healthy' as const };
  const installed = installedCondition(ctx, kyma, result, now);
  const noEvent = { type: SKR_WEBHOOK_CONDITION, ok: false, reason: 'NoEventFromWebhook' };
  switch (verdict.kind) {
    case 'healthy':
      return { condition: installed, state: 'Ready', ...restoredFlag(result) };
    case 'waiting':
      // A pass in the middle of a probe (a Kyma edit woke it) keeps what the last probe found.
      if (verdict.broken !== undefined)
        return {
          condition: { ...noEvent, message: verdict.broken },
          state: 'Warning',
          requeueAfterMs: verdict.afterMs,
        };
      return {
        condition: installed,
        state: 'Ready',
        requeueAfterMs: verdict.afterMs,
        ...restoredFlag(result),
      };
    case 'probe':
    case 'broken': {
      await writeProbe(settings, runtimeId, skr, skrKymaRef, now);
      if (verdict.kind === 'probe')
        return {
          condition: installed,
          state: 'Ready',
          requeueAfterMs: verdict.timeoutMs,
          ...restoredFlag(result),
        };
      return {
        condition: { ...noEvent, message: verdict.message },
        state: 'Warning',
        requeueAfterMs: verdict.timeoutMs,
      };
    }
  }
}

function restoredFlag(result: { restored?: string[] }): { restored?: true } {
  return result.restored && result.restored.length > 0 ? { restored: true } : {};
}

/** A harmless write the webhook must turn into an event: an annotation on the SKR Kyma. */
async function writeProbe(
  settings: RegistrationSettings,
  runtimeId: string,
  skr: ClusterClient,
  skrKymaRef: Parameters<typeof mergePatchCustomObject>[1],
  now: Date,
): Promise<void> {
  await mergePatchCustomObject(skr.custom, skrKymaRef, {
    metadata: { annotations: { [ANNOTATIONS.watcherProbe]: now.toISOString() } },
  });
  settings.health?.recordProbe(runtimeId, now);
}

/**
 * The webhook's health on a pass that leaves the SKR otherwise alone (pass-inputs.ts): in doubt once a probe went
 * unanswered (callbacks may be lost, so the pass re-applies everything); else a probe written when one is due, and
 * when to look again.
 */
export async function webhookAtRest(
  ctx: ReconcileContext,
  settings: RegistrationSettings,
  kyma: Kyma,
  skr: ClusterClient,
  skrKymaRef: Parameters<typeof mergePatchCustomObject>[1],
): Promise<{ doubt: true } | { doubt: false; requeueAfterMs?: number }> {
  const now = ctx.clock();
  const runtimeId = kyma.metadata.labels?.[LABELS.runtimeId] ?? '';
  const verdict = settings.health?.assess(runtimeId, now) ?? { kind: 'healthy' as const };
  switch (verdict.kind) {
    case 'healthy':
      return { doubt: false };
    case 'waiting':
      return verdict.broken === undefined
        ? { doubt: false, requeueAfterMs: verdict.afterMs }
        : { doubt: true };
    case 'probe':
      await writeProbe(settings, runtimeId, skr, skrKymaRef, now);
      return { doubt: false, requeueAfterMs: verdict.timeoutMs };
    case 'broken':
      return { doubt: true };
  }
}

/** Reason of the SKRWebhook condition after a pass put back what someone deleted or changed in the SKR. */
export const RESTORED_REASON = 'Restored';

/**
 * The condition of an installed webhook. A pass that found the webhook's objects deleted or changed in the SKR says
 * so (reason Restored, with what and when); later passes that change nothing keep that note, so the Kyma shows the
 * last repair until the registration has something else to say.
 */
function installedCondition(
  ctx: ReconcileContext,
  kyma: Kyma,
  result: { reason: string; message: string; restored?: string[] },
  now: Date,
): ConditionInput {
  if (result.restored && result.restored.length > 0) {
    const message = `put back at ${now.toISOString()}, found deleted or changed in the SKR: ${result.restored.join(', ')}`;
    ctx.logger.warn({ kyma: kyma.metadata.name, restored: result.restored }, 'SKR webhook objects put back');
    return { type: SKR_WEBHOOK_CONDITION, ok: true, reason: RESTORED_REASON, message };
  }
  const previous = kyma.status?.conditions?.find((c) => c.type === SKR_WEBHOOK_CONDITION);
  if (previous?.reason === RESTORED_REASON && previous.status === 'True' && result.reason === 'Installed')
    return {
      type: SKR_WEBHOOK_CONDITION,
      ok: true,
      reason: RESTORED_REASON,
      message: previous.message ?? '',
    };
  return { type: SKR_WEBHOOK_CONDITION, ok: true, reason: result.reason, message: result.message };
}

/** Deletion: the webhook, its Secret and deployment in the SKR, and the certificate Secret in KCP. */
export async function removeSkrWebhook(
  ctx: ReconcileContext,
  settings: RegistrationSettings,
  kyma: Kyma,
  skr: ClusterClient | undefined,
): Promise<void> {
  await unregisterSkrWebhook({
    kcp: ctx.kcp,
    namespace: ctx.namespace,
    kymaName: kyma.metadata.name,
    skr,
    skrNamespace: settings.options.skrNamespace,
  });
  settings.pki?.forget(kyma.metadata.name);
  const runtimeId = kyma.metadata.labels?.[LABELS.runtimeId];
  if (runtimeId) settings.health?.forget(runtimeId);
}
