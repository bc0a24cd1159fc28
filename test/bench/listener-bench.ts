// Listener benchmark (DESIGN 5): events/s over mTLS with kept-alive connections, and how many reconciles
// 10,000 events from 1,000 SKR identities cost when they go through the listener into a coalescing
// work queue (packages/kube WorkQueue, one worker, ~1 ms per key).
//
//   npx tsx --conditions=source test/bench/listener-bench.ts [--events 40000] [--connections 64] [--clients 1] [--windows 0,50,250,1000]
//
// The load generator runs in a worker thread (its own event loop, same process): on a 2-core machine the
// listener and the client each get about a core. Figures are printed; nothing here passes or fails.
import { availableParallelism, cpus } from 'node:os';
import { Worker } from 'node:worker_threads';
import { WorkQueue } from '@skr-watcher/kube';
import { startListener, type ListenerOptions } from '../../agent/src/listener/index.js';
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

function shuffle<T>(items: T[]): T[] {
  for (let i = items.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [items[i], items[j]] = [items[j] as T, items[i] as T];
  }
  return items;
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
): Promise<void> {
  let enqueued = 0;
  const listener = await startListener(listenerOptions(fixture, { enqueue: () => void enqueued++ }));
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
      `throughput: ${result.sent} events over ${connections} kept-alive mTLS connections (${clients} client thread${clients > 1 ? 's' : ''}) in ${(result.elapsedMs / 1000).toFixed(2)} s` +
        ` = ${Math.round(rate)} events/s (bar ≥ 5,000); client latency p50 ${result.p50Ms.toFixed(2)} ms, p99 ${result.p99Ms.toFixed(2)} ms;` +
        ` codes ${JSON.stringify(result.codes)}; enqueued ${enqueued};` +
        ` listener event-loop utilisation ${(utilisation * 100).toFixed(0)}%`,
    );
  } finally {
    await listener.close();
  }
}

async function coalescing(
  fixture: Fixture,
  pattern: 'bursts' | 'interleaved',
  windowMs: number,
): Promise<void> {
  let reconciles = 0;
  const queue = new WorkQueue({
    name: 'bench',
    workers: 1,
    process: async () => {
      reconciles++;
      await sleep(1);
    },
  });
  queue.start();
  const listener = await startListener(
    listenerOptions(fixture, { enqueue: (key) => queue.add(key), coalesceWindowMs: windowMs }),
  );
  try {
    const identities = fixture.certs.length;
    const perIdentity = 10;
    let lanes: number[][];
    const lanesCount = 64;
    if (pattern === 'bursts') {
      // Each SKR sends its 10 events back to back (one user action touching several objects); 64 SKRs at a
      // time, so one SKR's burst lasts about 10 × 64 / rate seconds.
      lanes = Array.from({ length: lanesCount }, (_, lane) =>
        Array.from({ length: identities }, (_, id) => id)
          .filter((id) => id % lanesCount === lane)
          .flatMap((id) => Array.from({ length: perIdentity }, () => id)),
      );
    } else {
      // The same 10,000 events in random order: every SKR's events spread over the whole run.
      const all = shuffle(Array.from({ length: identities * perIdentity }, (_, i) => i % identities));
      lanes = Array.from({ length: lanesCount }, (_, lane) => all.filter((_, i) => i % lanesCount === lane));
    }
    const result = await runLoad({
      port: listener.port,
      caPem: fixture.ca.certPem,
      keyPem: fixture.keyPem,
      certs: fixture.certs,
      lanes,
      warmUp: true,
    });
    await sleep(windowMs + 50);
    await queue.whenIdle();
    console.log(
      `coalescing (${pattern}, window ${windowMs} ms): ${result.sent} events from ${identities} identities in ${(result.elapsedMs / 1000).toFixed(2)} s` +
        ` → ${reconciles} reconciles (bar ≤ 1,100); codes ${JSON.stringify(result.codes)}`,
    );
  } finally {
    await listener.close();
    await queue.stop();
  }
}

async function main(): Promise<void> {
  const events = argument('events', 40_000);
  const connections = argument('connections', 64);
  const identities = 1_000;
  const windows = (
    process.argv.includes('--windows')
      ? String(process.argv[process.argv.indexOf('--windows') + 1])
      : '0,50,250,1000'
  )
    .split(',')
    .map(Number)
    .filter((ms) => Number.isFinite(ms) && ms >= 0);
  console.log(`node ${process.version}, ${availableParallelism()} CPUs (${cpus()[0]?.model ?? 'unknown'})`);
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

  await throughput(fixture, events, connections, argument('clients', 1));
  for (const pattern of ['bursts', 'interleaved'] as const) {
    for (const windowMs of windows) await coalescing(fixture, pattern, windowMs);
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
