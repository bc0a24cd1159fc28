// Child processes of the test environment, and the guarantee that none outlives this process.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';

const live = new Set<ChildProcess>();
let hooksInstalled = false;

/** `setpriv --pdeathsig` makes the kernel kill the child if this process dies, even by SIGKILL. */
const hasSetpriv = spawnSync('setpriv', ['--help'], { stdio: 'ignore' }).status === 0;

function installExitHooks(): void {
  if (hooksInstalled) return;
  hooksInstalled = true;
  // 'exit' handlers must be synchronous: SIGKILL whatever is left.
  process.on('exit', () => {
    for (const child of live) child.kill('SIGKILL');
  });
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.once(signal, () => {
      for (const child of live) child.kill('SIGKILL');
      // Exit as the default handler would have, unless the program installed its own handler.
      if (process.listenerCount(signal) === 0)
        process.exit(128 + (signal === 'SIGINT' ? 2 : signal === 'SIGTERM' ? 15 : 1));
    });
  }
}

export interface ManagedProcess {
  readonly pid: number;
  readonly exited: Promise<number | null>;
  /** SIGTERM, then SIGKILL after `graceMs`. Resolves once the process is gone. */
  stop(graceMs?: number): Promise<void>;
  isRunning(): boolean;
}

/**
 * Starts a binary whose output goes to `logFile`; it is killed when this process exits. `env` is added to this
 * process's environment for it alone.
 */
export function startProcess(
  binary: string,
  args: string[],
  logFile: string,
  env?: Record<string, string>,
): ManagedProcess {
  installExitHooks();
  const [command, argv] = hasSetpriv
    ? ['setpriv', ['--pdeathsig', 'SIGKILL', '--', binary, ...args]]
    : [binary, args];
  const log = createWriteStream(logFile, { flags: 'a' });
  const child = spawn(command, argv as string[], {
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(env ? { env: { ...process.env, ...env } } : {}),
  });
  child.stdout?.pipe(log);
  child.stderr?.pipe(log);
  live.add(child);
  let running = true;
  const exited = new Promise<number | null>((resolve) => {
    child.once('exit', (code) => {
      running = false;
      live.delete(child);
      resolve(code);
    });
    child.once('error', () => {
      running = false;
      live.delete(child);
      resolve(null);
    });
  });
  return {
    pid: child.pid ?? -1,
    exited,
    isRunning: () => running,
    async stop(graceMs = 5000) {
      if (!running) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** PIDs of the children still alive; tests use it to prove clean shutdown. */
export function liveChildPids(): number[] {
  return [...live].map((child) => child.pid ?? -1).filter((pid) => pid > 0);
}
