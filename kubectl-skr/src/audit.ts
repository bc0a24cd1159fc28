// The audit trail of administrative actions: one JSON line on stderr per attempt (who, what, which Kyma, when,
// why, how it ended), and for each action that changed the Kyma a Kubernetes Event on it naming the user, so
// `kubectl describe kyma` and the cluster's own audit log tell the same story.
import { GROUP, KINDS } from '@skr-watcher/api';
import { auditLine as sharedAuditLine, recordAuditEvent, type AuditOutcome } from '@skr-watcher/kube';
import type { Kcp } from './kcp.js';

const PREFIX = 'operator.kyma-project.io';

/**
 * On a Kyma: when someone last asked for a pass (RFC 3339). Any annotation change wakes the agent's Kyma watch
 * (agent/src/controller.ts compares labels and annotations), so writing it is the request.
 */
export const RECONCILE_REQUESTED_ANNOTATION = `${PREFIX}/reconcile-requested-at`;
/** On a Kyma: the last administrative action as JSON {action, user, reason, at}, readable without Events (they expire). */
export const LAST_ACTION_ANNOTATION = `${PREFIX}/last-admin-action`;

/** Who wrote the Events. */
export const EVENT_COMPONENT = 'kubectl-skr';

export type AdminAction = 'pause' | 'resume' | 'reconcile';

export type { AuditOutcome };

export interface AuditRecord {
  time: string;
  user: string;
  action: AdminAction;
  kyma: string;
  reason: string;
  outcome: AuditOutcome;
  detail?: string;
}

/** The one audit line of an attempt (packages/kube audit.ts has its shape). */
export function auditLine(record: AuditRecord): string {
  return sharedAuditLine(EVENT_COMPONENT, record);
}

const EVENT_REASONS: Record<AdminAction, string> = {
  pause: 'ReconciliationPaused',
  resume: 'ReconciliationResumed',
  reconcile: 'ReconcileRequested',
};

export function eventReasonOf(action: AdminAction): string {
  return EVENT_REASONS[action];
}

/** A Normal Event on the Kyma that names the user and the reason. */
export async function recordKymaEvent(
  kcp: Kcp,
  kyma: { name: string; uid?: string },
  record: Pick<AuditRecord, 'action' | 'user' | 'reason'>,
  message: string,
  now: Date,
): Promise<void> {
  await kcp.request({ verb: 'create', resource: 'events' }, () =>
    recordAuditEvent(kcp.core, {
      namespace: kcp.namespace,
      involvedObject: {
        apiVersion: `${GROUP}/${KINDS.kyma.version}`,
        kind: KINDS.kyma.kind,
        name: kyma.name,
        ...(kyma.uid ? { uid: kyma.uid } : {}),
      },
      reason: eventReasonOf(record.action),
      action: record.action,
      message,
      component: EVENT_COMPONENT,
      user: record.user,
      now,
    }),
  );
}
