// Kubernetes Events (core v1) about a KCP Kyma, so `kubectl describe kyma` tells an operator what failed.
// Repeats of the same reason and message are folded into one Event whose count grows, as client-go does; a series
// (one subject, e.g. one SKR object put back again and again) keeps one Event whose message and count move on.
import { createHash } from 'node:crypto';
import type { CoreV1Event } from '@kubernetes/client-node';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { GROUP, KINDS } from '@skr-watcher/api';
import { isConflict, isNotFound, type ClusterClient } from '@skr-watcher/kube';
import type { Logger } from '@skr-watcher/telemetry';

export const EVENT_COMPONENT = 'skr-watcher-agent';

export interface KymaEventTarget {
  namespace: string;
  name: string;
  uid?: string;
}

/** Repeats of one subject recorded as one Event, whatever each message says. */
export interface EventSeries {
  /** Names the Event with the type and reason instead of the message. */
  key: string;
  /** Occurrences this record stands for (default 1): added to the Event's count. */
  count?: number;
}

export interface EventRecorder {
  /** Records a Warning Event; never throws (a failed Event must not fail a reconcile). */
  warning(kyma: KymaEventTarget, reason: string, message: string, series?: EventSeries): Promise<void>;
  normal(kyma: KymaEventTarget, reason: string, message: string, series?: EventSeries): Promise<void>;
}

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const MAX_MESSAGE = 1024;

export function createEventRecorder(kcp: ClusterClient, logger: Logger, clock: () => Date): EventRecorder {
  async function record(
    kyma: KymaEventTarget,
    type: 'Normal' | 'Warning',
    reason: string,
    text: string,
    series?: EventSeries,
  ) {
    const message = text.length > MAX_MESSAGE ? `${text.slice(0, MAX_MESSAGE - 1)}…` : text;
    const subject = series ? `series\0${series.key}` : message;
    const digest = createHash('sha256').update(`${type}\0${reason}\0${subject}`).digest('hex').slice(0, 10);
    const name = `${kyma.name}.${digest}`;
    const count = Math.max(1, series?.count ?? 1);
    const now = clock();
    try {
      try {
        await kcp.core.createNamespacedEvent({
          namespace: kyma.namespace,
          body: {
            metadata: { name, namespace: kyma.namespace },
            involvedObject: {
              apiVersion: `${GROUP}/${KINDS.kyma.version}`,
              kind: KINDS.kyma.kind,
              name: kyma.name,
              namespace: kyma.namespace,
              ...(kyma.uid ? { uid: kyma.uid } : {}),
            },
            type,
            reason,
            message,
            count,
            firstTimestamp: now,
            lastTimestamp: now,
            source: { component: EVENT_COMPONENT },
            reportingComponent: EVENT_COMPONENT,
          } satisfies CoreV1Event,
        });
      } catch (error) {
        if (!isConflict(error)) throw error;
        const existing = await kcp.core.readNamespacedEvent({ name, namespace: kyma.namespace });
        await kcp.core.patchNamespacedEvent(
          {
            name,
            namespace: kyma.namespace,
            body: {
              count: (existing.count ?? 1) + count,
              lastTimestamp: now.toISOString(),
              ...(series ? { message } : {}),
            },
          },
          mergePatch,
        );
      }
    } catch (error) {
      // An Event that expired between create and patch is not worth a retry.
      if (!isNotFound(error)) {
        logger.warn({ kyma: `${kyma.namespace}/${kyma.name}`, reason, err: error }, 'could not record Event');
      }
    }
  }
  return {
    warning: (kyma, reason, message, series) => record(kyma, 'Warning', reason, message, series),
    normal: (kyma, reason, message, series) => record(kyma, 'Normal', reason, message, series),
  };
}
