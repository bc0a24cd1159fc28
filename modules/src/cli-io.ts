// What every skr-modules command stands on: where it writes, and the error that means it was called wrongly.
export interface CliIo {
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
}

/** A mistake in how the command was called (exit 2), as opposed to a failure while doing it (exit 1). */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}
