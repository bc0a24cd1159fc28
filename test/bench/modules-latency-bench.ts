// Module install latency: module enabled in the SKR Kyma → Manifest Ready, for a module with no
// workloads (bar: p50 ≤ 1 s, p99 ≤ 3 s). The whole path of the demo (test/support/system): a KCP and one SKR on real
// kube-apiservers, a real OCI registry, skr-agent with --oci-registry-host, the SKR webhook whose callback wakes the
// Kyma; each round enables the module in the SKR Kyma, waits for its Manifest Ready and the Kyma status Ready, then
// removes it and waits until the Manifest is gone, so every round is a fresh install (pull from the process cache,
// apply, readiness).
//
//   npm run bench:modules-latency -- [--rounds 100] [--timeout 60s]
//
// The module: a ConfigMap and a ServiceAccount in kyma-system (no CRD, no default CR, no workload). Prints figures
// with the load average and `uptime`; nothing passes or fails.
import { execFileSync } from 'node:child_process';
import { mkdtemp } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULTS, parseDuration, TIMER_MAX_MS } from '@skr-watcher/api';
import { stringify } from 'yaml';
import { disableModule, formatModuleTimeline, timeModuleInstall } from '../support/system/module-timeline.js';
import { createCatalog, publishModules } from '../support/system/modules.js';
import { startLocalSystem } from '../support/system/index.js';

function flag(name: string, fallback: string): string {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 && process.argv[at + 1] ? (process.argv[at + 1] as string) : fallback;
}

const ROUNDS = Number(flag('rounds', '100'));
const TIMEOUT_MS = parseDuration(flag('timeout', '60s'), TIMER_MAX_MS);
const MODULE = { module: 'latency', ocmComponentName: 'kyma-project.io/module/latency' };

const uptime = () => execFileSync('uptime', { encoding: 'utf8' }).trim();
const load = () => loadavg()[0]!.toFixed(1);

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? NaN;
}

function summary(label: string, values: number[]): string {
  const sorted = [...values].sort((a, b) => a - b);
  return (
    `${label}: n=${sorted.length} p50 ${quantile(sorted, 0.5)} ms, p90 ${quantile(sorted, 0.9)} ms, ` +
    `p99 ${quantile(sorted, 0.99)} ms, max ${sorted.at(-1)} ms`
  );
}

async function main(): Promise<void> {
  console.log(`start: ${uptime()}`);
  const dir = join(await mkdtemp(join(tmpdir(), 'modules-latency-')), 'system');
  const system = await startLocalSystem({
    dir,
    skrs: ['skr1'],
    modules: true,
    progress: (line) => console.log(`  ${line}`),
  });
  try {
    if (!system.modules?.agentInstalls) {
      console.log('skr-agent has no --oci-registry-host (it installs no modules): nothing to measure');
      process.exitCode = 1;
      return;
    }
    const [published] = await publishModules(system.modules.registryHost, [
      {
        moduleName: MODULE.module,
        version: '1.0.0',
        channels: ['regular'],
        ocmComponentName: MODULE.ocmComponentName,
        rawManifest: [
          {
            apiVersion: 'v1',
            kind: 'ConfigMap',
            metadata: { name: 'latency-module', namespace: DEFAULTS.skrNamespace },
            data: { purpose: 'bench:modules-latency' },
          },
          {
            apiVersion: 'v1',
            kind: 'ServiceAccount',
            metadata: { name: 'latency-module', namespace: DEFAULTS.skrNamespace },
          },
        ]
          .map((object) => stringify(object))
          .join('---\n'),
      },
    ]);
    if (published) await createCatalog(system.kcp, system.namespace, published);
    console.log(`ready: ${ROUNDS} rounds, load ${load()}`);

    const skrConfig = system.skr('skr1').kubeConfig();
    const context = { kcp: system.kcp, skrConfig, namespace: system.namespace, skr: 'skr1' };
    const toManifestReady: number[] = [];
    const toKymaReady: number[] = [];
    const toManifest: number[] = [];
    const removals: number[] = [];
    let failed = 0;
    for (let round = 1; round <= ROUNDS; round++) {
      const timeline = await timeModuleInstall({ ...context, module: MODULE, timeoutMs: TIMEOUT_MS });
      if (timeline.readyAtMs === undefined || timeline.kymaReadyAtMs === undefined) {
        failed++;
        console.log(
          `round ${round}: not Ready within ${TIMEOUT_MS} ms (state ${timeline.lastState ?? 'none'})`,
        );
        for (const line of formatModuleTimeline(timeline)) console.log(line);
      } else {
        toManifestReady.push(timeline.readyAtMs - timeline.sentAtMs);
        toKymaReady.push(timeline.kymaReadyAtMs - timeline.sentAtMs);
        if (timeline.manifestAtMs !== undefined) toManifest.push(timeline.manifestAtMs - timeline.sentAtMs);
      }
      if (round === 1) for (const line of formatModuleTimeline(timeline)) console.log(line);
      const removed = await disableModule({ ...context, module: MODULE, timeoutMs: TIMEOUT_MS });
      if (removed === undefined) {
        console.log(`round ${round}: the module was not removed within ${TIMEOUT_MS} ms; stopping`);
        break;
      }
      removals.push(removed);
      if (round % 10 === 0) console.log(`  ${round} rounds, load ${load()}`);
    }

    console.log();
    console.log(`figures (load ${load()}; ${uptime()}):`);
    console.log(`  ${summary('enabled → Manifest Ready (bar p50 ≤ 1,000, p99 ≤ 3,000)', toManifestReady)}`);
    console.log(`  ${summary('enabled → module Ready in the KCP Kyma status', toKymaReady)}`);
    console.log(`  ${summary('enabled → Manifest written in KCP', toManifest)}`);
    console.log(`  ${summary('removed → Manifest gone and the Kyma status without it', removals)}`);
    console.log(`  rounds not Ready in time: ${failed}`);
  } finally {
    await system.stop();
  }
}

main().then(
  () => process.exit(process.exitCode ?? 0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
