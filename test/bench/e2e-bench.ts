// End-to-end benchmark (bar: Module CR edit → ModuleConfig p50 ≤ 25 ms, p99 ≤ 100 ms, printed beside the
// floor): SKR edits reaching KCP over the real path (SKR API server → skr-webhook → mTLS listener → skr-agent →
// KCP API server), on the same local system as the demo (test/support/system). One run prints:
// - the floor: the SKR read + KCP server-side apply the agent needs, issued directly from this process;
// - Module CR edits: edit → ModuleConfig p50/p99/max, lost edits, where the milliseconds go (admission, callback,
//   agent), reconciles and SKR re-reads per edit;
// - round trips (the module-manager bar: p50 ≤ 60 ms, p99 ≤ 200 ms): with examples/sample-manager running
//   (started after the phases above, so they are measured as before), Module CR edit sent → the manager's ConfigMap
//   updated in the same SKR, by stage; then edits of a field the manager does not render, which must cost 0
//   SyncResource writes;
// - Kyma edits (the SKR Kyma's module switched to managed: false and back, which removes and restores its
//   ModuleConfig): the same figures.
//
//   npm run bench:e2e -- [--edits 1000] [--rate 10] [--kyma-edits 40] [--kyma-rate 2] [--floor 200] [--warmup 4] [--hung 20]
//                        [--round-trips 1000] [--noop-edits 100] [--agent-cpu-prof DIR] [--manager ts|go]
//
// --manager go runs the round trips through examples/go-manager (the same contract, in Go) instead.
//
// --agent-cpu-prof DIR writes the agent's V8 CPU profile (node --cpu-prof) into DIR when the agent stops.
// --hung N adds N Kymas whose SKR accepts TLS and never answers (a hung SKR must not stall the
// others); they are created and their reconciles under way before the measured edits start.
// Edits are paced open loop at --rate per second, alternating SKR 1 and SKR 2, each setting spec.greeting of
// the sample Module CR to a unique value. Latency: from the edit's write returning to this process seeing the
// ModuleConfig carry that value (a watch on KCP). When a later edit of the same SKR arrives first (the
// webhook and the work queue coalesce), the earlier edit counts as arrived then: KCP holds a newer state.
// The machine's load average is printed at the start and the end: on a shared machine the figures move with it.
// Figures only; nothing passes or fails.
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { CoreV1Api, CustomObjectsApi } from '@kubernetes/client-node';
import { DEFAULTS, FIELD_MANAGER, GROUP, KINDS } from '@skr-watcher/api';
import { applyCustomObject, createClusterClient, readObject } from '@skr-watcher/kube';
import { SAMPLE_MANAGER } from '@skr-watcher/sample-manager';
import { connectLiveEvents, type LiveEvent } from '../support/system/live-events.js';
import {
  buildGoManager,
  startSampleManager,
  type RenderedSeen,
  type SampleManagerProcess,
} from '../support/system/sample-manager.js';
import {
  SAMPLE_MODULE,
  SKR_KYMA,
  startLocalSystem,
  type AdmissionSeen,
  type LocalSystem,
} from '../support/system/index.js';
import { parseMetrics, sumOf, type Samples } from '../support/prometheus-text.js';
import { neverAnswers, startHostileSkr, type HostileSkr } from '../support/hostile-skr.js';
import { seedKyma } from '../support/kcp-seed.js';
import { intoOwnCpuGroup, removeCpuGroups } from '../support/cpu-cgroup.js';
import { costLines, snapshot, type Costed } from './process-costs.js';

const { values } = parseArgs({
  options: {
    edits: { type: 'string', default: '1000' },
    'kyma-edits': { type: 'string', default: '40' },
    'kyma-rate': { type: 'string', default: '2' },
    floor: { type: 'string', default: '200' },
    rate: { type: 'string', default: '10' },
    warmup: { type: 'string', default: '4' },
    hung: { type: 'string', default: '0' },
    'round-trips': { type: 'string', default: '1000' },
    'noop-edits': { type: 'string', default: '100' },
    'agent-cpu-prof': { type: 'string' },
    'edit-connections': { type: 'string', default: 'kept' },
    'webhook-cgroup': { type: 'string', default: 'own' },
    manager: { type: 'string', default: 'ts' },
  },
});
/** The sample module's manager of the round-trip phase: examples/sample-manager (ts) or examples/go-manager (go). */
const MANAGER = values.manager;
if (MANAGER !== 'ts' && MANAGER !== 'go') throw new Error(`--manager must be ts or go, not ${MANAGER}`);
const HUNG = Number(values.hung);
const EDITS = Number(values.edits);
const RATE = Number(values.rate);
const WARMUP = Number(values.warmup);
const KYMA_EDITS = Number(values['kyma-edits']);
const KYMA_RATE = Number(values['kyma-rate']);
const FLOOR = Number(values.floor);
const ROUND_TRIPS = Number(values['round-trips']);
const NOOP_EDITS = Number(values['noop-edits']);
const SETTLE_MS = 30_000;
/**
 * `kept`: the edits are sent over one kept-alive connection per SKR (as a controller or a long-lived client does);
 * `new`: a new TLS connection per edit (client-node's default), whose handshake is then part
 * of "sent → admission".
 */
const EDIT_CONNECTIONS = values['edit-connections'];
if (EDIT_CONNECTIONS !== 'kept' && EDIT_CONNECTIONS !== 'new')
  throw new Error(`--edit-connections must be kept or new, not ${EDIT_CONNECTIONS}`);
/**
 * `own` (default): each SKR webhook runs in a CPU cgroup of its own, as its Pod's container does on a node, so its
 * SCHED_IDLE dispatch thread gives way only to the webhook's own admission thread (decision 015); `shared`: it stays
 * in this machine's one group, where that thread ranks below every other process.
 */
const WEBHOOK_CGROUP = values['webhook-cgroup'];
if (WEBHOOK_CGROUP !== 'own' && WEBHOOK_CGROUP !== 'shared')
  throw new Error(`--webhook-cgroup must be own or shared, not ${WEBHOOK_CGROUP}`);
const load = () =>
  loadavg()
    .map((l) => l.toFixed(1))
    .join(' ');

interface Edit {
  index: number;
  skr: string;
  greeting: string;
  sentAtMs: number;
  writeReturnedAtMs?: number;
  /** metadata.generation of the Module CR after the edit (as the write returned it). */
  generation?: number;
  /** The webhook logged the relevant change; the listener accepted its callback (agent's clock, ms). */
  admissionAtMs?: number;
  callbackAtMs?: number;
  arrivedAtMs?: number;
  /** A later edit of the same SKR reached KCP first. */
  superseded?: boolean;
  failed?: string;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] as number;
}

function summary(label: string, latencies: number[]): string {
  const sorted = [...latencies].sort((a, b) => a - b);
  const fmt = (ms: number) => `${Math.round(ms)} ms`.padStart(8);
  return `${label.padEnd(16)} n=${String(sorted.length).padStart(4)}  p50 ${fmt(percentile(sorted, 50))}  p99 ${fmt(percentile(sorted, 99))}  max ${fmt(sorted.at(-1) ?? Number.NaN)}`;
}

async function scrape(port: number): Promise<Samples> {
  return parseMetrics(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text());
}

/** Runs `edits` paced at `rate`/s; resolves when every edit arrived in KCP or `SETTLE_MS` after the last. */
async function runEdits(
  system: LocalSystem,
  edits: Edit[],
  onWritten: (edit: Edit) => void = () => {},
): Promise<void> {
  let settled: () => void = () => {};
  const allArrived = new Promise<void>((resolve) => (settled = resolve));
  const check = () => {
    if (edits.every((edit) => edit.arrivedAtMs !== undefined || edit.failed)) settled();
  };
  const byGreeting = new Map(edits.map((edit) => [edit.greeting, edit]));
  const seen = seenInOrder(edits, (edit, atMs, reached) => {
    edit.arrivedAtMs = atMs;
    edit.superseded = edit !== reached;
    check();
  });
  const unsubscribe = system.moduleConfigs.subscribe((mirror) => {
    const reached = byGreeting.get(String(mirror.spec['greeting']));
    if (reached && reached.skr === mirror.kyma) seen.reached(reached, mirror.seenAtMs);
  });
  const start = Date.now() + 100;
  const sends = edits.map(async (edit, i) => {
    const due = start + (i * 1000) / RATE;
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, due - Date.now())));
    edit.sentAtMs = Date.now();
    try {
      const written = (await (
        await editClient(system, edit.skr)
      ).patchNamespacedCustomObject({
        ...SAMPLE_MODULE,
        body: [{ op: 'replace', path: '/spec/greeting', value: edit.greeting }],
      })) as { metadata?: { generation?: number } } | undefined;
      edit.writeReturnedAtMs = Date.now();
      edit.generation = written?.metadata?.generation;
      seen.written(edit);
      onWritten(edit);
    } catch (error) {
      edit.failed = error instanceof Error ? error.message : String(error);
      check();
    }
  });
  await Promise.all(sends);
  check();
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([allArrived, new Promise((resolve) => (timer = setTimeout(resolve, SETTLE_MS)))]);
  clearTimeout(timer);
  unsubscribe();
}

/** Per SKR, the client the edits are sent with (--edit-connections); closed by closeEditClients. */
const editClients = new Map<string, Promise<{ custom: CustomObjectsApi; close(): Promise<void> }>>();

function editClient(system: LocalSystem, skr: string): Promise<CustomObjectsApi> {
  if (EDIT_CONNECTIONS === 'new')
    return Promise.resolve(system.skr(skr).kubeConfig().makeApiClient(CustomObjectsApi));
  let client = editClients.get(skr);
  if (!client) {
    client = createClusterClient(system.skr(skr).kubeConfig(), { name: `edits-${skr}`, keepAliveMs: 60_000 });
    editClients.set(skr, client);
  }
  return client.then(({ custom }) => custom);
}

async function closeEditClients(): Promise<void> {
  await Promise.all([...editClients.values()].map(async (client) => (await client).close()));
  editClients.clear();
}

/** The processes and API servers whose costs per edit a phase prints. */
function costed(system: LocalSystem, manager?: SampleManagerProcess): Costed[] {
  return [
    { name: 'agent', pid: () => system.agent.pid },
    ...(manager ? [{ name: 'sample-manager', pid: () => manager.child.pid }] : []),
    ...system.skrs.map((skr) => ({ name: `${skr.name} webhook`, pid: () => skr.webhook.pid })),
    ...['kcp', ...system.skrs.map((skr) => skr.name)].map((plane) => ({
      name: plane,
      pid: () => system.env.plane(plane).pid(),
      kubeConfig: plane === 'kcp' ? system.kcp : system.skr(plane).kubeConfig(),
    })),
    { name: 'etcd', pid: () => system.env.pids()[0] ?? -1 },
  ];
}

/** The agent's own requests per edit by cluster, verb and resource (skr_agent_kube_requests_total). */
function agentRequests(before: Samples, after: Samples, edits: number): string {
  const rows = [...after.keys()]
    .filter((key) => key.startsWith('skr_agent_kube_requests_total{'))
    .map((key) => {
      const labels = Object.fromEntries(
        [...key.matchAll(/(\w+)="([^"]*)"/g)].map((match) => [match[1], match[2]] as const),
      );
      return [
        `${labels['cluster']} ${labels['verb']} ${labels['resource']}`,
        (after.get(key) ?? 0) - (before.get(key) ?? 0),
      ] as const;
    })
    .filter(([, delta]) => delta > 0)
    .sort((a, b) => b[1] - a[1]);
  const total = rows.reduce((sum, [, n]) => sum + n, 0);
  return `agent requests per edit (total ${(total / edits).toFixed(2)}): ${rows
    .map(([what, n]) => `${what} ${(n / edits).toFixed(2)}`)
    .join(', ')}`;
}

function editsFor(system: LocalSystem, count: number, prefix: string): Edit[] {
  return Array.from({ length: count }, (_, index) => {
    const skr = system.skrs[index % system.skrs.length]?.name as string;
    return { index, skr, greeting: `${prefix}-${index}-${Date.now()}`, sentAtMs: 0 };
  });
}

/**
 * The floor: what the agent must do for one edit at the least, issued directly with the agent's own client
 * (pooled, kept-alive): read the Module CR in the SKR, then server-side apply a ModuleConfig-shaped object in KCP
 * (in a namespace of its own, which the agent does not watch).
 */
async function floor(system: LocalSystem, count: number): Promise<number[]> {
  const skr = await createClusterClient((system.skrs[0] as LocalSystem['skrs'][0]).kubeConfig(), {
    name: 'floor-skr',
  });
  const kcp = await createClusterClient(system.kcp, { name: 'floor-kcp' });
  const namespace = 'bench-floor';
  await system.kcp
    .makeApiClient(CoreV1Api)
    .createNamespace({ body: { metadata: { name: namespace } } })
    .catch(() => undefined);
  const ref = {
    group: GROUP,
    version: KINDS.moduleConfig.version,
    plural: KINDS.moduleConfig.plural,
    namespace,
    name: 'floor',
  };
  const latencies: number[] = [];
  try {
    for (let i = 0; i < count + 5; i++) {
      const started = performance.now();
      const moduleCr = (await readObject(skr.objects, {
        apiVersion: `${GROUP}/${KINDS.sample.version}`,
        kind: KINDS.sample.kind,
        namespace: DEFAULTS.skrNamespace,
        name: SAMPLE_MODULE.name,
      })) as { spec?: Record<string, unknown> } | undefined;
      await applyCustomObject(
        kcp.custom,
        ref,
        {
          apiVersion: `${GROUP}/${KINDS.moduleConfig.version}`,
          kind: KINDS.moduleConfig.kind,
          metadata: { name: 'floor', namespace },
          spec: {
            kyma: 'floor',
            module: 'sample',
            resource: {
              apiVersion: 'v1',
              kind: 'Floor',
              metadata: { name: 'floor' },
              spec: { ...moduleCr?.spec, i },
            },
          },
        },
        { fieldManager: FIELD_MANAGER, force: true },
      );
      // The first few pay for connections; the agent's are warm.
      if (i >= 5) latencies.push(performance.now() - started);
    }
  } finally {
    await skr.close();
    await kcp.close();
  }
  return latencies;
}

interface KymaEdit {
  skr: string;
  managed: boolean;
  sentAtMs: number;
  writeReturnedAtMs?: number;
  arrivedAtMs?: number;
  failed?: string;
}

/**
 * Kyma edits: the SKR Kyma's sample module switched to managed: false (its ModuleConfig goes) and back (it
 * comes back), alternating SKRs, paced at `rate`/s. Arrival: this process sees the ModuleConfig gone or present.
 */
async function runKymaEdits(system: LocalSystem, count: number, rate: number): Promise<KymaEdit[]> {
  const skrKyma = SKR_KYMA;
  const edits: KymaEdit[] = Array.from({ length: count }, (_, i) => ({
    skr: system.skrs[i % system.skrs.length]?.name as string,
    // Each SKR goes false, true, false, ...
    managed: Math.floor(i / system.skrs.length) % 2 === 1,
    sentAtMs: 0,
  }));
  const shows = (edit: KymaEdit) =>
    (system.moduleConfigs.current(edit.skr, SAMPLE_MODULE.module) !== undefined) === edit.managed;
  const watching = new Set<KymaEdit>();
  const poll = setInterval(() => {
    for (const edit of watching) {
      if (shows(edit)) {
        edit.arrivedAtMs = Date.now();
        watching.delete(edit);
      }
    }
  }, 1);
  const start = Date.now() + 100;
  try {
    for (const [i, edit] of edits.entries()) {
      const due = start + (i * 1000) / rate;
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, due - Date.now())));
      const api = system.skr(edit.skr).kubeConfig().makeApiClient(CustomObjectsApi);
      edit.sentAtMs = Date.now();
      try {
        await api.patchNamespacedCustomObject({
          ...skrKyma,
          body: [
            { op: 'replace', path: '/spec/modules', value: [{ name: 'sample', managed: edit.managed }] },
          ],
        });
        edit.writeReturnedAtMs = Date.now();
        watching.add(edit);
      } catch (error) {
        edit.failed = error instanceof Error ? error.message : String(error);
      }
    }
    const deadline = Date.now() + SETTLE_MS;
    while (watching.size > 0 && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 20));
  } finally {
    clearInterval(poll);
  }
  return edits;
}

/** What the agent did per edit over one phase, from its metrics. */
function agentPerEdit(before: Samples, after: Samples, edits: number): string {
  const delta = (prefix: string) => sumOf(after, prefix) - sumOf(before, prefix);
  const exact = (key: string) => (after.get(key) ?? 0) - (before.get(key) ?? 0);
  const reconciles = delta('skr_agent_reconcile_total');
  const mirrors = exact('skr_agent_module_mirror_reads_count');
  const reads = exact('skr_agent_module_mirror_reads_sum');
  const atMostOneReread = exact('skr_agent_module_mirror_reads_bucket{le="2"}');
  const perEdit = (n: number) => (n / edits).toFixed(2);
  return (
    `agent: full reconciles ${reconciles} (${perEdit(reconciles)} per edit), targeted mirrors ${mirrors}, ` +
    `SKR re-reads ${reads - mirrors} (${perEdit(reads - mirrors)} per edit); callbacks needing more than one re-read: ${mirrors - atMostOneReread}`
  );
}

/** Pairs each edit with the first admission its webhook logged and the first callback the listener accepted after it. */
function attachStages(edits: Edit[], admissions: AdmissionSeen[], callbacks: LiveEvent[]): void {
  const usedAdmissions = new Set<AdmissionSeen>();
  const usedCallbacks = new Set<LiveEvent>();
  for (const edit of [...edits].sort((a, b) => a.sentAtMs - b.sentAtMs)) {
    const admission = admissions.find(
      (seen) =>
        !usedAdmissions.has(seen) &&
        seen.skr === edit.skr &&
        seen.kind === KINDS.sample.kind &&
        seen.atMs >= edit.sentAtMs - 1,
    );
    if (!admission) continue;
    usedAdmissions.add(admission);
    edit.admissionAtMs = admission.atMs;
    const callback = callbacks.find(
      (event) =>
        !usedCallbacks.has(event) &&
        event.runtimeId === edit.skr &&
        event.kind === KINDS.sample.kind &&
        Date.parse(event.time) >= admission.atMs - 1,
    );
    if (!callback) continue;
    usedCallbacks.add(callback);
    edit.callbackAtMs = Date.parse(callback.time);
  }
}

/** The agent's debug entry per targeted mirror: when each step ended (epoch ms; agent/src/reconcile/index.ts). */
interface MirrorLog {
  kyma: string;
  outcome: string;
  reads: number;
  generation?: number;
  /** The listener accepted the callback (absent when the mirror was merged into one already waiting). */
  receivedAt?: number;
  queuedAt: number;
  startedAt: number;
  skrReadAt?: number;
  kymaReadAt?: number;
  configReadAt?: number;
  specAppliedAt?: number;
  /** generation of the ModuleConfig the spec apply returned. */
  configGeneration?: number;
  doneAt: number;
}

/** The agent's debug entry per targeted SyncResource apply (agent/src/reconcile/index.ts). */
interface SyncApplyLog {
  kyma: string;
  syncResource: string;
  outcome: string;
  kymaStatusChanged?: boolean;
  generation?: number;
  queuedAt: number;
  startedAt?: number;
  skrAppliedAt?: number;
  doneAt: number;
}

/** sample-manager's info entry per SyncResource write (packages/module-manager). */
interface ManagerApplyLog {
  kyma: string;
  generation?: number;
  syncResourceGeneration?: number;
  receivedAt?: number;
  startedAt: number;
  appliedAt: number;
}

/** What the round-trip phase collects from the processes' logs. */
interface ProcessLogs {
  mirrors: MirrorLog[];
  reconciles: ReconcileLog[];
  syncApplies: SyncApplyLog[];
}

/** The agent's debug entry per full reconcile. */
interface ReconcileLog {
  kyma: string;
  startedAt: number;
  doneAt: number;
}

const AGENT_MESSAGES = {
  mirror: 'Module CR mirrored on its callback',
  reconcile: 'Kyma reconciled',
  syncApply: 'SyncResource applied on its change',
} as const;

/** Kyma name of a `namespace/name` key. */
const kymaName = (key: string) => key.slice(key.indexOf('/') + 1);

/**
 * Where the agent's part goes, per edit whose ModuleConfig its own targeted mirror wrote (matched by SKR and the
 * Module CR generation the mirror read); then what the other mirrors found and why.
 */
function agentSteps(edits: Edit[], mirrors: MirrorLog[], reconciles: ReconcileLog[]): void {
  const written = new Map<string, MirrorLog>();
  for (const mirror of mirrors)
    if (mirror.outcome === 'mirrored' && mirror.generation !== undefined)
      written.set(`${kymaName(mirror.kyma)}\0${mirror.generation}`, mirror);
  const pairs = edits.flatMap((edit) => {
    const mirror = written.get(`${edit.skr}\0${edit.generation}`);
    return mirror && edit.arrivedAtMs !== undefined && !edit.superseded ? [{ edit, mirror }] : [];
  });
  const step = (label: string, of: (pair: (typeof pairs)[0]) => number | undefined) =>
    console.log(
      summary(
        label,
        pairs.flatMap((pair) => {
          const ms = of(pair);
          return ms === undefined || Number.isNaN(ms) ? [] : [ms];
        }),
      ),
    );
  console.log(
    `The agent's part, step by step (${pairs.length} edits whose ModuleConfig their own targeted mirror wrote):`,
  );
  // The agent's whole part, from its own clock: the webhook coalesces callbacks, so pairing them by order is loose.
  step(
    'accepted → watch',
    ({ edit, mirror }) => (edit.arrivedAtMs as number) - (mirror.receivedAt ?? Number.NaN),
  );
  step('accepted → queued', ({ mirror }) => mirror.queuedAt - (mirror.receivedAt ?? Number.NaN));
  step('queued → started', ({ mirror }) => mirror.startedAt - mirror.queuedAt);
  step('start → SKR read', ({ mirror }) => (mirror.skrReadAt ?? Number.NaN) - mirror.startedAt);
  step('start → Kyma read', ({ mirror }) => (mirror.kymaReadAt ?? Number.NaN) - mirror.startedAt);
  step('start → MC read', ({ mirror }) => (mirror.configReadAt ?? Number.NaN) - mirror.startedAt);
  step(
    'reads → applied',
    ({ mirror }) =>
      (mirror.specAppliedAt ?? Number.NaN) - Math.max(mirror.skrReadAt ?? 0, mirror.configReadAt ?? 0),
  );
  step(
    'applied → watch',
    ({ edit, mirror }) => (edit.arrivedAtMs as number) - (mirror.specAppliedAt ?? Number.NaN),
  );
  step('applied → done', ({ mirror }) => mirror.doneAt - (mirror.specAppliedAt ?? Number.NaN));
  const behindFull = (mirror: MirrorLog) =>
    reconciles.some(
      (pass) =>
        pass.kyma === mirror.kyma && pass.startedAt < mirror.startedAt && pass.doneAt > mirror.queuedAt,
    );
  const byOutcome = new Map<string, { all: number; behindFull: number }>();
  for (const mirror of mirrors) {
    const counts = byOutcome.get(mirror.outcome) ?? { all: 0, behindFull: 0 };
    counts.all++;
    if (behindFull(mirror)) counts.behindFull++;
    byOutcome.set(mirror.outcome, counts);
  }
  console.log(
    `targeted mirrors by outcome (of them, queued while a full reconcile of the same Kyma ran): ${[
      ...byOutcome,
    ]
      .map(([outcome, { all, behindFull: behind }]) => `${outcome} ${all} (${behind})`)
      .join(', ')}`,
  );
  const passMs = reconciles.map((pass) => pass.doneAt - pass.startedAt);
  console.log(summary('full reconcile', passMs), ' (duration of each full reconcile during the run)');
}

/**
 * Marks each edit when `seen` first shows it, or a later edit of the same SKR (the SKR then holds a newer state).
 * Returns the unsubscribe function.
 */
function track(
  edits: Edit[],
  seen: { subscribe(listener: (rendered: RenderedSeen) => void): () => void },
  mark: Map<Edit, number>,
): { stop: () => void; written: (edit: Edit) => void } {
  const byGreeting = new Map(edits.map((edit) => [edit.greeting, edit]));
  const order = seenInOrder(edits, (edit, atMs) => mark.set(edit, atMs));
  const stop = seen.subscribe(({ kyma, greeting, atMs }) => {
    const reached = greeting === undefined ? undefined : byGreeting.get(greeting);
    if (reached && reached.skr === kyma) order.reached(reached, atMs);
  });
  return { stop, written: (edit) => order.written(edit) };
}

/**
 * Which edits a state seen downstream covers. Later means a higher Module CR generation (as the edit's write returned
 * it), not a later send: under load two writes of one object overlap, and the API server may store the later-sent
 * one first; the object then ends with the earlier-sent edit, and counting by send order would call the other lost.
 * `reached(edit)`: the state of `edit` was seen; it covers every edit of that SKR with a generation at most its own,
 * also those whose write returns afterwards (`written`). Each edit is marked once, with the first time it was covered.
 */
function seenInOrder(
  edits: Edit[],
  mark: (edit: Edit, atMs: number, reached: Edit) => void,
): { reached(edit: Edit, atMs: number): void; written(edit: Edit): void } {
  const marked = new Set<Edit>();
  /** Edits seen before their write returned (their generation unknown then). */
  const early = new Map<Edit, number>();
  /** Per SKR, the highest generation seen so far, when it was first seen, and by which edit. */
  const highest = new Map<string, { generation: number; atMs: number; edit: Edit }[]>();
  const coverOf = (edit: Edit) =>
    highest
      .get(edit.skr)
      ?.find((seen) => edit.generation !== undefined && seen.generation >= edit.generation);
  return {
    reached(edit, atMs) {
      if (edit.generation === undefined) {
        // Its write has not returned yet: it covers itself now, and the edits below it once its generation is known.
        if (!marked.has(edit)) {
          marked.add(edit);
          early.set(edit, atMs);
          mark(edit, atMs, edit);
        }
        return;
      }
      const list = highest.get(edit.skr) ?? [];
      if (!list.some((seen) => seen.generation >= (edit.generation as number))) {
        list.push({ generation: edit.generation, atMs, edit });
        highest.set(edit.skr, list);
      }
      for (const other of edits) {
        if (other.skr !== edit.skr || marked.has(other) || other.generation === undefined) continue;
        if (other.generation <= edit.generation) {
          marked.add(other);
          mark(other, atMs, edit);
        }
      }
    },
    written(edit) {
      const seenAt = early.get(edit);
      if (seenAt !== undefined) {
        early.delete(edit);
        this.reached(edit, seenAt);
        return;
      }
      if (marked.has(edit)) return;
      const cover = coverOf(edit);
      if (cover) {
        marked.add(edit);
        mark(edit, cover.atMs, cover.edit);
      }
    },
  };
}

async function syncResourceWrites(manager: SampleManagerProcess): Promise<number> {
  return sumOf(await scrape(manager.metricsPort), 'module_manager_syncresource_writes_total');
}

/** sample-manager's SyncResource writes from its log file (JSON lines). */
async function managerApplies(logFile: string): Promise<ManagerApplyLog[]> {
  const text = await readFile(logFile, 'utf8').catch(() => '');
  return text.split('\n').flatMap((line) => {
    if (!line.includes('"SyncResource applied"')) return [];
    try {
      return [JSON.parse(line) as ManagerApplyLog];
    } catch {
      return [];
    }
  });
}

/**
 * Where a round trip's milliseconds go, per edit whose own change went through every step (its Module CR generation
 * mirrored by a targeted mirror, that ModuleConfig generation rendered by the manager, that SyncResource generation
 * applied by the agent's targeted path): the clocks of this process, the agent and the manager (one machine).
 */
function roundTripSteps(
  edits: Edit[],
  logs: { mirrors: MirrorLog[]; manager: ManagerApplyLog[]; syncApplies: SyncApplyLog[] },
  marks: { synced: Map<Edit, number>; applied: Map<Edit, number> },
): void {
  const mirrorOf = new Map<string, MirrorLog>();
  for (const mirror of logs.mirrors)
    if (mirror.outcome === 'mirrored' && mirror.generation !== undefined)
      mirrorOf.set(`${kymaName(mirror.kyma)}\0${mirror.generation}`, mirror);
  const managerOf = new Map<string, ManagerApplyLog>();
  for (const entry of logs.manager)
    if (entry.generation !== undefined) managerOf.set(`${entry.kyma}\0${entry.generation}`, entry);
  const applyOf = new Map<string, SyncApplyLog>();
  for (const entry of logs.syncApplies)
    if (entry.outcome === 'applied' && entry.generation !== undefined)
      applyOf.set(`${kymaName(entry.kyma)}\0${entry.generation}`, entry);
  const chains = edits.flatMap((edit) => {
    const mirror = mirrorOf.get(`${edit.skr}\0${edit.generation}`);
    const render = mirror && managerOf.get(`${edit.skr}\0${mirror.configGeneration}`);
    const apply = render && applyOf.get(`${edit.skr}\0${render.syncResourceGeneration}`);
    return mirror && render && apply ? [{ edit, mirror, render, apply }] : [];
  });
  console.log(
    `Round trip step by step (${chains.length} of ${edits.length} edits whose own change went through every step; ` +
      'the others were merged into a later edit on the way):',
  );
  const step = (label: string, of: (chain: (typeof chains)[0]) => number | undefined) =>
    console.log(
      summary(
        label,
        chains.flatMap((chain) => {
          const ms = of(chain);
          return ms === undefined || Number.isNaN(ms) ? [] : [ms];
        }),
      ),
    );
  const n = (value: number | undefined) => value ?? Number.NaN;
  // Contiguous steps: they add up to the round trip (a step may be negative where two processes' events race).
  step('sent → callback', ({ edit, mirror }) => n(mirror.receivedAt) - edit.sentAtMs);
  step('callback → mirror start', ({ mirror }) => mirror.startedAt - n(mirror.receivedAt));
  step('mirror start → MC applied', ({ mirror }) => n(mirror.specAppliedAt) - mirror.startedAt);
  step('MC → manager watch', ({ mirror, render }) => n(render.receivedAt) - n(mirror.specAppliedAt));
  step('manager queue wait', ({ render }) => render.startedAt - n(render.receivedAt));
  step('render + SyncRes. apply', ({ render }) => render.appliedAt - render.startedAt);
  step('SyncRes. → agent watch', ({ render, apply }) => apply.queuedAt - render.appliedAt);
  step('agent lane wait', ({ apply }) => n(apply.startedAt) - apply.queuedAt);
  step('reads + SKR apply', ({ apply }) => n(apply.skrAppliedAt) - n(apply.startedAt));
  step('SKR apply → bench watch', ({ edit, apply }) => n(marks.applied.get(edit)) - n(apply.skrAppliedAt));
  step('round trip (these)', ({ edit }) => n(marks.applied.get(edit)) - edit.sentAtMs);
  step('(beside) write returned', ({ edit }) => n(edit.writeReturnedAtMs) - edit.sentAtMs);
  step('(off path) status write', ({ apply }) => apply.doneAt - n(apply.skrAppliedAt));
  const behindFull = logs.syncApplies.filter((entry) => entry.kymaStatusChanged).length;
  console.log(
    `targeted SyncResource applies: ${logs.syncApplies.length} (${behindFull} changed what the Kyma status says, each followed by a full pass)`,
  );
}

/** Module managers: round trips through sample-manager, then edits it does not render. */
async function roundTripPhase(system: LocalSystem, logs: ProcessLogs): Promise<void> {
  const executable = MANAGER === 'go' ? await buildGoManager() : undefined;
  const t0 = Date.now();
  const manager = await startSampleManager({
    ...(executable ? { executable } : {}),
    dir: system.dir,
    kcp: system.kcp,
    kcpKubeconfigPath: system.kcpKubeconfigPath,
    namespace: system.namespace,
    skrs: system.skrs,
    deadline: Date.now() + 120_000,
  });
  try {
    console.log(
      `\nsample-manager (${MANAGER === 'go' ? 'examples/go-manager' : 'examples/sample-manager'}) up and its ConfigMaps in every SKR in ${Date.now() - t0} ms`,
    );
    await runEdits(system, editsFor(system, WARMUP, 'warmup-round-trip'));
    const edits = editsFor(system, ROUND_TRIPS, 'round-trip');
    const synced = new Map<Edit, number>();
    const applied = new Map<Edit, number>();
    const trackers = [track(edits, manager.syncResources, synced), track(edits, manager.configMaps, applied)];
    const writesBefore = await syncResourceWrites(manager);
    const agentBefore = await scrape(system.agentMetricsPort);
    const costsBefore = await snapshot(costed(system, manager));
    const logsFrom = { mirrors: logs.mirrors.length, syncApplies: logs.syncApplies.length };
    console.log(
      `Round trips: ${ROUND_TRIPS} Module CR edits at ${RATE}/s, alternating SKRs (load average ${load()})`,
    );
    await runEdits(system, edits, (edit) => trackers.forEach((tracker) => tracker.written(edit)));
    const deadline = Date.now() + SETTLE_MS;
    while (edits.some((edit) => !edit.failed && !applied.has(edit)) && Date.now() < deadline)
      await new Promise((resolve) => setTimeout(resolve, 20));
    for (const tracker of trackers) tracker.stop();
    const costsAfter = await snapshot(costed(system, manager));
    const writes = (await syncResourceWrites(manager)) - writesBefore;
    const agentAfter = await scrape(system.agentMetricsPort);
    const agentDelta = (name: string) => sumOf(agentAfter, name) - sumOf(agentBefore, name);
    const spans = (from: (edit: Edit) => number | undefined, to: (edit: Edit) => number | undefined) =>
      edits.flatMap((edit) => {
        const a = from(edit);
        const b = to(edit);
        return a !== undefined && b !== undefined ? [b - a] : [];
      });
    const roundTrip = spans(
      (edit) => edit.sentAtMs,
      (edit) => applied.get(edit),
    ).sort((a, b) => a - b);
    console.log(
      'Edit sent → ConfigMap rendered by sample-manager updated in the same SKR (watch on the SKR):',
    );
    console.log(summary('round trip', roundTrip));
    // The end-to-end bar's clock (the Module CR edits phase above): from the user's write returned.
    const fromReturned = spans(
      (edit) => edit.writeReturnedAtMs,
      (edit) => applied.get(edit),
    ).sort((a, b) => a - b);
    console.log(summary('(write returned →)', fromReturned));
    console.log(
      summary(
        'sent → ModuleConfig',
        spans(
          (edit) => edit.sentAtMs,
          (edit) => edit.arrivedAtMs,
        ),
      ),
    );
    console.log(
      summary(
        'MC → SyncResource',
        spans(
          (edit) => edit.arrivedAtMs,
          (edit) => synced.get(edit),
        ),
      ),
    );
    console.log(
      summary(
        'SyncRes. → SKR',
        spans(
          (edit) => synced.get(edit),
          (edit) => applied.get(edit),
        ),
      ),
    );
    roundTripSteps(
      edits,
      {
        mirrors: logs.mirrors.slice(logsFrom.mirrors),
        manager: await managerApplies(join(system.dir, `${SAMPLE_MANAGER.name}.log`)),
        syncApplies: logs.syncApplies.slice(logsFrom.syncApplies),
      },
      { synced, applied },
    );
    const p50 = percentile(roundTrip, 50);
    const p99 = percentile(roundTrip, 99);
    const lost = edits.filter((edit) => !edit.failed && !applied.has(edit)).length;
    const verdict = (value: number, bar: number) =>
      `${Math.round(value)} ms: ${value <= bar ? 'met' : 'NOT met'}`;
    console.log(
      `Module-manager bar, from the edit sent: p50 ≤ 60 ms (${verdict(p50, 60)}), ` +
        `p99 ≤ 200 ms (${verdict(p99, 200)}); from the write returned (the end-to-end bar's clock): ` +
        `p50 ${verdict(percentile(fromReturned, 50), 60)}, p99 ${verdict(percentile(fromReturned, 99), 200)}; ` +
        `lost (not in the SKR within ${SETTLE_MS / 1000} s): ${lost} of ${ROUND_TRIPS}; failed writes: ${edits.filter((e) => e.failed).length}${edits.find((e) => e.failed) ? ` (first: ${edits.find((e) => e.failed)?.failed})` : ''}; ` +
        `SyncResource writes: ${writes}`,
    );
    // The agent's side of the last stage: SyncResource changes applied on their own (targeted) and full passes.
    console.log(
      `Agent: ${agentDelta('skr_agent_sync_resource_applies_total')} targeted SyncResource applies, ` +
        `${agentDelta('skr_agent_reconcile_total')} full Kyma reconciles (load average ${load()})`,
    );
    console.log(
      `What the round trips cost (${ROUND_TRIPS} edits, the bench's own edits and watches included):`,
    );
    for (const line of costLines(costsBefore, costsAfter, ROUND_TRIPS)) console.log(line);
    console.log(agentRequests(agentBefore, agentAfter, ROUND_TRIPS));

    if (NOOP_EDITS > 0) {
      const custom = system.kcp.makeApiClient(CustomObjectsApi);
      const versions = async () =>
        (
          (await custom.listNamespacedCustomObject({
            group: GROUP,
            version: KINDS.syncResource.version,
            plural: KINDS.syncResource.plural,
            namespace: system.namespace,
          })) as { items: { metadata: { name: string; resourceVersion: string } }[] }
        ).items
          .map((item) => `${item.metadata.name}@${item.metadata.resourceVersion}`)
          .join(' ');
      const before = await syncResourceWrites(manager);
      const agentNoopBefore = await scrape(system.agentMetricsPort);
      const versionsBefore = await versions();
      const notes = editsFor(system, NOOP_EDITS, 'note');
      const start = Date.now() + 100;
      await Promise.all(
        notes.map(async (edit, i) => {
          await new Promise((resolve) =>
            setTimeout(resolve, Math.max(0, start + (i * 1000) / RATE - Date.now())),
          );
          await (
            await editClient(system, edit.skr)
          )
            .patchNamespacedCustomObject({
              ...SAMPLE_MODULE,
              body: [{ op: 'add', path: '/spec/note', value: edit.greeting }],
            })
            .then(
              (written) =>
                (edit.generation = (written as { metadata?: { generation?: number } }).metadata?.generation),
              (error: unknown) => (edit.failed = String(error)),
            );
        }),
      );
      // The note the Module CR ends with: that of the stored write with the highest generation (overlapping writes
      // may be stored in another order than sent).
      const lastWrite = new Map<string, Edit>();
      for (const edit of notes) {
        const held = lastWrite.get(edit.skr);
        if (!edit.failed && (held === undefined || (edit.generation ?? 0) > (held.generation ?? 0)))
          lastWrite.set(edit.skr, edit);
      }
      const last = new Map([...lastWrite].map(([skr, edit]) => [skr, edit.greeting]));
      const until = Date.now() + SETTLE_MS;
      while (
        [...last].some(
          ([skr, note]) => system.moduleConfigs.current(skr, SAMPLE_MODULE.module)?.spec['note'] !== note,
        ) &&
        Date.now() < until
      )
        await new Promise((resolve) => setTimeout(resolve, 20));
      // The manager reconciles each ModuleConfig generation within milliseconds; give it ample time.
      await new Promise((resolve) => setTimeout(resolve, 3_000));
      const mirrored = [...last].filter(
        ([skr, note]) => system.moduleConfigs.current(skr, SAMPLE_MODULE.module)?.spec['note'] === note,
      ).length;
      const noopWrites = (await syncResourceWrites(manager)) - before;
      const unchanged = (await versions()) === versionsBefore;
      const targetedApplies =
        sumOf(await scrape(system.agentMetricsPort), 'skr_agent_sync_resource_applies_total') -
        sumOf(agentNoopBefore, 'skr_agent_sync_resource_applies_total');
      console.log(
        `Edits of spec.note (not rendered): ${NOOP_EDITS} at ${RATE}/s (failed writes: ${notes.filter((edit) => edit.failed).length}); ` +
          `last one stored in every ModuleConfig: ${mirrored === last.size ? 'yes' : 'NO'}; ` +
          `SyncResource writes: ${noopWrites}; SyncResources unchanged (resourceVersions): ${unchanged ? 'yes' : 'NO'}; ` +
          `targeted SyncResource applies by the agent: ${targetedApplies}`,
      );
      console.log(
        `Bar "0 SyncResource writes for edits that do not change the rendered objects": ` +
          `${noopWrites === 0 && unchanged && mirrored === last.size ? 'met' : 'NOT met'} (${noopWrites} writes for ${NOOP_EDITS} edits)`,
      );
    }
  } finally {
    await manager.stop();
  }
}

async function main(): Promise<void> {
  const parent = await mkdtemp(join(tmpdir(), 'e2e-bench-'));
  const t0 = Date.now();
  const admissions: AdmissionSeen[] = [];
  const callbacks: LiveEvent[] = [];
  const logs: ProcessLogs = { mirrors: [], reconciles: [], syncApplies: [] };
  console.log(
    `load average at the start: ${load()} (2 cores, shared); edits sent over ${EDIT_CONNECTIONS === 'kept' ? 'one kept-alive connection per SKR' : 'a new connection each'}`,
  );
  const system = await startLocalSystem({
    dir: join(parent, 'system'),
    progress: (line) => console.log(`[${((Date.now() - t0) / 1000).toFixed(1).padStart(5)} s] ${line}`),
    onAdmission: (seen) => admissions.push(seen),
    ...(values['agent-cpu-prof']
      ? { agentNodeArgs: ['--cpu-prof', `--cpu-prof-dir=${values['agent-cpu-prof']}`] }
      : {}),
    onAgentLog: {
      messages: Object.values(AGENT_MESSAGES),
      handle: (entry) => {
        if (entry['msg'] === AGENT_MESSAGES.mirror) logs.mirrors.push(entry as unknown as MirrorLog);
        else if (entry['msg'] === AGENT_MESSAGES.syncApply)
          logs.syncApplies.push(entry as unknown as SyncApplyLog);
        else logs.reconciles.push(entry as unknown as ReconcileLog);
      },
    },
  });
  const live = connectLiveEvents(system.eventsUrl, (event) => callbacks.push(event));
  let hung: HostileSkr | undefined;
  const cgroups: string[] = [];
  try {
    if (WEBHOOK_CGROUP === 'own') {
      for (const skr of system.skrs) {
        const placed = await intoOwnCpuGroup(skr.webhook.pid ?? -1, `${skr.name}-webhook`);
        if ('path' in placed) cgroups.push(placed.path);
        console.log(
          `${skr.name} webhook: ${'path' in placed ? `in a CPU cgroup of its own (${placed.path}), as in a Pod` : `left in the shared CPU group: ${placed.reason}`}`,
        );
      }
    } else console.log('webhooks in the shared CPU group (--webhook-cgroup shared)');
    await live.opened;
    if (HUNG > 0) {
      hung = await startHostileSkr(neverAnswers);
      for (let i = 0; i < HUNG; i++)
        await seedKyma(system.kcp, system.namespace, `hung-${i}`, hung.kubeconfig);
      const since = Date.now();
      while (hung.pending() < Math.min(HUNG, 4) && Date.now() - since < 60_000)
        await new Promise((resolve) => setTimeout(resolve, 100));
      console.log(`${HUNG} Kymas with a hung SKR added; ${hung.pending()} of their requests hanging`);
    }
    console.log(`system up in ${Date.now() - t0} ms; warm-up: ${WARMUP} edits`);
    await runEdits(system, editsFor(system, WARMUP, 'warmup'));

    const floorLatencies = await floor(system, FLOOR);
    console.log(`\nFloor (SKR read + KCP apply, issued directly, ${FLOOR} times):`);
    console.log(summary('floor', floorLatencies));

    const before = await Promise.all(system.skrs.map((skr) => scrape(skr.webhookMetricsPort)));
    const agentBefore = await scrape(system.agentMetricsPort);
    const costsBefore = await snapshot(costed(system));
    console.log(
      `\nModule CR edits: ${EDITS} at ${RATE}/s, alternating ${system.skrs.map((s) => s.name).join(' and ')} (load average ${load()})`,
    );
    const edits = editsFor(system, EDITS, 'bench');
    const logsFrom = { mirrors: logs.mirrors.length, reconciles: logs.reconciles.length };
    await runEdits(system, edits);
    const costsAfter = await snapshot(costed(system));
    const after = await Promise.all(system.skrs.map((skr) => scrape(skr.webhookMetricsPort)));
    const agentAfter = await scrape(system.agentMetricsPort);
    attachStages(edits, admissions, callbacks);

    const latencyOf = (edit: Edit) => (edit.arrivedAtMs as number) - (edit.writeReturnedAtMs as number);
    const arrived = edits.filter((e) => e.arrivedAtMs !== undefined && e.writeReturnedAtMs !== undefined);
    console.log('Edit write returned → ModuleConfig shows the edit (watch on KCP):');
    for (const skr of system.skrs) {
      console.log(summary(skr.name, arrived.filter((e) => e.skr === skr.name).map(latencyOf)));
    }
    const overall = arrived.map(latencyOf).sort((a, b) => a - b);
    console.log(summary('Module CR edits', overall));
    const span = (from: (e: Edit) => number | undefined, to: (e: Edit) => number | undefined) =>
      edits.flatMap((e) => {
        const a = from(e);
        const b = to(e);
        return a !== undefined && b !== undefined ? [b - a] : [];
      });
    console.log('Where the milliseconds go (ms clocks of this process, the webhook logs and the agent):');
    console.log(
      summary(
        'sent → admission',
        span(
          (e) => e.sentAtMs,
          (e) => e.admissionAtMs,
        ),
      ),
    );
    console.log(
      summary(
        'admission → return',
        span(
          (e) => e.admissionAtMs,
          (e) => e.writeReturnedAtMs,
        ),
      ),
    );
    console.log(
      summary(
        'admission → callback',
        span(
          (e) => e.admissionAtMs,
          (e) => e.callbackAtMs,
        ),
      ),
    );
    console.log(
      summary(
        'callback → ModuleConfig',
        span(
          (e) => e.callbackAtMs,
          (e) => e.arrivedAtMs,
        ),
      ),
    );
    agentSteps(edits, logs.mirrors.slice(logsFrom.mirrors), logs.reconciles.slice(logsFrom.reconciles));
    const writes = edits
      .filter((e) => e.writeReturnedAtMs !== undefined)
      .map((e) => (e.writeReturnedAtMs as number) - e.sentAtMs);
    console.log(summary('writes', writes), ' (edit sent → write returned, admission included)');
    const p50 = percentile(overall, 50);
    const p99 = percentile(overall, 99);
    console.log(
      `End-to-end bar: p50 ≤ 25 ms (${Math.round(p50)} ms: ${p50 <= 25 ? 'met' : 'NOT met'}), ` +
        `p99 ≤ 100 ms (${Math.round(p99)} ms: ${p99 <= 100 ? 'met' : 'NOT met'})`,
    );
    const superseded = edits.filter((e) => e.superseded).length;
    const lost = edits.filter((e) => e.arrivedAtMs === undefined && !e.failed).length;
    const failed = edits.filter((e) => e.failed);
    console.log(
      `edits: ${EDITS}; arrived ${arrived.length} (of which ${superseded} superseded by a later edit of the same SKR first); ` +
        `lost (not arrived within ${SETTLE_MS / 1000} s): ${lost} of ${EDITS}; failed writes: ${failed.length}${failed[0] ? ` (first: ${failed[0].failed})` : ''}`,
    );
    console.log(agentPerEdit(agentBefore, agentAfter, EDITS));
    system.skrs.forEach((skr, i) => {
      const delta = (prefix: string) =>
        sumOf(after[i] as Samples, prefix) - sumOf(before[i] as Samples, prefix);
      console.log(
        `${skr.name} webhook: admissions ${delta('skr_webhook_admission_requests_total')}, events enqueued ${delta('skr_webhook_events_enqueued_total')}, ` +
          `coalesced ${delta('skr_webhook_events_coalesced_total')}, delivered ${delta('skr_webhook_events_delivered_total')}, ` +
          `dropped ${delta('skr_webhook_events_dropped_total')}`,
      );
    });
    // Per labelled series: triggers by source, reconciles by result.
    const agentSeries = [...agentAfter.keys()]
      .filter((key) => /^skr_agent_(triggers|reconcile|module_mirrors)_total\{/.test(key))
      .map((key) => [key, (agentAfter.get(key) ?? 0) - (agentBefore.get(key) ?? 0)] as const)
      .filter(([, delta]) => delta > 0)
      .map(([key, delta]) => `${key} +${delta}`);
    console.log(`agent during the run: ${agentSeries.join(', ') || 'nothing'}`);
    console.log(`What the edits cost (${EDITS} edits, the bench's own edits and watches included):`);
    for (const line of costLines(costsBefore, costsAfter, EDITS)) console.log(line);
    console.log(agentRequests(agentBefore, agentAfter, EDITS));

    if (KYMA_EDITS > 0) {
      const kymaBefore = await scrape(system.agentMetricsPort);
      console.log(
        `\nKyma edits: ${KYMA_EDITS} at ${KYMA_RATE}/s (the SKR Kyma's module managed: false / true; load average ${load()})`,
      );
      const kymaEdits = await runKymaEdits(system, KYMA_EDITS, KYMA_RATE);
      const kymaAfter = await scrape(system.agentMetricsPort);
      const kymaArrived = kymaEdits.filter(
        (e) => e.arrivedAtMs !== undefined && e.writeReturnedAtMs !== undefined,
      );
      console.log(
        summary(
          'Kyma edits',
          kymaArrived.map((e) => (e.arrivedAtMs as number) - (e.writeReturnedAtMs as number)),
        ),
        ' (write returned → ModuleConfig gone or back)',
      );
      console.log(
        `lost: ${kymaEdits.filter((e) => e.arrivedAtMs === undefined && !e.failed).length} of ${KYMA_EDITS}; failed writes: ${kymaEdits.filter((e) => e.failed).length}`,
      );
      console.log(agentPerEdit(kymaBefore, kymaAfter, KYMA_EDITS));
    }
    if (ROUND_TRIPS > 0 || NOOP_EDITS > 0) await roundTripPhase(system, logs);
    if (hung)
      console.log(`hung SKR: ${hung.requests()} requests received, ${hung.pending()} hanging at the end`);
    console.log(`\nload average at the end: ${load()}`);
  } finally {
    await live.close();
    await closeEditClients();
    await hung?.close();
    await system.stop();
    await removeCpuGroups(cgroups);
    await rm(parent, { recursive: true, force: true });
  }
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
