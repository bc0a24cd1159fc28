// A local system's child processes (skr-agent, one skr-webhook per SKR): run from source through tsx, output to a
// log file, killed with the process that started them (the demo, a suite, a bench) even if it is killed.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const REPO = fileURLToPath(new URL('../../../', import.meta.url));

/** The entry points of the two binaries, from source: a fresh clone runs the demo without a build. */
export const ENTRY_POINTS = {
  agent: `${REPO}agent/src/main.ts`,
  webhook: `${REPO}webhook/src/main.ts`,
} as const;

/** `setpriv --pdeathsig` makes the kernel kill a child when its starter dies, even by SIGKILL. */
const hasSetpriv = spawnSync('setpriv', ['--help'], { stdio: 'ignore' }).status === 0;
const live = new Set<ChildProcess>();
let exitHookInstalled = false;

export interface ChildOptions {
  /** Names the child in messages, e.g. `skr-agent` or `skr-webhook (skr1)`. */
  name: string;
  entry: string;
  args?: string[];
  /** A compiled program (a Go manager) to run with `args` instead of node with `entry`. */
  executable?: string;
  /** Flags for node itself, before the entry point (e.g. --cpu-prof for a benchmark's profile). */
  nodeArgs?: string[];
  env?: Record<string, string>;
  /** stdout and stderr are appended here. */
  logFile: string;
  /** Called for every stdout line (JSON logs), e.g. to pick timestamps out of debug lines. */
  onLine?: (line: string) => void;
}

export interface Child {
  readonly name: string;
  /** The arguments after the entry point, as started. */
  readonly args: readonly string[];
  /** Starts the same program again (e.g. after a kill -9 in a fault test), with `overrides` of its options. */
  relaunch(overrides?: Partial<ChildOptions>): Child;
  readonly pid: number;
  readonly logFile: string;
  /** Resolves with the exit code (or the signal name) once the process is gone. */
  readonly exited: Promise<number | string>;
  isRunning(): boolean;
  /** SIGTERM, SIGKILL after `graceMs`; resolves when the process is gone. */
  stop(graceMs?: number): Promise<void>;
}

export function startChild(options: ChildOptions): Child {
  if (!exitHookInstalled) {
    exitHookInstalled = true;
    // 'exit' handlers run synchronously: whatever is still alive is killed outright.
    process.on('exit', () => {
      for (const child of live) child.kill('SIGKILL');
    });
  }
  const nodeArgs = [
    ...(options.nodeArgs ?? []),
    '--import',
    'tsx',
    '--conditions=source',
    options.entry,
    ...(options.args ?? []),
  ];
  const [program, programArgs] = options.executable
    ? [options.executable, options.args ?? []]
    : [process.execPath, nodeArgs];
  const [command, argv] = hasSetpriv
    ? ['setpriv', ['--pdeathsig', 'SIGKILL', '--', program, ...programArgs]]
    : [program, programArgs];
  const child = spawn(command, argv, {
    cwd: REPO,
    env: { ...process.env, ...options.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  if (child.pid === undefined) throw new Error(`start ${options.name}: no process was created`);
  live.add(child);
  const log = createWriteStream(options.logFile, { flags: 'a' });
  child.stderr?.pipe(log, { end: false });
  if (child.stdout) {
    const lines = createInterface({ input: child.stdout, crlfDelay: Infinity });
    lines.on('line', (line) => {
      log.write(`${line}\n`);
      options.onLine?.(line);
    });
  }
  let running = true;
  const exited = new Promise<number | string>((resolve) => {
    // 'close' comes after the output streams ended, so every line reached the log before it is closed.
    child.once('close', (code, signal) => {
      running = false;
      live.delete(child);
      log.end();
      resolve(code ?? signal ?? 'unknown');
    });
    child.once('error', (error) => {
      log.write(`${options.name}: ${error.message}\n`);
    });
  });
  return {
    name: options.name,
    args: options.args ?? [],
    relaunch: (overrides = {}) => startChild({ ...options, ...overrides }),
    pid: child.pid,
    logFile: options.logFile,
    exited,
    isRunning: () => running,
    async stop(graceMs = 10_000) {
      if (!running) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(timer);
    },
  };
}
