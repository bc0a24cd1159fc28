// Webhook benchmark: the webhook against a bare Node TLS responder, the floor.
//   npx tsx --conditions=source test/bench/webhook-bench.ts [--rate 1000] [--seconds 5] [--rounds 3]
//   [--mix many,one] [--connections 200] [--servers floor,up,down] [--baseline <dir>/webhook/src/index.ts]: adds another build, KCP up and down, to
//   the same run; <dir> must sit inside this tree so its imports resolve, e.g.
//   git archive HEAD~3 webhook/src | tar -x -C webhook/.bench-base  →  --baseline webhook/.bench-base/webhook/src/index.ts
//   --express: adds the same admission review served through an express 5 app (express.json with the webhook's
//   body limit, the same route, 405/404/error middleware) beside this webhook, to decide whether the admission
//   path may move to express (decision 011).
//   BENCH_CPU_PROF=<dir>: CPU profiles of the server children (floor and webhooks).
//   BENCH_CPU_BURSTS=1: also the CPU each server spends between two ticks of a 1 ms timer (its own stalls).
//   --kcp-nice N (default 19): scheduling priority of the KCP stand-in. In a cluster the KCP listener runs on
//   another machine; here it shares the 2 cores with the server under test and the load generator, and at the
//   default priority its ~150 µs per callback is CPU the webhook's admission thread waits for, which the floor
//   (no callbacks) never does. --kcp-nice 0 measures that contention too; --kcp-nice idle runs it SCHED_IDLE
//   (util-linux chrt), the nearest this machine gets to a KCP on another machine: it then never takes a core
//   from the webhook or the load generator, not even for the rest of a time slice.
// Each server runs in its own child process; this process only generates load and measures.
// Open loop: requests are scheduled at a fixed rate and latency counts from the scheduled time, so
// queueing in the server (or the client) counts. Saturation: closed loop on N kept-alive connections.
import { fork, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { loadavg, setPriority } from 'node:os';
import { createServer as createHttpsServer, Agent, request } from 'node:https';
import type { AddressInfo } from 'node:net';
import { resolve as resolvePath } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  PerformanceObserver,
  constants as perf,
  createHistogram,
  monitorEventLoopDelay,
} from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import express, { type ErrorRequestHandler } from 'express';
import { TLS_SERVER_CIPHERS, allowedResponse, parseAdmissionReview } from '@skr-watcher/api';
import { createLogger, createRegistry, limitConnections, tlsConnectionOptions } from '@skr-watcher/telemetry';
import {
  CONFIG_DEFAULTS,
  dispatchSettings,
  isRelevantChange,
  parseKcpAddress,
  readTlsMaterial,
  startWebhook,
} from '@skr-watcher/webhook';
import { DispatchThread } from '../../webhook/src/dispatch/thread.js';
import { createWebhookMetrics } from '../../webhook/src/metrics.js';
import { SecretVolume, secretFiles, testPki } from '../../webhook/test/support/certs.js';

const SELF = fileURLToPath(import.meta.url);

interface ServerReady {
  port: number;
}
type Role = 'floor' | 'webhook' | 'webhook-express' | 'kcp';

// ---------------------------------------------------------------- child roles

/**
 * The webhook's admission review behind an express 5 app, with the webhook's own dispatch thread, metrics and
 * connection limits: only the HTTP layer differs (routing, express.json for the body and its limit, error
 * middleware). It has no shared in-flight body budget; the production server keeps one.
 */
async function startExpressWebhook(dir: string, kcpAddr: string): Promise<number> {
  const config = CONFIG_DEFAULTS;
  const logger = createLogger('skr-webhook-express', 'info');
  const metrics = createWebhookMetrics(createRegistry());
  const material = await readTlsMaterial({
    certFile: `${dir}/tls.crt`,
    keyFile: `${dir}/tls.key`,
    caFile: `${dir}/ca.crt`,
  });
  const dispatch = await DispatchThread.start({
    address: parseKcpAddress(kcpAddr),
    material,
    ...dispatchSettings(config),
    logger,
    observer: metrics.dispatch,
  });
  // express 5 as the project's servers ran on it before they moved to node:http (decisions 011, 031): exact routes,
  // no banner, no ETag.
  const app = express();
  app.disable('x-powered-by');
  app.disable('etag');
  app.set('case sensitive routing', true);
  app.set('strict routing', true);
  app
    .route('/validate/:manager')
    .post(express.json({ limit: config.maxBodyBytes }), (request, response) => {
      const started = performance.now();
      const parsed = parseAdmissionReview(request.body);
      if (!parsed.ok) {
        metrics.admission.error('invalid_review');
        response.status(400).type('text/plain').send(`not an AdmissionReview: ${parsed.error}\n`);
        metrics.admission.answered(400, (performance.now() - started) / 1000);
        return;
      }
      const uid = parsed.value.request.uid;
      response.type('application/json').send(allowedResponse(uid, parsed.value.apiVersion));
      metrics.admission.answered(200, (performance.now() - started) / 1000);
      const event = isRelevantChange(parsed.value);
      if (event) dispatch.enqueue(String(request.params['manager']), event, uid);
    })
    .all((request, response) => {
      response
        .status(405)
        .set('allow', 'POST')
        .type('text/plain')
        .send(`method ${request.method} is not allowed on ${request.path}; use POST\n`);
    });
  app.use((request, response) => {
    response
      .status(404)
      .type('text/plain')
      .send(`not found: ${request.path.slice(0, 200)}\n`);
  });
  // body-parser's errors carry their status: 413 over the limit, 400 for a body that is not JSON.
  const bodyErrors: ErrorRequestHandler = (
    error: { status?: number; message?: string },
    _request,
    response,
    _next,
  ) => {
    response
      .status(error.status ?? 500)
      .type('text/plain')
      .send(`${error.message ?? 'error'}\n`);
  };
  app.use(bodyErrors);
  const limits = { maxConnections: config.maxConnections, idleTimeoutMs: config.idleTimeoutMs };
  const server = createHttpsServer(
    {
      cert: material.cert,
      key: material.key,
      minVersion: 'TLSv1.2',
      ciphers: TLS_SERVER_CIPHERS,
      honorCipherOrder: true,
      ...tlsConnectionOptions(limits),
      requestTimeout: 30_000,
      headersTimeout: 10_000,
    },
    app,
  );
  server.keepAliveTimeout = 95_000;
  limitConnections(server, limits, { refused: () => metrics.admission.connectionRefused() });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  return (server.address() as AddressInfo).port;
}

/**
 * CPU of this process's main thread (its thread id is the pid), from /proc in clock ticks (10 ms): beside the
 * process's CPU it splits a webhook's cost between the admission thread and the dispatch thread.
 */
function mainThreadCpuMicros(): number {
  try {
    const stat = readFileSync(`/proc/self/task/${process.pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10_000;
  } catch {
    return NaN;
  }
}

/** Linux's number for SCHED_IDLE in /proc/<pid>/task/<tid>/stat (field 41, the scheduling policy). */
const SCHED_IDLE_POLICY = 5;

/**
 * CPU of this process by thread, in ns (from schedstat): the main thread (the admission thread of a webhook); the
 * dispatch thread (the one the webhook made SCHED_IDLE or nicer than the process); all others (V8's platform
 * threads, which also run the dispatch thread's GC and compiler tasks at normal priority, and libuv's pool). Beside
 * them, how long the main thread was runnable but waited for a core, and how often it was preempted.
 */
export interface ThreadCpu {
  mainRunNs: number;
  mainWaitNs: number;
  mainPreempted: number;
  dispatchRunNs: number;
  dispatchWaitNs: number;
  otherRunNs: number;
}

function threadCpu(): ThreadCpu {
  const cpu: ThreadCpu = {
    mainRunNs: 0,
    mainWaitNs: 0,
    mainPreempted: 0,
    dispatchRunNs: 0,
    dispatchWaitNs: 0,
    otherRunNs: 0,
  };
  const threads: { tid: number; nice: number; policy: number; runNs: number; waitNs: number }[] = [];
  for (const tid of readdirSync('/proc/self/task')) {
    try {
      const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
      const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const [runNs, waitNs] = readFileSync(`/proc/self/task/${tid}/schedstat`, 'utf8').split(' ').map(Number);
      threads.push({
        tid: Number(tid),
        nice: Number(fields[16]),
        policy: Number(fields[38]),
        runNs: runNs ?? 0,
        waitNs: waitNs ?? 0,
      });
    } catch {
      // The thread ended between listing and reading.
    }
  }
  const main = threads.find((thread) => thread.tid === process.pid);
  for (const thread of threads) {
    if (thread === main) {
      cpu.mainRunNs += thread.runNs;
      cpu.mainWaitNs += thread.waitNs;
    } else if (thread.policy === SCHED_IDLE_POLICY || (main && thread.nice > main.nice)) {
      cpu.dispatchRunNs += thread.runNs;
      cpu.dispatchWaitNs += thread.waitNs;
    } else cpu.otherRunNs += thread.runNs;
  }
  try {
    const status = readFileSync(`/proc/self/task/${process.pid}/status`, 'utf8');
    cpu.mainPreempted = Number(/nonvoluntary_ctxt_switches:\s*(\d+)/.exec(status)?.[1] ?? NaN);
  } catch {
    cpu.mainPreempted = NaN;
  }
  return cpu;
}

const GC_KINDS: Record<number, string> = {
  [perf.NODE_PERFORMANCE_GC_MINOR]: 'minor',
  [perf.NODE_PERFORMANCE_GC_MAJOR]: 'major',
  [perf.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
  [perf.NODE_PERFORMANCE_GC_WEAKCB]: 'weakcb',
};

/** Callbacks the KCP stand-in answered (its role only). */
let callbacks = 0;
/** The webhook's dispatch counters (its role only). */
let dispatchStats: (() => Promise<unknown>) | undefined;

async function runRole(role: Role, dir: string, kcpAddr: string, webhookModule: string): Promise<void> {
  // The KCP stand-in serves the listener's certificate: the webhook refuses an SKR leaf as its KCP server.
  const cert = readFileSync(`${dir}/${role === 'kcp' ? 'kcp-tls.crt' : 'tls.crt'}`, 'utf8');
  const key = readFileSync(`${dir}/${role === 'kcp' ? 'kcp-tls.key' : 'tls.key'}`, 'utf8');
  const ca = readFileSync(`${dir}/ca.crt`, 'utf8');
  let port: number;
  if (role === 'webhook-express') {
    port = await startExpressWebhook(dir, kcpAddr);
  } else if (role === 'webhook') {
    // Another build of the webhook (a baseline to compare with in the same run), or this one.
    const start = webhookModule
      ? ((await import(webhookModule)) as { startWebhook: typeof startWebhook }).startWebhook
      : startWebhook;
    const webhook = await start({
      host: '127.0.0.1',
      webhookPort: 0,
      metricsPort: 0,
      tlsCertFile: `${dir}/tls.crt`,
      tlsKeyFile: `${dir}/tls.key`,
      caCertFile: `${dir}/ca.crt`,
      kcpAddr,
      logger: createLogger('skr-webhook', 'info'),
    });
    port = webhook.webhookPort;
    dispatchStats = async () => ({ depth: await webhook.queueDepth(), ...webhook.dispatchStats });
  } else {
    const server = createHttpsServer(
      role === 'kcp' ? { cert, key, ca, requestCert: true, rejectUnauthorized: true } : { cert, key },
      (req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (chunk: Buffer) => chunks.push(chunk));
        req.on('end', () => {
          if (role === 'kcp') {
            callbacks++;
            res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
            return;
          }
          // The floor: parse, answer allowed with the uid; no validation, no relevance, no metrics.
          const review = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { request: { uid: string } };
          res.writeHead(200, { 'content-type': 'application/json' }).end(
            JSON.stringify({
              apiVersion: 'admission.k8s.io/v1',
              kind: 'AdmissionReview',
              response: { uid: review.request.uid, allowed: true },
            }),
          );
        });
      },
    );
    server.keepAliveTimeout = 95_000;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
    port = (server.address() as AddressInfo).port;
  }
  // Event-loop delay inside the server: stalls show here even when the client's view is noisy.
  const loopDelay = monitorEventLoopDelay({ resolution: 1 });
  loopDelay.enable();
  // Garbage collection pauses of the main thread, by kind: a major GC stops answers for milliseconds.
  const gcPauses = new Map<string, number[]>();
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      const kind = GC_KINDS[(entry as { detail?: { kind?: number } }).detail?.kind ?? 0] ?? 'other';
      const pauses = gcPauses.get(kind) ?? [];
      pauses.push(entry.duration);
      gcPauses.set(kind, pauses);
    }
  }).observe({ entryTypes: ['gc'] });
  // CPU the process spent between two ticks of a 1 ms timer: the longest stretch of its own work
  // without the loop coming round, which (unlike the wall-clock delay) other tenants cannot inflate.
  // Opt-in (BENCH_CPU_BURSTS=1): a thousand cpuUsage() calls a second cost about 1% CPU themselves.
  const bursts = createHistogram();
  if (process.env['BENCH_CPU_BURSTS'] === '1') {
    let lastCpu = process.cpuUsage();
    const burstTicker = setInterval(() => {
      const cpu = process.cpuUsage();
      bursts.record(Math.max(1, cpu.user + cpu.system - lastCpu.user - lastCpu.system));
      lastCpu = cpu;
    }, 1);
    burstTicker.unref();
  }
  process.on('message', (message) => {
    if (message === 'gc') {
      const summary: Record<string, { count: number; totalMs: number; maxMs: number }> = {};
      for (const [kind, pauses] of gcPauses)
        summary[kind] = {
          count: pauses.length,
          totalMs: Math.round(pauses.reduce((a, b) => a + b, 0)),
          maxMs: Math.round(Math.max(...pauses) * 10) / 10,
        };
      gcPauses.clear();
      process.send?.(summary);
    }
    if (message === 'loop-reset') {
      loopDelay.reset();
      bursts.reset();
    }
    if (message === 'loop') {
      process.send?.({
        p99Ms: loopDelay.percentile(99) / 1e6,
        maxMs: loopDelay.max / 1e6,
        burstP999Ms: bursts.count > 0 ? bursts.percentile(99.9) / 1000 : NaN,
        burstMaxMs: bursts.count > 0 ? bursts.max / 1000 : NaN,
      } satisfies LoopDelay);
    }
    if (message === 'threads') process.send?.(threadCpu());
    if (message === 'callbacks') process.send?.({ callbacks });
    if (message === 'dispatch')
      void (dispatchStats?.() ?? Promise.resolve({})).then((stats) => process.send?.(stats));
    if (message === 'cpu') {
      const usage = process.cpuUsage();
      process.send?.({ cpuMicros: usage.user + usage.system, mainThreadCpuMicros: mainThreadCpuMicros() });
    }
    if (message === 'rss') {
      const usage = process.resourceUsage();
      const cpuMicros = usage.userCPUTime + usage.systemCPUTime;
      process.send?.({ maxRssBytes: usage.maxRSS * 1024, cpuMicros }, () => process.exit(0));
    }
  });
  process.send?.({ port } satisfies ServerReady);
}

// ---------------------------------------------------------------- load generation

/** Nice value of the KCP stand-in, or `idle` for SCHED_IDLE on all its threads (--kcp-nice). */
let kcpNice: number | 'idle' = 19;

interface Server {
  name: string;
  child: ChildProcess;
  port: number;
}

async function startChild(
  name: string,
  role: Role,
  dir: string,
  kcpAddr = '',
  webhookModule = '',
): Promise<Server> {
  const child = fork(SELF, ['--role', role, '--dir', dir, '--kcp', kcpAddr, '--module', webhookModule], {
    execArgv: [
      '--import',
      'tsx',
      '--conditions=source',
      ...(process.env['BENCH_CPU_PROF'] && role !== 'kcp'
        ? ['--cpu-prof', `--cpu-prof-dir=${process.env['BENCH_CPU_PROF']}`]
        : []),
    ],
    stdio: ['ignore', 'ignore', 'inherit', 'ipc'],
    env: { ...process.env, LOG_LEVEL: 'info' },
  });
  if (role === 'kcp' && child.pid && kcpNice !== 'idle') setPriority(child.pid, kcpNice);
  const port = await new Promise<number>((resolve, reject) => {
    child.once('message', (message) => resolve((message as ServerReady).port));
    child.once('exit', (code) => reject(new Error(`${name} exited with ${code} before listening`)));
  });
  // Once it listens, every thread it will run exists.
  if (role === 'kcp' && child.pid && kcpNice === 'idle') {
    const chrt = spawnSync('chrt', ['--idle', '--all-tasks', '--pid', '0', String(child.pid)], {
      encoding: 'utf8',
    });
    if (chrt.status !== 0) throw new Error(`chrt --idle on the KCP stand-in: ${chrt.stderr}`);
  }
  return { name, child, port };
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}

interface LoopDelay {
  p99Ms: number;
  maxMs: number;
  /** CPU time between two ticks of a 1 ms timer. */
  burstP999Ms: number;
  burstMaxMs: number;
}

function loopDelay(server: Server): Promise<LoopDelay> {
  return new Promise((resolve) => {
    server.child.once('message', (message) => resolve(message as LoopDelay));
    server.child.send('loop');
  });
}

interface Usage {
  maxRssBytes: number;
  cpuMicros: number;
}

function cpuMicros(server: Server): Promise<number> {
  return cpuSplit(server).then((cpu) => cpu.cpuMicros);
}

/** Process CPU and its main thread's share. */
function cpuSplit(server: Server): Promise<{ cpuMicros: number; mainThreadCpuMicros: number }> {
  return new Promise((resolve) => {
    server.child.once('message', (message) =>
      resolve(message as { cpuMicros: number; mainThreadCpuMicros: number }),
    );
    server.child.send('cpu');
  });
}

/** Peak RSS and CPU time of a server child, which then exits. */
async function finalUsage(server: Server): Promise<Usage> {
  const exited = new Promise((resolve) => server.child.once('exit', resolve));
  const usage = await new Promise<Usage>((resolve) => {
    server.child.once('message', (message) => resolve(message as Usage));
    server.child.send('rss');
  });
  // Let it finish exiting (and write a CPU profile, if asked for).
  await exited;
  return usage;
}

/** UPDATE reviews of Samples whose spec changes: every one is relevant. The uid goes between the parts. */
function reviewParts(objects: number): [string, string][] {
  const parts: [string, string][] = [];
  for (let i = 0; i < objects; i++) {
    const meta = {
      name: `sample-${i}`,
      namespace: 'kyma-system',
      labels: { 'operator.kyma-project.io/watched-by': 'lifecycle-manager' },
    };
    const object = (replicas: number, rv: string) => ({
      apiVersion: 'operator.kyma-project.io/v1alpha1',
      kind: 'Sample',
      metadata: { ...meta, resourceVersion: rv, uid: '1f8e3d7a-0000-4000-8000-000000000000' },
      spec: { replicas, greeting: 'hello from the benchmark, with a little padding to look like a real CR' },
      status: { state: 'Ready' },
    });
    const request = {
      kind: { group: 'operator.kyma-project.io', version: 'v1alpha1', kind: 'Sample' },
      resource: { group: 'operator.kyma-project.io', version: 'v1alpha1', resource: 'samples' },
      name: meta.name,
      namespace: meta.namespace,
      operation: 'UPDATE',
      userInfo: { username: 'kubernetes-admin', groups: ['system:masters', 'system:authenticated'] },
      object: object(2, '11'),
      oldObject: object(1, '10'),
      dryRun: false,
    };
    const text = JSON.stringify({
      apiVersion: 'admission.k8s.io/v1',
      kind: 'AdmissionReview',
      request: { uid: '@UID@', ...request },
    });
    const at = text.indexOf('@UID@');
    parts.push([text.slice(0, at), text.slice(at + 5)]);
  }
  return parts;
}

/**
 * The review mixes: `many`, UPDATEs spread over 500 objects (every one a callback of its own); `one`, every UPDATE
 * of the same object (the webhook's queue coalesces them into the callback in flight and one after it).
 */
const MIXES = { many: reviewParts(500), one: reviewParts(1) } as const;
type Mix = keyof typeof MIXES;
let PARTS: [string, string][] = MIXES.many;
let uidCounter = 0;

function send(agent: Agent, port: number, caPem: string, onDone: (ok: boolean) => void): void {
  const [head, tail] = PARTS[uidCounter % PARTS.length] as [string, string];
  const uid = `bench-${uidCounter++}`;
  const body = head + uid + tail;
  const req = request(
    {
      host: '127.0.0.1',
      port,
      method: 'POST',
      path: '/validate/lifecycle-manager?timeout=10s',
      agent,
      ca: caPem,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) },
    },
    (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (text += chunk));
      res.on('end', () => onDone(res.statusCode === 200 && text.includes(uid)));
    },
  );
  req.on('error', () => onDone(false));
  req.end(body);
}

interface RunResult {
  latenciesMs: number[];
  completed: number;
  failed: number;
  seconds: number;
}

/** `agent` is kept by the caller across slices, so connections (and their handshakes) are reused. */
async function openLoop(
  agent: Agent,
  port: number,
  caPem: string,
  rate: number,
  seconds: number,
): Promise<RunResult> {
  const total = Math.round(rate * seconds);
  const interval = 1000 / rate;
  const latencies: number[] = [];
  let failed = 0;
  let finished = 0;
  const start = performance.now() + 20;
  let next = 0;
  await new Promise<void>((resolve) => {
    const tick = () => {
      const now = performance.now();
      while (next < total && start + next * interval <= now) {
        const scheduled = start + next * interval;
        next++;
        send(agent, port, caPem, (ok) => {
          if (ok) latencies.push(performance.now() - scheduled);
          else failed++;
          if (++finished === total) resolve();
        });
      }
      if (next < total) setTimeout(tick, 1);
    };
    setTimeout(tick, 0);
  });
  return {
    latenciesMs: latencies,
    completed: latencies.length,
    failed,
    seconds: (performance.now() - start) / 1000,
  };
}

async function saturation(
  port: number,
  caPem: string,
  connections: number,
  seconds: number,
): Promise<RunResult> {
  const agent = new Agent({ keepAlive: true, maxSockets: connections });
  const latencies: number[] = [];
  let failed = 0;
  const start = performance.now();
  const deadline = start + seconds * 1000;
  await Promise.all(
    Array.from(
      { length: connections },
      () =>
        new Promise<void>((resolve) => {
          const loop = () => {
            if (performance.now() >= deadline) return resolve();
            const sent = performance.now();
            send(agent, port, caPem, (ok) => {
              if (ok) latencies.push(performance.now() - sent);
              else failed++;
              loop();
            });
          };
          loop();
        }),
    ),
  );
  agent.destroy();
  return {
    latenciesMs: latencies,
    completed: latencies.length,
    failed,
    seconds: (performance.now() - start) / 1000,
  };
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] as number;
}

interface Summary {
  p50: number;
  p99: number;
  max: number;
  rps: number;
  failed: number;
}

function summarise(result: RunResult): Summary {
  const sorted = [...result.latenciesMs].sort((a, b) => a - b);
  return {
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    max: sorted.at(-1) ?? NaN,
    rps: result.completed / result.seconds,
    failed: result.failed,
  };
}

const loadAverage = () =>
  loadavg()
    .map((value) => value.toFixed(2))
    .join(' / ');

/** NaN (which arrives as null over IPC) prints as n/a. */
const ms = (value: number | null) =>
  (typeof value === 'number' && Number.isFinite(value) ? `${value.toFixed(2)} ms` : 'n/a').padStart(11);

function row(label: string, s: Summary, rssBytes?: number): string {
  const rss = rssBytes === undefined ? '' : `${(rssBytes / 1024 / 1024).toFixed(0)} MiB`.padStart(9);
  return `${label.padEnd(34)} p50 ${ms(s.p50)}  p99 ${ms(s.p99)}  max ${ms(s.max)}  ${s.rps.toFixed(0).padStart(6)} req/s  failed ${String(s.failed).padStart(4)} ${rss}`;
}

/** One measured window: one server, one mix, one round. */
interface SteadyRow {
  mix: Mix;
  round: number;
  /** Index of the server in the list of servers. */
  server: number;
  open: Summary;
  cpuMicrosPerRequest: number;
  /** Of which the main thread (the admission thread of a webhook). */
  mainThreadCpuMicrosPerRequest: number;
  /** Of which the dispatch thread (SCHED_IDLE or nicer than the process), and all other threads. */
  dispatchThreadCpuMicrosPerRequest: number;
  otherThreadsCpuMicrosPerRequest: number;
  /** Time the main thread was runnable but waited for a core, per review; and how often it was preempted. */
  mainThreadRunQueueMicrosPerRequest: number;
  mainThreadPreemptions: number;
  /** The server's own event-loop delay in this window (a stall of its main thread shows here). */
  loopDelay: LoopDelay;
  kcpCpuMicrosPerRequest: number;
  /** The load generator's own CPU (this process). */
  loadCpuMicrosPerRequest: number;
  callbacksPerSecond: number;
  /** The webhook's dispatch counters in this window, and its queue depth at the window's end; undefined for the floor. */
  dispatch?: Record<string, unknown>;
  /** Main-thread GC pauses during the measured window, by kind. */
  gc: Record<string, unknown>;
}

/** Over the rounds of one server and mix: each round's p99, their median, and the p99 of all reviews together. */
interface SteadySummary {
  mix: Mix;
  server: number;
  roundP99s: number[];
  medianP99: number;
  pooled: Summary;
  /** Median over rounds of (this server's p99 / the floor's p99 in the same round); NaN for the floor. */
  medianRoundRatio: number;
}

/** Main-thread GC pauses since the last call, by kind. */
function gcOf(server: Server): Promise<Record<string, unknown>> {
  return new Promise((resolve) => {
    server.child.once('message', (message) => resolve(message as Record<string, unknown>));
    server.child.send('gc');
  });
}

function dispatchOf(server: Server): Promise<Record<string, unknown>> {
  return new Promise((resolve) => {
    server.child.once('message', (message) => resolve(message as Record<string, unknown>));
    server.child.send('dispatch');
  });
}

function threadsOf(server: Server): Promise<ThreadCpu> {
  return new Promise((resolve) => {
    server.child.once('message', (message) => resolve(message as ThreadCpu));
    server.child.send('threads');
  });
}

function callbacksOf(kcp: Server): Promise<number> {
  return new Promise((resolve) => {
    kcp.child.once('message', (message) => resolve((message as { callbacks: number }).callbacks));
    kcp.child.send('callbacks');
  });
}

/** Counters of the webhook's dispatcher (cumulative). */
const DISPATCH_COUNTERS = ['enqueued', 'coalesced', 'delivered'] as const;

/** A webhook whose KCP answers: until its queue is empty (at most `limitMs`), so none of its callbacks run later. */
async function drained(server: Server, limitMs: number): Promise<void> {
  const deadline = performance.now() + limitMs;
  while (performance.now() < deadline) {
    const { depth } = (await dispatchOf(server)) as { depth?: number };
    if (!depth) return;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * Each server alone under sustained load, as its API server would load it. Per mix, every server is a fresh process
 * (so no mix inherits another's queue, and every server of a mix starts from the same state), warmed up for 2 s;
 * then `rounds` rounds, each visiting every server in a new random order: 1 s of warm-up on the same load, then
 * `seconds` of open loop measured, then (KCP up) until its queue is empty, so its callbacks never run while another
 * server is measured. Several windows per server and mix: one burst from another tenant moves one round, not the
 * median.
 */
async function measureSteady(run: {
  start: () => Promise<{ started: Server[]; agents: Agent[] }>;
  stop: (servers: Server[]) => Promise<void>;
  /** Which servers send callbacks to the live KCP stand-in (their queue drains after a window). */
  drains: boolean[];
  /** Index of the floor among the servers, -1 without one. */
  floor: number;
  kcp: Server;
  mixes: Mix[];
  caPem: string;
  rate: number;
  seconds: number;
  rounds: number;
  /** false: one set of servers for all mixes (a later mix inherits the queue the mix before left). */
  freshPerMix: boolean;
}): Promise<{ rows: SteadyRow[]; summaries: SteadySummary[]; last: { started: Server[]; agents: Agent[] } }> {
  const rows: SteadyRow[] = [];
  const summaries: SteadySummary[] = [];
  let last: { started: Server[]; agents: Agent[] } = { started: [], agents: [] };
  for (const [m, mix] of run.mixes.entries()) {
    PARTS = MIXES[mix];
    const { started, agents } = run.freshPerMix || m === 0 ? await run.start() : last;
    last = { started, agents };
    const latencies = started.map((): number[] => []);
    const totals = started.map((): RunResult => ({ latenciesMs: [], completed: 0, failed: 0, seconds: 0 }));
    for (let round = 1; round <= run.rounds; round++) {
      for (const i of [...started.keys()].sort(() => Math.random() - 0.5)) {
        const server = started[i] as Server;
        const agent = agents[i] as Agent;
        await openLoop(agent, server.port, run.caPem, run.rate, 1);
        await gcOf(server);
        const dispatchBefore = await dispatchOf(server);
        server.child.send('loop-reset');
        const loadCpu = process.cpuUsage();
        const before = {
          cpu: await cpuSplit(server),
          threads: await threadsOf(server),
          kcp: await cpuMicros(run.kcp),
          sent: await callbacksOf(run.kcp),
        };
        const result = await openLoop(agent, server.port, run.caPem, run.rate, run.seconds);
        const loadCpuUsed = process.cpuUsage(loadCpu);
        const completed = Math.max(1, result.completed);
        const after = { cpu: await cpuSplit(server), threads: await threadsOf(server) };
        const perReview = (ns: number) => ns / 1000 / completed;
        const dispatchAfter = await dispatchOf(server);
        const dispatch: Record<string, unknown> = {};
        if ('depth' in dispatchAfter) {
          for (const counter of DISPATCH_COUNTERS)
            dispatch[counter] = Number(dispatchAfter[counter]) - Number(dispatchBefore[counter]);
          dispatch['depth'] = dispatchAfter['depth'];
        }
        rows.push({
          mix,
          round,
          server: i,
          open: summarise(result),
          cpuMicrosPerRequest: (after.cpu.cpuMicros - before.cpu.cpuMicros) / completed,
          mainThreadCpuMicrosPerRequest: perReview(after.threads.mainRunNs - before.threads.mainRunNs),
          dispatchThreadCpuMicrosPerRequest: perReview(
            after.threads.dispatchRunNs - before.threads.dispatchRunNs,
          ),
          otherThreadsCpuMicrosPerRequest: perReview(after.threads.otherRunNs - before.threads.otherRunNs),
          mainThreadRunQueueMicrosPerRequest: perReview(after.threads.mainWaitNs - before.threads.mainWaitNs),
          mainThreadPreemptions: after.threads.mainPreempted - before.threads.mainPreempted,
          loopDelay: await loopDelay(server),
          kcpCpuMicrosPerRequest: ((await cpuMicros(run.kcp)) - before.kcp) / completed,
          loadCpuMicrosPerRequest: (loadCpuUsed.user + loadCpuUsed.system) / completed,
          callbacksPerSecond: ((await callbacksOf(run.kcp)) - before.sent) / result.seconds,
          ...(Object.keys(dispatch).length > 0 ? { dispatch } : {}),
          gc: await gcOf(server),
        });
        for (const latency of result.latenciesMs) (latencies[i] as number[]).push(latency);
        const total = totals[i] as RunResult;
        total.completed += result.completed;
        total.failed += result.failed;
        total.seconds += result.seconds;
        if (run.drains[i]) await drained(server, 5000);
        await new Promise((resolve) => setTimeout(resolve, 300));
      }
    }
    const ofMix = rows.filter((r) => r.mix === mix);
    const floorRounds = ofMix.filter((r) => r.server === run.floor);
    for (const i of started.keys()) {
      const roundP99s = ofMix.filter((r) => r.server === i).map((r) => r.open.p99);
      const ratios = ofMix
        .filter((r) => r.server === i)
        .map((r) => r.open.p99 / (floorRounds.find((f) => f.round === r.round)?.open.p99 ?? NaN))
        .filter(Number.isFinite);
      const total = totals[i] as RunResult;
      summaries.push({
        mix,
        server: i,
        roundP99s,
        medianP99: median(roundP99s),
        pooled: summarise({ ...total, latenciesMs: latencies[i] as number[] }),
        medianRoundRatio: i === run.floor ? NaN : median(ratios),
      });
    }
    if (run.freshPerMix && m < run.mixes.length - 1) await run.stop(started);
  }
  PARTS = MIXES.many;
  return { rows, summaries, last };
}

function median(values: number[]): number {
  return percentile(
    [...values].sort((a, b) => a - b),
    50,
  );
}

const micros = (value: number) => `${Number.isFinite(value) ? value.toFixed(0) : 'n/a'} µs`;

function printSteady(
  rows: SteadyRow[],
  summaries: SteadySummary[],
  labels: string[],
  floorIndex: number,
  rounds: number,
): void {
  for (const mix of new Set(rows.map((r) => r.mix))) {
    const ofMix = summaries.filter((s) => s.mix === mix).sort((a, b) => a.server - b.server);
    const floor = ofMix.find((s) => s.server === floorIndex);
    console.log('');
    console.log(
      `steady open loop, mix "${mix}" (fresh servers for this mix; ${rounds} rounds; p99 of each round, their median, the p99 of all rounds' reviews; ratio to the floor's, bar <= 1.5):`,
    );
    for (const s of ofMix) {
      const label = labels[s.server] ?? String(s.server);
      const ratio =
        floor && s !== floor
          ? `  ratio ${(s.medianP99 / floor.medianP99).toFixed(2)} (pooled ${(s.pooled.p99 / floor.pooled.p99).toFixed(2)}, median of round ratios ${s.medianRoundRatio.toFixed(2)})`
          : '';
      console.log(
        `  ${label.padEnd(32)} p99 by round ${s.roundP99s.map((p) => p.toFixed(2)).join(' / ')} ms  median ${ms(s.medianP99).trim()}  pooled ${ms(s.pooled.p99).trim()} (p50 ${ms(s.pooled.p50).trim()}, max ${ms(s.pooled.max).trim()}, failed ${s.pooled.failed})${ratio}`,
      );
      for (const r of rows.filter((row) => row.mix === mix && row.server === s.server)) {
        console.log(
          `      round ${r.round}: p99 ${ms(r.open.p99).trim()}, server loop delay max ${ms(r.loopDelay.maxMs).trim()}${Number.isFinite(r.loopDelay.burstMaxMs) ? ` (CPU burst max ${ms(r.loopDelay.burstMaxMs).trim()})` : ''}; CPU per review ${micros(r.cpuMicrosPerRequest)}: main thread ${micros(r.mainThreadCpuMicrosPerRequest)}, dispatch thread ${micros(r.dispatchThreadCpuMicrosPerRequest)}, other threads ${micros(r.otherThreadsCpuMicrosPerRequest)}; main thread waited for a core ${micros(r.mainThreadRunQueueMicrosPerRequest)}/review, preempted ${r.mainThreadPreemptions}×; KCP stand-in ${micros(r.kcpCpuMicrosPerRequest)}, load generator ${micros(r.loadCpuMicrosPerRequest)}; ${r.callbacksPerSecond.toFixed(0)} callbacks/s${r.dispatch ? `; dispatch ${JSON.stringify(r.dispatch)}` : ''}; GC ${JSON.stringify(r.gc)}`,
        );
      }
    }
  }
  console.log('');
  console.log('p99 ratio to the floor, median of rounds (bar: <= 1.5):');
  for (const mix of new Set(rows.map((r) => r.mix)))
    for (const s of summaries.filter((x) => x.mix === mix && x.server !== floorIndex)) {
      const floor = summaries.find((x) => x.mix === mix && x.server === floorIndex);
      if (!floor) continue;
      console.log(
        `  mix ${mix.padEnd(5)} ${(labels[s.server] ?? String(s.server)).padEnd(32)} ${(s.medianP99 / floor.medianP99).toFixed(2)}  (${ms(s.medianP99).trim()} against ${ms(floor.medianP99).trim()})`,
      );
    }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      role: { type: 'string' },
      dir: { type: 'string' },
      kcp: { type: 'string' },
      module: { type: 'string' },
      rate: { type: 'string', default: '1000' },
      seconds: { type: 'string', default: '5' },
      /** Steady method: measured windows per server and mix, each server's in a new random order. */
      rounds: { type: 'string', default: '3' },
      /** Steady method: `fresh` server processes for every mix, or `shared` by all mixes (the method before). */
      'servers-per-mix': { type: 'string', default: 'fresh' },
      connections: { type: 'string', default: '200' },
      'saturation-seconds': { type: 'string', default: '5' },
      /**
       * steady (default): each server alone for --seconds of sustained load per mix, back to back, as an API server
       * loads its webhook; interleaved: --slice-ms slices of every server in random order, repeated.
       */
      method: { type: 'string', default: 'steady' },
      /** Review mixes for the steady method: many, one, or both (comma-separated). */
      mix: { type: 'string', default: 'many,one' },
      /** Kept-alive connections of the open loop (an API server keeps a pool per webhook). */
      'open-connections': { type: 'string', default: '32' },
      'slice-ms': { type: 'string', default: '250' },
      /**
       * Comma-separated subset of floor,up,down (for profiling one of them); with --baseline also
       * up-base,down-base.
       */
      servers: { type: 'string', default: 'floor,up,down' },
      'kcp-nice': { type: 'string', default: '19' },
      /** Path of another build's webhook entry (e.g. a checkout's webhook/src/index.ts) to run beside this one. */
      baseline: { type: 'string' },
      /** Also the admission review behind express 5, KCP up (express-up) and, unless --servers says otherwise, down. */
      express: { type: 'boolean', default: false },
    },
  });
  if (values.role)
    return runRole(values.role as Role, values.dir ?? '', values.kcp ?? '', values.module ?? '');

  kcpNice = values['kcp-nice'] === 'idle' ? 'idle' : Number(values['kcp-nice']);
  const rate = Number(values.rate);
  const seconds = Number(values.seconds);
  const rounds = Number(values.rounds);
  const connections = Number(values.connections);
  const saturationSeconds = Number(values['saturation-seconds']);
  const sliceSeconds = Number(values['slice-ms']) / 1000;
  const steady = values.method !== 'interleaved';
  const mixes = (values.mix ?? '').split(',').filter((mix): mix is Mix => mix in MIXES);
  const openConnections = Number(values['open-connections']);
  const pki = testPki('skr-webhook-bench-ca');
  const listener = pki.listener();
  const volume = await SecretVolume.create({
    ...secretFiles(pki.leaf('skr-bench'), pki.ca.certPem),
    'kcp-tls.crt': listener.certPem,
    'kcp-tls.key': listener.keyPem,
  });
  const caPem = pki.ca.certPem;
  const children: Server[] = [];
  try {
    const kcp = await startChild('kcp', 'kcp', volume.dir);
    children.push(kcp);
    // Imported here only: the server children need none of client-node.
    const { freePort } = await import('@skr-watcher/testenv');
    const deadKcp = `127.0.0.1:${await freePort()}`;
    const wanted = new Set((values.servers ?? '').split(','));
    const baseline = values.baseline ? resolvePath(values.baseline) : '';
    if (baseline) wanted.add('up-base').add('down-base');
    if (values.express) wanted.add('express-up');
    const servers = [
      { key: 'floor', label: 'floor (bare Node TLS responder)', role: 'floor' as const, kcpAddr: '' },
      { key: 'up', label: 'skr-webhook, KCP up', role: 'webhook' as const, kcpAddr: `127.0.0.1:${kcp.port}` },
      { key: 'down', label: 'skr-webhook, KCP down', role: 'webhook' as const, kcpAddr: deadKcp },
      {
        key: 'express-up',
        label: 'express 5 webhook, KCP up',
        role: 'webhook-express' as const,
        kcpAddr: `127.0.0.1:${kcp.port}`,
      },
      {
        key: 'express-down',
        label: 'express 5 webhook, KCP down',
        role: 'webhook-express' as const,
        kcpAddr: deadKcp,
      },
      ...(baseline
        ? [
            {
              key: 'up-base',
              label: 'baseline, KCP up',
              role: 'webhook' as const,
              kcpAddr: `127.0.0.1:${kcp.port}`,
              module: baseline,
            },
            {
              key: 'down-base',
              label: 'baseline, KCP down',
              role: 'webhook' as const,
              kcpAddr: deadKcp,
              module: baseline,
            },
          ]
        : []),
    ].filter((server) => wanted.has(server.key));
    const method = steady
      ? `per mix (${mixes.join(', ')}) ${values['servers-per-mix'] === 'shared' ? 'the same server processes (shared by the mixes)' : 'fresh server processes'}, then ${rounds} rounds of each server alone for 1 s warm-up + ${seconds} s measured, in a new random order each round, a KCP-up webhook's queue drained after its window`
      : `interleaved ${sliceSeconds * 1000} ms slices in random order`;
    console.log(
      `open loop ${rate} req/s (${method}; ${openConnections} kept-alive connections, 2 s warm-up after each start), saturation ${connections} connections for ${saturationSeconds} s; ` +
        `node ${process.version}, ${(PARTS[0]?.[0].length ?? 0) + (PARTS[0]?.[1].length ?? 0) + 10}-byte UPDATE reviews, every one relevant`,
    );
    console.log(
      `load average at start (1/5/15 min, 2 cores here): ${loadAverage()}; KCP stand-in ${kcpNice === 'idle' ? 'SCHED_IDLE' : `at nice ${kcpNice}`}`,
    );
    const startServers = async (): Promise<{ started: Server[]; agents: Agent[] }> => {
      const started: Server[] = [];
      const agents: Agent[] = [];
      for (const spec of servers) {
        const server = await startChild(
          spec.label,
          spec.role,
          volume.dir,
          spec.kcpAddr,
          'module' in spec ? spec.module : '',
        );
        children.push(server);
        started.push(server);
        const agent = new Agent({ keepAlive: true, maxSockets: openConnections });
        agents.push(agent);
        await openLoop(agent, server.port, caPem, rate, 2);
      }
      return { started, agents };
    };
    const floorIndex = servers.findIndex((spec) => spec.role === 'floor');
    const measured = steady
      ? await measureSteady({
          start: startServers,
          stop: async (stopped) => {
            for (const server of stopped) await stopChild(server.child);
          },
          drains: servers.map((spec) => spec.role !== 'floor' && spec.kcpAddr !== deadKcp),
          floor: floorIndex,
          kcp,
          mixes,
          caPem,
          rate,
          seconds,
          rounds,
          freshPerMix: values['servers-per-mix'] !== 'shared',
        })
      : undefined;
    const { started, agents } = measured?.last ?? (await startServers());
    // Interleaved short slices: the load other tenants put on this shared machine hits every
    // server alike, which keeps the ratio meaningful even when absolute figures are noisy.
    const open = started.map((): RunResult => ({ latenciesMs: [], completed: 0, failed: 0, seconds: 0 }));
    const openCpuMicros = started.map(() => 0);
    const slices = Math.max(1, Math.round(seconds / sliceSeconds));
    /** Per round, each server's slice p99; the median of their ratios shrugs off a burst in one slice. */
    const roundP99s: number[][] = [];
    for (const server of started) server.child.send('loop-reset');
    for (let slice = 0; steady ? false : slice < slices; slice++) {
      const p99s: number[] = [];
      roundP99s.push(p99s);
      // A different order each round, so no server always follows the same one.
      const order = [...started.keys()].sort(() => Math.random() - 0.5);
      for (const i of order) {
        const server = started[i] as Server;
        const cpuBefore = await cpuMicros(server);
        const run = await openLoop(agents[i] as Agent, server.port, caPem, rate, sliceSeconds);
        // Callbacks still in flight at the end of a slice are billed to the next one: it evens out.
        openCpuMicros[i] = (openCpuMicros[i] ?? 0) + (await cpuMicros(server)) - cpuBefore;
        p99s[i] = percentile(
          [...run.latenciesMs].sort((a, b) => a - b),
          99,
        );
        const into = open[i] as RunResult;
        for (const latency of run.latenciesMs) into.latenciesMs.push(latency);
        into.completed += run.completed;
        into.failed += run.failed;
        into.seconds += run.seconds;
      }
    }
    for (const agent of agents) agent.destroy();
    const loopDelays: LoopDelay[] = [];
    for (const server of started) loopDelays.push(await loopDelay(server));
    const results: {
      label: string;
      open: Summary;
      saturated: Summary;
      rss: number;
      cpuMicrosPerRequest: number;
      loopDelay: LoopDelay;
    }[] = [];
    for (const [i, server] of started.entries()) {
      const saturated = summarise(await saturation(server.port, caPem, connections, saturationSeconds));
      const usage = await finalUsage(server);
      const label = servers[i]?.label ?? server.name;
      results.push({
        label,
        open: summarise(open[i] as RunResult),
        saturated,
        rss: usage.maxRssBytes,
        cpuMicrosPerRequest: (openCpuMicros[i] ?? 0) / Math.max(1, (open[i] as RunResult).completed),
        loopDelay: loopDelays[i] as LoopDelay,
      });
    }
    for (const result of results) {
      if (!steady) console.log(row(`${result.label} [open]`, result.open));
      console.log(row(`${result.label} [saturation]`, result.saturated, result.rss));
    }
    if (steady)
      printSteady(
        measured?.rows ?? [],
        measured?.summaries ?? [],
        results.map((result) => result.label),
        floorIndex,
        rounds,
      );
    else {
      console.log('');
      console.log(
        'server CPU per request in the open-loop slices (callbacks included; far less sensitive to noise):',
      );
      for (const result of results)
        console.log(`  ${result.label.padEnd(32)} ${result.cpuMicrosPerRequest.toFixed(0)} µs`);
    }
    console.log('');
    if (!steady)
      console.log(
        'server event loop over the open-loop slices (idle time between its slices included): delay, and with BENCH_CPU_BURSTS=1 the CPU spent between two ticks of a 1 ms timer (own stalls, which other tenants cannot inflate):',
      );
    for (const result of steady ? [] : results)
      console.log(
        `  ${result.label.padEnd(32)} delay p99 ${ms(result.loopDelay.p99Ms)} max ${ms(result.loopDelay.maxMs)}  CPU burst p99.9 ${ms(result.loopDelay.burstP999Ms)} max ${ms(result.loopDelay.burstMaxMs)}`,
      );
    const floor = results.find((result) => result.label.startsWith('floor'));
    if (floor && !steady) {
      console.log('');
      console.log('open loop p99 ratio to the floor (bar: <= 1.5):');
      for (const result of results.filter((r) => r !== floor))
        console.log(`  ${result.label.padEnd(32)} ${(result.open.p99 / floor.open.p99).toFixed(2)}`);
      const floorAt = results.indexOf(floor);
      console.log(
        'median over rounds of the slice p99 ratio to the floor (robust to bursts from other tenants):',
      );
      for (const [i, result] of results.entries()) {
        if (i === floorAt) continue;
        const ratios = roundP99s
          .map((round) => (round[i] ?? NaN) / (round[floorAt] ?? NaN))
          .filter(Number.isFinite)
          .sort((a, b) => a - b);
        console.log(`  ${result.label.padEnd(32)} ${percentile(ratios, 50).toFixed(2)}`);
      }
    }
    console.log('');
    console.log(`load average at end (1/5/15 min): ${loadAverage()}`);
    console.log(
      'summary (JSON):',
      JSON.stringify({
        rate,
        seconds,
        rounds,
        connections,
        load: loadavg(),
        results,
        steady: measured?.rows ?? [],
        steadySummary: measured?.summaries ?? [],
      }),
    );
  } finally {
    for (const { child } of children) await stopChild(child);
    await volume.remove();
  }
}

await main();
