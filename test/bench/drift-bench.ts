// Drift benchmark (issue 30 item 3; DESIGN 5 "Drift on an installed object put back within the end-to-end bar":
// p50 ≤ 25 ms, p99 ≤ 100 ms). On the demo's local system (real planes, a real registry, the agent and one webhook
// as processes; requeues an hour long, so only the callback explains a revert), with the greeter module installed
// in skr1, one run prints:
// - the floor: a user's write of the greeter ConfigMap followed by the agent's server-side apply of it, both issued
//   directly from this process, timed to the watch showing the object as installed again;
// - reverts: --reverts user edits of that ConfigMap (merge patch under a user's field manager), one at a time; from
//   the edit sent to the watch showing it put back: p50/p99/max, and any not put back within 10 s;
// - the cost of the extra admission traffic on a busy SKR: --writes writes at --concurrency in flight of
//   ConfigMaps labelled managed-by: kyma that no Manifest holds (a controller's churn: an annotation it owns, and
//   the agent's own applies), against the same writes of unlabelled ConfigMaps, which no webhook entry selects:
//   the API server's write latency p50/p99 each, the webhook's CPU per reviewed write (process_cpu_seconds_total)
//   and the callbacks they caused (must be 0).
//
//   npm run bench:drift -- [--reverts 200] [--floor 100] [--writes 2000] [--concurrency 8]
//
// `uptime` is printed at the start and the end: on a shared machine the figures move with the load.
// Figures only; nothing passes or fails.
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { CoreV1Api, PatchStrategy, setHeaderOptions, type KubeConfig } from '@kubernetes/client-node';
import { DRIFT, LABELS, MANIFEST } from '@skr-watcher/api';
import { applyObject, createClusterClient } from '@skr-watcher/kube';
import { DRIFT_KEY, INSTALLED_GREETING, timeDriftRevert, watchConfigMap } from '../../demo/drift-timeline.js';
import { timeModuleInstall } from '../../demo/module-timeline.js';
import { GREETER } from '../../demo/modules.js';
import { startLocalSystem, type LocalSystem } from '../../demo/system.js';
import { parseMetrics, sumOf } from '../support/prometheus-text.js';
import { latencySummary } from '../support/latency.js';

const { values } = parseArgs({
  options: {
    reverts: { type: 'string', default: '200' },
    floor: { type: 'string', default: '100' },
    writes: { type: 'string', default: '2000' },
    concurrency: { type: 'string', default: '8' },
  },
});
const REVERTS = Number(values.reverts);
const FLOOR = Number(values.floor);
const WRITES = Number(values.writes);
const CONCURRENCY = Number(values.concurrency);
const SKR = 'skr1';
const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

const uptime = () => execFileSync('uptime', { encoding: 'utf8' }).trim();

async function scrape(port: number) {
  return parseMetrics(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text());
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
    const latencies = await writes(WRITES, CONCURRENCY, (i) => write(names(kind)[i % CONCURRENCY]!, i));
    await new Promise((resolve) => setTimeout(resolve, 300));
    const after = await scrape(port);
    const delta = (prefix: string, ...labels: string[]) =>
      sumOf(after, prefix, ...labels) - sumOf(before, prefix, ...labels);
    const reviewed = delta('skr_webhook_drift_reviews_total');
    const cpuMs = delta('process_cpu_seconds_total') * 1000;
    const callbacks = delta('skr_webhook_drift_reviews_total', 'verdict="drift"');
    console.log(
      `${latencySummary(label, latencies)}  webhook: ${reviewed} reviewed, ${callbacks} drift, CPU ${cpuMs.toFixed(0)} ms` +
        (reviewed > 0 ? ` (${((cpuMs * 1000) / reviewed).toFixed(0)} µs per reviewed write)` : ''),
    );
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

async function main(): Promise<void> {
  console.log(`uptime (start): ${uptime()}`);
  const parent = await mkdtemp(join(tmpdir(), 'drift-bench-'));
  let system: LocalSystem | undefined;
  try {
    system = await startLocalSystem({
      dir: join(parent, 'system'),
      skrs: [SKR],
      modules: true,
      agentArgs: ['--requeue-processing', '1h', '--requeue-ready', '1h'],
      progress: (line) => console.error(line),
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
    const watch = await watchConfigMap(skrConfig, GREETER.namespace, GREETER.configMap, DRIFT_KEY);
    try {
      // Warm-up: the API server uses the webhook's new entry a moment after the agent wrote it.
      for (let i = 0; i < 5; i++)
        await timeDriftRevert({ skrConfig, skr: SKR, watch, edit: `warm-up ${i}`, timeoutMs: 30_000 });
      const reverts: number[] = [];
      let lost = 0;
      for (let i = 0; i < REVERTS; i++) {
        const timeline = await timeDriftRevert({
          skrConfig,
          skr: SKR,
          watch,
          edit: `edit ${i}`,
          timeoutMs: 10_000,
        });
        if (timeline.revertedAtMs === undefined) lost++;
        else reverts.push(timeline.revertedAtMs - timeline.sentAtMs);
      }
      const floorLatencies = await floor(skrConfig);
      console.log(
        `\nDrift: ConfigMap ${GREETER.namespace}/${GREETER.configMap} of greeter in ${SKR}, edit sent → put back`,
      );
      console.log(latencySummary('floor', floorLatencies));
      console.log(`${latencySummary('revert', reverts)}  not put back within 10 s: ${lost}`);
      const agent = await scrape(system.agentMetricsPort).catch(() => undefined);
      if (agent)
        console.log(
          `agent: skr_agent_drift_reverts_total reverted=${sumOf(agent, 'skr_agent_drift_reverts_total', 'outcome="reverted"')}` +
            ` in_place=${sumOf(agent, 'skr_agent_drift_reverts_total', 'outcome="in_place"')}` +
            ` failed=${sumOf(agent, 'skr_agent_drift_reverts_total', 'outcome="failed"')}`,
        );
    } finally {
      watch.stop();
    }
    await admissionCost(system, skrConfig);
  } finally {
    await system?.stop();
    await rm(parent, { recursive: true, force: true });
    console.log(`\nuptime (end): ${uptime()}`);
  }
}

await main();
