// Drift benchmark (bar: drift on an installed object put back within the end-to-end bar, p50 ≤ 25 ms,
// p99 ≤ 100 ms). On the demo's local system (real planes, a real registry, the agent and one webhook
// as processes; requeues an hour long, so only the callback explains a revert), with the greeter module (a
// ConfigMap) and the drifter module (a Deployment, never Ready: no node runs it) installed in skr1, one run prints:
// - ConfigMap edits: --reverts user edits of greeter's ConfigMap (merge patch under a user's field manager), one at
//   a time; from the edit sent to the watch showing it put back: p50/p99/max, and any not put back within 10 s;
// - Deployment deletions: --deletions deletions of drifter's Deployment, one at a time; from the deletion sent to the
//   watch showing a Deployment of that name (a new uid) again;
// - for each, where the time went: per step p50/p99 from the webhook's and the agent's own timestamps (admission
//   seen, callback received, lane started, Manifest found, write shown, object rendered, applied, Event written),
//   SKR and KCP requests per revert by verb and resource, and full Kyma passes per revert;
// - the floors: the same user write and the agent's server-side apply issued directly from this process on an
//   object no webhook entry selects, timed the same way (--floor of each);
// - the cost of the extra admission traffic on a busy SKR: --writes writes at --concurrency in flight of
//   ConfigMaps labelled managed-by: kyma that no Manifest holds (a controller's churn: an annotation it owns, and
//   the agent's own applies), against the same writes of unlabelled ConfigMaps, which no webhook entry selects:
//   the API server's write latency p50/p99 each, the webhook's CPU per reviewed write (process_cpu_seconds_total)
//   and the callbacks they caused (must be 0).
//
//   npm run bench:drift -- [--reverts 200] [--deletions 100] [--floor 100] [--writes 2000] [--concurrency 8]
//
// The agent runs with --drift-revert-backoff 0: the edits follow one another, which the agent otherwise paces as a
// fight (docs/drift.md); the figures are those of one revert each.
//
// `uptime` is printed at the start, before the revert phases and at the end: on a shared machine the figures move
// with the load. Figures only; nothing passes or fails.
import { execFileSync } from 'node:child_process';
import https from 'node:https';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import {
  AppsV1Api,
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  Watch,
  setHeaderOptions,
  type KubeConfig,
} from '@kubernetes/client-node';
import { DRIFT, LABELS, MANIFEST } from '@skr-watcher/api';
import { applyObject, createClusterClient, mergePatchCustomObject } from '@skr-watcher/kube';
import {
  DRIFT_KEY,
  INSTALLED_GREETING,
  timeDriftRevert,
  watchConfigMap,
} from '../support/system/drift-timeline.js';
import { timeModuleInstall } from '../support/system/module-timeline.js';
import { GREETER, createCatalog, publishModules } from '../support/system/modules.js';
import { SKR_KYMA, startLocalSystem, type AdmissionSeen, type LocalSystem } from '../support/system/index.js';
import type { DriftSteps } from '../../agent/src/targeted/drift.js';
import { DRIFTER, drifterModule } from '../support/drifter-module.js';
import { parseMetrics, sumOf, type Samples } from '../support/prometheus-text.js';
import { latencySummary, nearestRank } from '../support/latency.js';

const { values } = parseArgs({
  options: {
    reverts: { type: 'string', default: '200' },
    deletions: { type: 'string', default: '100' },
    floor: { type: 'string', default: '100' },
    writes: { type: 'string', default: '2000' },
    concurrency: { type: 'string', default: '8' },
  },
});
const REVERTS = Number(values.reverts);
const DELETIONS = Number(values.deletions);
const FLOOR = Number(values.floor);
const WRITES = Number(values.writes);
const CONCURRENCY = Number(values.concurrency);
const SKR = 'skr1';
const BAR = { p50: 25, p99: 100 };
const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

const uptime = () => execFileSync('uptime', { encoding: 'utf8' }).trim();

async function scrape(port: number) {
  return parseMetrics(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text());
}

/** The SKR API server's own /metrics (its view of the webhook calls). */
async function scrapeApiServer(skrConfig: KubeConfig): Promise<Samples> {
  const options: https.RequestOptions = {};
  await skrConfig.applyToHTTPSOptions(options);
  const url = new URL('/metrics', skrConfig.getCurrentCluster()!.server);
  const text = await new Promise<string>((resolve, reject) => {
    https
      .get(url, { ...options, agent: undefined }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (body += chunk));
        res.on('end', () => resolve(body));
      })
      .on('error', reject);
  });
  return parseMetrics(text);
}

/** Mean duration (ms) and count of the API server's calls of the drift webhook entry between two scrapes. */
function webhookCalls(before: Samples, after: Samples): string {
  const prefix = 'apiserver_admission_webhook_admission_duration_seconds';
  // The drift entry (agent/src/registration/webhook-configuration.ts): installed-objects.skr-webhook.<group>.
  const name = 'name="installed-objects.';
  const delta = (suffix: string) =>
    sumOf(after, `${prefix}${suffix}`, name) - sumOf(before, `${prefix}${suffix}`, name);
  const count = delta('_count');
  return count > 0
    ? `${count} calls of the drift webhook entry, mean ${((delta('_sum') * 1000) / count).toFixed(1)} ms as the API server timed them`
    : 'no call of the drift webhook entry counted by the API server';
}

/** The agent's `drift callback handled` log line: its step timestamps (epoch ms). */
interface AgentDriftEntry extends DriftSteps {
  name: string;
  outcome: string;
  reads: number;
  receivedAt?: number;
  doneAt?: number;
}

const STEP_FIELDS = [
  'receivedAt',
  'startedAt',
  'foundAt',
  'shownAt',
  'renderedAt',
  'appliedAt',
  'recordedAt',
  'doneAt',
] as const satisfies readonly (keyof AgentDriftEntry)[];

/**
 * One user write timed from sent to the watch showing the object as installed again; `returnedAt`: when the user's
 * write returned, where bench:e2e starts its clock (the end-to-end bar's method: the user's own write is not the
 * system's latency).
 */
interface Sample {
  sentAt: number;
  returnedAt: number;
  revertedAt: number | undefined;
}

/** What the processes logged during a run, for the per-step figures. */
class Steps {
  readonly admissions: AdmissionSeen[] = [];
  readonly agent: AgentDriftEntry[] = [];

  agentEntry(entry: Record<string, unknown>): void {
    const logged: AgentDriftEntry = {
      name: String(entry['name'] ?? ''),
      outcome: String(entry['outcome'] ?? ''),
      reads: typeof entry['reads'] === 'number' ? entry['reads'] : 0,
    };
    for (const field of STEP_FIELDS) if (typeof entry[field] === 'number') logged[field] = entry[field];
    this.agent.push(logged);
  }

  /**
   * Per-step p50/p99 of `samples` (writes of `kind` `name`, one at a time): each sample is matched with the first
   * admission and the first agent entry about that object after it was sent and before the next one was.
   */
  matched(kind: string, name: string, phase: Phase): string[] {
    const samples = phase.samples;
    const gaps = new Map<string, number[]>();
    const reads: number[] = [];
    const outcomes = new Map<string, number>();
    const add = (step: string, from: number | undefined, to: number | undefined) => {
      if (from === undefined || to === undefined) return;
      gaps.set(step, [...(gaps.get(step) ?? []), to - from]);
    };
    // Log lines carry whole milliseconds: allow for that when comparing with the send time.
    for (const [index, sample] of samples.entries()) {
      const until = samples[index + 1]?.sentAt ?? Number.POSITIVE_INFINITY;
      const within = (atMs: number | undefined) =>
        atMs !== undefined && atMs >= sample.sentAt - 1 && atMs < until;
      const admission = this.admissions.find(
        (seen) => seen.kind === kind && seen.name === name && within(seen.atMs),
      );
      const entry = this.agent.find((logged) => logged.name === name && within(logged.receivedAt));
      if (entry) {
        reads.push(entry.reads);
        outcomes.set(entry.outcome, (outcomes.get(entry.outcome) ?? 0) + 1);
      }
      add('sent → admission', sample.sentAt, admission?.atMs);
      add('admission → callback in', admission?.atMs, entry?.receivedAt);
      add('callback in → lane', entry?.receivedAt, entry?.startedAt);
      add('lane → Manifest found', entry?.startedAt, entry?.foundAt);
      add('found → write shown', entry?.foundAt, entry?.shownAt);
      add('shown → rendered', entry?.shownAt, entry?.renderedAt);
      add('rendered → applied', entry?.renderedAt, entry?.appliedAt);
      add('applied → watch shows', entry?.appliedAt, sample.revertedAt);
      add('(applied → Event written)', entry?.appliedAt, entry?.recordedAt);
      add('(sent → callback in)', sample.sentAt, entry?.receivedAt);
    }
    const sortedReads = [...reads].sort((a, b) => a - b);
    return [
      `  steps (webhook and agent timestamps, whole ms; ${samples.length} writes, ${gaps.get('callback in → lane')?.length ?? 0} matched to an agent log line):`,
      ...[...gaps].map(([step, values]) => `  ${latencySummary(step, values)}`),
      `  SKR reads until the write showed: p50 ${nearestRank(sortedReads, 50)}, max ${sortedReads.at(-1) ?? 'n/a'}; ` +
        `outcomes: ${[...outcomes].map(([outcome, count]) => `${outcome}=${count}`).join(' ') || 'none'}`,
    ];
  }
}

/** Requests the agent sent, per write, between two scrapes; and the full Kyma passes it ran. */
function printRequests(before: Samples, after: Samples, writes: number): void {
  const perWrite = new Map<string, number>();
  for (const [key, value] of after) {
    if (!key.startsWith('skr_agent_kube_requests_total{')) continue;
    const delta = value - (before.get(key) ?? 0);
    if (delta <= 0) continue;
    const label = (name: string) => new RegExp(`${name}="([^"]*)"`).exec(key)?.[1] ?? '';
    perWrite.set(`${label('cluster')} ${label('verb')} ${label('resource')}`, delta / writes);
  }
  const passes = sumOf(after, 'skr_agent_reconcile_total') - sumOf(before, 'skr_agent_reconcile_total');
  const listed = [...perWrite]
    .sort((a, b) => b[1] - a[1])
    .map(([what, count]) => `${what} ${count.toFixed(2)}`)
    .join(', ');
  console.log(`  agent requests per write: ${listed || 'none'}`);
  console.log(`  full Kyma passes per write: ${(passes / writes).toFixed(2)}`);
}

function printAgainstBar(label: string, latencies: readonly number[], lost: number): void {
  const sorted = [...latencies].sort((a, b) => a - b);
  const p50 = nearestRank(sorted, 50);
  const p99 = nearestRank(sorted, 99);
  const verdict = (value: number, bar: number) => (value <= bar ? 'met' : 'not met');
  console.log(
    `${latencySummary(label, latencies)}  not put back within 10 s: ${lost}  ` +
      `[bar p50 ≤ ${BAR.p50}: ${verdict(p50, BAR.p50)}; p99 ≤ ${BAR.p99}: ${verdict(p99, BAR.p99)}]`,
  );
}

/** A watch of one Deployment: `recreated(uid)` resolves at the first event of that name with another uid. */
async function watchDeployment(skrConfig: KubeConfig, namespace: string, name: string) {
  const waiters = new Set<{ uid: string; resolve: (atMs: number) => void }>();
  const request = await new Watch(skrConfig).watch(
    `/apis/apps/v1/namespaces/${namespace}/deployments`,
    { fieldSelector: `metadata.name=${name}`, allowWatchBookmarks: false },
    (type: string, object: { metadata?: { uid?: string } }) => {
      const atMs = Date.now();
      if (type === 'DELETED') return;
      for (const waiter of waiters)
        if (object.metadata?.uid !== waiter.uid) {
          waiters.delete(waiter);
          waiter.resolve(atMs);
        }
    },
    () => {},
  );
  return {
    recreated(uid: string, timeoutMs: number): Promise<number | undefined> {
      return new Promise((resolve) => {
        const timer = setTimeout(() => {
          waiters.delete(waiter);
          resolve(undefined);
        }, timeoutMs);
        const waiter = {
          uid,
          resolve: (atMs: number) => {
            clearTimeout(timer);
            resolve(atMs);
          },
        };
        waiters.add(waiter);
      });
    },
    stop: () => request.abort(),
  };
}

/** The drifter module enabled in the SKR's Kyma; resolves once its Deployment exists in the SKR. */
async function installDrifter(system: LocalSystem, skrConfig: KubeConfig): Promise<void> {
  const [published] = await publishModules(system.modules!.registryHost, [drifterModule()]);
  await createCatalog(system.kcp, system.namespace, published!);
  const api = skrConfig.makeApiClient(CustomObjectsApi);
  const current = (await api.getNamespacedCustomObject(SKR_KYMA)) as { spec?: { modules?: unknown[] } };
  await mergePatchCustomObject(api, SKR_KYMA, {
    spec: { modules: [...(current.spec?.modules ?? []), { name: DRIFTER.module }] },
  });
  const apps = skrConfig.makeApiClient(AppsV1Api);
  const deadline = Date.now() + 120_000;
  for (;;) {
    const found = await apps
      .readNamespacedDeployment({ name: DRIFTER.deployment, namespace: DRIFTER.namespace })
      .catch(() => undefined);
    if (found) return;
    if (Date.now() > deadline) throw new Error('the drifter module was not installed within 120 s');
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** Deletes drifter's Deployment as a user would and waits until a Deployment of that name exists again. */
async function timeDeletion(
  apps: AppsV1Api,
  watch: Awaited<ReturnType<typeof watchDeployment>>,
  timeoutMs: number,
): Promise<Sample> {
  const current = await apps.readNamespacedDeployment({
    name: DRIFTER.deployment,
    namespace: DRIFTER.namespace,
  });
  const back = watch.recreated(current.metadata!.uid!, timeoutMs);
  const sentAt = Date.now();
  await apps.deleteNamespacedDeployment({ name: DRIFTER.deployment, namespace: DRIFTER.namespace });
  const returnedAt = Date.now();
  return { sentAt, returnedAt, revertedAt: await back };
}

/**
 * The user's write and the agent's apply issued directly, on a ConfigMap no webhook entry selects: what a revert costs
 * without webhook, callback and agent, timed the same way (edit sent → the watch shows the value back).
 */
async function floor(skrConfig: KubeConfig): Promise<number[]> {
  const core = skrConfig.makeApiClient(CoreV1Api);
  const objects = (await createClusterClient(skrConfig)).objects;
  const name = 'bench-floor';
  const installed = (data: Record<string, string>) => ({
    apiVersion: 'v1',
    kind: 'ConfigMap',
    metadata: { name, namespace: GREETER.namespace },
    data,
  });
  const apply = { fieldManager: MANIFEST.applyFieldManager, force: true };
  await applyObject(objects, installed({ [DRIFT_KEY]: INSTALLED_GREETING }), apply);
  const watch = await watchConfigMap(skrConfig, GREETER.namespace, name, DRIFT_KEY);
  const latencies: number[] = [];
  try {
    for (let i = 0; i < FLOOR; i++) {
      const back = watch.shows(INSTALLED_GREETING, 10_000);
      const sent = Date.now();
      await core.patchNamespacedConfigMap(
        {
          name,
          namespace: GREETER.namespace,
          fieldManager: 'bench-user',
          body: { data: { [DRIFT_KEY]: `floor ${i}` } },
        },
        mergePatch,
      );
      await applyObject(objects, installed({ [DRIFT_KEY]: INSTALLED_GREETING }), apply);
      const at = await back;
      if (at !== undefined) latencies.push(at - sent);
    }
  } finally {
    watch.stop();
  }
  return latencies;
}

/** The same for a Deployment no webhook entry selects: deletion sent, then the apply that re-creates it. */
async function deletionFloor(skrConfig: KubeConfig): Promise<number[]> {
  const apps = skrConfig.makeApiClient(AppsV1Api);
  const objects = (await createClusterClient(skrConfig)).objects;
  const name = 'bench-floor';
  const labels = { 'app.kubernetes.io/name': name };
  const deployment = {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, namespace: DRIFTER.namespace, labels },
    spec: {
      replicas: 1,
      selector: { matchLabels: labels },
      template: { metadata: { labels }, spec: { containers: [{ name: 'operator', image: 'floor:1' }] } },
    },
  };
  const apply = { fieldManager: MANIFEST.applyFieldManager, force: true };
  let uid = (await applyObject(objects, deployment, apply)).metadata?.uid ?? '';
  const watch = await watchDeployment(skrConfig, DRIFTER.namespace, name);
  const latencies: number[] = [];
  try {
    for (let i = 0; i < FLOOR; i++) {
      const back = watch.recreated(uid, 10_000);
      const sent = Date.now();
      await apps.deleteNamespacedDeployment({ name, namespace: DRIFTER.namespace });
      uid = (await applyObject(objects, deployment, apply)).metadata?.uid ?? '';
      const at = await back;
      if (at !== undefined) latencies.push(at - sent);
    }
  } finally {
    watch.stop();
  }
  return latencies;
}

/** `count` writes at `concurrency` in flight, each timed from sent to the API server's answer. */
async function writes(count: number, concurrency: number, write: (i: number) => Promise<unknown>) {
  const latencies: number[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < count) {
        const i = next++;
        const sent = performance.now();
        await write(i);
        latencies.push(performance.now() - sent);
      }
    }),
  );
  return latencies;
}

async function admissionCost(system: LocalSystem, skrConfig: KubeConfig): Promise<void> {
  const core = skrConfig.makeApiClient(CoreV1Api);
  const objects = (await createClusterClient(skrConfig)).objects;
  const port = system.skr(SKR).webhookMetricsPort;
  const namespace = GREETER.namespace;
  const names = (kind: string) => Array.from({ length: CONCURRENCY }, (_, i) => `bench-${kind}-${i}`);
  const labelled = { [LABELS.managedBy]: DRIFT.managedByValue };
  for (const name of [...names('labelled'), ...names('plain')])
    await core
      .createNamespacedConfigMap({
        namespace,
        body: {
          metadata: { name, namespace, ...(name.includes('labelled') ? { labels: labelled } : {}) },
          data: { a: '1' },
        },
      })
      .catch(() => undefined);
  // The API server picks up objects for the webhook at once (the configuration is already in place).
  const phase = async (
    label: string,
    kind: 'labelled' | 'plain',
    write: (name: string, i: number) => Promise<unknown>,
  ) => {
    const before = await scrape(port);
    const apiBefore = await scrapeApiServer(skrConfig);
    const latencies = await writes(WRITES, CONCURRENCY, (i) => write(names(kind)[i % CONCURRENCY]!, i));
    await new Promise((resolve) => setTimeout(resolve, 300));
    const after = await scrape(port);
    const apiAfter = await scrapeApiServer(skrConfig);
    const delta = (prefix: string, ...labels: string[]) =>
      sumOf(after, prefix, ...labels) - sumOf(before, prefix, ...labels);
    const reviewed = delta('skr_webhook_drift_reviews_total');
    const cpuMs = delta('process_cpu_seconds_total') * 1000;
    const callbacks = delta('skr_webhook_drift_reviews_total', 'verdict="drift"');
    console.log(
      `${latencySummary(label, latencies)}  webhook: ${reviewed} reviewed, ${callbacks} drift, CPU ${cpuMs.toFixed(0)} ms` +
        (reviewed > 0 ? ` (${((cpuMs * 1000) / reviewed).toFixed(0)} µs per reviewed write)` : ''),
    );
    if (kind === 'labelled') console.log(`  ${webhookCalls(apiBefore, apiAfter)}`);
  };
  const churn = (name: string, i: number) =>
    core.patchNamespacedConfigMap(
      {
        name,
        namespace,
        fieldManager: 'kube-controller-manager',
        body: { metadata: { annotations: { 'deployment.kubernetes.io/revision': String(i) } } },
      },
      mergePatch,
    );
  const ownApply = (name: string, i: number) =>
    applyObject(
      objects,
      {
        apiVersion: 'v1',
        kind: 'ConfigMap',
        metadata: { name, namespace, ...(name.includes('labelled') ? { labels: labelled } : {}) },
        data: { a: String(i) },
      },
      { fieldManager: MANIFEST.applyFieldManager, force: true },
    );
  console.log(`\nAdmission cost on a busy SKR: ${WRITES} writes per phase, ${CONCURRENCY} in flight`);
  await phase('churn, plain', 'plain', churn);
  await phase('churn, labelled', 'labelled', churn);
  await phase('agent apply, plain', 'plain', ownApply);
  await phase('agent apply, labelled', 'labelled', ownApply);
}

/** A phase of `count` writes, one at a time, with the agent's and the SKR API server's metrics around it. */
interface Phase {
  samples: Sample[];
  agent: [Samples, Samples];
  apiServer: [Samples, Samples];
}

async function measured(
  agentPort: number,
  skrConfig: KubeConfig,
  count: number,
  write: (i: number) => Promise<Sample>,
): Promise<Phase> {
  const agent: Samples[] = [await scrape(agentPort)];
  const apiServer: Samples[] = [await scrapeApiServer(skrConfig)];
  const samples: Sample[] = [];
  for (let i = 0; i < count; i++) samples.push(await write(i));
  agent.push(await scrape(agentPort));
  apiServer.push(await scrapeApiServer(skrConfig));
  return { samples, agent: [agent[0]!, agent[1]!], apiServer: [apiServer[0]!, apiServer[1]!] };
}

function report(
  title: string,
  floorLatencies: readonly number[],
  label: string,
  stepLines: readonly string[],
  phase: Phase,
): void {
  const latencies = phase.samples.flatMap((sample) =>
    sample.revertedAt === undefined ? [] : [sample.revertedAt - sample.sentAt],
  );
  const fromReturned = phase.samples.flatMap((sample) =>
    sample.revertedAt === undefined ? [] : [sample.revertedAt - sample.returnedAt],
  );
  console.log(`\nDrift: ${title}`);
  console.log(latencySummary('floor', floorLatencies));
  printAgainstBar(label, latencies, phase.samples.length - latencies.length);
  // bench:e2e's clock: from the user's write returned, as the end-to-end bar is measured.
  printAgainstBar(`${label} (write returned →)`, fromReturned, phase.samples.length - fromReturned.length);
  for (const line of stepLines) console.log(line);
  printRequests(phase.agent[0], phase.agent[1], phase.samples.length);
  console.log(`  admission: ${webhookCalls(phase.apiServer[0], phase.apiServer[1])}`);
}

async function main(): Promise<void> {
  console.log(`uptime (start): ${uptime()}`);
  const parent = await mkdtemp(join(tmpdir(), 'drift-bench-'));
  const steps = new Steps();
  let system: LocalSystem | undefined;
  try {
    system = await startLocalSystem({
      dir: join(parent, 'system'),
      skrs: [SKR],
      modules: true,
      // Edits one after another are a fight the agent paces (one targeted revert per doubling window); the bar is
      // the latency of one revert, so every edit here is put back at once.
      agentArgs: ['--requeue-processing', '1h', '--requeue-ready', '1h', '--drift-revert-backoff', '0'],
      progress: (line) => console.error(line),
      onAdmission: (seen) => steps.admissions.push(seen),
      onAgentLog: { messages: ['drift callback handled'], handle: (entry) => steps.agentEntry(entry) },
    });
    if (!system.modules?.agentInstalls) throw new Error('this skr-agent does not install modules');
    const skrConfig = system.skr(SKR).kubeConfig();
    const install = await timeModuleInstall({
      kcp: system.kcp,
      skrConfig,
      namespace: system.namespace,
      skr: SKR,
      timeoutMs: 120_000,
    });
    if (install.readyAtMs === undefined) throw new Error('greeter did not get Ready');
    await installDrifter(system, skrConfig);
    const apps = skrConfig.makeApiClient(AppsV1Api);
    const watch = await watchConfigMap(skrConfig, GREETER.namespace, GREETER.configMap, DRIFT_KEY);
    const deployments = await watchDeployment(skrConfig, DRIFTER.namespace, DRIFTER.deployment);
    const agentPort = system.agentMetricsPort;
    try {
      // Warm-up: the API server uses the webhook's new entry a moment after the agent wrote it.
      for (let i = 0; i < 5; i++)
        await timeDriftRevert({ skrConfig, skr: SKR, watch, edit: `warm-up ${i}`, timeoutMs: 30_000 });
      for (let i = 0; i < 3; i++) await timeDeletion(apps, deployments, 30_000);
      // Let the full passes the warm-up woke finish.
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      console.log(`uptime (reverts): ${uptime()}`);

      const edits = await measured(agentPort, skrConfig, REVERTS, async (i) => {
        const timeline = await timeDriftRevert({
          skrConfig,
          skr: SKR,
          watch,
          edit: `edit ${i}`,
          timeoutMs: 10_000,
        });
        return {
          sentAt: timeline.sentAtMs,
          returnedAt: timeline.writeReturnedAtMs,
          revertedAt: timeline.revertedAtMs,
        };
      });
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      const deletions = await measured(agentPort, skrConfig, DELETIONS, () =>
        timeDeletion(apps, deployments, 10_000),
      );

      const floorEdits = await floor(skrConfig);
      const floorDeletions = await deletionFloor(skrConfig);
      // Let the last agent log lines arrive.
      await new Promise((resolve) => setTimeout(resolve, 500));
      report(
        `ConfigMap ${GREETER.namespace}/${GREETER.configMap} of greeter in ${SKR}, edit sent → put back`,
        floorEdits,
        'revert',
        steps.matched('ConfigMap', GREETER.configMap, edits),
        edits,
      );
      report(
        `Deployment ${DRIFTER.namespace}/${DRIFTER.deployment} of drifter in ${SKR}, deletion sent → exists again`,
        floorDeletions,
        're-created',
        steps.matched('Deployment', DRIFTER.deployment, deletions),
        deletions,
      );

      const agent = await scrape(agentPort).catch(() => undefined);
      if (agent)
        console.log(
          `\nagent: skr_agent_drift_reverts_total reverted=${sumOf(agent, 'skr_agent_drift_reverts_total', 'outcome="reverted"')}` +
            ` in_place=${sumOf(agent, 'skr_agent_drift_reverts_total', 'outcome="in_place"')}` +
            ` not_shown=${sumOf(agent, 'skr_agent_drift_reverts_total', 'outcome="not_shown"')}` +
            ` failed=${sumOf(agent, 'skr_agent_drift_reverts_total', 'outcome="failed"')} (warm-up included)`,
        );
    } finally {
      watch.stop();
      deployments.stop();
    }
    await admissionCost(system, skrConfig);
  } finally {
    await system?.stop();
    await rm(parent, { recursive: true, force: true });
    console.log(`\nuptime (end): ${uptime()}`);
  }
}

await main();
