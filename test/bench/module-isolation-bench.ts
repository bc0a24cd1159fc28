// What hostile or oversized modules cost the agent and everyone else: the agent started as manifests/kcp starts
// it (the bundle, its NODE_OPTIONS and MALLOC_ARENA_MAX), a KCP and two SKRs on real kube-apiservers, a real OCI
// registry. Kyma `victim` (skr2) enables and disables a small module over and over; each edit is timed until the
// KCP Kyma's status shows it. Meanwhile Kyma `hostile` (skr1) enables, one case at a time: a 4 MB raw manifest of
// one flow mapping (past the parse bounds), a module of 2,000 ConfigMaps (4.4 MB, inside them), a module whose
// manifest is 16 MiB of nested sequences. Per case it prints the agent's RSS and event-loop delay (its own
// nodejs_eventloop_lag_max_seconds, scraped every 250 ms) and the victim's edit latency; nothing passes or fails.
//
//   npm run bench:module-isolation -- [--edits 10]
import { execFileSync } from 'node:child_process';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import {
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
} from '@kubernetes/client-node';
import { GROUP, KINDS } from '@skr-watcher/api';
import { publishModule, registryConfigFromFlags } from '@skr-watcher/oci';
import { freePort, startEnvironment, startProcess, startRegistry } from '@skr-watcher/testenv';
import { benchAgentRunArgs } from '../support/bench-fleet.js';
import { seedKyma } from '../support/kcp-seed.js';
import { shippedAgentEnv, shippedAgentScript } from '../support/shipped-agent.js';

function flag(name: string, fallback: string): string {
  const at = process.argv.indexOf(`--${name}`);
  return at >= 0 && process.argv[at + 1] ? (process.argv[at + 1] as string) : fallback;
}

const EDITS = Number(flag('edits', '10'));
const NAMESPACE = 'isolation';
const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

function configMaps(count: number, keysEach: number): string {
  let text = '';
  for (let index = 0; index < count; index++) {
    text += `---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big-${index}\n  namespace: kyma-system\ndata:\n`;
    for (let key = 0; key < keysEach; key++) text += `  key${key}: "${'x'.repeat(30)}"\n`;
  }
  return text;
}

const CASES: { module: string; what: string; rawManifest: () => string }[] = [
  {
    module: 'flow',
    what: '4 MB flow mapping (past the bounds)',
    rawManifest: () =>
      `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: flow, namespace: kyma-system}\ndata: {${Array.from({ length: 420_000 }, (_, i) => `k${i}: v`).join(', ')}}\n`,
  },
  {
    module: 'large',
    what: '2,000 ConfigMaps, 4.4 MB (inside the bounds)',
    rawManifest: () => configMaps(2_000, 50),
  },
  {
    module: 'nested',
    what: '16 MiB of nested sequences',
    rawManifest: () =>
      `apiVersion: v1\nkind: ConfigMap\nmetadata: {name: n, namespace: kyma-system}\ndata: ${'['.repeat(8 * 1024 * 1024)}${']'.repeat(8 * 1024 * 1024)}\n`,
  },
];

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil(q * sorted.length) - 1)] ?? NaN;
}

function metric(text: string, name: string): number | undefined {
  const line = text.split('\n').find((l) => l.startsWith(`${name} `) || l.startsWith(`${name}{`));
  return line === undefined ? undefined : Number(line.split(' ').at(-1));
}

async function main(): Promise<void> {
  console.log(`start: ${execFileSync('uptime', { encoding: 'utf8' }).trim()}`);
  const env = await startEnvironment({ planes: ['kcp', 'skr1', 'skr2'] });
  const registry = await startRegistry();
  const dir = await mkdtemp(join(tmpdir(), 'module-isolation-'));
  let agent: ReturnType<typeof startProcess> | undefined;
  let metricsPort = 0;
  try {
    const kcp = env.plane('kcp').kubeConfig();
    const api = kcp.makeApiClient(CustomObjectsApi);
    await kcp.makeApiClient(CoreV1Api).createNamespace({
      body: { metadata: { name: NAMESPACE } },
    });
    const target = registryConfigFromFlags({ ociRegistryHost: `http://${registry.host}` });
    const modules = [
      {
        module: 'small',
        rawManifest: () =>
          'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: small, namespace: kyma-system}\ndata: {a: "1"}\n',
      },
      ...CASES,
    ];
    for (const { module, rawManifest } of modules) {
      const published = await publishModule(
        target,
        {
          moduleName: module,
          version: '1.0.0',
          ocmComponentName: `kyma-project.io/module/${module}`,
          rawManifest: rawManifest(),
        },
        { namespace: NAMESPACE },
      );
      for (const object of [published.moduleTemplate, published.moduleReleaseMeta])
        await api.createNamespacedCustomObject({
          group: GROUP,
          version: 'v1beta2',
          plural: object.kind === 'ModuleTemplate' ? 'moduletemplates' : 'modulereleasemetas',
          namespace: NAMESPACE,
          body: { ...object, metadata: { ...object.metadata, namespace: NAMESPACE } },
        });
    }
    for (const [kyma, plane] of [
      ['hostile', 'skr1'],
      ['victim', 'skr2'],
    ] as const)
      await seedKyma(kcp, NAMESPACE, kyma, await readFile(env.plane(plane).kubeconfigPath, 'utf8'), {
        spec: { modules: [], sync: { moduleCatalog: false } },
      });

    const port = await freePort();
    metricsPort = port;
    agent = startProcess(
      process.execPath,
      [
        shippedAgentScript(),
        ...benchAgentRunArgs({
          kubeconfig: env.plane('kcp').kubeconfigPath,
          namespace: NAMESPACE,
          metricsAddress: `127.0.0.1:${port}`,
          workers: '4',
          resync: '10m',
        }),
        '--oci-registry-host',
        `http://${registry.host}`,
        '--log-level',
        flag('log-level', 'info'),
      ],
      join(dir, 'agent.log'),
      shippedAgentEnv(),
    );
    console.log(
      `agent: ${shippedAgentScript()} with ${JSON.stringify(shippedAgentEnv())}; log ${dir}/agent.log`,
    );
    const scrape = async () => (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    for (let attempt = 0; ; attempt++) {
      try {
        await scrape();
        break;
      } catch (error) {
        if (attempt > 100) throw error;
        await sleep(200);
      }
    }

    const kymaOf = async (name: string) =>
      (await api.getNamespacedCustomObject({
        group: GROUP,
        version: KINDS.kyma.version,
        plural: KINDS.kyma.plural,
        namespace: NAMESPACE,
        name,
      })) as Json;
    const setModules = async (skr: KubeConfig, kyma: string, names: string[]) => {
      await skr.makeApiClient(CustomObjectsApi).patchNamespacedCustomObject(
        {
          group: GROUP,
          version: KINDS.kyma.version,
          plural: KINDS.kyma.plural,
          namespace: 'kyma-system',
          name: 'default',
          body: { spec: { modules: names.map((name) => ({ name })) } },
        },
        mergePatch,
      );
      // Then the KCP Kyma's edit wakes its pass (no webhook in this bench), which reads the SKR Kyma as edited.
      await api.patchNamespacedCustomObject(
        {
          group: GROUP,
          version: KINDS.kyma.version,
          plural: KINDS.kyma.plural,
          namespace: NAMESPACE,
          name: kyma,
          body: { metadata: { annotations: { 'bench/edit': String(Date.now()) } } },
        },
        mergePatch,
      );
    };
    const until = async (what: string, done: () => Promise<boolean>, timeoutMs = 120_000) => {
      const deadline = Date.now() + timeoutMs;
      while (!(await done().catch(() => false))) {
        if (Date.now() > deadline) throw new Error(`${what}: not reached in ${timeoutMs} ms`);
        await sleep(50);
      }
    };
    const moduleState = async (kyma: string, module: string) =>
      ((await kymaOf(kyma)).status?.modules ?? []).find((m: Json) => m.name === module)?.state as
        string | undefined;
    await until('both SKR Kymas exist', async () => (await kymaOf('victim')).status?.state !== undefined);
    await until('both SKR Kymas exist', async () => (await kymaOf('hostile')).status?.state !== undefined);

    /** The victim's edits, timed edit → KCP Kyma status, while `during` runs. */
    const victimEdits = async (during: Promise<unknown>) => {
      const times: number[] = [];
      let running = true;
      void during.finally(() => (running = false));
      for (let edit = 0; edit < EDITS || running; edit++) {
        const enable = edit % 2 === 0;
        const started = Date.now();
        await setModules(env.plane('skr2').kubeConfig(), 'victim', enable ? ['small'] : []);
        await until('victim edit shown', async () =>
          enable
            ? (await moduleState('victim', 'small')) === 'Ready'
            : (await moduleState('victim', 'small')) === undefined,
        );
        times.push(Date.now() - started);
        if (edit > 200) break;
      }
      return times.sort((a, b) => a - b);
    };
    const sample = () => {
      const rss: number[] = [];
      const lag: number[] = [];
      let on = true;
      const loop = (async () => {
        while (on) {
          const text = await scrape().catch(() => '');
          const r = metric(text, 'process_resident_memory_bytes');
          const l = metric(text, 'nodejs_eventloop_lag_max_seconds');
          if (r !== undefined) rss.push(r);
          if (l !== undefined) lag.push(l);
          await sleep(250);
        }
      })();
      return {
        stop: async () => {
          on = false;
          await loop;
          return { rss: Math.max(...rss) / 2 ** 20, lag: Math.max(...lag) * 1000 };
        },
      };
    };
    const report = (label: string, edits: number[], seen: { rss: number; lag: number }) =>
      console.log(
        `${label}: agent RSS peak ${seen.rss.toFixed(0)} MiB, event-loop delay max ${seen.lag.toFixed(0)} ms; ` +
          `victim edits n=${edits.length} p50 ${quantile(edits, 0.5)} ms, p99 ${quantile(edits, 0.99)} ms, max ${edits.at(-1)} ms; ` +
          `agent ${agent?.isRunning() ? 'running' : 'EXITED'}`,
      );

    const quiet = sample();
    report('baseline (nothing else)', await victimEdits(Promise.resolve()), await quiet.stop());
    for (const { module, what } of CASES) {
      const seen = sample();
      await setModules(env.plane('skr1').kubeConfig(), 'hostile', [module]);
      const settled = until(
        `${module} settled`,
        async () => {
          const state = await moduleState('hostile', module);
          return state === 'Ready' || state === 'Error';
        },
        300_000,
      );
      const edits = await victimEdits(settled);
      await settled;
      const hostile = ((await kymaOf('hostile')).status?.modules ?? []).find((m: Json) => m.name === module);
      report(
        `${what} → ${hostile?.state} (${String(hostile?.message ?? '').slice(0, 120)})`,
        edits,
        await seen.stop(),
      );
      await setModules(env.plane('skr1').kubeConfig(), 'hostile', []);
      await until(
        `${module} removed`,
        async () => (await moduleState('hostile', module)) === undefined,
        300_000,
      );
    }
  } catch (error) {
    console.log(`agent ${agent?.isRunning() ? 'running' : 'EXITED'}`);
    const metrics = await fetch(`http://127.0.0.1:${metricsPort}/metrics`)
      .then((r) => r.text())
      .catch(String);
    console.log(
      metrics
        .split('\n')
        .filter((l) => /^skr_agent_(work|queue|reconcile|kymas)|eventloop_lag_max/.test(l))
        .join('\n'),
    );
    const log = await readFile(join(dir, 'agent.log'), 'utf8').catch(() => '');
    await writeFile('/tmp/module-isolation-agent.log', log);
    console.log(
      `agent log, last lines (all in /tmp/module-isolation-agent.log):\n${log.split('\n').slice(-40).join('\n')}`,
    );
    throw error;
  } finally {
    await agent?.stop(10_000);
    await registry.stop();
    await env.stop();
    await rm(dir, { recursive: true, force: true });
    console.log(`end: ${execFileSync('uptime', { encoding: 'utf8' }).trim()}`);
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
