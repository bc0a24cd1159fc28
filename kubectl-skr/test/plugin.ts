// Runs the built kubectl-skr (kubectl-skr/dist/main.js) as an engineer would: arguments in, stdout, stderr and the
// exit code out.
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const repo = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const BINARY = join(repo, 'kubectl-skr', 'dist', 'main.js');

/** Builds kubectl-skr and its references (incremental: fast when nothing changed). */
export function buildPlugin(): void {
  execFileSync(
    process.execPath,
    [join(repo, 'node_modules', 'typescript', 'bin', 'tsc'), '-b', join(repo, 'kubectl-skr')],
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

/** The plugin with a home of its own: no ~/.kube/config or $KUBECONFIG of the machine leaks into a test. */
export function startPlugin(args: string[]): ChildProcess {
  const env = { ...process.env, KUBECONFIG: '/nonexistent/kubeconfig', HOME: '/nonexistent' };
  return spawn(process.execPath, [BINARY, ...args], { stdio: ['ignore', 'pipe', 'pipe'], env });
}

export function kubectlSkr(args: string[]): Promise<RunResult> {
  const child = startPlugin(args);
  let stdout = '';
  let stderr = '';
  child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

/** The JSON audit lines of a run's stderr. */
export function auditLines(stderr: string): Record<string, unknown>[] {
  return stderr
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Record<string, unknown>)
    .filter((line) => line['audit'] === true);
}
