// The audit trail of administrative actions, shared by the project's CLIs (kubectl-skr's pause, resume and reconcile;
// skr-certs rotate-ca): one JSON line per attempt (who, what, on which Kyma or scope, when, why, how it ended), and for
// an action that changed something a Kubernetes Event naming the user, so `kubectl describe` and the cluster's own
// audit log tell the same story. Who is who the API server says the caller is (SelfSubjectReview), never a guess.
import { randomBytes } from 'node:crypto';
import type { AuthenticationV1Api, CoreV1Api, CoreV1Event, V1ObjectReference } from '@kubernetes/client-node';

/** How an attempt ended: done (something changed), unchanged (it already was so), refused (RBAC), failed. */
export type AuditOutcome = 'done' | 'unchanged' | 'refused' | 'failed';

export interface AuditRecord {
  time: string;
  user: string;
  action: string;
  /** `namespace/name` of the Kyma acted on. */
  kyma?: string;
  /** What else the action covers when it is not one Kyma, e.g. `kcp-system/skr-watcher-ca (every SKR)`. */
  scope?: string;
  reason: string;
  outcome: AuditOutcome;
  detail?: string;
}

/** The one audit line of an attempt; `audit: true` lets a log pipeline pick these out of stderr. */
export function auditLine(component: string, record: AuditRecord): string {
  return `${JSON.stringify({ audit: true, component, ...record })}\n`;
}

/** The caller's user name as the API server sees it (SelfSubjectReview). */
export async function callerIdentity(
  auth: AuthenticationV1Api,
): Promise<{ username: string; groups: string[] }> {
  const review = await auth.createSelfSubjectReview({
    body: { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' },
  });
  const username = review.status?.userInfo?.username;
  if (!username) throw new Error('the API server answered the SelfSubjectReview without a username');
  return { username, groups: review.status?.userInfo?.groups ?? [] };
}

export interface AuditEvent {
  namespace: string;
  /** The object the action was about (its namespace is `namespace`). */
  involvedObject: Required<Pick<V1ObjectReference, 'apiVersion' | 'kind' | 'name'>> & { uid?: string };
  /** CamelCase, e.g. ReconciliationPaused. */
  reason: string;
  action: string;
  message: string;
  /** Who writes the Event: the CLI's name. */
  component: string;
  user: string;
  now: Date;
}

/** A Normal Event on the object that names the user (as the reporting instance) and the reason. */
export async function recordAuditEvent(core: CoreV1Api, event: AuditEvent): Promise<void> {
  const { namespace, now } = event;
  const body: CoreV1Event = {
    metadata: { name: `${event.involvedObject.name}.${randomBytes(8).toString('hex')}`, namespace },
    involvedObject: { ...event.involvedObject, namespace },
    type: 'Normal',
    reason: event.reason,
    action: event.action,
    message: event.message,
    count: 1,
    firstTimestamp: now,
    lastTimestamp: now,
    source: { component: event.component },
    reportingComponent: event.component,
    reportingInstance: event.user.slice(0, 128),
  };
  await core.createNamespacedEvent({ namespace, body });
}
