// Sharded agent benchmark (decision 012): N Kymas, each with its own kubeconfig Secret and SKR
// namespace, spread over a few SKR API servers, reconciled by several real `skr-agent run --shard` processes.
//
//   npm run bench:agent -- [--kymas 5000] [--replicas 3] [--skrs 3] [--workers 8] [--resync 60s]
//                          [--lease 15s/10s/2s] [--node-flags '--max-old-space-size=256'] [--log-level info]
//                          [--agent path/to/agent/dist/bundle/main.cjs] [--kill-at resync] [--skip-resync]
//                          [--edit-sample 150] [--edit-every 200ms] [--skip-joins]
//
// Prints: per replica owned Kymas and steady RSS; time until every Kyma is Ready; one full resync with the agents'
// CPU per reconcile and the API servers' CPU; after kill -9 of one replica, how long until every Kyma it owned was
// reconciled by a survivor, with a timeline (the victim's last renewal, each survivor's expiry, fence and claims from
// its log, the orphans' first reconciles from the journals, the survivors' pacer and queue every 2 s) and what the
// takeover cost per orphan (survivors', API servers' and etcd's CPU from the kill until the last orphan's first
// reconcile ended, and the survivors' requests by cluster, verb and resource); after a replacement joins (two live → three) and then a fourth (three → four), how many Kymas each join moved; overlapping reconciles of one
// Kyma (from the replicas' journals); per replica how often it suspended and whether it lost membership (logs).
// With --edit-sample N (default 150; 0: none), every (Kymas/N)-th Kyma enables the sample module, so its SKR holds a
// Module CR and the KCP its ModuleConfig, and the replicas run their mTLS listeners and peer endpoints. From just
// before the kill, the bench edits the Module CRs of the sampled Kymas the victim owned, one every --edit-every
// round-robin, and sends each edit's callback as the webhook does (the v2 body with the fingerprint, signed with that
// SKR's client certificate, to a survivor's listener, sent again after Retry-After while answered non-2xx); it prints
// per edit the time from the kill, edit→ModuleConfig latency and sends, and the worst against lease duration + 5 s.
// Figures only; nothing passes or fails. The scale-out bars: RSS ≤ 300 MB each, resync ≤ 60 s, orphans re-reconciled ≤ 90 s and an orphan's edit in its ModuleConfig ≤ lease + 5 s,
// join moves ≤ 35 % (as a fourth replica joins), zero overlaps.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, openSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CoordinationV1Api, CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { GROUP, KINDS, LABELS, SHARDING, type Kyma } from '@skr-watcher/api';
import { startEnvironment } from '@skr-watcher/testenv';
import { listenerFlags } from '../../agent/test/support/agent-child.js';
import { createTestCa } from '../../agent/test/support/listener-certs.js';
import { benchAgentRunArgs, createBenchFleet } from '../support/bench-fleet.js';
import { seedSampleCatalog } from '../support/kcp-seed.js';
import { startEditStream, type EditOutcome } from '../support/orphan-edits.js';
import { cpuSeconds } from '../support/process-memory.js';
import { costLines, snapshot, type Costed } from './process-costs.js';
import {
  overlaps,
  reconcileIntervals,
  type JournalSource,
  type ReconcileInterval,
} from '../support/reconcile-journal.js';

/** `--agent <main.js>`: another build of the agent (A/B runs); by default this tree's bundle, the file the image runs (decision 017). */
const BUILT = flag('agent', fileURLToPath(new URL('../../agent/dist/bundle/main.cjs', import.meta.url)));

function flag(name: string, fallback: string): string {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 && process.argv[at + 1] ? (process.argv[at + 1] as string) : fallback;
}

const KYMAS = Number(flag('kymas', '5000'));
const REPLICAS = Number(flag('replicas', '3'));
const SKRS = Array.from({ length: Number(flag('skrs', '3')) }, (_, i) => `skr${i + 1}`);
const WORKERS = flag('workers', '8');
const RESYNC = flag('resync', '60s');
const NAMESPACE = 'kcp-bench';
/** Node flags for the agents, e.g. `--max-old-space-size=256` so that a runaway fails fast. */
const NODE_FLAGS = flag('node-flags', '').split(' ').filter(Boolean);
/** `--kill-at resync`: kill so that a survivor's periodic relist lands just before the victim's Lease expires (the orphans' worst case); default: 15 s after the measured resync. */
const KILL_AT = flag('kill-at', 'steady');
/** `--skip-resync`: kill 15 s after all are Ready, without measuring a full resync first (takeover runs). */
const SKIP_RESYNC = process.argv.includes('--skip-resync');
/** info: the kill -9 timeline reads the survivors' takeover (expiry, fence, claims) from their logs. */
const LOG_LEVEL = flag('log-level', 'info');
/** Kymas with the sample module (Module CR, ModuleConfig, listeners on); 0: none and no listeners. */
const EDIT_SAMPLE = Number(flag('edit-sample', '150'));
/** One edit of an orphan's Module CR this often after the kill. */
const EDIT_EVERY = flag('edit-every', '200ms');
/** `--skip-joins`: end after the takeover, without the two joins. */
const SKIP_JOINS = process.argv.includes('--skip-joins');
/** Membership timing (--lease-duration/--renew-deadline/--retry-period), e.g. `60s/40s/5s`; the agent's defaults if empty. */
const LEASE = flag('lease', '').split('/').filter(Boolean);
const LEASE_FLAGS =
  LEASE.length === 3
    ? [
        '--lease-duration',
        LEASE[0] as string,
        '--renew-deadline',
        LEASE[1] as string,
        '--retry-period',
        LEASE[2] as string,
      ]
    : [];

interface Replica extends JournalSource {
  child: ChildProcess;
  port: number;
  /** The listener's port (0 without --edit-sample). */
  listenerPort: number;
}

/** `60s`, `2m`, `500ms` in seconds. */
const seconds = (text: string) => {
  const match = /^(\d+(?:\.\d+)?)(ms|s|m)$/.exec(text);
  if (!match) throw new Error(`not a duration: ${text}`);
  return Number(match[1]) * ({ ms: 0.001, s: 1, m: 60 } as const)[match[2] as 'ms' | 's' | 'm'];
};
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const mb = (bytes: number) => `${Math.round(bytes / 1048576)} MB`;

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise((resolve) => server.close(resolve));
  return typeof address === 'object' && address ? address.port : 0;
}

/** Every sample of a replica's /metrics as `name{labels}` → value. */
async function scrapeAll(port: number): Promise<Map<string, number>> {
  // Bounded: a replica whose event loop is stuck must not stall the bench.
  const text = await (
    await fetch(`http://127.0.0.1:${port}/metrics`, { signal: AbortSignal.timeout(5_000) })
  ).text();
  const found = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const space = line.lastIndexOf(' ');
    found.set(line.slice(0, space), Number(line.slice(space + 1)));
  }
  return found;
}

/**
 * Requests of all replicas between two looks (skr_agent_kube_requests_total, summed over replicas) per reconcile,
 * by cluster, verb and resource: what grows with the fleet shows here (decision 016).
 */
function requestsPerReconcile(
  before: Map<string, number>[],
  after: Map<string, number>[],
  reconciles: number,
) {
  const total = new Map<string, number>();
  after.forEach((samplesNow, i) => {
    for (const [key, value] of samplesNow) {
      if (!key.startsWith('skr_agent_kube_requests_total{')) continue;
      const label = (name: string) => new RegExp(`${name}="([^"]*)"`).exec(key)?.[1] ?? '';
      const what = `${label('cluster')} ${label('verb')} ${label('resource')}`;
      total.set(what, (total.get(what) ?? 0) + value - (before[i]?.get(key) ?? 0));
    }
  });
  return [...total]
    .filter(([, n]) => n > 0)
    .sort((a, b) => a[0].localeCompare(b[0]))
    .map(([what, n]) => `${what} ${(n / reconciles).toFixed(2)}`)
    .join(', ');
}

/** Bytes of the answers all replicas read whole between two looks (not watches), per reconcile, by cluster kind. */
function answersPerReconcile(
  before: Map<string, number>[],
  after: Map<string, number>[],
  reconciles: number,
) {
  const total = new Map<string, number>([
    ['kcp', 0],
    ['skr', 0],
  ]);
  after.forEach((samplesNow, i) => {
    for (const [key, value] of samplesNow) {
      if (!key.startsWith('skr_agent_kube_response_bytes_total{')) continue;
      const cluster = /cluster="([^"]*)"/.exec(key)?.[1] ?? '';
      total.set(cluster, (total.get(cluster) ?? 0) + value - (before[i]?.get(key) ?? 0));
    }
  });
  return [...total]
    .map(([cluster, bytes]) => `${cluster} ${(bytes / reconciles / 1024).toFixed(1)} kB`)
    .join(', ');
}

/** The sum of every sample of `name` on a replica's /metrics. */
async function metric(port: number, name: string): Promise<number> {
  let sum = 0;
  for (const [key, value] of await scrapeAll(port)) if (key.startsWith(name)) sum += value;
  return sum;
}

/** Every sample of `name` on a replica's /metrics, by its label set (`{cluster="kcp",verb="get",…}`). */
async function metricSamples(port: number, name: string): Promise<Map<string, number>> {
  const samples = new Map<string, number>();
  for (const [key, value] of await scrapeAll(port)) {
    if (key.startsWith(`${name}{`)) samples.set(key.slice(name.length), value);
  }
  return samples;
}

/** What the survivors, the API servers and etcd have spent so far: CPU seconds and requests by label set. */
interface Spent {
  agentCpu: number;
  serverCpu: number;
  etcdCpu: number;
  requests: Map<string, number>;
  connections: Map<string, number>;
}

const load = () =>
  `load ${loadavg()
    .map((l) => l.toFixed(1))
    .join(' ')}`;

interface Sample {
  limit: number;
  waiting: number;
  depth: number;
  inFlight: number;
  resyncs: number;
}

async function sampleReplica(r: { port: number }): Promise<Sample> {
  const [limit, waiting, depth, inFlight, resyncs] = await Promise.all(
    [
      'skr_agent_shard_reconcile_limit',
      'skr_agent_shard_reconciles_waiting',
      'workqueue_depth{name="kyma"}',
      'workqueue_in_flight{name="kyma"}',
      'skr_agent_triggers_total{source="resync"}',
    ].map((name) => metric(r.port, name)),
  );
  return { limit, waiting, depth, inFlight, resyncs } as Sample;
}

function describeSample(now: Sample | undefined, atKill: Sample | undefined): string {
  if (!now) return 'no answer';
  const resyncs = atKill ? now.resyncs - atKill.resyncs : NaN;
  return `${now.limit}/${now.waiting}/${now.depth}/${now.inFlight}/${resyncs}`;
}

const timeMs = (value: unknown) =>
  value instanceof Date ? value.getTime() : typeof value === 'string' ? Date.parse(value) : NaN;

/**
 * Each orphan's first reconcile by a survivor after the kill (undefined while none started), and the first that
 * ended (undefined while none did; a run cut short by its replica's exit has not ended).
 */
function firstRuns(
  byKyma: Map<string, ReconcileInterval[]>,
  orphans: string[],
  victim: string,
  killedAt: bigint,
): { started: (ReconcileInterval | undefined)[]; ended: (ReconcileInterval | undefined)[] } {
  const after = (kyma: string) =>
    (byKyma.get(kyma) ?? []).filter((run) => run.replica !== victim && run.start > killedAt);
  return {
    started: orphans.map((kyma) => after(kyma).sort((a, b) => (a.start < b.start ? -1 : 1))[0]),
    ended: orphans.map(
      (kyma) =>
        after(kyma)
          .filter((run) => !run.open)
          .sort((a, b) => (a.end < b.end ? -1 : 1))[0],
    ),
  };
}

const SUSPENDED = 'membership renewal overdue; starting no work until it lands';
const RESUMED = 'membership renewed late; no peer had taken over, resuming';
const LOST = 'lost shard membership; this replica must stop reconciling now';

/** A replica's log lines from `sinceMs` (epoch) on: ms since then and message. */
function logMessages(file: string, sinceMs: number): { at: number; msg: string }[] {
  const entries: { at: number; msg: string }[] = [];
  for (const line of readFileSync(file, 'utf8').split('\n')) {
    try {
      const entry = JSON.parse(line) as { time?: string; msg?: string };
      const at = Date.parse(entry.time ?? '') - sinceMs;
      if (at >= 0) entries.push({ at, msg: entry.msg ?? '' });
    } catch {
      // not a log line (a partial last line)
    }
  }
  return entries;
}

/** A survivor's takeover from its log (info level): expiry seen, fence, member change, claims; ms after the kill. */
function logTimeline(file: string, killedMs: number): string {
  const entries = logMessages(file, killedMs);
  const times = (msg: string) => entries.filter((e) => e.msg === msg).map((e) => e.at);
  const first = (msg: string) => times(msg)[0] ?? '-';
  const claims = times('Kyma claimed');
  return [
    `Lease seen expired ${first('a peer’s Lease expired on our clock; fencing it')}`,
    `fenced ${first('fenced the expired Lease of a peer; its Kymas may be claimed')}`,
    `members changed ${first('shard members changed')}`,
    `${claims.length} claims written ${claims.length ? `${claims[0]} … ${claims[claims.length - 1]}` : ''}`,
    `late renewals ${times('membership renewal late').length}, suspensions ${times(SUSPENDED).length}, lost ${times(LOST).length}`,
  ].join('; ');
}

/**
 * The edit stream's figures: per edit its time from the kill, edit→ModuleConfig latency and callback sends; the
 * worst of those made after the kill and of those made after the victim's Lease expired, against lease + 5 s.
 */
/** `503×4, error×1` */
const tally = (codes: string[]) =>
  [...new Set(codes)].map((code) => `${code}×${codes.filter((c) => c === code).length}`).join(', ');

function printEdits(
  outcomes: EditOutcome[],
  at: { killedMs: number; expiredMs: number; leaseSeconds: number; targets: number },
): void {
  const bar = (at.leaseSeconds + 5) * 1000;
  const latency = (o: EditOutcome) => (o.reachedAtMs ?? NaN) - o.editedAtMs;
  const fromKill = (o: EditOutcome) => ((o.editedAtMs - at.killedMs) / 1000).toFixed(1);
  console.log(
    `edits of orphaned SKRs' Module CRs (${outcomes.length} over ${at.targets} Kymas the victim owned; the victim's Lease ` +
      `expired ${((at.expiredMs - at.killedMs) / 1000).toFixed(1)} s after the kill; bar lease ${at.leaseSeconds} s + 5 s = ${bar / 1000} s; ${load()}):`,
  );
  const cells = outcomes.map(
    (o) =>
      `${fromKill(o)} s ${o.kyma}: ${o.error ? `edit failed (${o.error})` : o.reachedAtMs === undefined ? 'NOT REACHED' : `${latency(o)} ms`}` +
      `${o.sends > 1 ? ` (${o.sends} sends; ${tally(o.refused)})` : ''}`,
  );
  for (let i = 0; i < cells.length; i += 4) console.log(`    ${cells.slice(i, i + 4).join(' | ')}`);
  const worst = (set: EditOutcome[], what: string) => {
    if (!set.length) return `${what}: none`;
    const lost = set.filter((o) => o.reachedAtMs === undefined).length;
    const sorted = set.map(latency).sort((a, b) => a - b);
    const max = lost ? Infinity : (sorted[sorted.length - 1] as number);
    const p50 = sorted[Math.floor(sorted.length / 2)] as number;
    return `${what} (${set.length}): p50 ${p50} ms, max ${lost ? `${lost} never reached` : `${max} ms`} ${
      max <= bar ? '≤' : '>'
    } ${bar} ms (${max <= bar ? 'met' : 'not met'})`;
  };
  const before = outcomes.filter((o) => o.editedAtMs < at.killedMs && !o.error);
  const after = outcomes.filter((o) => o.editedAtMs >= at.killedMs && !o.error);
  const afterExpiry = after.filter((o) => o.editedAtMs >= at.expiredMs);
  const gap = after.filter((o) => o.editedAtMs < at.expiredMs);
  console.log(`  ${worst(before, 'edits before the kill')}`);
  console.log(`  ${worst(after, 'edits after the kill (the bar)')}`);
  console.log(`  ${worst(gap, '  of them made while the victim’s Lease still ran')}`);
  console.log(`  ${worst(afterExpiry, '  of them made after the Lease expired')}`);
  // Where an edit's time went: until a listener took its callback, and from then until its ModuleConfig showed it.
  const split = (set: EditOutcome[]) => {
    const taken = set.filter((o) => o.acceptedAtMs !== undefined && o.reachedAtMs !== undefined);
    const spans = (span: (o: EditOutcome) => number) => {
      const sorted = taken.map(span).sort((a, b) => a - b);
      return `p50 ${sorted[Math.floor(sorted.length / 2)] ?? NaN} ms, max ${sorted[sorted.length - 1] ?? NaN} ms`;
    };
    return `edit → callback taken ${spans((o) => (o.acceptedAtMs as number) - o.editedAtMs)}; callback taken → ModuleConfig ${spans(
      (o) => (o.reachedAtMs as number) - (o.acceptedAtMs as number),
    )}`;
  };
  console.log(`  edits after the kill: ${split(after)}`);
  const refused = after.filter((o) => o.sends > 1).length;
  console.log(
    `  callbacks answered non-2xx at first: ${refused} of ${after.length} edits after the kill; edits that failed: ${
      outcomes.filter((o) => o.error).length
    }`,
  );
}

async function main(): Promise<void> {
  const t0 = Date.now();
  const dir = mkdtempSync(join(tmpdir(), 'skr-shard-bench-'));
  const env = await startEnvironment({ planes: ['kcp', ...SKRS] });
  console.log(
    `${KYMAS} Kymas, ${REPLICAS} replicas (+2 joining), ${SKRS.length} SKR API servers; agent logs and journals in ${dir}; load average ${loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')} (2 cores)`,
  );
  const kcpPath = env.plane('kcp').kubeconfigPath;
  const kcp = env.plane('kcp').kubeConfig();
  const core = kcp.makeApiClient(CoreV1Api);
  const api = kcp.makeApiClient(CustomObjectsApi);
  const leases = kcp.makeApiClient(CoordinationV1Api);
  const replicas: Replica[] = [];
  try {
    await core.createNamespace({ body: { metadata: { name: NAMESPACE } } });
    const kubeconfigs = SKRS.map((skr) => readFileSync(env.plane(skr).kubeconfigPath, 'utf8'));
    const stride = EDIT_SAMPLE > 0 ? Math.max(1, Math.floor(KYMAS / EDIT_SAMPLE)) : 0;
    const sampled = (i: number) => stride > 0 && i % stride === 0;
    if (stride) await seedSampleCatalog(kcp, NAMESPACE, { moduleCrPerKyma: true });
    await createBenchFleet({
      kcp,
      namespace: NAMESPACE,
      kymas: KYMAS,
      kubeconfigs,
      modulesOf: (i) => (sampled(i) ? [{ name: 'sample' }] : []),
      // No copy of the sample's catalog into every SKR: the fleet costs what it cost before the sample.
      ...(stride ? { moduleCatalog: false } : {}),
    });
    const sample = Array.from({ length: KYMAS }, (_, i) => i).filter(sampled);
    const ca = stride ? createTestCa('kcp-bench-ca') : undefined;
    console.log(`setup: ${KYMAS} Kymas over ${SKRS.length} SKR API servers in ${Date.now() - t0} ms`);

    const start = async (identity: string): Promise<Replica> => {
      const port = await freePort();
      const journal = join(dir, `${identity}.journal`);
      const listenerPort = ca ? await freePort() : 0;
      const listener = ca
        ? [
            ...(await listenerFlags(mkdtempSync(join(dir, `${identity}-tls-`)), ca, listenerPort)),
            // Callbacks accepted by a replica that does not own the Kyma go to the owner's peer endpoint.
            '--peer-address',
            '127.0.0.1:0',
          ]
        : undefined;
      const child = spawn(
        process.execPath,
        [
          ...NODE_FLAGS,
          BUILT,
          ...benchAgentRunArgs({
            kubeconfig: kcpPath,
            namespace: NAMESPACE,
            metricsAddress: `127.0.0.1:${port}`,
            workers: WORKERS,
            resync: RESYNC,
            ...(listener ? { listener } : {}),
          }),
          '--shard',
          '--shard-identity',
          identity,
          ...LEASE_FLAGS,
          '--reconcile-journal',
          journal,
          '--log-level',
          LOG_LEVEL,
        ],
        { stdio: ['ignore', openSync(join(dir, `${identity}.log`), 'a'), 'inherit'] },
      );
      const replica: Replica = { identity, journal, child, port, listenerPort };
      child.once('exit', () => (replica.deadAt = process.hrtime.bigint()));
      replicas.push(replica);
      return replica;
    };
    const listed = async <T>(kind: 'kyma' | 'moduleConfig') =>
      (
        (await api.listNamespacedCustomObject({
          group: GROUP,
          version: KINDS[kind].version,
          plural: KINDS[kind].plural,
          namespace: NAMESPACE,
        })) as { items: T[] }
      ).items;
    const kymas = () => listed<Kyma>('kyma');
    const ownersNow = async () =>
      new Map((await kymas()).map((k) => [k.metadata.name, k.metadata.labels?.[LABELS.shardOwner] ?? '']));

    const started = Date.now();
    let progress = 0;
    for (let i = 0; i < REPLICAS; i++) await start(`bench-${i}`);
    for (;;) {
      const ready = (await kymas()).filter((k) => k.status?.state === 'Ready').length;
      if (ready >= KYMAS) break;
      if (Date.now() - started > 20 * 60_000) throw new Error(`only ${ready}/${KYMAS} Ready after 20 min`);
      if ((progress += 1) % 5 === 0) {
        const states = await Promise.all(
          replicas.map(async (r) => {
            if (r.deadAt !== undefined) return `${r.identity} exited`;
            const rss = await metric(r.port, 'process_resident_memory_bytes').catch(() => NaN);
            const depth = await metric(r.port, 'workqueue_depth{name="kyma"}').catch(() => NaN);
            const limit = await metric(r.port, 'skr_agent_shard_reconcile_limit').catch(() => NaN);
            const suspended = await metric(r.port, 'skr_agent_shard_suspended').catch(() => NaN);
            return `${r.identity} RSS ${mb(rss)} queue ${depth} limit ${limit}${suspended ? ' SUSPENDED' : ''}`;
          }),
        );
        console.log(
          `  ${Math.round((Date.now() - started) / 1000)} s: ${ready} Ready; ${states.join('; ')}; ${load()}`,
        );
      }
      await sleep(2_000);
    }
    console.log(
      `initial: all ${KYMAS} Kymas Ready ${Date.now() - started} ms after ${REPLICAS} replicas started; ${load()}`,
    );
    if (sample.length) {
      const configs = async () => (await listed<unknown>('moduleConfig')).length;
      for (const deadline = Date.now() + 5 * 60_000; (await configs()) < sample.length; await sleep(1_000)) {
        if (Date.now() > deadline) throw new Error(`not every sampled Kyma has its ModuleConfig after 5 min`);
      }
      console.log(`  ${sample.length} Kymas with the sample module: every ModuleConfig mirrored`);
    }

    // Full resync: every replica's relist enqueues each owned Kyma; done when all queues are idle again.
    const live = () => replicas.filter((r) => r.deadAt === undefined);
    const resyncs = async () =>
      Promise.all(live().map((r) => metric(r.port, 'skr_agent_triggers_total{source="resync"}')));
    const before = await resyncs();
    const agentCpu = async () =>
      (
        await Promise.all(live().map((r) => metric(r.port, 'process_cpu_seconds_total').catch(() => NaN)))
      ).reduce((a, b) => a + b, 0);
    const apiServers = ['kcp', ...SKRS].map((plane) => env.plane(plane).pid());
    // etcd (one or more processes of the environment that are not API servers) is charged per reconcile too.
    const etcds = env.pids().filter((pid) => !apiServers.includes(pid));
    const apiCpu = () => [...apiServers, ...etcds].map(cpuSeconds);
    let cpuAtStart = { agents: 0, api: [] as number[] };
    let requestsAtStart: Map<string, number>[] = [];
    let resyncStart = 0;
    for (const deadline = Date.now() + 10 * 60_000; !SKIP_RESYNC && Date.now() < deadline; await sleep(200)) {
      // A replica's /metrics may reset a connection under load (seen at load 28): look again.
      const now = await resyncs().catch(() => undefined);
      if (!now) continue;
      const grown = now.reduce((sum, n, i) => sum + n - (before[i] ?? 0), 0);
      if (!resyncStart && grown > 0) {
        resyncStart = Date.now();
        cpuAtStart = { agents: await agentCpu(), api: apiCpu() };
        requestsAtStart = await Promise.all(live().map((r) => scrapeAll(r.port)));
      }
      const busy = await Promise.all(
        live().map(
          async (r) =>
            (await metric(r.port, 'workqueue_depth{name="kyma"}')) +
            (await metric(r.port, 'workqueue_in_flight{name="kyma"}')),
        ),
      ).catch(() => [NaN]);
      if (resyncStart && grown >= KYMAS && busy.every((b) => b === 0)) {
        const seconds = (Date.now() - resyncStart) / 1000;
        const agents = (await agentCpu()) - cpuAtStart.agents;
        const all = apiCpu().map((cpu, i) => cpu - (cpuAtStart.api[i] ?? 0));
        const api = all.slice(0, apiServers.length);
        const etcd = all.slice(apiServers.length).reduce((a, b) => a + b, 0);
        const requestsNow = await Promise.all(live().map((r) => scrapeAll(r.port)));
        console.log(
          `full resync: ${KYMAS} Kymas reconciled again in ${Math.round(seconds * 1000)} ms; ${load()}`,
        );
        console.log(
          `  CPU meanwhile: agents ${agents.toFixed(1)} s (${((1000 * agents) / KYMAS).toFixed(1)} ms per reconcile); ` +
            `API servers ${['kcp', ...SKRS].map((p, i) => `${p} ${(api[i] ?? 0).toFixed(1)} s`).join(', ')} ` +
            `(${((1000 * api.reduce((a, b) => a + b, 0)) / KYMAS).toFixed(1)} ms per reconcile; ` +
            `${(api.reduce((a, b) => a + b, 0) / seconds).toFixed(2)} cores); ` +
            `etcd ${etcd.toFixed(1)} s (${((1000 * etcd) / KYMAS).toFixed(1)} ms per reconcile)`,
        );
        console.log(
          `  requests per reconcile (all replicas): ${requestsPerReconcile(requestsAtStart, requestsNow, KYMAS)}`,
        );
        console.log(
          `  answers read per reconcile (watches not included): ${answersPerReconcile(requestsAtStart, requestsNow, KYMAS)}`,
        );
        break;
      }
    }

    await sleep(15_000);
    const owners = await ownersNow();
    for (const r of live()) {
      const owned = [...owners.values()].filter((o) => o === r.identity).length;
      const rss = await metric(r.port, 'process_resident_memory_bytes').catch(() => NaN);
      const heap = await metric(r.port, 'nodejs_heap_size_used_bytes').catch(() => NaN);
      console.log(
        `replica ${r.identity}: owns ${owned} Kymas; steady RSS ${mb(rss)} (heap used ${mb(heap)})`,
      );
    }

    // kill -9: the victim's Kymas wait out its Lease, then survivors fence it, claim and reconcile them.
    const victim = replicas[0] as Replica;
    const orphans = [...owners]
      .filter(([, o]) => o === victim.identity)
      .map(([name]) => `${NAMESPACE}/${name}`);
    const survivors = live().filter((r) => r !== victim);
    if (KILL_AT === 'resync') {
      // The orphans' worst case: a survivor's own periodic relist queues all its Kymas just before the victim's
      // Lease expires. Wait for a relist to start, then kill a resync interval less the lease duration (+1 s) later.
      const before = await Promise.all(survivors.map((r) => sampleReplica(r).catch(() => undefined)));
      for (const deadline = Date.now() + 2 * 60_000; Date.now() < deadline; await sleep(200)) {
        const now = await Promise.all(survivors.map((r) => sampleReplica(r).catch(() => undefined)));
        if (now.some((n, i) => n && before[i] && n.resyncs > before[i].resyncs)) break;
      }
      await sleep(Math.max(0, seconds(RESYNC) - seconds(LEASE[0] ?? '15s') - 1) * 1000);
    }
    const atKill = await Promise.all(survivors.map((r) => sampleReplica(r).catch(() => undefined)));
    const planePids = new Set(apiServers);
    const etcdPids = env.pids().filter((pid) => !planePids.has(pid));
    const sumOf = (maps: Map<string, number>[]) => {
      const sum = new Map<string, number>();
      for (const map of maps) for (const [k, v] of map) sum.set(k, (sum.get(k) ?? 0) + v);
      return sum;
    };
    const spent = async (): Promise<Spent> => ({
      agentCpu: (
        await Promise.all(survivors.map((r) => metric(r.port, 'process_cpu_seconds_total').catch(() => NaN)))
      ).reduce((a, b) => a + b, 0),
      serverCpu: apiCpu().reduce((a, b) => a + b, 0),
      etcdCpu: etcdPids.map(cpuSeconds).reduce((a, b) => a + b, 0),
      requests: sumOf(
        await Promise.all(survivors.map((r) => metricSamples(r.port, 'skr_agent_kube_requests_total'))),
      ),
      connections: sumOf(
        await Promise.all(
          survivors.map((r) => metricSamples(r.port, 'skr_agent_kube_tls_connections_total')),
        ),
      ),
    });
    const spentAtKill = await spent();
    // Each process apart, and the requests each API server served whoever sent them (the bench's own included).
    const costed: Costed[] = [
      ...['kcp', ...SKRS].map((plane) => ({
        name: plane,
        pid: () => env.plane(plane).pid(),
        kubeConfig: env.plane(plane).kubeConfig(),
      })),
      ...etcdPids.map((pid, i) => ({ name: `etcd${etcdPids.length > 1 ? i + 1 : ''}`, pid: () => pid })),
      ...survivors.map((r) => ({ name: r.identity, pid: () => r.child.pid ?? 0 })),
    ];
    const costsAtKill = await snapshot(costed);
    // The user's edits in orphaned SKRs: from a moment before the kill (the figure without a fault) on.
    const orphanSample = sample.filter((i) => owners.get(`kyma-${i}`) === victim.identity);
    const edits =
      ca && orphanSample.length
        ? await startEditStream({
            kcp,
            namespace: NAMESPACE,
            targets: orphanSample.map((i) => ({
              kyma: `kyma-${i}`,
              runtimeId: `runtime-${i}`,
              skr: env.plane(SKRS[i % SKRS.length] as string).kubeConfig(),
              skrNamespace: `bench-${i}`,
            })),
            ca,
            listenerPorts: survivors.map((r) => r.listenerPort),
            everyMs: seconds(EDIT_EVERY) * 1000,
          })
        : undefined;
    if (edits) await sleep(2_000);
    victim.child.kill('SIGKILL');
    const killedAt = process.hrtime.bigint();
    const killedMs = Date.now();
    const victimLease = await leases
      .readNamespacedLease({ name: `${SHARDING.ring}-${victim.identity}`, namespace: NAMESPACE })
      .catch(() => undefined);
    const lastRenewal = timeMs(victimLease?.spec?.renewTime);
    const leaseSeconds = victimLease?.spec?.leaseDurationSeconds ?? NaN;
    const samples: string[] = [];
    let lastSample = 0;
    let allStartedMs: number | undefined;
    for (const deadline = Date.now() + 5 * 60_000; Date.now() < deadline; await sleep(500)) {
      if (Date.now() - lastSample >= 2_000) {
        lastSample = Date.now();
        const now = await Promise.all(survivors.map((r) => sampleReplica(r).catch(() => undefined)));
        samples.push(
          `    +${((Date.now() - killedMs) / 1000).toFixed(1)} s: ${survivors
            .map((r, i) => `${r.identity} ${describeSample(now[i], atKill[i])}`)
            .join(' | ')}; ${load()}`,
        );
      }
      const firsts = firstRuns(reconcileIntervals(replicas), orphans, victim.identity, killedAt);
      if (allStartedMs === undefined && firsts.started.every((run) => run !== undefined)) {
        allStartedMs = Date.now() - killedMs;
        console.log(
          `kill -9 ${victim.identity}: all ${orphans.length} of its Kymas reconciled (started) by survivors ${allStartedMs} ms later`,
        );
      }
      if (firsts.ended.every((run) => run !== undefined)) {
        const spentAtEnd = await spent();
        const costsAtEnd = await snapshot(costed);
        console.log(
          `kill -9 ${victim.identity}: all ${orphans.length} of its Kymas reconciled to the end by survivors ${Date.now() - killedMs} ms later`,
        );
        console.log(`kill -9 timeline (ms after the kill; ${load()}):`);
        const ms = (t: bigint) => Math.round(Number(t - killedAt) / 1e6);
        const started = firsts.started as ReconcileInterval[];
        const ended = firsts.ended as ReconcileInterval[];
        const span = (values: number[]) => `${Math.min(...values)} … ${Math.max(...values)}`;
        console.log(`  victim's last Lease renewal: ${Math.round(lastRenewal - killedMs)}`);
        for (const r of survivors)
          console.log(`  ${r.identity}: ${logTimeline(join(dir, `${r.identity}.log`), killedMs)}`);
        console.log(
          `  first reconciles of the ${orphans.length} orphans: started ${span(started.map((run) => ms(run.start)))}, ended ${span(
            ended.map((run) => ms(run.end)),
          )}; ended by ${survivors.map((r) => `${r.identity} ${ended.filter((run) => run.replica === r.identity).length}`).join(', ')}`,
        );
        console.log(
          `  survivors (limit, waiting for a slot, queue depth, in flight, resync adds since the kill):`,
        );
        for (const line of samples) console.log(line);
        const n = orphans.length;
        const perOrphan = (seconds: number) => `${((1000 * seconds) / n).toFixed(1)} ms`;
        console.log(
          `takeover cost per orphan (kill to the last first reconcile's end, idle and routine work included): CPU ` +
            `survivors ${perOrphan(spentAtEnd.agentCpu - spentAtKill.agentCpu)}, API servers ${perOrphan(
              spentAtEnd.serverCpu - spentAtKill.serverCpu,
            )}, etcd ${perOrphan(spentAtEnd.etcdCpu - spentAtKill.etcdCpu)}`,
        );
        const delta = (end: Map<string, number>, start: Map<string, number>) =>
          [...end]
            .map(([labels, value]) => [labels, value - (start.get(labels) ?? 0)] as const)
            .filter(([, d]) => d > 0)
            .sort((a, b) => b[1] - a[1]);
        const requests = delta(spentAtEnd.requests, spentAtKill.requests);
        const total = requests.reduce((sum, [, d]) => sum + d, 0);
        console.log(
          `  survivors' requests per orphan: ${(total / n).toFixed(2)} (${requests
            .map(
              ([labels, d]) => `${labels.replace(/[{}"]/g, '').replace(/\w+=/g, '')} ${(d / n).toFixed(2)}`,
            )
            .join('; ')})`,
        );
        for (const line of costLines(costsAtKill, costsAtEnd, n, 10, 'orphan')) console.log(`  ${line}`);
        console.log(
          `  TLS connections per orphan: ${delta(spentAtEnd.connections, spentAtKill.connections)
            .map(([labels, d]) => `${labels.replace(/[{}"]/g, '')} ${(d / n).toFixed(2)}`)
            .join('; ')}`,
        );
        break;
      }
    }

    if (edits) {
      // The stream runs on until the victim's Lease expired 30 s ago, so edits made after the takeover count too.
      await sleep(Math.max(0, lastRenewal + (leaseSeconds + 30) * 1000 - Date.now()));
      printEdits(await edits.stop(60_000), {
        killedMs,
        expiredMs: lastRenewal + leaseSeconds * 1000,
        leaseSeconds,
        targets: orphanSample.length,
      });
    }
    // Joins: how many Kymas change owner (the dead one's are already moved). The first joiner replaces the killed
    // replica (two live members become three: a third of the Kymas should move); the second is a fourth live
    // member, the case the bar is for (about a quarter should move).
    const joinReplica = async (joiner: string): Promise<void> => {
      const beforeJoin = await ownersNow();
      const live = new Set(beforeJoin.values()).size;
      await start(joiner);
      // Start-up takes seconds on a loaded machine: wait for its first Kyma before waiting for owners to settle.
      for (const deadline = Date.now() + 3 * 60_000; Date.now() < deadline; await sleep(1_000)) {
        if ([...(await ownersNow()).values()].includes(joiner)) break;
      }
      let stableSince = Date.now();
      let last = '';
      for (const deadline = Date.now() + 5 * 60_000; Date.now() < deadline; await sleep(1_000)) {
        const text = JSON.stringify([...(await ownersNow())]);
        if (text !== last) {
          last = text;
          stableSince = Date.now();
        } else if (Date.now() - stableSince > 10_000) break;
      }
      const afterJoin = await ownersNow();
      const moved = [...afterJoin].filter(([name, owner]) => beforeJoin.get(name) !== owner).length;
      console.log(
        `join of ${joiner} (${live} → ${live + 1} live replicas; ideal ${(100 / (live + 1)).toFixed(1)} %): ${moved} of ${KYMAS} Kymas moved (${((100 * moved) / KYMAS).toFixed(1)} %); it owns ${
          [...afterJoin.values()].filter((o) => o === joiner).length
        }`,
      );
    };
    if (!SKIP_JOINS) {
      await joinReplica(`bench-${REPLICAS}`);
      await joinReplica(`bench-${REPLICAS + 1}`);
    }
    const found = overlaps(reconcileIntervals(replicas));
    for (const r of replicas) {
      // By message: a withdrawn run's error also names the suspension ("… withdrawn: membership renewal overdue").
      const messages = logMessages(join(dir, `${r.identity}.log`), 0).map((e) => e.msg);
      const count = (msg: string) => messages.filter((m) => m === msg).length;
      console.log(
        `replica ${r.identity}: suspended ${count(SUSPENDED)} times, resumed ${count(RESUMED)}, lost membership ${count(
          LOST,
        )} times${r === victim ? ' (killed by the bench)' : ''}`,
      );
    }
    console.log(
      `load average at the end: ${loadavg()
        .map((l) => l.toFixed(1))
        .join(' ')} (2 cores)`,
    );
    console.log(
      `overlapping reconciles of one Kyma: ${found.length}${found.length ? ` (${found.slice(0, 5).join('; ')})` : ''}`,
    );
  } finally {
    for (const r of replicas) if (r.deadAt === undefined) r.child.kill('SIGTERM');
    await sleep(3_000);
    await env.stop();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
