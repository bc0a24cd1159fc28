// Listener benchmark: events/s over mTLS with kept-alive connections, and the listener under overload:
// events offered at 10× what the workers can reconcile, for 30 s, through the agent's wake-up path (the targeted router,
// the mirror lanes, the coalescing work queue), with reconciles simulated by waits.
//
//   npm run bench:listener -- [--events 40000] [--connections 64] [--clients 1]
//                             [--skrs 250] [--workers 4] [--reconcile-ms 16] [--mirror-ms 4] [--overload 10] [--seconds 30]
//                             [--overload-only] [--throughput-only] [--baseline <dir>/agent/src/listener/index.ts]
// --baseline: another build of the listener (e.g. the one before express, decision 011), measured in the same run,
// alternating with this one (baseline, this, baseline, this) so a change in machine load hits both:
//   mkdir -p tmp/bench-base && git archive <rev> agent/src/listener | tar -x -C tmp/bench-base
//
// A FIFO queue that holds every SKR once drains in SKRs ÷ capacity seconds, so the 2 s bar needs capacity ≥ SKRs/2
// per second: the defaults (250 SKRs, 250 reconciles/s, 2,500 events/s offered) keep that, within what one
// client thread can offer here.
// The load generator runs in a worker thread (its own event loop, same process): on a 2-core machine the
// listener and the client each get about a core. Figures are printed; nothing here passes or fails.
import { availableParallelism, cpus, loadavg } from 'node:os';
import { resolve as resolvePath } from 'node:path';
import { Worker } from 'node:worker_threads';
import { WorkQueue } from '@skr-watcher/kube';
import { silentLogger } from '@skr-watcher/telemetry';
import { startListener, type ListenerOptions } from '../../agent/src/listener/index.js';
import { MirrorLanes, type ModuleCrChange } from '../../agent/src/reconcile/index.js';
import { createTargetedRouter } from '../../agent/src/targeted/router.js';
import {
  createTestCa,
  createTestKey,
  issueListenerServingCert,
  issueTestLeaf,
  type TestCa,
} from '../../agent/test/support/listener-certs.js';

interface LoadPlan {
  port: number;
  caPem: string;
  keyPem: string;
  /** Client certificate per identity index. */
  certs: string[];
  /** Each lane sends its events one after another over kept-alive connections; lanes run concurrently. */
  lanes: number[][];
  /** Before the timed part, each identity used by the plan opens its connection (GET → 405, not an event). */
  warmUp: boolean;
}

interface LoadResult {
  elapsedMs: number;
  sent: number;
  codes: Record<string, number>;
  errors: number;
  p50Ms: number;
  p99Ms: number;
}

// Plain JavaScript so the worker needs no TypeScript loader.
const LOAD_GENERATOR = `
const { parentPort, workerData } = require('node:worker_threads');
const https = require('node:https');
const plan = workerData;
const body = JSON.stringify({ watched: { Namespace: 'kyma-system', Name: 'sample' },
  watchedGvk: { group: 'operator.kyma-project.io', version: 'v1alpha1', kind: 'Sample' } });
const agents = new Map();
function agentFor(id) {
  let agent = agents.get(id);
  if (!agent) {
    agent = new https.Agent({ keepAlive: true, maxSockets: 4, ca: plan.caPem, cert: plan.certs[id], key: plan.keyPem, servername: 'localhost' });
    agents.set(id, agent);
  }
  return agent;
}
function send(id, method) {
  return new Promise((resolve) => {
    const request = https.request({ host: '127.0.0.1', port: plan.port, path: '/v2/lifecycle-manager/event', method,
      agent: agentFor(id), headers: { 'content-type': 'application/json', 'content-length': method === 'POST' ? Buffer.byteLength(body) : 0 } },
      (response) => { response.resume(); response.on('end', () => resolve(response.statusCode)); });
    request.on('error', () => resolve(0));
    request.end(method === 'POST' ? body : undefined);
  });
}
(async () => {
  if (plan.warmUp) {
    const ids = [...new Set(plan.lanes.flat())];
    let next = 0;
    await Promise.all(Array.from({ length: 32 }, async () => { while (next < ids.length) await send(ids[next++], 'GET'); }));
  }
  const codes = {};
  const latencies = [];
  let errors = 0;
  const started = performance.now();
  await Promise.all(plan.lanes.map(async (lane) => {
    for (const id of lane) {
      const t0 = performance.now();
      const code = await send(id, 'POST');
      latencies.push(performance.now() - t0);
      if (code === 0) errors++;
      codes[code] = (codes[code] || 0) + 1;
    }
  }));
  const elapsedMs = performance.now() - started;
  latencies.sort((a, b) => a - b);
  const at = (q) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] || 0;
  for (const agent of agents.values()) agent.destroy();
  parentPort.postMessage({ elapsedMs, sent: latencies.length, codes, errors, p50Ms: at(0.5), p99Ms: at(0.99) });
})();
`;

/** Splits the lanes over `clients` worker threads and merges what they measured. */
async function runLoad(plan: LoadPlan, clients = 1): Promise<LoadResult> {
  if (clients <= 1) return runLoadInOneWorker(plan);
  const parts = Array.from({ length: clients }, (_, client) => ({
    ...plan,
    lanes: plan.lanes.filter((_, lane) => lane % clients === client),
  }));
  const results = await Promise.all(parts.map((part) => runLoadInOneWorker(part)));
  const codes: Record<string, number> = {};
  for (const result of results) {
    for (const [code, count] of Object.entries(result.codes)) codes[code] = (codes[code] ?? 0) + count;
  }
  return {
    elapsedMs: Math.max(...results.map((result) => result.elapsedMs)),
    sent: results.reduce((sum, result) => sum + result.sent, 0),
    codes,
    errors: results.reduce((sum, result) => sum + result.errors, 0),
    // Percentiles do not merge; the worst worker's are the honest upper bound.
    p50Ms: Math.max(...results.map((result) => result.p50Ms)),
    p99Ms: Math.max(...results.map((result) => result.p99Ms)),
  };
}

function runLoadInOneWorker(plan: LoadPlan): Promise<LoadResult> {
  return new Promise((resolve, reject) => {
    const worker = new Worker(LOAD_GENERATOR, { eval: true, workerData: plan });
    worker.once('message', (result: LoadResult) => {
      resolve(result);
      void worker.terminate();
    });
    worker.once('error', reject);
  });
}

function argument(name: string, fallback: number): number {
  const index = process.argv.indexOf(`--${name}`);
  const value = index === -1 ? undefined : Number(process.argv[index + 1]);
  return value !== undefined && Number.isFinite(value) && value > 0 ? value : fallback;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

interface Fixture {
  ca: TestCa;
  serving: { certPem: string; keyPem: string };
  keyPem: string;
  certs: string[];
}

function listenerOptions(
  fixture: Fixture,
  rest: Pick<ListenerOptions, 'enqueue'> & Partial<ListenerOptions>,
): ListenerOptions {
  return {
    host: '127.0.0.1',
    port: 0,
    mode: { kind: 'direct', ...fixture.serving, caBundlePem: fixture.ca.certPem },
    resolveKyma: (runtimeId) => ({
      namespace: 'kcp-system',
      name: `kyma-${runtimeId.slice('runtime-'.length)}`,
    }),
    ...rest,
  };
}

async function throughput(
  fixture: Fixture,
  events: number,
  connections: number,
  clients: number,
  build: { label: string; start: typeof startListener } = { label: 'this build', start: startListener },
): Promise<void> {
  let enqueued = 0;
  const listener = await build.start(listenerOptions(fixture, { enqueue: () => void enqueued++ }));
  try {
    const lanes = Array.from({ length: connections }, (_, lane) =>
      Array.from({ length: Math.ceil(events / connections) }, () => lane),
    );
    // A short run first warms the JIT and the TLS sessions; then the measured run.
    await runLoad(
      {
        port: listener.port,
        caPem: fixture.ca.certPem,
        keyPem: fixture.keyPem,
        certs: fixture.certs,
        lanes: lanes.map((l) => l.slice(0, 200)),
        warmUp: true,
      },
      clients,
    );
    enqueued = 0;
    const utilisationBefore = performance.eventLoopUtilization();
    const result = await runLoad(
      {
        port: listener.port,
        caPem: fixture.ca.certPem,
        keyPem: fixture.keyPem,
        certs: fixture.certs,
        lanes,
        warmUp: true,
      },
      clients,
    );
    const rate = (result.sent / result.elapsedMs) * 1000;
    // How busy the listener's thread was (includes time it was runnable but descheduled on a shared box):
    // well below 100% means the client, not the listener, set the pace.
    const utilisation = performance.eventLoopUtilization(utilisationBefore).utilization;
    console.log(
      `throughput (${build.label}): ${result.sent} events over ${connections} kept-alive mTLS connections (${clients} client thread${clients > 1 ? 's' : ''}) in ${(result.elapsedMs / 1000).toFixed(2)} s` +
        ` = ${Math.round(rate)} events/s (bar ≥ 5,000); client latency p50 ${result.p50Ms.toFixed(2)} ms, p99 ${result.p99Ms.toFixed(2)} ms;` +
        ` codes ${JSON.stringify(result.codes)}; enqueued ${enqueued};` +
        ` listener event-loop utilisation ${(utilisation * 100).toFixed(0)}%;` +
        ` process RSS ${Math.round(process.memoryUsage().rss / 2 ** 20)} MiB (listener and client threads)`,
    );
  } finally {
    await listener.close();
  }
}

// Paced open-loop load for the overload run: `rate` events/s for `seconds`, spread over lanes, each event for a
// random SKR and carrying a fingerprint (decision 010) as our webhook sends it. Plain JavaScript, like the above.
const PACED_LOAD_GENERATOR = `
const { parentPort, workerData } = require('node:worker_threads');
const https = require('node:https');
const plan = workerData;
const agents = new Map();
const generations = new Map();
function agentFor(id) {
  let agent = agents.get(id);
  if (!agent) {
    agent = new https.Agent({ keepAlive: true, maxSockets: 2, ca: plan.caPem, cert: plan.certs[id], key: plan.keyPem, servername: 'localhost' });
    agents.set(id, agent);
  }
  return agent;
}
function send(id) {
  const generation = (generations.get(id) || 1) + 1;
  generations.set(id, generation);
  const body = JSON.stringify({ watched: { Namespace: 'kyma-system', Name: 'sample' },
    watchedGvk: { group: 'operator.kyma-project.io', version: 'v1alpha1', kind: 'Sample' },
    uid: 'uid-' + id, generation, previousResourceVersion: String(generation - 1) });
  return new Promise((resolve) => {
    const request = https.request({ host: '127.0.0.1', port: plan.port, path: '/v2/lifecycle-manager/event', method: 'POST',
      agent: agentFor(id), headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
      (response) => { response.resume(); response.on('end', () => resolve(response.statusCode)); });
    request.on('error', () => resolve(0));
    request.end(body);
  });
}
(async () => {
  const codes = {};
  const total = Math.round(plan.rate * plan.seconds);
  let next = 0;
  let late = 0;
  const started = performance.now();
  await Promise.all(Array.from({ length: plan.lanes }, async () => {
    for (;;) {
      const index = next++;
      if (index >= total) return;
      const due = started + (index * 1000) / plan.rate;
      const wait = due - performance.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
      else if (wait < -100) late++;
      const code = await send(Math.floor(Math.random() * plan.skrs));
      codes[code] = (codes[code] || 0) + 1;
    }
  }));
  const elapsedMs = performance.now() - started;
  for (const agent of agents.values()) agent.destroy();
  parentPort.postMessage({ elapsedMs, sent: total, codes, late });
})();
`;

interface PacedResult {
  elapsedMs: number;
  sent: number;
  codes: Record<string, number>;
  /** Events sent more than 100 ms after their due time: the client (or the machine) could not keep the pace. */
  late: number;
}

/** Percentile of an ascending list (nearest rank). */
function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? NaN;
}

/**
 * The listener under overload: events offered at `overload` × what the workers can reconcile, for
 * `seconds`, through the listener and the agent's own wake-up path (the targeted router → targeted mirror in its
 * Module CR's mirror lane, then the coalescing work queue). Reconciles and mirrors are simulated by waits (a real one waits
 * on two API servers). Prints the three figures an operator needs: most keys the queue held (never above the
 * SKRs), overlapping runs of one key (0), and per SKR the time from the burst's end until its last change was
 * reconciled (bar ≤ 2 s).
 */
async function overload(
  fixture: Fixture,
  options: {
    skrs: number;
    workers: number;
    reconcileMs: number;
    mirrorMs: number;
    overload: number;
    seconds: number;
  },
): Promise<void> {
  const { skrs, workers, reconcileMs, mirrorMs, seconds } = options;
  const capacity = (workers * 1000) / reconcileMs;
  const rate = capacity * options.overload;
  const running = new Set<string>();
  let overlaps = 0;
  let reconciles = 0;
  let mirrors = 0;
  /** Per Kyma key: when its last event was accepted, and runs (start, end) of its full reconciles and mirrors. */
  const lastEventAt = new Map<string, number>();
  const fullRuns = new Map<string, { start: number; end: number }[]>();
  const mirrorRuns = new Map<string, { start: number; end: number }[]>();
  // Full reconciles and mirrors of one Kyma may overlap (each Module CR's mirrors are ordered in their own lane):
  // an overlap is two full reconciles, or two mirrors, of one key at once.
  const runOnce = async (key: string, ms: number, runs: Map<string, { start: number; end: number }[]>) => {
    const lane = `${runs === fullRuns ? 'full' : 'mirror'}\0${key}`;
    if (running.has(lane)) overlaps++;
    running.add(lane);
    const start = performance.now();
    await sleep(ms);
    running.delete(lane);
    const list = runs.get(key) ?? [];
    list.push({ start, end: performance.now() });
    runs.set(key, list);
  };
  const lanes = new MirrorLanes();
  const queue = new WorkQueue({
    name: 'bench',
    workers,
    process: (key) =>
      lanes.run(key, async () => {
        reconciles++;
        await runOnce(key, reconcileMs, fullRuns);
      }),
  });
  const logger = silentLogger();
  const router = createTargetedRouter({
    paths: {
      objectChanged: (key: string, change: ModuleCrChange) =>
        lanes.mirror(key, change, async () => {
          mirrors++;
          await runOnce(key, mirrorMs, mirrorRuns);
          return { path: 'mirror' as const, outcome: 'mirrored' as const, reads: 1 };
        }),
      syncResourceChanged: () => Promise.resolve({ outcome: 'skipped' as const, reason: 'not benchmarked' }),
    },
    fullPass: { now: (key) => queue.add(key), after: (key, ms) => queue.addAfter(key, ms) },
    logger,
  });
  let maxQueueKeys = 0;
  let maxDelayed = 0;
  let maxLanes = 0;
  let maxWaitingMirrors = 0;
  const sample = () => {
    maxQueueKeys = Math.max(maxQueueKeys, queue.depth + queue.inFlight);
    maxDelayed = Math.max(maxDelayed, queue.delayedCount);
    const size = lanes.size;
    maxLanes = Math.max(maxLanes, size.lanes);
    maxWaitingMirrors = Math.max(maxWaitingMirrors, size.waitingMirrors);
  };
  const sampler = setInterval(sample, 5);
  queue.start();
  const listener = await startListener(
    listenerOptions(fixture, {
      enqueue: (key, event) => {
        lastEventAt.set(key, performance.now());
        router.callback(key, event);
        sample();
      },
    }),
  );
  try {
    const result = await new Promise<PacedResult>((resolve, reject) => {
      const worker = new Worker(PACED_LOAD_GENERATOR, {
        eval: true,
        workerData: {
          port: listener.port,
          caPem: fixture.ca.certPem,
          keyPem: fixture.keyPem,
          certs: fixture.certs.slice(0, skrs),
          skrs,
          rate,
          seconds,
          lanes: 128,
        },
      });
      worker.once('message', (message: PacedResult) => {
        resolve(message);
        void worker.terminate();
      });
      worker.once('error', reject);
    });
    const burstEnd = Math.max(...lastEventAt.values());
    // Everything the burst left is done when the queue is idle, no lane has work and no full reconcile waits for
    // its window (MODULE_MIRROR.fullReconcileAfterMirrorMs after a mirror).
    while (lanes.size.lanes > 0 || queue.depth + queue.inFlight + queue.delayedCount > 0) await sleep(5);
    const settledAt = performance.now();
    const afterBurst = (runs: Map<string, { start: number; end: number }[]>) => {
      const latencies: number[] = [];
      let missed = 0;
      for (const [key, at] of lastEventAt) {
        // The last change is reconciled by the first run that started after it arrived.
        const run = (runs.get(key) ?? []).find((r) => r.start >= at);
        if (run) latencies.push(Math.max(0, run.end - burstEnd));
        else missed++;
      }
      latencies.sort((a, b) => a - b);
      return { latencies, missed };
    };
    const full = afterBurst(fullRuns);
    const mirrored = afterBurst(mirrorRuns);
    const fmt = (ms: number) => `${Math.round(ms)} ms`;
    const achieved = (result.sent / result.elapsedMs) * 1000;
    console.log(
      `overload: ${skrs} SKRs, ${workers} workers × ${reconcileMs} ms per reconcile = ${Math.round(capacity)} reconciles/s; ` +
        `offered ${Math.round(rate)} events/s (${options.overload}×) for ${seconds} s: sent ${result.sent} at ${Math.round(achieved)}/s ` +
        `(${(achieved / capacity).toFixed(1)}× capacity; ${result.late} sent >100 ms late), codes ${JSON.stringify(result.codes)}`,
    );
    console.log(
      `  queue keys at most ${maxQueueKeys} (SKRs ${skrs}: ${maxQueueKeys <= skrs ? 'never above' : 'ABOVE'}); delayed keys at most ${maxDelayed}; ` +
        `Kyma lanes busy at most ${maxLanes}, targeted mirrors waiting at most ${maxWaitingMirrors}`,
    );
    console.log(
      `  overlapping runs of one key: ${overlaps} (bar 0); full reconciles ${reconciles}, targeted mirrors ${mirrors}`,
    );
    console.log(
      `  burst end → each SKR's last change reconciled (full pass): p50 ${fmt(percentile(full.latencies, 50))}, p99 ${fmt(percentile(full.latencies, 99))}, ` +
        `max ${fmt(full.latencies.at(-1) ?? NaN)} (bar ≤ 2 s: ${(full.latencies.at(-1) ?? Infinity) <= 2000 && full.missed === 0 ? 'met' : 'NOT met'}); never reconciled: ${full.missed}`,
    );
    console.log(
      `  burst end → each SKR's last change mirrored (targeted): p50 ${fmt(percentile(mirrored.latencies, 50))}, p99 ${fmt(percentile(mirrored.latencies, 99))}, ` +
        `max ${fmt(mirrored.latencies.at(-1) ?? NaN)}; never mirrored: ${mirrored.missed}; all settled ${fmt(settledAt - burstEnd)} after the burst`,
    );
  } finally {
    clearInterval(sampler);
    await listener.close();
    await queue.stop();
  }
}

async function main(): Promise<void> {
  const events = argument('events', 40_000);
  const connections = argument('connections', 64);
  const skrs = argument('skrs', 250);
  const identities = Math.max(1_000, skrs);
  console.log(
    `node ${process.version}, ${availableParallelism()} CPUs (${cpus()[0]?.model ?? 'unknown'}), load average ${loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}`,
  );
  const started = performance.now();
  const ca = createTestCa('bench-ca');
  const key = createTestKey();
  const certs = Array.from(
    { length: identities },
    (_, i) => issueTestLeaf(ca, { commonName: `runtime-${i}`, key }).certPem,
  );
  const fixture: Fixture = { ca, serving: issueListenerServingCert(ca), keyPem: key.keyPem, certs };
  console.log(
    `issued ${identities} SKR certificates in ${((performance.now() - started) / 1000).toFixed(1)} s`,
  );

  const baselineAt = process.argv.indexOf('--baseline');
  const builds = [{ label: 'this build', start: startListener }];
  if (baselineAt !== -1) {
    const path = resolvePath(String(process.argv[baselineAt + 1]));
    const baseline = (await import(path)) as { startListener: typeof startListener };
    builds.unshift({ label: `baseline ${path}`, start: baseline.startListener });
  }
  if (!process.argv.includes('--overload-only')) {
    for (const round of baselineAt === -1 ? [1] : [1, 2]) {
      for (const build of builds) {
        await throughput(fixture, events, connections, argument('clients', 1), {
          ...build,
          label: `${build.label}, round ${round}`,
        });
      }
    }
  }
  if (process.argv.includes('--throughput-only')) return;
  await overload(fixture, {
    skrs,
    workers: argument('workers', 4),
    reconcileMs: argument('reconcile-ms', 16),
    mirrorMs: argument('mirror-ms', 4),
    overload: argument('overload', 10),
    seconds: argument('seconds', 30),
  });
  console.log(
    `load average at the end ${loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}`,
  );
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
