// What one Kyma with one installed module costs the agent in memory, run as the image runs it (the bundle that
// manifests/kcp's Deployment starts, with its NODE_OPTIONS and MALLOC_ARENA_MAX), and what a pass woken with nothing
// changed costs the SKR. A local system on real kube-apiservers and a real registry: the Kyma of skr1 enables the
// sample module; once it is Ready, callbacks as skr1's webhook sends them (mTLS, upstream's body) wake the agent. The
// agent's RSS is read from /proc every 200 ms from the moment it runs, its peak also from the kernel's high-water
// mark (VmHWM); the breakdown from its own /metrics (V8's heap spaces, external memory) and /proc/<pid>/smaps_rollup.
// The SKR's requests and writes per pass from the SKR API server's apiserver_request_total. Nothing passes or fails.
//
//   npm run bench:agent-memory -- [--callbacks 10] [--steady 30] [--agent-script agent/dist/bundle/main.cjs]
//     [--manifest-kb 20]  the module's raw manifest padded with ConfigMaps to that size, a real module's (default: one
//                         ConfigMap)
//     [--heap-snapshot]   also writes a heap snapshot at the end and prints its largest constructors
//     [--env NAME=VALUE]  an environment variable added to the shipped ones (repeatable), to try an allocator or V8 setting
//     [--keep-logs]       keeps the system's directory (the agent's log among it) and prints where
import { execFileSync } from 'node:child_process';
import { mkdir, mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { eventually } from '../support/eventually.js';
import { sumOf, type Samples } from '../support/prometheus-text.js';
import {
  agentMetrics,
  kymaReadyWithModules,
  noopCallbacks,
  settleCallbacks,
} from '../support/system/callbacks.js';
import { startLocalSystem, type LocalSystem } from '../support/system/index.js';
import { sampleModules } from '../support/system/modules.js';
import { documentMarkers } from '@skr-watcher/oci';
import { shippedAgentEnv, shippedAgentScript } from '../support/shipped-agent.js';

function flag(name: string, fallback: string): string {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 && process.argv[at + 1] ? (process.argv[at + 1] as string) : fallback;
}

const CALLBACKS = Number(flag('callbacks', '10'));
const STEADY_SECONDS = Number(flag('steady', '30'));
const MANIFEST_BYTES = Number(flag('manifest-kb', '0')) * 1000;
const HEAP_SNAPSHOT = process.argv.includes('--heap-snapshot');
const KEEP_LOGS = process.argv.includes('--keep-logs');
const EXTRA_ENV = process.argv.flatMap((arg, at) =>
  process.argv[at - 1] === '--env' && arg.includes('=')
    ? [arg.split(/=(.*)/s).slice(0, 2) as [string, string]]
    : [],
);
const SAMPLE_MS = 200;
const MIB = 2 ** 20;
const mib = (bytes: number) => (bytes / MIB).toFixed(1);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const uptime = () => execFileSync('uptime', { encoding: 'utf8' }).trim();

/** `/proc/<pid>/status` or `smaps_rollup` fields in bytes (the kernel writes them in kB). */
async function procKb(pid: number, file: string): Promise<Map<string, number>> {
  const text = await readFile(`/proc/${pid}/${file}`, 'utf8');
  const fields = new Map<string, number>();
  for (const match of text.matchAll(/^(\w+):\s+(\d+) kB$/gm))
    fields.set(match[1] as string, Number(match[2]) * 1024);
  return fields;
}

/** RSS of `pid` every SAMPLE_MS until stopped; each sample tagged with the phase it was taken in. */
function sampleRss(pid: number) {
  const samples: { phase: string; rss: number; hwm: number }[] = [];
  let phase = 'start';
  let running = true;
  const loop = (async () => {
    while (running) {
      const status = await procKb(pid, 'status').catch(() => new Map<string, number>());
      const [rss, hwm] = [status.get('VmRSS'), status.get('VmHWM')];
      if (rss !== undefined && hwm !== undefined) samples.push({ phase, rss, hwm });
      await sleep(SAMPLE_MS);
    }
  })();
  return {
    phase: (next: string) => (phase = next),
    stop: async () => {
      running = false;
      await loop;
      return samples;
    },
  };
}

async function kymaWithModuleReady(system: LocalSystem): Promise<void> {
  await eventually(
    'the Kyma Ready with its module Ready',
    async () => ((await kymaReadyWithModules(system, 'skr1', 1)) ? true : undefined),
    300_000,
    500,
  );
}

/** Where the agent's memory is now: V8's spaces and external memory from its /metrics, the rest from the kernel. */
async function breakdown(system: LocalSystem): Promise<string[]> {
  const metrics: Samples = await agentMetrics(system);
  const rollup = await procKb(system.agent.pid, 'smaps_rollup');
  const brkHeap = await mainArenaRss(system.agent.pid);
  const heapTotal = sumOf(metrics, 'nodejs_heap_size_total_bytes');
  const external = sumOf(metrics, 'nodejs_external_memory_bytes');
  const rssAnon = rollup.get('Anonymous') ?? 0;
  const spaces = [...metrics]
    .filter(([key]) => key.startsWith('nodejs_heap_space_size_used_bytes{'))
    .map(([key, used]) => {
      const space = /space="([^"]+)"/.exec(key)?.[1] ?? key;
      const total = metrics.get(key.replace('_used_bytes', '_total_bytes')) ?? 0;
      return { space, used, total };
    })
    .filter(({ total }) => total > 0)
    .sort((a, b) => b.total - a.total);
  return [
    `RSS ${mib(rollup.get('Rss') ?? 0)} MiB = anonymous ${mib(rssAnon)} + file-backed ${mib((rollup.get('Rss') ?? 0) - rssAnon)} ` +
      `(node's own code and libraries, shared with every node process)`,
    `V8 heap: used ${mib(sumOf(metrics, 'nodejs_heap_size_used_bytes'))} MiB of ${mib(heapTotal)} MiB committed; ` +
      spaces.map(({ space, used, total }) => `${space} ${mib(used)}/${mib(total)}`).join(', '),
    `external ${mib(external)} MiB (array buffers ${mib(sumOf(metrics, 'nodejs_array_buffers_bytes'))} MiB)`,
    `native (anonymous RSS beyond V8's committed heap: glibc arenas, compiled code's metadata, libuv, OpenSSL): ` +
      `${mib(rssAnon - heapTotal)} MiB, of which glibc's main arena (the brk heap) ${mib(brkHeap)} MiB`,
  ];
}

/** Resident bytes of the process's brk heap: glibc's main arena, where the main thread's malloc()s go. */
async function mainArenaRss(pid: number): Promise<number> {
  const smaps = await readFile(`/proc/${pid}/smaps`, 'utf8');
  const heap = /\[heap\]\n(?:.*\n)*?Rss:\s+(\d+) kB/.exec(smaps);
  return heap ? Number(heap[1]) * 1024 : 0;
}

/** The largest entries of a heap snapshot by constructor (self sizes), from V8's JSON format. */
async function heapSnapshotSummary(file: string, rows = 15): Promise<string[]> {
  const snapshot = JSON.parse(await readFile(file, 'utf8')) as {
    snapshot: { meta: { node_fields: string[]; node_types: [string[]] } };
    nodes: number[];
    strings: string[];
  };
  const fields = snapshot.snapshot.meta.node_fields;
  const [typeAt, nameAt, sizeAt] = ['type', 'name', 'self_size'].map((field) => fields.indexOf(field)) as [
    number,
    number,
    number,
  ];
  const types = snapshot.snapshot.meta.node_types[0];
  const bySize = new Map<string, { size: number; count: number }>();
  let total = 0;
  for (let at = 0; at < snapshot.nodes.length; at += fields.length) {
    const type = types[snapshot.nodes[at + typeAt] as number] as string;
    const name = snapshot.strings[snapshot.nodes[at + nameAt] as number] as string;
    const key = type === 'object' || type === 'closure' ? `${type} ${name}` : `(${type})`;
    const size = snapshot.nodes[at + sizeAt] as number;
    const entry = bySize.get(key) ?? { size: 0, count: 0 };
    entry.size += size;
    entry.count++;
    bySize.set(key, entry);
    total += size;
  }
  return [
    `heap snapshot: ${mib(total)} MiB in ${snapshot.nodes.length / fields.length} objects; largest by constructor:`,
    ...[...bySize]
      .sort((a, b) => b[1].size - a[1].size)
      .slice(0, rows)
      .map(([key, { size, count }]) => `  ${mib(size).padStart(6)} MiB ${String(count).padStart(7)}  ${key}`),
  ];
}

async function main(): Promise<void> {
  const script = resolve(flag('agent-script', shippedAgentScript()));
  const env = { ...shippedAgentEnv(), ...Object.fromEntries(EXTRA_ENV) };
  const parent = await mkdtemp(join(tmpdir(), 'agent-memory-'));
  const snapshots = join(parent, 'snapshots');
  if (HEAP_SNAPSHOT) {
    await mkdir(snapshots);
    env.NODE_OPTIONS = `${env.NODE_OPTIONS ?? ''} --heapsnapshot-signal=SIGUSR2 --diagnostic-dir=${snapshots}`;
  }
  console.log(`start: ${uptime()}`);
  console.log(`agent: ${script} with ${JSON.stringify(env)}`);
  const manifest = sampleModules({ manifestBytes: MANIFEST_BYTES })[0]!.rawManifest;
  console.log(
    `module: sample 1.0.0, raw manifest of ${manifest.length} bytes in ${documentMarkers(manifest) + 1} documents`,
  );
  let system: LocalSystem | undefined;
  let failed = true;
  try {
    system = await startLocalSystem({
      dir: join(parent, 'system'),
      skrs: ['skr1'],
      modules: true,
      sampleManifestBytes: MANIFEST_BYTES,
      shippedAgent: { script, env },
    });
    const rss = sampleRss(system.agent.pid);
    rss.phase('install');
    await kymaWithModuleReady(system);
    rss.phase('settle');
    await settleCallbacks(system, 'skr1');
    rss.phase('callbacks');
    const noop = await noopCallbacks(system, 'skr1', CALLBACKS);
    rss.phase('steady');
    await sleep(STEADY_SECONDS * 1000);
    const parts = await breakdown(system);
    const samples = await rss.stop();
    const peak = (await procKb(system.agent.pid, 'status')).get('VmHWM') ?? 0;
    const of = (phase: string) => samples.filter((sample) => sample.phase === phase).map((s) => s.rss);
    const range = (values: number[]) =>
      values.length === 0 ? 'no samples' : `${mib(Math.min(...values))}–${mib(Math.max(...values))} MiB`;

    console.log(`end: ${uptime()}`);
    console.log(
      `RSS: peak ${mib(peak)} MiB (VmHWM, since the agent started); sampled max ${mib(Math.max(...samples.map((s) => s.rss)))} MiB`,
    );
    // The high-water mark at the first sample is what starting took; after that, each phase's growth of it.
    let hwmBefore = 0;
    for (const phase of ['install', 'settle', 'callbacks', 'steady']) {
      const hwms = samples.filter((sample) => sample.phase === phase).map((s) => s.hwm);
      const hwm = hwms.length > 0 ? Math.max(...hwms) : hwmBefore;
      const grew =
        phase === 'install' && hwms.length > 0
          ? `peak ${mib(hwms[0] as number)} MiB when started, ${mib(hwm)} MiB by its end`
          : hwm > hwmBefore
            ? `peak grew to ${mib(hwm)} MiB`
            : 'peak unchanged';
      console.log(`  ${phase.padEnd(9)} ${range(of(phase))} (${of(phase).length} samples; ${grew})`);
      hwmBefore = Math.max(hwmBefore, hwm);
    }
    for (const line of parts) console.log(line);
    const per = (n: number) => (noop.passes > 0 ? (n / noop.passes).toFixed(2) : 'n/a');
    console.log(
      `${CALLBACKS} callbacks with nothing changed: ${noop.passes} passes; SKR requests ${noop.requests} ` +
        `(${per(noop.requests)} per pass: ${[...noop.served].map(([what, n]) => `${what} ${n}`).join(', ') || 'none'}), ` +
        `SKR writes ${noop.writes} (${per(noop.writes)} per pass)`,
    );
    if (HEAP_SNAPSHOT) {
      process.kill(system.agent.pid, 'SIGUSR2');
      // V8 writes the file in pieces from the agent's thread: it is complete once it parses.
      const summary = await eventually(
        'the heap snapshot written',
        async () => {
          const file = (await readdir(snapshots)).find((name) => name.endsWith('.heapsnapshot'));
          return file ? await heapSnapshotSummary(join(snapshots, file)) : undefined;
        },
        180_000,
        2_000,
      );
      for (const line of summary) console.log(line);
    }
    failed = false;
  } finally {
    await system?.stop({ keepDir: failed || KEEP_LOGS });
    if (failed || KEEP_LOGS) console.log(`agent memory bench: logs kept in ${parent}`);
    else await rm(parent, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
