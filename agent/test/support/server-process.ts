// Starts a test server script (listener-process.ts, peer-process.ts) in a process of its own and reads the JSON
// line it prints once listening, so a test can read that process's descriptors and memory from /proc.
import { spawn, type ChildProcess } from 'node:child_process';

export interface StartedProcess<T> {
  child: ChildProcess;
  started: T;
  stop(): Promise<void>;
}

export async function startServerScript<T>(
  script: string,
  env: Record<string, string>,
): Promise<StartedProcess<T>> {
  const child = spawn(process.execPath, ['--import', 'tsx', '--conditions=source', script], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const line = await new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const end = out.indexOf('\n');
      if (end !== -1) resolve(out.slice(0, end));
    });
    child.once('exit', (code) => reject(new Error(`${script} exited (${code}) before listening`)));
  });
  return {
    child,
    started: JSON.parse(line) as T,
    stop: async () => {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await exited;
    },
  };
}
