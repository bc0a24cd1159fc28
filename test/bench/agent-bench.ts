// Agent benchmark (DESIGN 5: 1,000 SKRs in one process, steady memory ≤ 300 MB, full resync ≤ 60 s).
// Runs the real skr-agent binary against real planes: one KCP with N Kymas, each with its own kubeconfig
// Secret and its own SKR Kyma namespace, spread over two SKR API servers (N SKR API servers do not fit on
// this machine; every Kyma still gets its own SKR client and connection pool in the agent, as with N SKRs).
//
//   npx tsx --conditions=source test/bench/agent-bench.ts [--kymas 1000] [--workers 8] [--resync 60s] [--source] [--paused]
//
// The agent runs from agent/dist (npm run build first) so its memory is that of the shipped binary;
// --source runs agent/src through tsx instead (adds the TypeScript loader's own memory).
//
// Prints: time until every Kyma is Ready after start, time of one full resync (every Kyma reconciled again),
// the agent's RSS and heap over time. Figures only; nothing passes or fails.
import { spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { GROUP, KINDS, LABELS, type Kyma } from '@skr-watcher/api';
import { startEnvironment } from '@skr-watcher/testenv';
import { createBenchFleet } from '../support/bench-fleet.js';

const MAIN = fileURLToPath(new URL('../../agent/src/main.ts', import.meta.url));
const BUILT = fileURLToPath(new URL('../../agent/dist/main.js', import.meta.url));

function flag(name: string, fallback: string): string {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 && process.argv[at + 1] ? (process.argv[at + 1] as string) : fallback;
}

const KYMAS = Number(flag('kymas', '1000'));
const WORKERS = flag('workers', '8');
const RESYNC = flag('resync', '60s');
const NAMESPACE = 'kcp-bench';
const SKRS = ['skr1', 'skr2'];
const FROM_SOURCE = process.argv.includes('--source');
/** Kymas labelled skip-reconciliation: measures the runtime (watches, caches, queue) without SKR clients. */
const PAUSED = process.argv.includes('--paused');

type Samples = Map<string, number>;

/** Parses Prometheus text into `name{labels}` → value. */
function parseMetrics(text: string): Samples {
  const samples: Samples = new Map();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const space = line.lastIndexOf(' ');
    samples.set(line.slice(0, space), Number(line.slice(space + 1)));
  }
  return samples;
}

const sumOf = (samples: Samples, prefix: string) =>
  [...samples].filter(([key]) => key.startsWith(prefix)).reduce((sum, [, value]) => sum + value, 0);

const mb = (bytes: number) => `${(bytes / 1024 / 1024).toFixed(0)} MB`;

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
    });
    console.log(
      `setup: ${KYMAS} Kymas and kubeconfig Secrets over ${SKRS.length} SKR API servers in ${Date.now() - t0} ms`,
    );

    const agent = spawn(
      process.execPath,
      [
        ...(FROM_SOURCE ? ['--import', 'tsx', '--conditions=source', MAIN] : [BUILT]),
        'run',
        '--kubeconfig',
        env.plane('kcp').kubeconfigPath,
        '--namespace',
        NAMESPACE,
        '--no-listener',
        '--metrics-address',
        '127.0.0.1:0',
        '--events-address',
        '127.0.0.1:0',
        '--workers',
        WORKERS,
        '--requeue-ready',
        '1h',
        '--resync-interval',
        RESYNC,
        '--log-level',
        'warn',
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    agentExit = new Promise((resolve) => agent.once('exit', () => resolve()));
    stopAgent = () => agent.kill('SIGTERM');
    // The start line is logged at info; read the port from /proc instead of raising the log level.
    const port = await new Promise<number>((resolve, reject) => {
      const deadline = Date.now() + 60_000;
      const poll = async () => {
        const tcp = await readFile('/proc/net/tcp', 'utf8');
        const inodes = new Set<string>();
        const fds = await import('node:fs/promises').then((fs) =>
          fs.readdir(`/proc/${agent.pid}/fd`).catch(() => []),
        );
        for (const fd of fds) {
          const target = await import('node:fs/promises').then((fs) =>
            fs.readlink(`/proc/${agent.pid}/fd/${fd}`).catch(() => ''),
          );
          const match = /socket:\[(\d+)\]/.exec(target);
          if (match) inodes.add(match[1] as string);
        }
        for (const line of tcp.split('\n').slice(1)) {
          const cols = line.trim().split(/\s+/);
          // state 0A = LISTEN
          if (cols[3] === '0A' && inodes.has(cols[9] ?? ''))
            return resolve(parseInt((cols[1] ?? '').split(':')[1] ?? '0', 16));
        }
        if (Date.now() > deadline) return reject(new Error('agent metrics port not found'));
        setTimeout(() => void poll(), 200);
      };
      void poll();
    });
    const scrape = async () => parseMetrics(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text());

    const rss: { atMs: number; rss: number; heap: number }[] = [];
    const started = Date.now();
    const sampler = setInterval(() => {
      scrape()
        .then((m) =>
          rss.push({
            atMs: Date.now() - started,
            rss: sumOf(m, 'process_resident_memory_bytes'),
            heap: sumOf(m, 'nodejs_heap_size_used_bytes'),
          }),
        )
        .catch(() => {});
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
      `initial: all ${KYMAS} Kymas ${PAUSED ? 'reconciled (paused)' : 'Ready'} ${initialMs} ms after the agent started`,
    );

    // Phase 2: a full resync (the Kyma relist enqueues every Kyma) until the queue is idle again.
    const resyncsBefore = sumOf(afterInitial, 'skr_agent_triggers_total{source="resync"}');
    let resyncStart = 0;
    let resyncEnd = 0;
    const deadline = Date.now() + 10 * 60_000;
    while (Date.now() < deadline) {
      const m = await scrape();
      const resyncs = sumOf(m, 'skr_agent_triggers_total{source="resync"}');
      if (!resyncStart && resyncs > resyncsBefore) {
        resyncStart = Date.now();
      }
      const busy = sumOf(m, 'workqueue_depth{name="kyma"}') + sumOf(m, 'workqueue_in_flight{name="kyma"}');
      if (resyncStart && resyncs - resyncsBefore >= KYMAS && busy === 0) {
        resyncEnd = Date.now();
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    const afterResync = await scrape();
    const reconciles = (m: Samples) => sumOf(m, 'skr_agent_reconcile_total');
    console.log(
      resyncEnd
        ? `full resync: ${KYMAS} Kymas reconciled again in ${resyncEnd - resyncStart} ms (${reconciles(afterResync) - reconciles(afterInitial)} reconciles)`
        : 'full resync: did not complete within 10 min',
    );

    // Phase 3: steady state for a while.
    await new Promise((resolve) => setTimeout(resolve, 20_000));
    clearInterval(sampler);
    const steady = rss.filter((s) => s.atMs > Date.now() - started - 15_000);
    const peak = rss.reduce((max, s) => Math.max(max, s.rss), 0);
    console.log(
      `memory: peak RSS ${mb(peak)}; steady RSS ${mb(Math.max(...steady.map((s) => s.rss)))} (heap used ${mb(
        Math.max(...steady.map((s) => s.heap)),
      )}) over the last 15 s`,
    );
    console.log(
      `RSS samples (s: MB): ${rss
        .filter((_, i) => i % 5 === 0)
        .map((s) => `${Math.round(s.atMs / 1000)}:${Math.round(s.rss / 1048576)}`)
        .join(' ')}`,
    );
    const final = await scrape();
    console.log(
      `reconciles by result: ${[...final]
        .filter(([k]) => k.startsWith('skr_agent_reconcile_total'))
        .map(([k, v]) => `${/result="([^"]+)"/.exec(k)?.[1]}=${v}`)
        .join(' ')}; informer watch restarts ${sumOf(final, 'informer_watch_restarts_total')}`,
    );
  } finally {
    stopAgent();
    await agentExit;
    await env.stop();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
