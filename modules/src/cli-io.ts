// What every skr-modules command stands on: where it writes, the error that means it was called wrongly, and how
// it reads the files it is given.
import { readFile } from 'node:fs/promises';

export interface CliIo {
  stdout: { write(text: string): unknown };
  stderr: { write(text: string): unknown };
}

/** A mistake in how the command was called (exit 2), as opposed to a failure while doing it (exit 1). */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/** The text of a file the command was given; a file that cannot be read is a usage mistake that names it. */
export async function readText(path: string, what: string): Promise<string> {
  try {
    return await readFile(path, 'utf8');
  } catch (cause) {
    throw new UsageError(
      `${what} ${path}: ${(cause as NodeJS.ErrnoException).code ?? (cause as Error).message}`,
    );
  }
}
