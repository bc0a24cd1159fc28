// Modules at scale: 1,000 Kymas × 5 modules on one agent replica, or 5,000 × 5 on three
// (`--replicas 3`: each a `skr-agent run --shard` process, as bench:agent starts them, with its own metrics port).
// Real planes (a KCP and two SKR API servers shared by the Kymas, as in bench:agent-single), a real OCI registry,
// the built skr-agent with --oci-registry-host, started as manifests/kcp/agent.yaml starts it: its script (the
// bundle), its NODE_OPTIONS and its glibc malloc settings (MALLOC_*), unless the flags say otherwise
// (`--malloc-arena-max default`: glibc's own).
//
//   npm run bench:modules-scale -- [--kymas 1000] [--modules 5] [--replicas 1] [--skrs 2] [--workers 8]
//                                  [--steady 60] [--resync 4m] [--lease 15s/10s/2s]
//                                  [--node-flags '<NODE_OPTIONS>'] [--malloc-arena-max <n>|default] [--heap-snapshot]
//                                  [--log-level warn|info] [--agent <script>]
//
// Prints: time until every Kyma is Ready with all its modules Ready (from the agents' start; per replica, when the
// Kymas it owns were), the requests of the install per installed module, the registry requests by operation against
// the digests the modules have (bar: one pull per digest and replica), what a no-op pass over every Kyma costs (bar:
// 0 SKR writes, 0 registry requests; the agents' request counters over one full resync, summed over replicas, in all
// and per pass), the agents' CPU per Kyma and hour at rest (the steady phase), and each agent's RSS at every sample of the steady
// phase after it (bar ≤ 300 MB per replica), split every 5 s into V8's heap, external memory and, from /proc, glibc's
// heaps; `--heap-snapshot`: each agent's heap at the end of the steady phase by constructor (V8 writes it on
// SIGUSR2); `--log-level info`: the agents' log lines during the no-op pass, counted by message (which writes it made
// and why). Figures only; nothing passes or fails.
//
// The modules' raw manifests hold no objects of their own, and their CRDs are created up front in each SKR API
// server: with 1,000 Kymas on two SKR API servers, one object of a module would be one object applied by 500
// Manifests, each stamping its own owned-by annotation on it (a write on every pass), which no fleet with one SKR
// per Kyma has. What every Manifest does do: its descriptor and raw manifest from the process cache, the set (empty)
// applied, its default CR created once in the Kyma's own SKR namespace (bench-<i>), readiness, its status.
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { ApiextensionsV1Api, CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { GROUP, KINDS, LABELS, type Kyma } from '@skr-watcher/api';
import { freePort, startEnvironment, startProcess, startRegistry } from '@skr-watcher/testenv';
import { stringify } from 'yaml';
import { createCatalog, publishModules } from '../support/system/modules.js';
import { benchAgentRunArgs, createBenchFleet } from '../support/bench-fleet.js';
import { formatHeapSummary, snapshotWritten, summariseHeapSnapshot } from '../support/heap-summary.js';
import { nativeMemory } from '../support/process-memory.js';
import { parseMetrics, sumOf, type Samples } from '../support/prometheus-text.js';
import { shippedAgentEnv, shippedAgentScript } from '../support/shipped-agent.js';
import { cpuMsOf } from './process-costs.js';

function flag(name: string, fallback: string): string {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 && process.argv[at + 1] ? (process.argv[at + 1] as string) : fallback;
}

/** The script manifests/kcp runs (the bundle, decision 017); `--agent agent/dist/main.js` runs the module tree. */
const BUILT = flag('agent', shippedAgentScript());
const KYMAS = Number(flag('kymas', '1000'));
const MODULES = Number(flag('modules', '5'));
const SKRS = Array.from({ length: Number(flag('skrs', '2')) }, (_, i) => `skr${i + 1}`);
const REPLICAS = Number(flag('replicas', '1'));
const WORKERS = flag('workers', '8');
const STEADY_S = Number(flag('steady', '60'));
const RESYNC = flag('resync', '4m');
const SHIPPED = shippedAgentEnv();
/** As manifests/kcp runs the agent (NODE_OPTIONS). */
const NODE_FLAGS = flag('node-flags', SHIPPED['NODE_OPTIONS'] ?? '')
  .split(' ')
  .filter(Boolean);
/** glibc's arena cap for the agents, as shipped; `default` leaves it to glibc (8 per core). */
const MALLOC_ARENA_MAX = flag('malloc-arena-max', SHIPPED['MALLOC_ARENA_MAX'] ?? 'default');
/** The shipped glibc malloc settings, the arena cap as the flag says. */
const AGENT_ENV: Record<string, string> = Object.fromEntries(
  Object.entries({ ...SHIPPED, MALLOC_ARENA_MAX }).filter(
    ([name, value]) => name.startsWith('MALLOC_') && value !== 'default',
  ),
);
/** Sharded membership timing (--lease-duration/--renew-deadline/--retry-period), e.g. `60s/40s/5s`; else the defaults. */
/** The install phase gives up after this long: 30 min per 1,000 Kymas (the machine's CPU, not a replica, bounds it). */
const INSTALL_LIMIT_MIN = 30 * Math.max(1, Math.ceil(KYMAS / 1000));
const HEAP_SNAPSHOT = process.argv.includes('--heap-snapshot');
/** The agents' --log-level; `info` logs each write a pass decides on (Manifest written, finalizers, installed). */
const LOG_LEVEL = flag('log-level', 'warn');
const LEASE = flag('lease', '').split('/').filter(Boolean);
const LEASE_FLAGS =
  LEASE.length === 3
    ? ['--lease-duration', LEASE[0]!, '--renew-deadline', LEASE[1]!, '--retry-period', LEASE[2]!]
    : [];
const NAMESPACE = 'kcp-bench';
const BENCH_GROUP = 'bench.kyma-project.io';

const uptime = () => execFileSync('uptime', { encoding: 'utf8' }).trim();
const load = () => loadavg()[0]!.toFixed(1);
const mb = (bytes: number) => `${Math.round(bytes / 1048576)} MB`;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The agents' requests between two scrapes by cluster (`kcp`, `skr`) and kind (`reads`, `writes`). */
function requestsByCluster(before: Samples, after: Samples): Map<string, number> {
  const sums = new Map<string, number>();
  for (const [series, delta] of increases(before, after, 'skr_agent_kube_requests_total')) {
    const cluster = /cluster="([^"]*)"/.exec(series)?.[1] ?? '?';
    const kind = /verb="(get|list|watch|discovery)"/.test(series) ? 'reads' : 'writes';
    sums.set(`${cluster} ${kind}`, (sums.get(`${cluster} ${kind}`) ?? 0) + delta);
  }
  return sums;
}

/** `what n (per unit)` for each entry, per `units`. */
function perUnit(sums: Map<string, number>, units: number, unit: string): string {
  return (
    [...sums]
      .sort()
      .map(([what, n]) => `${what} ${Math.round(n)} (${(n / units).toFixed(2)} per ${unit})`)
      .join(', ') || 'none'
  );
}

/** Counter increases between two scrapes, for the series of `prefix`, by series. */
function increases(before: Samples, after: Samples, prefix: string): [string, number][] {
  return [...after]
    .filter(([key]) => key.startsWith(prefix))
    .map(([key, value]): [string, number] => [key.slice(prefix.length), value - (before.get(key) ?? 0)])
    .filter(([, delta]) => delta > 0);
}

/** What the agent did between two scrapes: reconciles by result, requests by cluster and verb, TLS connections. */
function progressOf(before: Samples, after: Samples): string {
  const grouped = (prefix: string, label: (series: string) => string) => {
    const sums = new Map<string, number>();
    for (const [series, delta] of increases(before, after, prefix))
      sums.set(label(series), (sums.get(label(series)) ?? 0) + delta);
    return [...sums].map(([key, n]) => `${key} ${Math.round(n)}`).join(', ');
  };
  const labelOf = (series: string, name: string) => new RegExp(`${name}="([^"]*)"`).exec(series)?.[1] ?? '?';
  return [
    `reconciles ${grouped('skr_agent_reconcile_total', (s) => labelOf(s, 'result'))}`,
    `requests ${grouped('skr_agent_kube_requests_total', (s) => `${labelOf(s, 'cluster')} ${labelOf(s, 'verb')}`)}`,
    `TLS connections ${grouped('skr_agent_kube_tls_connections_total', (s) => `${labelOf(s, 'cluster')} resumed=${labelOf(s, 'resumed')}`)}`,
  ].join('; ');
}

interface BenchAgent {
  /** --shard-identity (the Kymas' owner label), or `single` with one replica. */
  identity: string;
  port: number;
  pid: number;
  stop: (graceMs: number) => Promise<void>;
  rss: { atMs: number; rss: number }[];
  /** Kymas labelled with this replica's identity at the last look. */
  owned?: number;
  /** Since the agents started, when every Kyma it owns was Ready with all modules (unset again if one was not). */
  readyMs?: number;
}

const rssOf = (pid: number) =>
  Number(/^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) * 1024;

const BREAKDOWN_COLUMNS = ' rss heapTotal heapUsed external arrayBuffers | anon brk arenas(n)';

/** One agent's RSS split into V8's heap, external memory (from its metrics) and glibc's heaps (from /proc). */
async function memoryBreakdown(
  agent: BenchAgent,
  scrapeOne: (agent: BenchAgent) => Promise<Samples>,
): Promise<string> {
  const [m, native] = await Promise.all([scrapeOne(agent), nativeMemory(agent.pid)]);
  const col = (bytes: number, width: number) => String(Math.round(bytes / 1048576)).padStart(width);
  return (
    `${col(native.rssKb * 1024, 4)} ${col(sumOf(m, 'nodejs_heap_size_total_bytes'), 9)} ` +
    `${col(sumOf(m, 'nodejs_heap_size_used_bytes'), 8)} ${col(sumOf(m, 'nodejs_external_memory_bytes'), 8)} ` +
    `${col(sumOf(m, 'nodejs_array_buffers_bytes'), 12)} | ${col(native.anonKb * 1024, 4)} ` +
    `${col(native.brkHeapKb * 1024, 3)} ${col(native.arenaKb * 1024, 6)}(${native.arenas})`
  );
}

/** An agent's JSON log lines stamped between two instants, counted by message, most frequent first. */
async function logLinesBetween(file: string, fromMs: number, toMs: number): Promise<[string, number][]> {
  const counts = new Map<string, number>();
  for (const line of (await readFile(file, 'utf8').catch(() => '')).split('\n')) {
    let entry: { time?: unknown; msg?: unknown };
    try {
      entry = JSON.parse(line) as typeof entry;
    } catch {
      continue;
    }
    const at = typeof entry.time === 'string' ? Date.parse(entry.time) : NaN;
    if (!(at >= fromMs && at <= toMs)) continue;
    const msg = String(entry.msg);
    counts.set(msg, (counts.get(msg) ?? 0) + 1);
  }
  return [...counts].sort((a, b) => b[1] - a[1]);
}

/** Module names are lower-case words (the ModuleTemplate CRD's pattern). */
const WORDS = ['alpha', 'bravo', 'charlie', 'delta', 'echo', 'foxtrot', 'golf', 'hotel', 'india', 'juliett'];

function word(k: number): string {
  const found = WORDS[k - 1];
  if (!found) throw new Error(`--modules ${MODULES}: at most ${WORDS.length}`);
  return found;
}

function moduleName(k: number): string {
  return `scale-${word(k)}`;
}

const kindOf = (k: number) => `Scale${word(k)[0]!.toUpperCase()}${word(k).slice(1)}`;

function crdOf(k: number) {
  const plural = `scale${word(k)}s`;
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${plural}.${BENCH_GROUP}` },
    spec: {
      group: BENCH_GROUP,
      names: { kind: kindOf(k), plural },
      scope: 'Namespaced',
      versions: [
        {
          name: 'v1',
          served: true,
          storage: true,
          schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
        },
      ],
    },
  };
}

async function main(): Promise<void> {
  console.log(`start: ${uptime()}`);
  const t0 = Date.now();
  const env = await startEnvironment({ planes: ['kcp', ...SKRS] });
  const registry = await startRegistry();
  let stopAgents = async (): Promise<void> => {};
  try {
    const kcp = env.plane('kcp').kubeConfig();
    await kcp.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: NAMESPACE } } });
    for (const skr of SKRS) {
      const crds = env.plane(skr).kubeConfig().makeApiClient(ApiextensionsV1Api);
      for (let k = 1; k <= MODULES; k++) await crds.createCustomResourceDefinition({ body: crdOf(k) });
    }
    const published = await publishModules(
      registry.url,
      Array.from({ length: MODULES }, (_, i) => ({
        moduleName: moduleName(i + 1),
        version: '1.0.0',
        channels: ['regular'],
        ocmComponentName: `kyma-project.io/module/${moduleName(i + 1)}`,
        rawManifest: '',
        defaultCr: stringify({
          apiVersion: `${BENCH_GROUP}/v1`,
          kind: kindOf(i + 1),
          metadata: { name: 'default' },
          spec: { module: i + 1 },
        }),
      })),
    );
    for (const module of published) await createCatalog(kcp, NAMESPACE, module);
    const kubeconfigs = await Promise.all(SKRS.map((skr) => readFile(env.plane(skr).kubeconfigPath, 'utf8')));
    await createBenchFleet({
      kcp,
      namespace: NAMESPACE,
      kymas: KYMAS,
      kubeconfigs,
      modules: published.map((p) => ({ name: p.moduleTemplate.spec['moduleName'] as string })),
    });
    console.log(
      `setup: ${KYMAS} Kymas × ${MODULES} modules over ${SKRS.length} SKR API servers, registry ${registry.url}, ${Date.now() - t0} ms`,
    );

    const dir = mkdtempSync(join(tmpdir(), 'modules-scale-'));
    console.log(
      `agents: ${REPLICAS} replica(s)${REPLICAS > 1 ? ' (--shard)' : ''}, logs in ${dir}; node flags: ${NODE_FLAGS.join(' ') || '(none)'}; ${
        Object.entries(AGENT_ENV)
          .map(([name, value]) => `${name}=${value}`)
          .join(' ') || 'glibc malloc defaults'
      }`,
    );
    const agents: BenchAgent[] = [];
    stopAgents = () => Promise.all(agents.map((a) => a.stop(15_000))).then(() => undefined);
    for (let i = 0; i < REPLICAS; i++) {
      const identity = REPLICAS > 1 ? `bench-${i}` : 'single';
      const port = await freePort();
      mkdirSync(join(dir, identity));
      // A child of testenv's: killed with this process, whatever ends it (Ctrl-C, kill, a crash).
      const agent = startProcess(
        process.execPath,
        [
          ...NODE_FLAGS,
          ...(HEAP_SNAPSHOT
            ? ['--heapsnapshot-signal=SIGUSR2', `--diagnostic-dir=${join(dir, identity)}`]
            : []),
          BUILT,
          ...benchAgentRunArgs({
            kubeconfig: env.plane('kcp').kubeconfigPath,
            namespace: NAMESPACE,
            metricsAddress: `127.0.0.1:${port}`,
            workers: WORKERS,
            resync: RESYNC,
          }),
          ...(REPLICAS > 1 ? ['--shard', '--shard-identity', identity, ...LEASE_FLAGS] : []),
          '--oci-registry-host',
          registry.url,
          '--log-level',
          LOG_LEVEL,
        ],
        join(dir, `${identity}.log`),
        AGENT_ENV,
      );
      agents.push({ identity, port, pid: agent.pid, stop: agent.stop, rss: [] });
    }
    const scrapeOne = async (agent: BenchAgent): Promise<Samples> => {
      for (let attempt = 1; ; attempt++) {
        try {
          return parseMetrics(await (await fetch(`http://127.0.0.1:${agent.port}/metrics`)).text());
        } catch (error) {
          if (attempt >= 50) throw error;
          await sleep(200);
        }
      }
    };
    /** Every replica's samples, summed by series: the fleet's counters. */
    const scrape = async (): Promise<Samples> => {
      const summed: Samples = new Map();
      for (const samples of await Promise.all(agents.map(scrapeOne)))
        for (const [key, value] of samples) summed.set(key, (summed.get(key) ?? 0) + value);
      return summed;
    };
    const rssNow = () => agents.map((a) => mb(rssOf(a.pid))).join(' / ');
    const started = Date.now();
    const sampler = setInterval(() => {
      for (const agent of agents) {
        try {
          agent.rss.push({ atMs: Date.now() - started, rss: rssOf(agent.pid) });
        } catch {
          // the agent is gone; the phases below say so
        }
      }
    }, 1_000);

    // Phase 1: every Kyma Ready with all its modules Ready; per replica, when the Kymas it owns all were.
    const api = kcp.makeApiClient(CustomObjectsApi);
    // In pages, each tried a few times: one list of 5,000 Kymas with their status, read every 2 s while the agents
    // install, was cut by the loaded KCP API server (an HTTP/2 stream reset), which ended the run.
    const listKymas = async (): Promise<Kyma[]> => {
      const items: Kyma[] = [];
      let next: string | undefined;
      do {
        for (let attempt = 1; ; attempt++) {
          try {
            const page = (await api.listNamespacedCustomObject({
              group: GROUP,
              version: KINDS.kyma.version,
              plural: KINDS.kyma.plural,
              namespace: NAMESPACE,
              limit: 500,
              _continue: next,
            })) as { items: Kyma[]; metadata?: { _continue?: string; continue?: string } };
            items.push(...page.items);
            next = page.metadata?.continue || page.metadata?._continue || undefined;
            break;
          } catch (error) {
            if (attempt >= 5) throw error;
            await sleep(2_000);
          }
        }
      } while (next);
      return items;
    };
    const installed = async () => {
      const list = { items: await listKymas() };
      let kymas = 0;
      let modules = 0;
      const byOwner = new Map<string, { owned: number; ready: number }>();
      for (const kyma of list.items) {
        const ready = (kyma.status?.modules ?? []).filter((m) => m.state === 'Ready').length;
        modules += ready;
        const done = kyma.status?.state === 'Ready' && ready === MODULES;
        if (done) kymas++;
        const owner = REPLICAS > 1 ? (kyma.metadata.labels?.[LABELS.shardOwner] ?? '(none)') : 'single';
        const counts = byOwner.get(owner) ?? { owned: 0, ready: 0 };
        counts.owned++;
        if (done) counts.ready++;
        byOwner.set(owner, counts);
      }
      for (const agent of agents) {
        const counts = byOwner.get(agent.identity);
        agent.owned = counts?.owned ?? 0;
        if (counts && counts.ready === counts.owned) agent.readyMs ??= Date.now() - started;
        else delete agent.readyMs;
      }
      return { kymas, modules };
    };
    let lastReport = Date.now();
    let lastSamples: Samples = new Map();
    for (;;) {
      const { kymas, modules } = await installed();
      if (kymas >= KYMAS) break;
      if (Date.now() - lastReport > 30_000) {
        lastReport = Date.now();
        const now = await scrape();
        console.log(
          `  ${Math.round((Date.now() - started) / 1000)} s: ${kymas} Kymas Ready, ${modules} modules Ready; RSS ${rssNow()}, load ${load()}\n` +
            `    since the last line: ${progressOf(lastSamples, now)}`,
        );
        lastSamples = now;
      }
      if (Date.now() - started > INSTALL_LIMIT_MIN * 60_000)
        throw new Error(`only ${kymas}/${KYMAS} Kymas installed after ${INSTALL_LIMIT_MIN} min`);
      // Every 2 s up to 1,000 Kymas, then less often: each read lists every Kyma with its status.
      await sleep(Math.max(2_000, KYMAS * 2));
    }
    const installMs = Date.now() - started;
    const afterInstall = await scrape();
    const registryRequests = increases(new Map(), afterInstall, 'skr_agent_oci_registry_requests_total');
    const pulls = sumOf(afterInstall, 'skr_agent_oci_registry_requests_total', 'operation="blob"');
    const manifestsRead = sumOf(
      afterInstall,
      'skr_agent_oci_registry_requests_total',
      'operation="manifest"',
    );
    console.log(
      `install: ${KYMAS} Kymas × ${MODULES} modules Ready ${installMs} ms after the agents started; load ${load()}`,
    );
    for (const agent of agents)
      console.log(
        `  replica ${agent.identity}: owns ${agent.owned ?? 0} Kymas, all of them Ready ${agent.readyMs ?? NaN} ms after the start`,
      );
    console.log(
      `  requests of the install: ${perUnit(requestsByCluster(new Map(), afterInstall), KYMAS * MODULES, 'installed module')}`,
    );
    console.log(
      `  registry requests: ${registryRequests.map(([series, n]) => `${series} ${n}`).join(', ') || 'none'}`,
    );
    console.log(
      `  ${manifestsRead} manifest and ${pulls} blob requests for ${MODULES} component versions, whose digests each replica needs are ${MODULES} manifests and ${3 * MODULES} blobs (config, descriptor layer, raw manifest); bar: one pull per digest and replica (${REPLICAS} × ${4 * MODULES})`,
    );

    // Phase 2: a no-op pass over every Kyma (the periodic resync), its requests by cluster, verb and resource.
    const resyncs = (m: Samples) => sumOf(m, 'skr_agent_triggers_total{source="resync"}');
    const busy = (m: Samples) =>
      sumOf(m, 'workqueue_depth{name="kyma"}') + sumOf(m, 'workqueue_in_flight{name="kyma"}');
    const resyncsBefore = resyncs(afterInstall);
    let before: Samples | undefined;
    let passStart = 0;
    let after: Samples | undefined;
    const deadline = Date.now() + 20 * 60_000;
    console.log(`no-op pass: waiting for the next resync (--resync ${RESYNC})`);
    while (Date.now() < deadline) {
      const m = await scrape();
      if (!before && resyncs(m) > resyncsBefore) {
        before = m;
        passStart = Date.now();
      }
      if (before && resyncs(m) - resyncsBefore >= KYMAS && busy(m) === 0) {
        after = m;
        break;
      }
      await sleep(500);
    }
    if (!before || !after) {
      console.log('  the resync did not complete within 20 min');
    } else {
      const reconciles =
        sumOf(after, 'skr_agent_reconcile_total') - sumOf(before, 'skr_agent_reconcile_total');
      const requests = increases(before, after, 'skr_agent_kube_requests_total');
      const skrWrites = requests.filter(
        ([series]) => series.includes('cluster="skr"') && !/verb="(get|list|watch|discovery)"/.test(series),
      );
      const kcpWrites = requests.filter(
        ([series]) => series.includes('cluster="kcp"') && !/verb="(get|list|watch|discovery)"/.test(series),
      );
      const registryInPass = increases(before, after, 'skr_agent_oci_registry_requests_total');
      console.log(
        `  ${reconciles} reconciles in ${Date.now() - passStart} ms; load ${load()}\n` +
          `  SKR write requests: ${skrWrites.reduce((n, [, d]) => n + d, 0)} ${skrWrites.map(([s, d]) => `${s} ${d}`).join(', ')}\n` +
          `  KCP write requests: ${kcpWrites.reduce((n, [, d]) => n + d, 0)} ${kcpWrites.map(([s, d]) => `${s} ${d}`).join(', ')}\n` +
          `  registry requests: ${registryInPass.reduce((n, [, d]) => n + d, 0)}\n` +
          `  per no-op pass: ${perUnit(requestsByCluster(before, after), Math.max(1, reconciles), 'pass')}\n` +
          `  all requests: ${requests.map(([s, d]) => `${s} ${d}`).join(', ')}`,
      );
      for (const agent of agents) {
        const lines = await logLinesBetween(join(dir, `${agent.identity}.log`), passStart, Date.now());
        console.log(
          `  ${agent.identity} logged during the pass: ${lines.map(([msg, n]) => `${n} × ${msg}`).join('; ') || 'nothing'}`,
        );
      }
    }

    // Phase 3: steady state; every RSS sample of it, and every 5 s where the memory is.
    const steadyFrom = Date.now() - started;
    const cpuBefore = await Promise.all(agents.map((agent) => cpuMsOf(agent.pid)));
    const steadyStartedAt = Date.now();
    const breakdowns = new Map<string, string[]>(agents.map((agent) => [agent.identity, []]));
    while (Date.now() - started < steadyFrom + STEADY_S * 1000) {
      await Promise.all(
        agents.map(async (agent) => {
          const at = Math.round((Date.now() - started - steadyFrom) / 1000);
          const row = await memoryBreakdown(agent, scrapeOne).catch((error: unknown) => String(error));
          breakdowns.get(agent.identity)!.push(`${String(at).padStart(4)} ${row}`);
        }),
      );
      await sleep(5_000);
    }
    clearInterval(sampler);
    const cpuAfter = await Promise.all(agents.map((agent) => cpuMsOf(agent.pid)));
    const restHours = (Date.now() - steadyStartedAt) / 3_600_000;
    const restCpuMs = agents.reduce((sum, _, i) => sum + (cpuAfter[i] ?? 0) - (cpuBefore[i] ?? 0), 0);
    console.log(
      `at rest: the agents used ${Math.round(restCpuMs)} ms of CPU in ${Math.round(restHours * 3600)} s, ${(restCpuMs / 1000 / KYMAS / restHours).toFixed(3)} CPU-s per Kyma per hour`,
    );
    for (const agent of agents) {
      const steady = agent.rss.filter((s) => s.atMs >= steadyFrom);
      const peak = Math.max(...agent.rss.map((s) => s.rss));
      console.log(
        `memory, replica ${agent.identity} (${agent.owned ?? 0} Kymas): peak RSS ${mb(peak)} over the whole run; steady phase (${STEADY_S} s after the no-op pass): max ${mb(Math.max(...steady.map((s) => s.rss)))}, min ${mb(Math.min(...steady.map((s) => s.rss)))} (bar ≤ 300 MB at every sample)`,
      );
      console.log(`  every steady sample (MB): ${steady.map((s) => Math.round(s.rss / 1048576)).join(' ')}`);
      console.log(`  where it is (MB), every 5 s of the steady phase:\n     t ${BREAKDOWN_COLUMNS}`);
      for (const row of breakdowns.get(agent.identity) ?? []) console.log(`  ${row}`);
      console.log(
        `  over the run (t s: MB, every 20th): ${agent.rss
          .filter((_, i) => i % 20 === 0)
          .map((s) => `${Math.round(s.atMs / 1000)}: ${Math.round(s.rss / 1048576)}`)
          .join(', ')}`,
      );
    }
    if (HEAP_SNAPSHOT) {
      for (const agent of agents) {
        process.kill(agent.pid, 'SIGUSR2');
        const file = await snapshotWritten(join(dir, agent.identity));
        console.log(`replica ${agent.identity}: ${formatHeapSummary(await summariseHeapSnapshot(file), 30)}`);
        console.log(`  (snapshot: ${file})`);
      }
    }
    console.log(`end: ${uptime()}`);
  } finally {
    await stopAgents();
    await registry.stop();
    await env.stop();
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
