// pause, resume and reconcile: the administrative actions on one Kyma. Each is a merge patch of the KCP Kyma
// (guarded by the resourceVersion read, so two engineers cannot silently overwrite each other), an Event on it, and
// an audit line, all naming the caller as the API server knows them (SelfSubjectReview).
import { isDeepStrictEqual } from 'node:util';
import { LABELS, PAUSE_ANNOTATIONS, readKyma, type Kyma } from '@skr-watcher/api';
import {
  LAST_ACTION_ANNOTATION,
  RECONCILE_REQUESTED_ANNOTATION,
  auditLine,
  recordKymaEvent,
  type AdminAction,
  type AuditOutcome,
  type AuditRecord,
} from './audit.js';
import { PluginError, RefusedError, whoAmI, type Kcp } from './kcp.js';

export interface AdminIo {
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
  now: () => Date;
  sleep: (ms: number) => Promise<void>;
}

export interface AdminRequest {
  action: AdminAction;
  kyma: string;
  reason: string;
  /** reconcile only: how long to wait for the agent's pass to show in the status (0: do not wait). */
  waitMs?: number;
}

interface Attempt {
  user: string;
  kyma: Kyma;
  now: Date;
}

/** Runs one action; writes its audit line whatever happens (refusals and failures included) and rethrows. */
export async function runAdminAction(kcp: Kcp, request: AdminRequest, io: AdminIo): Promise<void> {
  const now = io.now();
  const kymaKey = `${kcp.namespace}/${request.kyma}`;
  let user = 'unknown';
  const audit = (outcome: AuditOutcome, detail?: string) => {
    const record: AuditRecord = {
      time: now.toISOString(),
      user,
      action: request.action,
      kyma: kymaKey,
      reason: request.reason,
      outcome,
      ...(detail ? { detail } : {}),
    };
    io.stderr.write(auditLine(record));
  };
  try {
    user = (await whoAmI(kcp)).username;
    const kyma = readKyma(await kcp.get('kyma', request.kyma));
    const attempt = { user, kyma, now };
    const result =
      request.action === 'pause'
        ? await pause(kcp, request, attempt)
        : request.action === 'resume'
          ? await resume(kcp, request, attempt)
          : await reconcile(kcp, request, attempt, io);
    io.stdout.write(`${result.message}\n`);
    audit(result.outcome);
  } catch (error) {
    audit(
      error instanceof RefusedError ? 'refused' : 'failed',
      error instanceof Error ? error.message : String(error),
    );
    throw error;
  }
}

interface ActionResult {
  outcome: AuditOutcome;
  message: string;
}

const isPaused = (kyma: Kyma) => kyma.metadata.labels?.[LABELS.skipReconciliation] === 'true';

function pausedBy(kyma: Kyma): string {
  const annotations = kyma.metadata.annotations ?? {};
  const by = annotations[PAUSE_ANNOTATIONS.by];
  const since = annotations[PAUSE_ANNOTATIONS.since];
  const why = annotations[PAUSE_ANNOTATIONS.reason];
  const who = [by ? `by ${by}` : 'by someone (no record of who)', since ? `since ${since}` : '']
    .filter(Boolean)
    .join(' ');
  return why ? `${who}: ${why}` : who;
}

function lastAction(request: AdminRequest, attempt: Attempt): string {
  return JSON.stringify({
    action: request.action,
    user: attempt.user,
    reason: request.reason,
    at: attempt.now.toISOString(),
  });
}

/** Merge patch guarded by the resourceVersion read: a concurrent change makes it fail with 409, not overwrite. */
async function patchKyma(kcp: Kcp, attempt: Attempt, metadata: Record<string, unknown>): Promise<Kyma> {
  try {
    return readKyma(
      await kcp.mergePatch('kyma', attempt.kyma.metadata.name, {
        metadata: { ...metadata, resourceVersion: attempt.kyma.metadata.resourceVersion },
      }),
    );
  } catch (error) {
    if (error instanceof PluginError && /HTTP 409/.test(error.message)) {
      throw new PluginError(
        `kyma "${attempt.kyma.metadata.name}" changed while this ran (someone else wrote it): run the command again`,
        { cause: error },
      );
    }
    throw error;
  }
}

async function event(kcp: Kcp, request: AdminRequest, attempt: Attempt, message: string): Promise<void> {
  const uid = attempt.kyma.metadata.uid;
  await recordKymaEvent(
    kcp,
    { name: attempt.kyma.metadata.name, ...(uid ? { uid } : {}) },
    { action: request.action, user: attempt.user, reason: request.reason },
    message,
    attempt.now,
  );
}

async function pause(kcp: Kcp, request: AdminRequest, attempt: Attempt): Promise<ActionResult> {
  const key = `${kcp.namespace}/${request.kyma}`;
  if (isPaused(attempt.kyma)) {
    return {
      outcome: 'unchanged',
      message: `${key} is already paused ${pausedBy(attempt.kyma)}: nothing changed`,
    };
  }
  await patchKyma(kcp, attempt, {
    labels: { [LABELS.skipReconciliation]: 'true' },
    annotations: {
      [PAUSE_ANNOTATIONS.by]: attempt.user,
      [PAUSE_ANNOTATIONS.reason]: request.reason,
      [PAUSE_ANNOTATIONS.since]: attempt.now.toISOString(),
      [LAST_ACTION_ANNOTATION]: lastAction(request, attempt),
    },
  });
  await event(kcp, request, attempt, `reconciliation paused by ${attempt.user}: ${request.reason}`);
  return {
    outcome: 'done',
    message: `paused ${key}: the agent leaves it alone until \`kubectl skr resume ${request.kyma} -n ${kcp.namespace} --reason …\``,
  };
}

async function resume(kcp: Kcp, request: AdminRequest, attempt: Attempt): Promise<ActionResult> {
  const key = `${kcp.namespace}/${request.kyma}`;
  if (!isPaused(attempt.kyma)) {
    return { outcome: 'unchanged', message: `${key} is not paused: nothing changed` };
  }
  const was = pausedBy(attempt.kyma);
  await patchKyma(kcp, attempt, {
    labels: { [LABELS.skipReconciliation]: null },
    annotations: {
      [PAUSE_ANNOTATIONS.by]: null,
      [PAUSE_ANNOTATIONS.reason]: null,
      [PAUSE_ANNOTATIONS.since]: null,
      [LAST_ACTION_ANNOTATION]: lastAction(request, attempt),
    },
  });
  await event(
    kcp,
    request,
    attempt,
    `reconciliation resumed by ${attempt.user}: ${request.reason} (was paused ${was})`,
  );
  return {
    outcome: 'done',
    message: `resumed ${key}, which was paused ${was}; the agent reconciles it again now`,
  };
}

async function reconcile(
  kcp: Kcp,
  request: AdminRequest,
  attempt: Attempt,
  io: AdminIo,
): Promise<ActionResult> {
  const key = `${kcp.namespace}/${request.kyma}`;
  if (isPaused(attempt.kyma)) {
    throw new PluginError(
      `${key} is paused ${pausedBy(attempt.kyma)}: the agent would skip the pass; resume it first (kubectl skr resume ${request.kyma} --reason …)`,
    );
  }
  const before = attempt.kyma.status;
  const patched = await patchKyma(kcp, attempt, {
    annotations: {
      [RECONCILE_REQUESTED_ANNOTATION]: attempt.now.toISOString(),
      [LAST_ACTION_ANNOTATION]: lastAction(request, attempt),
    },
  });
  await event(
    kcp,
    request,
    attempt,
    `reconcile requested by ${attempt.user}${request.reason ? `: ${request.reason}` : ''}`,
  );
  const requested = `reconcile requested for ${key} at ${attempt.now.toISOString()}: the agent's Kyma watch wakes on the annotation and runs a pass`;
  if (!request.waitMs) return { outcome: 'done', message: requested };
  const deadline = Date.now() + request.waitMs;
  while (Date.now() < deadline) {
    await io.sleep(Math.min(500, Math.max(0, deadline - Date.now())));
    const now = readKyma(await kcp.get('kyma', request.kyma));
    if (
      now.metadata.resourceVersion !== patched.metadata.resourceVersion &&
      !isDeepStrictEqual(now.status, before)
    ) {
      const state = now.status?.state || 'Unknown';
      return { outcome: 'done', message: `${requested}\nthe pass wrote the status: state ${state}` };
    }
  }
  const seconds = Math.round(request.waitMs / 1000);
  return {
    outcome: 'done',
    message: `${requested}\nno status change within ${seconds} s: the agent writes the status only when a pass changes it, so a pass that found everything in place shows nothing here (its log has the pass)`,
  };
}
