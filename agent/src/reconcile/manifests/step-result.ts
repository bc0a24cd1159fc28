// What the steps of a Manifest's pass answer: go on with a value, or end the pass with the status to write; what the
// Kyma pass learns from the whole; and the text an error leaves in the Manifest's status.
import type { Manifest } from '@skr-watcher/api';
import { writeStatus, type StatusInput, type StatusWriter } from './manifest-status.js';

/** What the Kyma pass learns from one Manifest's reconcile. */
export interface ManifestOutcome {
  /** The Manifest as this pass left it (its status is what the Kyma reports); undefined once it is gone. */
  manifest: Manifest | undefined;
}

/** One step's answer: the next step gets `value`, or the pass ends here with `status` written. */
export type StepResult<T> = { proceed: true; value: T } | { proceed: false; status: StatusInput };

export function proceed<T>(value: T): StepResult<T> {
  return { proceed: true, value };
}

export function halt(status: StatusInput): StepResult<never> {
  return { proceed: false, status };
}

/** The pass ends with `status`: written (when a reader would see a change), and the Manifest as written answered. */
export async function endWith(
  ctx: StatusWriter,
  manifest: Manifest,
  status: StatusInput,
): Promise<ManifestOutcome> {
  return { manifest: await writeStatus(ctx, manifest, status) };
}

export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
