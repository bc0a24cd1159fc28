// Silent-connection flood (decision 022): TCP connections that never send a ClientHello against the callback
// listener or a replica's peer endpoint, each in a process of its own. Prints, per round, what the server holds
// while flooded and after the peers left: descriptors, RSS, the main malloc arena ([heap]), glibc's thread
// arenas, and V8's heap and external memory (after a forced GC), so native memory can be told from V8's.
//
//   npx tsx --conditions=source test/bench/silent-flood-bench.ts -- [--server listener|peer] [--connections 9900]
//     [--rounds 3] [--hold-ms 3000] [--env MALLOC_ARENA_MAX=2] [--max-connections N] [--idle-timeout-ms N]
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { loadavg } from 'node:os';
import type { Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { descriptorCount, openSilentConnections } from '../support/descriptors.js';
import { nativeMemory } from '../support/process-memory.js';
import type { ServerMemoryReport } from '../../agent/test/support/server-memory.js';

const { values } = parseArgs({
  args: process.argv.slice(2).filter((arg) => arg !== '--'),
  options: {
    server: { type: 'string', default: 'peer' },
    connections: { type: 'string', default: '9900' },
    rounds: { type: 'string', default: '3' },
    'hold-ms': { type: 'string', default: '3000' },
    env: { type: 'string', multiple: true, default: [] },
    'max-connections': { type: 'string' },
    'idle-timeout-ms': { type: 'string', default: '600000' },
    // Diagnosis only: gdb prints glibc's malloc_stats (bytes in use vs held) and calls malloc_trim(0).
    'gdb-trim': { type: 'boolean', default: false },
  },
});
const CONNECTIONS = Number(values.connections);
const SERVER = values.server === 'listener' ? 'listener' : 'peer';
const script = fileURLToPath(new URL(`../../agent/test/support/${SERVER}-process.ts`, import.meta.url));
const prefix = SERVER === 'listener' ? 'LISTENER' : 'PEER';
const extraEnv = Object.fromEntries(
  (values.env ?? []).map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]),
);

const child: ChildProcess = spawn(
  process.execPath,
  ['--expose-gc', '--import', 'tsx', '--conditions=source', script],
  {
    env: {
      ...process.env,
      ...extraEnv,
      [`${prefix}_IDLE_TIMEOUT_MS`]: values['idle-timeout-ms'],
      ...(values['max-connections'] ? { [`${prefix}_MAX_CONNECTIONS`]: values['max-connections'] } : {}),
    },
    stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
  },
);
const port = await new Promise<number>((resolve, reject) => {
  let out = '';
  child.stdout?.on('data', (chunk: Buffer) => {
    out += chunk.toString();
    const end = out.indexOf('\n');
    if (end !== -1) resolve((JSON.parse(out.slice(0, end)) as { port: number }).port);
  });
  child.once('exit', (code) => reject(new Error(`server process exited (${code})`)));
});
const pid = child.pid as number;

const v8Memory = (gc: boolean) =>
  new Promise<ServerMemoryReport>((resolve) => {
    child.once('message', (report) => resolve(report as ServerMemoryReport));
    child.send({ memory: true, gc });
  });
const mb = (bytes: number) => (bytes / 1024 / 1024).toFixed(0);
async function report(phase: string, gc = false): Promise<void> {
  const v8 = await v8Memory(gc);
  const native = await nativeMemory(pid);
  console.log(
    [
      phase.padEnd(26),
      `fds ${String(descriptorCount(pid)).padStart(5)}`,
      `rss ${String(Math.round(native.rssKb / 1024)).padStart(4)} MB`,
      `[heap] ${String(Math.round(native.brkHeapKb / 1024)).padStart(4)} MB`,
      `arenas ${native.arenas} (${Math.round(native.arenaKb / 1024)} MB)`,
      `v8 heap ${mb(v8.heapTotal)} MB (used ${mb(v8.heapUsed)})`,
      `external ${mb(v8.external)} MB`,
      `load ${loadavg()[0]!.toFixed(1)}`,
    ].join('  '),
  );
}

console.log(
  `${SERVER}: ${CONNECTIONS} silent connections x ${values.rounds} rounds, env ${JSON.stringify(extraEnv)}, max ${values['max-connections'] ?? 'default'}`,
);
await report('start', true);
for (let round = 1; round <= Number(values.rounds); round++) {
  const peers: Socket[] = [];
  for (let opened = 0; opened < CONNECTIONS; opened += 500) {
    peers.push(...(await openSilentConnections(port, Math.min(500, CONNECTIONS - opened)).catch(() => [])));
  }
  await sleep(Number(values['hold-ms']));
  await report(`round ${round}: held (${peers.length})`);
  for (const peer of peers) peer.destroy();
  await sleep(5_000);
  await report(`round ${round}: 5 s after`);
  await report(`round ${round}: after GC`, true);
  if (values['gdb-trim']) {
    const gdb = (call: string) =>
      spawnSync('gdb', ['-p', String(pid), '-batch', '-ex', `call ${call}`], { encoding: 'utf8' });
    gdb('(void)malloc_stats()');
    gdb('(int)malloc_trim(0)');
    await report(`round ${round}: after malloc_trim`);
  }
}
await sleep(30_000);
await report('30 s later, after GC', true);
child.kill('SIGTERM');
