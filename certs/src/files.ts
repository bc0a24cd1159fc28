// Files the CLI reads and writes: PEM inputs with clear errors, private keys with mode 0600.
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';

/** PEM files are small; refuse anything large so a wrong path (a disk image, /dev/zero) fails fast. */
const MAX_PEM_BYTES = 1024 * 1024;

export function readPemFile(path: string, what: string): string {
  let content: Buffer;
  try {
    content = readFileSync(path);
  } catch (cause) {
    throw new Error(`read ${what} ${path}: ${(cause as NodeJS.ErrnoException).code ?? 'unreadable'}`, {
      cause,
    });
  }
  if (content.length > MAX_PEM_BYTES)
    throw new Error(`read ${what} ${path}: larger than 1 MiB, not a PEM file`);
  return content.toString('utf8');
}

export interface OutputFile {
  name: string;
  content: string;
  secret: boolean;
}

/** Writes files into `dir`; keys get mode 0600 even when a file with a wider mode was there. */
export function writeOutputFiles(dir: string, files: OutputFile[], overwrite: boolean): string[] {
  try {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
  } catch (cause) {
    throw new Error(`create output directory ${dir}`, { cause });
  }
  const paths = files.map((file) => join(dir, file.name));
  if (!overwrite) {
    const existing = paths.filter((path) => existsSync(path));
    if (existing.length > 0) throw new Error(`refusing to overwrite ${existing.join(', ')} (pass --force)`);
  }
  files.forEach((file, i) => {
    const path = paths[i] as string;
    // A fresh file created with its final mode, then renamed: a key is never readable by others, not even briefly.
    const temporary = `${path}.${randomBytes(4).toString('hex')}.tmp`;
    try {
      writeFileSync(temporary, file.content, { mode: file.secret ? 0o600 : 0o644, flag: 'wx' });
      renameSync(temporary, path);
    } catch (cause) {
      rmSync(temporary, { force: true });
      throw new Error(`write ${path}`, { cause });
    }
  });
  return paths;
}
