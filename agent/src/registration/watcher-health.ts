// Broken-watcher detection: when each SKR last delivered an event, and the probes sent to quiet ones.
// This is the one piece of agent memory outside the clusters; after a restart every SKR is simply probed again.

export type WatcherVerdict =
  /** Events arrive: nothing to do. */
  | { kind: 'healthy' }
  /** Quiet for too long: write a probe now and look again after `timeoutMs`. */
  | { kind: 'probe'; timeoutMs: number }
  /** A probe is out: look again after `afterMs`. `broken` is set while an earlier probe already went unanswered:
   * the webhook stays reported broken until an event arrives, whatever wakes the Kyma in between. */
  | { kind: 'waiting'; afterMs: number; broken?: string }
  /** A probe got no event in time: the webhook is broken; write a new probe to notice recovery. */
  | { kind: 'broken'; message: string; timeoutMs: number };

export interface WatcherHealthOptions {
  /** An SKR without events for this long is probed. */
  quietAfterMs: number;
  /** A probe must come back as an event within this bound. */
  probeTimeoutMs: number;
}

export interface WatcherHealth {
  recordEvent(runtimeId: string, at: Date): void;
  recordProbe(runtimeId: string, at: Date): void;
  assess(runtimeId: string, now: Date): WatcherVerdict;
  forget(runtimeId: string): void;
}

export function createWatcherHealth(options: WatcherHealthOptions): WatcherHealth {
  const lastEvent = new Map<string, number>();
  const probeSent = new Map<string, number>();
  /** Why the webhook counts as broken, from the first unanswered probe until an event arrives. */
  const brokenBecause = new Map<string, string>();
  return {
    recordEvent(runtimeId, at) {
      lastEvent.set(runtimeId, Math.max(at.getTime(), lastEvent.get(runtimeId) ?? 0));
    },
    recordProbe(runtimeId, at) {
      probeSent.set(runtimeId, at.getTime());
    },
    forget(runtimeId) {
      lastEvent.delete(runtimeId);
      probeSent.delete(runtimeId);
      brokenBecause.delete(runtimeId);
    },
    assess(runtimeId, now) {
      const nowMs = now.getTime();
      const event = lastEvent.get(runtimeId);
      const probe = probeSent.get(runtimeId);
      if (probe !== undefined && event !== undefined && event >= probe) {
        probeSent.delete(runtimeId);
        brokenBecause.delete(runtimeId);
        return { kind: 'healthy' };
      }
      if (probe === undefined) {
        if (event !== undefined && nowMs - event < options.quietAfterMs) return { kind: 'healthy' };
        return { kind: 'probe', timeoutMs: options.probeTimeoutMs };
      }
      const waited = nowMs - probe;
      if (waited < options.probeTimeoutMs) {
        const broken = brokenBecause.get(runtimeId);
        const afterMs = options.probeTimeoutMs - waited;
        return broken === undefined ? { kind: 'waiting', afterMs } : { kind: 'waiting', afterMs, broken };
      }
      const seconds = Math.round(options.probeTimeoutMs / 1000);
      const last =
        event === undefined
          ? 'no event since the agent started'
          : `last event ${new Date(event).toISOString()}`;
      const message = `the SKR webhook sent no event within ${seconds} s of a probe written at ${new Date(probe).toISOString()} (${last})`;
      brokenBecause.set(runtimeId, message);
      return { kind: 'broken', message, timeoutMs: options.probeTimeoutMs };
    },
  };
}
