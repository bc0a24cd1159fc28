// Agent benchmark (bar: 1,000 SKRs in one process, steady memory ≤ 300 MB, full resync ≤ 60 s).
// Runs the real skr-agent binary against real planes: one KCP with N Kymas, each with its own kubeconfig
// Secret and its own SKR Kyma namespace, spread over two SKR API servers (N SKR API servers do not fit on
// this machine; every Kyma still gets its own SKR client and connection pool in the agent, as with N SKRs).
//
//   npm run bench:agent-single -- [--kymas 1000] [--skrs 2] [--workers 8] [--resync 60s] [--source] [--paused]
//                                 [--register] [--profile-resync DIR] [--steady 30] [--catalog 0]
//                                 [--node-flags '--max-semi-space-size=4'] [--heap-snapshot] [--malloc-stats]
//                                 [--agent PATH]
//
// The agent runs from agent/dist (npm run build first) so its memory is that of the shipped binary;
// --source runs agent/src through tsx instead (adds the TypeScript loader's own memory); --agent runs another
// tree's built main.js (A/B). --catalog N offers N modules in KCP (a ModuleReleaseMeta and two ModuleTemplates of
// about 8 kB each, shaped as modulectl writes them), so every Kyma's pass keeps 3N catalog copies in its SKR.
//
// Prints: time until every Kyma is Ready after start, time of one full resync (every Kyma reconciled again),
// and where the agent's memory goes over time: RSS split into V8 heap (committed and used), external and
// ArrayBuffers (process.memoryUsage via /metrics), and from /proc the anonymous memory, glibc's malloc arenas,
// threads and established TCP connections per API server. --steady is the steady phase after the resync
// (seconds); --heap-snapshot writes a snapshot at its end (SIGUSR2, after the figures: it forces a GC) and
// prints it by constructor. Environment variables reach the agent (e.g. MALLOC_ARENA_MAX=2).
//
// What a no-op full reconcile costs (decision 016): over the full resync (nothing changed since the Kymas became
// Ready), per reconcile the agent's CPU, each API server's and etcd's CPU (from /proc, the idle rate of the steady
// phase taken off), the requests by cluster, verb and resource (skr_agent_kube_requests_total) and the TLS
// handshakes, full and resumed. --register turns webhook registration on (in-cluster mode, as manifests/kcp runs
// it): a CA in KCP, and the Kymas of one SKR API server share its runtime-id and one certificate, so that their
// webhook Secret, Deployment and configuration in that SKR agree and a pass finds nothing to change, as with one
// Kyma per SKR. --profile-resync DIR writes a CPU profile of the agent over the resync (inspector) and prints its
// top functions. Keep --resync above the initial phase plus the steady phase, so no second resync overlaps.
// Also prints how many series the agent's /metrics exports (bar: fewer than 5,000 at 1,000 Kymas).
// Figures only; nothing passes or fails.
import { spawn } from 'node:child_process';
import { mkdtempSync, openSync } from 'node:fs';
import { mkdir, readFile, readdir, readlink, writeFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { DEFAULTS, GROUP, KINDS, LABELS, type Kyma } from '@skr-watcher/api';
import { KcpPkiSecrets } from '@skr-watcher/kube';
import { createCa, issueLeaf, webhookDnsNames } from '@skr-watcher/pki';
import { freePort, startEnvironment } from '@skr-watcher/testenv';
import { benchAgentRunArgs, createBenchFleet } from '../support/bench-fleet.js';
import { parseMetrics, sumOf, type Samples } from '../support/prometheus-text.js';
import { realisticCatalog } from '../support/module-catalog.js';
import { formatHeapSummary, snapshotWritten, summariseHeapSnapshot } from '../support/heap-summary.js';
import {
  cpuSeconds,
  nativeMemory,
  tcpConnectionsByRemotePort,
  type NativeMemory,
} from '../support/process-memory.js';
import { startCpuProfile, summariseCpuProfile } from '../support/cpu-profile.js';

const MAIN = fileURLToPath(new URL('../../agent/src/main.ts', import.meta.url));

function flag(name: string, fallback: string): string {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 && process.argv[at + 1] ? (process.argv[at + 1] as string) : fallback;
}

const BUILT = flag('agent', fileURLToPath(new URL('../../agent/dist/main.js', import.meta.url)));
const CATALOG_MODULES = Number(flag('catalog', '0'));

const KYMAS = Number(flag('kymas', '1000'));
const WORKERS = flag('workers', '8');
const RESYNC = flag('resync', '60s');
const NAMESPACE = 'kcp-bench';
const SKRS = Array.from({ length: Number(flag('skrs', '2')) }, (_, i) => `skr${i + 1}`);
const REGISTER = process.argv.includes('--register');
const PROFILE_DIR = flag('profile-resync', '');
const FROM_SOURCE = process.argv.includes('--source');
/** Kymas labelled skip-reconciliation: measures the runtime (watches, caches, queue) without SKR clients. */
const PAUSED = process.argv.includes('--paused');
const STEADY_S = Number(flag('steady', '30'));
/** Node flags for the agent, e.g. `--max-semi-space-size=4 --max-old-space-size=200`. */
const NODE_FLAGS = flag('node-flags', '').split(' ').filter(Boolean);
const HEAP_SNAPSHOT = process.argv.includes('--heap-snapshot');
/** glibc's malloc_stats() of the agent at the end of the steady phase (needs gdb; stops the agent for a moment). */
const MALLOC_STATS = process.argv.includes('--malloc-stats');

const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(0)} MB`;
const load = () => loadavg()[0]!.toFixed(1);

/** One look at the agent's memory: process.memoryUsage() through /metrics, the rest from /proc. */
interface MemorySample {
  atMs: number;
  load1: string;
  rss: number;
  heapTotal: number;
  heapUsed: number;
  external: number;
  arrayBuffers: number;
  native: NativeMemory;
  /** Established connections by API server (kcp, skr1, ...). */
  connections: Record<string, number>;
}

const MEMORY_COLUMNS =
  't(s) load  rss  heapTot heapUsed extern arrBuf | anon brk arenas(n) threads | tcp by server';
function formatSample(s: MemorySample): string {
  const m = (bytes: number) => String(Math.round(bytes / 1048576)).padStart(4);
  const k = (kb: number) => String(Math.round(kb / 1024)).padStart(4);
  const tcp = Object.entries(s.connections)
    .map(([server, n]) => `${server}=${n}`)
    .join(' ');
  return (
    `${String(Math.round(s.atMs / 1000)).padStart(4)} ${s.load1.padStart(4)} ${m(s.rss)} ${m(s.heapTotal)}    ` +
    `${m(s.heapUsed)}   ${m(s.external)}  ${m(s.arrayBuffers)} | ${k(s.native.anonKb)} ${k(s.native.brkHeapKb)} ` +
    `${k(s.native.arenaKb)}(${s.native.arenas}) ${String(s.native.threads).padStart(4)}    | ${tcp}`
  );
}

async function main(): Promise<void> {
  const t0 = Date.now();
  const env = await startEnvironment({ planes: ['kcp', ...SKRS] });
  const kcp = env.plane('kcp').kubeConfig();
  const core = kcp.makeApiClient(CoreV1Api);
  const api = kcp.makeApiClient(CustomObjectsApi);
  const kubeconfigs = await Promise.all(SKRS.map((skr) => readFile(env.plane(skr).kubeconfigPath, 'utf8')));
  let agentExit: Promise<void> | undefined;
  let stopAgent = () => {};
  try {
    await core.createNamespace({ body: { metadata: { name: NAMESPACE } } });
    await createBenchFleet({
      kcp,
      namespace: NAMESPACE,
      kymas: KYMAS,
      kubeconfigs,
      ...(PAUSED ? { labels: { [LABELS.skipReconciliation]: 'true' } } : {}),
      // One runtime-id (and one certificate) per SKR API server: its Kymas then install the same webhook there.
      ...(REGISTER ? { runtimeId: (i: number) => `runtime-${SKRS[i % SKRS.length]}` } : {}),
    });
    if (REGISTER) await registrationSetup(env, core);
    const catalog = realisticCatalog(NAMESPACE, CATALOG_MODULES);
    for (const [kind, objects] of [
      ['moduleReleaseMeta', catalog.metas],
      ['moduleTemplate', catalog.templates],
    ] as const) {
      for (const body of objects)
        await api.createNamespacedCustomObject({
          group: GROUP,
          version: KINDS[kind].version,
          plural: KINDS[kind].plural,
          namespace: NAMESPACE,
          body,
        });
    }
    console.log(
      `setup: ${KYMAS} Kymas and kubeconfig Secrets over ${SKRS.length} SKR API servers, ${CATALOG_MODULES} catalog modules, in ${Date.now() - t0} ms`,
    );

    const snapshotDir = HEAP_SNAPSHOT ? mkdtempSync(join(tmpdir(), 'agent-heap-')) : undefined;
    const logFile = join(mkdtempSync(join(tmpdir(), 'agent-bench-')), 'agent.log');
    console.log(`agent log: ${logFile}`);
    const inspectPort = PROFILE_DIR ? await freePort() : 0;
    const agent = spawn(
      process.execPath,
      [
        ...NODE_FLAGS,
        ...(PROFILE_DIR ? [`--inspect=127.0.0.1:${inspectPort}`] : []),
        ...(snapshotDir ? ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${snapshotDir}`] : []),
        ...(FROM_SOURCE ? ['--import', 'tsx', '--conditions=source', MAIN] : [BUILT]),
        ...benchAgentRunArgs({
          kubeconfig: env.plane('kcp').kubeconfigPath,
          namespace: NAMESPACE,
          metricsAddress: '127.0.0.1:0',
          workers: WORKERS,
          resync: RESYNC,
        }),
        ...(REGISTER
          ? [
              '--register-skr-webhook',
              // Nothing listens there: the webhook never runs in these SKRs (no nodes); only what is installed counts.
              '--skr-webhook-kcp-address',
              '127.0.0.1:8082',
              // No listener, so no callback ever proves a webhook works: one probe, answered "waiting" for an hour.
              '--watcher-probe-timeout',
              '1h',
            ]
          : []),
        '--log-level',
        'warn',
      ],
      // Logs to a file: a pipe nobody reads fills after 64 kB of warnings, and then pino's synchronous writes block
      // the agent (likely why two loaded runs, with ~1,000 failed reconciles, left agents deaf to SIGTERM).
      { stdio: ['ignore', openSync(logFile, 'a'), 'inherit'] },
    );
    agentExit = new Promise((resolve) => agent.once('exit', () => resolve()));
    stopAgent = () => agent.kill('SIGTERM');
    // The start line is logged at info; find the listening port that serves /metrics (the events port does not)
    // from /proc instead of raising the log level.
    const port = await new Promise<number>((resolve, reject) => {
      const deadline = Date.now() + 60_000;
      const poll = async () => {
        const tcp = await readFile('/proc/net/tcp', 'utf8');
        const inodes = new Set<string>();
        for (const fd of await readdir(`/proc/${agent.pid}/fd`).catch(() => [] as string[])) {
          const target = await readlink(`/proc/${agent.pid}/fd/${fd}`).catch(() => '');
          const match = /socket:\[(\d+)\]/.exec(target);
          if (match) inodes.add(match[1] as string);
        }
        for (const line of tcp.split('\n').slice(1)) {
          const cols = line.trim().split(/\s+/);
          // state 0A = LISTEN
          if (cols[3] !== '0A' || !inodes.has(cols[9] ?? '')) continue;
          const listening = parseInt((cols[1] ?? '').split(':')[1] ?? '0', 16);
          const answer = await fetch(`http://127.0.0.1:${listening}/metrics`).catch(() => undefined);
          await answer?.body?.cancel();
          if (answer?.ok) return resolve(listening);
        }
        if (Date.now() > deadline) return reject(new Error('agent metrics port not found'));
        setTimeout(() => void poll(), 200);
      };
      void poll();
    });
    // Under heavy load (20 on 2 cores) /metrics may reset a connection: look again rather than end the run.
    const scrape = async (): Promise<Samples> => {
      for (let attempt = 1; ; attempt++) {
        try {
          return parseMetrics(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text());
        } catch (error) {
          if (attempt >= 5) throw error;
          await new Promise((resolve) => setTimeout(resolve, 200));
        }
      }
    };

    const servers = new Map<number, string>(
      ['kcp', ...SKRS].map((plane) => [
        Number(new URL(env.plane(plane).kubeConfig().getCurrentCluster()?.server ?? 'https://x:0').port),
        plane,
      ]),
    );
    const rss: MemorySample[] = [];
    const started = Date.now();
    const sample = async (): Promise<MemorySample> => {
      const [m, native, byPort] = await Promise.all([
        scrape(),
        nativeMemory(agent.pid as number),
        tcpConnectionsByRemotePort(agent.pid as number),
      ]);
      const connections: Record<string, number> = {};
      for (const [port, n] of byPort) {
        const server = servers.get(port) ?? 'other';
        connections[server] = (connections[server] ?? 0) + n;
      }
      return {
        atMs: Date.now() - started,
        load1: load(),
        rss: sumOf(m, 'process_resident_memory_bytes'),
        heapTotal: sumOf(m, 'nodejs_heap_size_total_bytes'),
        heapUsed: sumOf(m, 'nodejs_heap_size_used_bytes'),
        external: sumOf(m, 'nodejs_external_memory_bytes'),
        arrayBuffers: sumOf(m, 'nodejs_array_buffers_bytes'),
        native,
        connections,
      };
    };
    let sampling = false;
    const sampler = setInterval(() => {
      if (sampling) return; // a loaded machine: never pile samples up
      sampling = true;
      sample()
        .then((s) => rss.push(s))
        .catch(() => {})
        .finally(() => (sampling = false));
    }, 1_000);

    // Phase 1: every Kyma Ready (first reconcile creates the finalizer, the SKR namespace and SKR Kyma).
    const readyCount = async () => {
      const list = (await api.listNamespacedCustomObject({
        group: GROUP,
        version: KINDS.kyma.version,
        plural: KINDS.kyma.plural,
        namespace: NAMESPACE,
      })) as { items: Kyma[] };
      return list.items.filter((k) => k.status?.state === 'Ready').length;
    };
    for (;;) {
      const ready = PAUSED
        ? sumOf(await scrape(), 'skr_agent_reconcile_total{result="paused"}')
        : await readyCount();
      if (ready >= KYMAS) break;
      if (Date.now() - started > 15 * 60_000) throw new Error(`only ${ready}/${KYMAS} Ready after 15 min`);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
    }
    const initialMs = Date.now() - started;
    const afterInitial = await scrape();
    console.log(
      `initial: all ${KYMAS} Kymas ${PAUSED ? 'reconciled (paused)' : 'Ready'} ${initialMs} ms after the agent started; load ${load()}`,
    );

    // Phase 2: a full resync (the Kyma relist enqueues every Kyma) until the queue is idle again.
    const resyncsBefore = sumOf(afterInitial, 'skr_agent_triggers_total{source="resync"}');
    let resyncStart = 0;
    let resyncEnd = 0;
    const processes = costedProcesses(env, agent.pid as number);
    let cpuAtStart: number[] = [];
    let countersAtStart: Samples = new Map();
    let profiling: Awaited<ReturnType<typeof startCpuProfile>> | undefined;
    const deadline = Date.now() + 10 * 60_000;
    while (Date.now() < deadline) {
      const m = await scrape();
      const resyncs = sumOf(m, 'skr_agent_triggers_total{source="resync"}');
      if (!resyncStart && resyncs > resyncsBefore) {
        resyncStart = Date.now();
        cpuAtStart = processes.map((p) => cpuSeconds(p.pid));
        countersAtStart = m;
        if (PROFILE_DIR) profiling = await startCpuProfile(inspectPort);
      }
      const busy = sumOf(m, 'workqueue_depth{name="kyma"}') + sumOf(m, 'workqueue_in_flight{name="kyma"}');
      if (resyncStart && resyncs - resyncsBefore >= KYMAS && busy === 0) {
        resyncEnd = Date.now();
        break;
      }
      // Every scrape costs the agent CPU that the figures below would count: twice a second is enough.
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    const cpuAtEnd = processes.map((p) => cpuSeconds(p.pid));
    const afterResync = await scrape();
    const profile = await profiling?.stop();
    const reconciles = (m: Samples) => sumOf(m, 'skr_agent_reconcile_total');
    console.log(
      resyncEnd
        ? `full resync: ${KYMAS} Kymas reconciled again in ${resyncEnd - resyncStart} ms (${reconciles(afterResync) - reconciles(afterInitial)} reconciles); load ${load()}`
        : 'full resync: did not complete within 10 min',
    );

    // Phase 3: steady state for a while (no further resync is due within it unless --resync is short).
    const steadyFrom = Date.now() - started;
    const cpuAtSteady = processes.map((p) => cpuSeconds(p.pid));
    await new Promise((resolve) => setTimeout(resolve, STEADY_S * 1000));
    const idlePerSecond = processes.map(
      (p, i) => (cpuSeconds(p.pid) - (cpuAtSteady[i] ?? 0)) / ((Date.now() - started - steadyFrom) / 1000),
    );
    const resyncsInSteady =
      sumOf(await scrape(), 'skr_agent_triggers_total{source="resync"}') -
      sumOf(afterResync, 'skr_agent_triggers_total{source="resync"}');
    if (resyncEnd) {
      const passes = reconciles(afterResync) - reconciles(countersAtStart);
      console.log(
        reconcileCost({
          passes,
          seconds: (resyncEnd - resyncStart) / 1000,
          processes,
          cpu: cpuAtEnd.map((cpu, i) => cpu - (cpuAtStart[i] ?? 0)),
          idlePerSecond,
          before: countersAtStart,
          after: afterResync,
        }),
      );
      if (resyncsInSteady > 0)
        console.log(
          `  (a resync started during the steady phase: the idle rates above include it; use a longer --resync)`,
        );
      if (profile && PROFILE_DIR) {
        const file = join(PROFILE_DIR, `agent-resync-${Date.now()}.cpuprofile`);
        await mkdir(PROFILE_DIR, { recursive: true });
        await writeFile(file, JSON.stringify(profile));
        console.log(`${summariseCpuProfile(profile)}\n  (profile: ${file})`);
      }
    }
    clearInterval(sampler);
    const steady = rss.filter((s) => s.atMs >= steadyFrom);
    const peak = rss.reduce((max, s) => Math.max(max, s.rss), 0);
    const maxOf = (pick: (s: MemorySample) => number) => Math.max(...steady.map(pick));
    console.log(
      `memory: peak RSS ${mb(peak)}; steady RSS ${mb(maxOf((s) => s.rss))} (heap total ${mb(maxOf((s) => s.heapTotal))}, ` +
        `heap used ${mb(maxOf((s) => s.heapUsed))}, external ${mb(maxOf((s) => s.external))}, ` +
        `arrayBuffers ${mb(maxOf((s) => s.arrayBuffers))}) over the last ${STEADY_S} s (max of each); load ${load()}`,
    );
    // V8 shrinks its heap some seconds after the burst (memory reducer): the last samples show where RSS settles.
    const settled = steady.filter((s) => s.atMs >= Date.now() - started - 10_000);
    console.log(
      `settled: RSS ${mb(Math.min(...settled.map((s) => s.rss)))}–${mb(Math.max(...settled.map((s) => s.rss)))} ` +
        `(heap total ${mb(Math.max(...settled.map((s) => s.heapTotal)))}) over the last 10 s of the steady phase`,
    );
    console.log(`memory over time (MB; every 10th sample):\n  ${MEMORY_COLUMNS}`);
    for (const s of rss.filter((_, i) => i % 10 === 0 || i === rss.length - 1))
      console.log(`  ${formatSample(s)}`);
    if (MALLOC_STATS) {
      // glibc prints each arena's system and in-use bytes to the agent's stderr (inherited): what malloc holds free.
      console.log('malloc_stats() of the agent (through gdb; glibc writes it to the agent stderr):');
      await new Promise((resolve) =>
        spawn('gdb', ['-p', String(agent.pid), '-batch', '-ex', 'call (void)malloc_stats()'], {
          stdio: 'ignore',
        }).once('exit', resolve),
      );
    }
    if (snapshotDir) {
      agent.kill('SIGUSR2');
      const file = await snapshotWritten(snapshotDir);
      console.log(formatHeapSummary(await summariseHeapSnapshot(file)));
      console.log(`(snapshot: ${file})`);
    }
    const final = await scrape();
    console.log(
      `reconciles by result: ${[...final]
        .filter(([k]) => k.startsWith('skr_agent_reconcile_total'))
        .map(([k, v]) => `${/result="([^"]+)"/.exec(k)?.[1]}=${v}`)
        .join(' ')}; informer watch restarts ${sumOf(final, 'informer_watch_restarts_total')}`,
    );
    // Decision 023: labels are bounded, so the series do not grow with the Kymas (bar: < 5,000 at 1,000).
    const families = new Map<string, number>();
    for (const key of final.keys()) {
      const family = key.replace(/\{.*$/, '');
      families.set(family, (families.get(family) ?? 0) + 1);
    }
    const largest = [...families].sort((a, b) => b[1] - a[1]).slice(0, 6);
    console.log(
      `series exported: ${final.size} with ${KYMAS} Kymas (bar: < 5,000 at 1,000) in ${families.size} families; ` +
        `largest: ${largest.map(([family, count]) => `${family} ${count}`).join(', ')}; load ${load()}`,
    );
  } finally {
    stopAgent();
    await agentExit;
    await env.stop();
  }
}

/** The agent, every API server and etcd: whose CPU a reconcile costs. */
function costedProcesses(
  env: Awaited<ReturnType<typeof startEnvironment>>,
  agentPid: number,
): { name: string; pid: number }[] {
  const planes = ['kcp', ...SKRS].map((plane) => ({ name: plane, pid: env.plane(plane).pid() }));
  const planePids = new Set(planes.map((p) => p.pid));
  const others = env.pids().filter((pid) => !planePids.has(pid));
  return [
    { name: 'agent', pid: agentPid },
    ...planes,
    ...others.map((pid, i) => ({ name: others.length > 1 ? `etcd${i + 1}` : 'etcd', pid })),
  ];
}

/** Per reconcile of the resync: CPU of each process (less its idle rate), requests, TLS handshakes. */
function reconcileCost(run: {
  passes: number;
  seconds: number;
  processes: { name: string; pid: number }[];
  cpu: number[];
  idlePerSecond: number[];
  before: Samples;
  after: Samples;
}): string {
  const per = (value: number) => value / Math.max(1, run.passes);
  const ms = (seconds: number) => (1000 * per(seconds)).toFixed(1);
  const cpu = run.processes.map((p, i) => {
    const raw = run.cpu[i] ?? 0;
    const idle = (run.idlePerSecond[i] ?? 0) * run.seconds;
    return { name: p.name, raw, net: Math.max(0, raw - idle), idle };
  });
  const servers = cpu.filter((c) => c.name !== 'agent');
  const delta = (prefix: string) =>
    [...run.after]
      .filter(([key]) => key.startsWith(prefix))
      .map(([key, value]) => ({ key, value: value - (run.before.get(key) ?? 0) }))
      .filter(({ value }) => value > 0);
  const label = (key: string, name: string) => new RegExp(`${name}="([^"]*)"`).exec(key)?.[1] ?? '';
  const requests = delta('skr_agent_kube_requests_total{')
    .map(({ key, value }) => ({
      cluster: label(key, 'cluster'),
      what: `${label(key, 'verb')} ${label(key, 'resource')}`.trim(),
      value,
    }))
    .sort((a, b) => a.cluster.localeCompare(b.cluster) || b.value - a.value);
  const byCluster = (cluster: string) =>
    requests.filter((r) => r.cluster === cluster).reduce((sum, r) => sum + r.value, 0);
  const received = delta('skr_agent_kube_response_bytes_total{');
  const kB = (cluster: string) =>
    per(
      received.filter(({ key }) => label(key, 'cluster') === cluster).reduce((sum, r) => sum + r.value, 0),
    ) / 1024;
  const tls = delta('skr_agent_kube_tls_connections_total{').map(({ key, value }) => ({
    cluster: label(key, 'cluster'),
    resumed: label(key, 'resumed') === 'true',
    value,
  }));
  const handshakes = (cluster: string, resumed: boolean) =>
    tls.filter((t) => t.cluster === cluster && t.resumed === resumed).reduce((sum, t) => sum + t.value, 0);
  return [
    `no-op reconcile cost over the resync (${run.passes} reconciles in ${run.seconds.toFixed(1)} s; load ${load()}):`,
    `  CPU per reconcile: ${cpu.map((c) => `${c.name} ${ms(c.net)} ms`).join(', ')} ` +
      `(API servers and etcd ${ms(servers.reduce((sum, c) => sum + c.net, 0))} ms; their idle rate taken off)`,
    `  CPU raw over the resync: ${cpu.map((c) => `${c.name} ${c.raw.toFixed(2)} s (idle ${c.idle.toFixed(2)})`).join(', ')}`,
    `  requests per reconcile: kcp ${per(byCluster('kcp')).toFixed(2)}, skr ${per(byCluster('skr')).toFixed(2)}`,
    ...requests.map((r) => `    ${r.cluster} ${r.what}: ${per(r.value).toFixed(2)}`),
    `  answers read per reconcile (watches not included): kcp ${kB('kcp').toFixed(1)} kB, skr ${kB('skr').toFixed(1)} kB`,
    `  TLS handshakes per reconcile: ${['kcp', 'skr']
      .map(
        (cluster) =>
          `${cluster} ${per(handshakes(cluster, false)).toFixed(2)} full, ${per(handshakes(cluster, true)).toFixed(2)} resumed`,
      )
      .join('; ')}`,
  ].join('\n');
}

/**
 * Webhook registration's inputs: the CA and its bundle in KCP, namespace kyma-system in every SKR, and for the
 * Kymas of each SKR API server one certificate (their runtime-id is the server's), as if each SKR had one Kyma.
 */
async function registrationSetup(env: Awaited<ReturnType<typeof startEnvironment>>, core: CoreV1Api) {
  const ca = createCa({ commonName: 'bench-ca', keyBits: 2048 });
  const secrets = new KcpPkiSecrets(core, NAMESPACE);
  await secrets.createCa(ca, {});
  await secrets.writeBundle(ca.certPem);
  const leaves = SKRS.map((skr) =>
    issueLeaf({ ca, runtimeId: `runtime-${skr}`, dnsNames: webhookDnsNames([]), ipAddresses: [] }),
  );
  for (const skr of SKRS) {
    await env
      .plane(skr)
      .kubeConfig()
      .makeApiClient(CoreV1Api)
      .createNamespace({ body: { metadata: { name: DEFAULTS.skrNamespace } } });
  }
  let next = 0;
  await Promise.all(
    Array.from({ length: 16 }, async () => {
      while (next < KYMAS) {
        const i = next++;
        await secrets.writeLeaf(`kyma-${i}`, leaves[i % SKRS.length]!, ca.certPem);
      }
    }),
  );
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
