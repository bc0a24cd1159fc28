// Module install latency on the whole path of the demo (test/support/system): a KCP and one SKR on real
// kube-apiservers, a real OCI registry, skr-agent with --oci-registry-host, the SKR webhook whose callback wakes the
// Kyma. Each round enables a module in the SKR Kyma, waits for its Manifest Ready and the module Ready in the KCP Kyma's
// status, then removes it and waits until the Manifest is gone, so every round is a fresh install (pull from the
// process cache, apply, readiness).
//
//   npm run bench:modules-latency -- [--rounds 30] [--warmup 1] [--timeout 60s] [--module plain|crd|both]
//
// Two modules:
//   plain  a ConfigMap and a ServiceAccount in kyma-system (no CRD, no default CR, no workload);
//          bar: enabled → Ready p50 ≤ 1 s, p99 ≤ 3 s.
//   crd    its own CRD, a ConfigMap and a default CR of that CRD. Its install cannot beat the API server: the first
//          create of a CR of a new CRD waits until the server has started storage for it. So each round also
//          measures that floor on the same SKR API server (a fresh CRD applied as the agent applies it, read until
//          Established, then one CR created, retried while the kind is not served yet); bars: install p50 ≤ 1.15× the
//          floor's p50, p99 ≤ 1.5× the floor's p99, removal p50 ≤ 1 s.
// The first install of an agent process also pays its first registry pull and first parse of module content; the
// `--warmup` rounds (timeline printed, not in the figures) take that, so the figures are those of an agent running.
// Prints each figure beside its bar with PASS/FAIL, N and the load average (the machine may be shared).
import { execFileSync } from 'node:child_process';
import { mkdtemp } from 'node:fs/promises';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import type { KubeConfig } from '@kubernetes/client-node';
import { DEFAULTS, parseDuration, TIMER_MAX_MS } from '@skr-watcher/api';
import { stringify } from 'yaml';
import { measureCrdFloor, type CrdFloorSample } from '../support/system/crd-floor.js';
import {
  disableModule,
  formatModuleTimeline,
  timeModuleInstall,
  type ModuleRef,
} from '../support/system/module-timeline.js';
import { createCatalog, publishModules } from '../support/system/modules.js';
import { startLocalSystem } from '../support/system/index.js';

function flag(name: string, fallback: string): string {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 && process.argv[at + 1] ? (process.argv[at + 1] as string) : fallback;
}

const ROUNDS = Number(flag('rounds', '30'));
const WARMUP = Number(flag('warmup', '1'));
const TIMEOUT_MS = parseDuration(flag('timeout', '60s'), TIMER_MAX_MS);
const WHICH = flag('module', 'both');
if (!['plain', 'crd', 'both'].includes(WHICH)) throw new Error(`--module ${WHICH}: plain, crd or both`);

const PLAIN: ModuleRef = { module: 'latency', ocmComponentName: 'kyma-project.io/module/latency' };
const PROBE = {
  group: 'bench.kyma-project.io',
  version: 'v1alpha1',
  kind: 'LatencyProbe',
  plural: 'latencyprobes',
};
const PROBE_DEFAULT_CR = {
  apiVersion: `${PROBE.group}/${PROBE.version}`,
  kind: PROBE.kind,
  metadata: { name: 'default', namespace: DEFAULTS.skrNamespace },
  spec: { purpose: 'bench:modules-latency' },
};
const WITH_CRD: ModuleRef = {
  module: 'latency-crd',
  ocmComponentName: 'kyma-project.io/module/latency-crd',
  defaultCr: `${PROBE.kind} ${DEFAULTS.skrNamespace}/default`,
};

const uptime = () => execFileSync('uptime', { encoding: 'utf8' }).trim();
const load = () => loadavg()[0]!.toFixed(1);

function quantile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? NaN;
}

function summary(label: string, values: number[]): string {
  return (
    `${label}: n=${values.length} p50 ${quantile(values, 0.5)} ms, p90 ${quantile(values, 0.9)} ms, ` +
    `p99 ${quantile(values, 0.99)} ms, max ${Math.max(...values)} ms`
  );
}

const verdict = (pass: boolean) => (pass ? 'PASS' : 'FAIL');

/** A figure beside an absolute bar (ms). */
function againstBar(label: string, values: number[], q: number, barMs: number): string {
  const value = quantile(values, q);
  return `${label} p${q * 100} ${value} ms (bar ≤ ${barMs} ms): ${verdict(value <= barMs)}`;
}

/** A figure beside the floor's same quantile times `factor`. */
function againstFloor(label: string, values: number[], floor: number[], q: number, factor: number): string {
  const value = quantile(values, q);
  const base = quantile(floor, q);
  const ratio = value / base;
  return (
    `${label} p${q * 100} ${value} ms = ${ratio.toFixed(2)}× the floor's p${q * 100} ${base} ms ` +
    `(bar ≤ ${factor}×): ${verdict(ratio <= factor)}`
  );
}

function rawManifestOf(objects: unknown[]): string {
  return objects.map((object) => stringify(object)).join('---\n');
}

function probeCrd() {
  return {
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${PROBE.plural}.${PROBE.group}` },
    spec: {
      group: PROBE.group,
      names: {
        kind: PROBE.kind,
        plural: PROBE.plural,
        singular: 'latencyprobe',
        listKind: 'LatencyProbeList',
      },
      scope: 'Namespaced',
      versions: [
        {
          name: PROBE.version,
          served: true,
          storage: true,
          schema: { openAPIV3Schema: { type: 'object', 'x-kubernetes-preserve-unknown-fields': true } },
        },
      ],
    },
  };
}

/** What one module's rounds gathered (ms from the module enabled). */
interface ModuleFigures {
  toManifestReady: number[];
  toKymaReady: number[];
  toManifest: number[];
  toDefaultCr: number[];
  removals: number[];
  failed: number;
}

function emptyFigures(): ModuleFigures {
  return { toManifestReady: [], toKymaReady: [], toManifest: [], toDefaultCr: [], removals: [], failed: 0 };
}

interface RoundContext {
  kcp: KubeConfig;
  skrConfig: KubeConfig;
  namespace: string;
  skr: string;
}

/** One install and removal of `module`; false when the module could not be removed (the run stops). */
async function round(
  context: RoundContext,
  module: ModuleRef,
  figures: ModuleFigures,
  index: number,
): Promise<boolean> {
  const timeline = await timeModuleInstall({ ...context, module, timeoutMs: TIMEOUT_MS });
  if (timeline.readyAtMs === undefined || timeline.kymaReadyAtMs === undefined) {
    figures.failed++;
    console.log(
      `round ${index} (${module.module}): not Ready within ${TIMEOUT_MS} ms (state ${timeline.lastState ?? 'none'})`,
    );
    for (const line of formatModuleTimeline(timeline)) console.log(line);
  } else {
    figures.toManifestReady.push(timeline.readyAtMs - timeline.sentAtMs);
    figures.toKymaReady.push(timeline.kymaReadyAtMs - timeline.sentAtMs);
    if (timeline.manifestAtMs !== undefined)
      figures.toManifest.push(timeline.manifestAtMs - timeline.sentAtMs);
    if (timeline.defaultCrAtMs !== undefined)
      figures.toDefaultCr.push(timeline.defaultCrAtMs - timeline.sentAtMs);
  }
  if (index === 1) for (const line of formatModuleTimeline(timeline)) console.log(line);
  const removed = await disableModule({ ...context, module, timeoutMs: TIMEOUT_MS });
  if (removed === undefined) {
    console.log(`round ${index} (${module.module}): not removed within ${TIMEOUT_MS} ms; stopping`);
    return false;
  }
  figures.removals.push(removed);
  return true;
}

function printPlain(figures: ModuleFigures): void {
  console.log(`module without a CRD (${PLAIN.module}: ConfigMap, ServiceAccount):`);
  for (const [label, values] of [
    ['enabled → Manifest Ready', figures.toManifestReady],
    ['enabled → module Ready in the KCP Kyma status', figures.toKymaReady],
  ] as const) {
    console.log(`  ${summary(label, values)}`);
    console.log(`    ${againstBar(label, values, 0.5, 1_000)}`);
    console.log(`    ${againstBar(label, values, 0.99, 3_000)}`);
  }
  console.log(`  ${summary('enabled → Manifest written in KCP', figures.toManifest)}`);
  console.log(`  ${summary('removed → Manifest gone and the Kyma status without it', figures.removals)}`);
  console.log(`  rounds not Ready in time: ${figures.failed}`);
}

function printWithCrd(figures: ModuleFigures, floor: CrdFloorSample[]): void {
  const toCr = floor.map((sample) => sample.crAcceptedMs);
  console.log(`API server floor (${floor.length} fresh CRDs on the same SKR API server):`);
  console.log(
    `  ${summary(
      'CRD applied → Established',
      floor.map((sample) => sample.establishedMs),
    )}`,
  );
  console.log(`  ${summary('CRD applied → first CR accepted (the floor)', toCr)}`);
  console.log(
    `module with a CRD and a default CR (${WITH_CRD.module}: CRD, ConfigMap, ${WITH_CRD.defaultCr}):`,
  );
  for (const [label, values] of [
    ['enabled → module Ready in the KCP Kyma status', figures.toKymaReady],
    ['enabled → Manifest Ready', figures.toManifestReady],
  ] as const) {
    console.log(`  ${summary(label, values)}`);
    console.log(`    ${againstFloor(label, values, toCr, 0.5, 1.15)}`);
    console.log(`    ${againstFloor(label, values, toCr, 0.99, 1.5)}`);
  }
  console.log(`  ${summary('enabled → Manifest written in KCP', figures.toManifest)}`);
  console.log(`  ${summary('enabled → default CR created (ModuleCR condition)', figures.toDefaultCr)}`);
  const removal = 'removed → Manifest gone and the Kyma status without it';
  console.log(`  ${summary(removal, figures.removals)}`);
  console.log(`    ${againstBar('removal', figures.removals, 0.5, 1_000)}`);
  console.log(`  rounds not Ready in time: ${figures.failed}`);
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
    const published = await publishModules(system.modules.registryHost, [
      {
        moduleName: PLAIN.module,
        version: '1.0.0',
        channels: ['regular'],
        ocmComponentName: PLAIN.ocmComponentName,
        rawManifest: rawManifestOf([
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
        ]),
      },
      {
        moduleName: WITH_CRD.module,
        version: '1.0.0',
        channels: ['regular'],
        ocmComponentName: WITH_CRD.ocmComponentName,
        rawManifest: rawManifestOf([
          probeCrd(),
          {
            apiVersion: 'v1',
            kind: 'ConfigMap',
            metadata: { name: 'latency-crd-module', namespace: DEFAULTS.skrNamespace },
            data: { purpose: 'bench:modules-latency' },
          },
        ]),
        defaultCr: stringify(PROBE_DEFAULT_CR),
      },
    ]);
    for (const module of published) await createCatalog(system.kcp, system.namespace, module);
    console.log(`ready: ${ROUNDS} rounds of ${WHICH}, load ${load()}`);

    const skrConfig = system.skr('skr1').kubeConfig();
    const context = { kcp: system.kcp, skrConfig, namespace: system.namespace, skr: 'skr1' };
    const plain = emptyFigures();
    const withCrd = emptyFigures();
    const floor: CrdFloorSample[] = [];
    for (let index = 1; index <= WARMUP; index++) {
      const ignored = emptyFigures();
      const removed =
        (WHICH === 'crd' || (await round(context, PLAIN, ignored, 1))) &&
        (WHICH === 'plain' || (await round(context, WITH_CRD, ignored, 1)));
      if (!removed) throw new Error('a warm-up round left its module installed');
      console.log(`warm-up round ${index} done (not in the figures), load ${load()}`);
    }
    for (let index = 1; index <= ROUNDS; index++) {
      if (WHICH !== 'crd' && !(await round(context, PLAIN, plain, index))) break;
      if (WHICH !== 'plain') {
        // The floor sample next to the install it bounds: both under the same load.
        floor.push(await measureCrdFloor(skrConfig, `r${index}`));
        if (!(await round(context, WITH_CRD, withCrd, index))) break;
      }
      if (index % 10 === 0) console.log(`  ${index} rounds, load ${load()}`);
    }

    console.log();
    console.log(`figures (load ${load()}; ${uptime()}):`);
    if (WHICH !== 'crd') printPlain(plain);
    if (WHICH !== 'plain') printWithCrd(withCrd, floor);
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
