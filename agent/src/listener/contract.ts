// The listener's contract with the rest of the agent; documented in index.ts.
import type { ChangeFingerprint, Clock, WatchEventV2 } from '@skr-watcher/api';
import type { Logger, Registry } from '@skr-watcher/telemetry';

/** One callback that passed every check and woke its Kyma. */
export interface AcceptedEvent {
  /** Subject CN of the verified client certificate. */
  runtimeId: string;
  /** The KCP Kyma labelled with that runtime-id. */
  kyma: { namespace: string; name: string };
  /** `<component>` of the path, e.g. `lifecycle-manager`. */
  component: string;
  contract: 'v1' | 'v2';
  /** The SKR object that changed; namespace is empty for cluster-scoped objects. */
  watched: { namespace: string; name: string };
  gvk: { group: string; version: string; kind: string };
  /** Which write the event is about (decision 010); empty from webhooks that do not say (upstream's). */
  fingerprint?: ChangeFingerprint;
  receivedAt: Date;
}

export interface TlsMaterial {
  certPem: string;
  keyPem: string;
  /** One or more PEM CA certificates; several during a CA rotation. */
  caBundlePem: string;
}

export type ListenerMode =
  | ({ kind: 'direct' } & TlsMaterial)
  /** Plain HTTP behind a mesh gateway; identity from X-Forwarded-Client-Cert, only from these IPs/CIDRs. */
  | { kind: 'gateway'; trustedProxies: string[] };

export interface ListenerOptions {
  host?: string;
  /** 0 = any free port; read the bound one from `Listener.port`. */
  port: number;
  mode: ListenerMode;
  /** Synchronous lookup of the Kyma labelled with a runtime-id (an informer cache). */
  resolveKyma(runtimeId: string): { namespace: string; name: string } | undefined;
  /**
   * Wakes the reconciliation of `namespace/name`; the caller's work queue coalesces repeats. `event` is the
   * callback that woke it, so the caller can take a targeted path first; undefined for keys released from the
   * coalescing window, which stand for several events. A promise (a callback forwarded to the replica that owns
   * the Kyma) is awaited before answering: when it rejects, the webhook gets 503 and sends the event again.
   */
  enqueue(kymaKey: string, event?: AcceptedEvent): void | Promise<void>;
  /**
   * What one runtime-id may send, so one SKR cannot cost the others their callbacks: over it, 429 with Retry-After.
   * Default CALLBACK_BUDGET; false turns it off (benchmarks of the listener itself).
   */
  callbackBudget?: { perSecond?: number; burst?: number } | false;
  /** Called after enqueue for every accepted event; exceptions are logged, never answered. */
  onAccepted?(event: AcceptedEvent): void;
  logger?: Logger;
  registry?: Registry;
  /**
   * Holds a Kyma key this long before `enqueue`, merging later events for the same Kyma into it, so a
   * burst from one SKR is one reconcile even when the queue is idle. 0 (default) enqueues at once.
   */
  coalesceWindowMs?: number;
  /** Timers of the coalescing window; tests pass a manual clock. Default: the system clock. */
  clock?: Clock;
  /** How long `close()` lets requests in flight finish before cutting connections. Default 5,000 ms. */
  shutdownGraceMs?: number;
  /** Connections open at once at most; more are closed on accept. Default `CONNECTION_LIMITS.listener`. */
  maxConnections?: number;
  /** An unfinished TLS handshake or a silent request is cut after this. Default `CONNECTION_LIMITS.listener`. */
  idleTimeoutMs?: number;
}

export interface Listener {
  readonly port: number;
  /** Swaps certificate, key and CA bundle for new connections; kept-alive ones are closed when idle. */
  updateTls(material: TlsMaterial): void;
  /** Stops accepting, lets requests in flight finish (up to the grace period), releases held keys. */
  close(): Promise<void>;
}

/** The fingerprint fields of a validated callback body; each is left out when the webhook did not send it. */
export function fingerprintOf(event: WatchEventV2): ChangeFingerprint {
  return {
    ...(event.uid !== undefined ? { uid: event.uid } : {}),
    ...(event.generation !== undefined ? { generation: event.generation } : {}),
    ...(event.previousResourceVersion !== undefined
      ? { previousResourceVersion: event.previousResourceVersion }
      : {}),
  };
}
