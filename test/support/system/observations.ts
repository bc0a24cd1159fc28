// What the webhooks log and the agent streams, fanned out to whoever follows a change through the system, and the
// lines that print such a change's steps in time order.
import type { LiveEvent } from './live-events.js';
import type { AdmissionSeen } from './index.js';

/** Fans out what the webhooks log and the agent streams, so an edit can wait for its own traces. */
export class EdgeObservations {
  private readonly admissionListeners = new Set<(seen: AdmissionSeen) => void>();
  private readonly eventListeners = new Set<(event: LiveEvent) => void>();

  admission(seen: AdmissionSeen): void {
    for (const listener of this.admissionListeners) listener(seen);
  }

  event(event: LiveEvent): void {
    for (const listener of this.eventListeners) listener(event);
  }

  onAdmission(listener: (seen: AdmissionSeen) => void): () => void {
    this.admissionListeners.add(listener);
    return () => this.admissionListeners.delete(listener);
  }

  onEvent(listener: (event: LiveEvent) => void): () => void {
    this.eventListeners.add(listener);
    return () => this.eventListeners.delete(listener);
  }
}

/** Steps in time order with offsets from `startMs`, then those not observed. */
export function formatSteps(startMs: number, steps: { atMs: number | undefined; what: string }[]): string[] {
  const offset = (atMs: number) => `+${atMs - startMs} ms`.padStart(9);
  const seen = steps
    .filter((step): step is { atMs: number; what: string } => step.atMs !== undefined)
    .sort((a, b) => a.atMs - b.atMs)
    .map((step) => `  ${offset(step.atMs)}  ${step.what}`);
  const missing = steps
    .filter((step) => step.atMs === undefined)
    .map((step) => `  ${'—'.padStart(9)}  ${step.what}: not observed`);
  return [...seen, ...missing];
}
