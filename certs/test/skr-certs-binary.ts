// Runs the built skr-certs binary (certs/dist/main.js) as a user would.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
export const BINARY = join(repo, 'certs', 'dist', 'main.js');

/** Builds certs/ and its references (incremental: fast when nothing changed). */
export function buildBinary(): void {
  execFileSync(
    process.execPath,
    [join(repo, 'node_modules', 'typescript', 'bin', 'tsc'), '-b', join(repo, 'certs')],
    {
      stdio: 'inherit',
    },
  );
}

export interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

export function startSkrCerts(args: string[]): ChildProcess {
  // Through this Node (22, from node_modules): tsc does not mark dist/main.js executable.
  return spawn(process.execPath, [BINARY, ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
}

export function skrCerts(args: string[]): Promise<RunResult> {
  const child = startSkrCerts(args);
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}
