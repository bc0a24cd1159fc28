// The shipped monitoring against the running system (decision 023): a real Prometheus (built from the Go module
// proxy by testenv) scrapes the real agent (sharded, one replica) and the real SKR webhooks on real planes, and
// evaluates the shipped PrometheusRule. Only the `for` durations are shortened to 3 s (their semantics are covered
// by promtool's unit tests): a stopped webhook fires SkrWebhookSilent, a broken kubeconfig Secret fires
// SkrUnreachable (and SkrKymasInError), and both resolve when fixed; a stopped module registry fires
// SkrModuleRegistryFailing and SkrModulesInError, never SkrUnreachable. Every metric named in the rules and
// dashboards is one the running processes export, read from their /metrics (names parsed by Prometheus itself).
// The agent installs modules from a registry of this suite's own (so the suite can stop it).
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { stringify } from 'yaml';
import { CoreV1Api, CustomObjectsApi, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { DEFAULTS, GROUP, KINDS, LABELS } from '@skr-watcher/api';
import { mergePatchCustomObject } from '@skr-watcher/kube';
import { freePort, startPrometheus, type RunningPrometheus } from '@skr-watcher/testenv';
import { SKR_KYMA, startLocalSystem, type LocalSystem } from '../support/system/index.js';
import {
  GREETER,
  createCatalog,
  greeterModule,
  publishModules,
  sampleModules,
  startModuleRegistry,
  type ModuleRegistry,
} from '../support/system/modules.js';
import { eventually } from '../support/eventually.js';
import { DASHBOARD_DIR, shippedRules } from '../support/monitoring.js';

interface Alert {
  labels: Record<string, string>;
  state: 'pending' | 'firing';
  value: string;
}

/** Names of the metrics a /metrics text declares (# TYPE), with a histogram's and summary's series names. */
function exportedNames(text: string): Set<string> {
  const names = new Set<string>();
  for (const [, name, type] of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    names.add(name as string);
    if (type === 'histogram')
      for (const suffix of ['_bucket', '_sum', '_count']) names.add(`${name}${suffix}`);
    if (type === 'summary') for (const suffix of ['_sum', '_count']) names.add(`${name}${suffix}`);
  }
  return names;
}

/** Metric names in a PromQL expression, from Prometheus's own parser (/api/v1/parse_query). */
async function metricNamesIn(prometheus: RunningPrometheus, expr: string): Promise<string[]> {
  const ast = await prometheus.api<unknown>(`parse_query?query=${encodeURIComponent(expr)}`);
  const names: string[] = [];
  const walk = (node: unknown) => {
    if (Array.isArray(node)) node.forEach(walk);
    else if (node && typeof node === 'object') {
      const record = node as Record<string, unknown>;
      // A range (`x[5m]`) is a matrixSelector carrying the name itself.
      const selector = record['type'] === 'vectorSelector' || record['type'] === 'matrixSelector';
      if (selector && typeof record['name'] === 'string') names.push(record['name']);
      Object.values(record).forEach(walk);
    }
  };
  walk(ast);
  return names;
}

/** Every `expr` of every panel target in a Grafana dashboard. */
function dashboardExprs(dashboard: unknown): string[] {
  const exprs: string[] = [];
  const walk = (node: unknown) => {
    if (Array.isArray(node)) node.forEach(walk);
    else if (node && typeof node === 'object') {
      const record = node as Record<string, unknown>;
      if (typeof record['expr'] === 'string') exprs.push(record['expr']);
      Object.values(record).forEach(walk);
    }
  };
  walk(dashboard);
  return exprs;
}

describe('shipped monitoring: a real Prometheus scraping the agent and webhooks on real planes', function () {
  this.timeout(900_000);
  let parent: string;
  let system: LocalSystem;
  let prometheus: RunningPrometheus;
  let registry: ModuleRegistry;
  const started = Date.now();

  before(async () => {
    parent = await mkdtemp(join(tmpdir(), 'skr-monitoring-'));
    // As startLocalSystem's `modules` option sets it up, with the registry in this suite's hands.
    registry = await startModuleRegistry(parent);
    const [greeter] = await publishModules(registry.registryHost, [greeterModule(), ...sampleModules()]);
    system = await startLocalSystem({
      dir: join(parent, 'system'),
      agentArgs: [
        // Quiet SKRs are probed after 2 s; a probe must come back within 4 s (as the e2e test).
        '--watcher-probe-after',
        '2s',
        '--watcher-probe-timeout',
        '4s',
        // One replica of a ring: the sharding metrics the dashboards and alerts read are exported.
        '--shard',
        '--shard-identity',
        'monitoring-test',
        '--peer-address',
        `127.0.0.1:${await freePort()}`,
        ...registry.agentArgs,
      ],
    });
    await createCatalog(system.kcp, system.namespace, greeter!);
    const rules = await shippedRules();
    for (const group of rules.groups) for (const rule of group.rules) if (rule.for) rule.for = '3s';
    prometheus = await startPrometheus({
      dir: join(parent, 'prometheus'),
      config: {
        global: { scrape_interval: '2s', scrape_timeout: '2s', evaluation_interval: '1s' },
        scrape_configs: [
          {
            job_name: 'skr-agent',
            static_configs: [{ targets: [`127.0.0.1:${system.agentMetricsPort}`] }],
          },
          {
            job_name: 'skr-webhook',
            static_configs: [{ targets: system.skrs.map((skr) => `127.0.0.1:${skr.webhookMetricsPort}`) }],
          },
        ],
      },
      ruleFiles: { 'skr-watcher.rules.yaml': stringify(rules) },
    });
  });
  after(async () => {
    await prometheus?.stop();
    await system?.stop();
    await registry?.stop();
    if (parent) await rm(parent, { recursive: true, force: true });
  });

  const seconds = () => ((Date.now() - started) / 1000).toFixed(0);
  const alerts = async () => (await prometheus.api<{ alerts: Alert[] }>('alerts')).alerts;
  const firing = async (name: string) =>
    (await alerts()).find((alert) => alert.labels['alertname'] === name && alert.state === 'firing');
  const waitFiring = async (name: string, poke?: () => Promise<void>) => {
    const alert = await eventually(
      `${name} firing`,
      async () => {
        await poke?.();
        return firing(name);
      },
      180_000,
      1_000,
    );
    console.log(`      ${name} fired with value ${alert.value} (${seconds()} s into the test)`);
    return alert;
  };
  const waitResolved = async (name: string, poke?: () => Promise<void>) => {
    await eventually(
      `${name} resolved`,
      async () => {
        await poke?.();
        return (await alerts()).some((alert) => alert.labels['alertname'] === name) ? undefined : true;
      },
      180_000,
      1_000,
    );
    console.log(`      ${name} resolved (${seconds()} s into the test)`);
  };
  const kymaRef = (name: string) => ({
    group: GROUP,
    version: KINDS.kyma.version,
    namespace: system.namespace,
    plural: KINDS.kyma.plural,
    name,
  });
  /** A label change makes the agent look at once (Ready requeues are an hour long here); at most every 3 s. */
  const poker = (name: string) => {
    let poked = 0;
    return async () => {
      if (Date.now() - poked < 3_000) return;
      poked = Date.now();
      await mergePatchCustomObject(system.kcp.makeApiClient(CustomObjectsApi), kymaRef(name), {
        metadata: { labels: { 'monitoring-test/poke': String(poked) } },
      });
    };
  };

  it('scrapes the agent and both webhooks, and sees the fleet Ready with no alert firing', async () => {
    await eventually(
      'every target up',
      async () => {
        const up = await prometheus.query('up');
        return up.length === 3 && up.every((sample) => sample.value[1] === '1') ? true : undefined;
      },
      120_000,
      1_000,
    );
    const ready = await eventually(
      'both Kymas Ready in skr_agent_kymas',
      async () => {
        const [sample] = await prometheus.query('sum(skr_agent_kymas{state="Ready"})');
        return sample?.value[1] === '2' ? sample : undefined;
      },
      120_000,
      1_000,
    );
    expect(ready.value[1]).to.equal('2');
    const [info] = await prometheus.query('skr_agent_build_info');
    expect(info?.metric['version']).to.match(/^\d+\.\d+\.\d+/);
    expect((await alerts()).filter((alert) => alert.state === 'firing')).to.deep.equal([]);
  });

  it('every metric the rules and dashboards name is exported by the running agent or webhooks', async () => {
    const scraped = new Set<string>();
    const targets = [system.agentMetricsPort, ...system.skrs.map((skr) => skr.webhookMetricsPort)];
    for (const port of targets) {
      const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      for (const name of exportedNames(text)) scraped.add(name);
    }
    // Prometheus's own series names (up, ALERTS) are not the system's: the files must not need them.
    const exprs: { where: string; expr: string }[] = [];
    for (const group of (await shippedRules()).groups)
      for (const rule of group.rules)
        exprs.push({ where: `rule ${rule.alert ?? rule.record}`, expr: rule.expr });
    for (const file of await readdir(DASHBOARD_DIR)) {
      const dashboard = JSON.parse(await readFile(join(DASHBOARD_DIR, file), 'utf8')) as unknown;
      for (const expr of dashboardExprs(dashboard)) exprs.push({ where: `dashboard ${file}`, expr });
    }
    expect(exprs.length).to.be.at.least(40);
    const missing: string[] = [];
    let checked = 0;
    for (const { where, expr } of exprs) {
      const names = await metricNamesIn(prometheus, expr);
      expect(names.length, `${where}: ${expr} names a metric`).to.be.greaterThan(0);
      for (const name of names) {
        checked++;
        if (!scraped.has(name)) missing.push(`${where}: ${name}`);
      }
    }
    console.log(
      `      ${exprs.length} queries, ${checked} metric references, ${scraped.size} names exported`,
    );
    expect(missing, 'metrics named but not exported').to.deep.equal([]);
  });

  it('a stopped webhook fires SkrWebhookSilent; it resolves once the webhook is back', async () => {
    const skr = system.skr('skr1');
    await skr.webhook.stop();
    try {
      const alert = await waitFiring('SkrWebhookSilent', poker('skr1'));
      expect(alert.value).to.equal('1e+00');
    } finally {
      await skr.restartWebhook();
    }
    await waitResolved('SkrWebhookSilent', poker('skr1'));
  });

  it('a broken kubeconfig Secret fires SkrUnreachable and SkrKymasInError; both resolve once it is fixed', async () => {
    const core = system.kcp.makeApiClient(CoreV1Api);
    const secrets = await core.listNamespacedSecret({
      namespace: system.namespace,
      labelSelector: `${LABELS.kymaName}=skr2`,
    });
    const secret = secrets.items.find((s) => s.data?.[DEFAULTS.kubeconfigSecretKey]);
    if (!secret?.metadata?.name) throw new Error('no kubeconfig Secret for skr2');
    const name = secret.metadata.name;
    const original = secret.data?.[DEFAULTS.kubeconfigSecretKey] as string;
    const broken = Buffer.from(original, 'base64')
      .toString('utf8')
      .replace(/server: \S+/g, 'server: https://127.0.0.1:9');
    const patch = (config: string) =>
      core.patchNamespacedSecret(
        { name, namespace: system.namespace, body: { data: { [DEFAULTS.kubeconfigSecretKey]: config } } },
        setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
      );
    await patch(Buffer.from(broken).toString('base64'));
    try {
      const unreachable = await waitFiring('SkrUnreachable', poker('skr2'));
      expect(unreachable.value).to.equal('1e+00');
      const inError = await waitFiring('SkrKymasInError');
      expect(inError.value).to.equal('1e+00');
      const [code] = await prometheus.query(
        'sum(skr_agent_kube_responses_total{cluster="skr",code="error"})',
      );
      expect(Number(code?.value[1])).to.be.greaterThan(0);
    } finally {
      await patch(original);
    }
    await waitResolved('SkrUnreachable', poker('skr2'));
    await waitResolved('SkrKymasInError');
  });

  it('a stopped module registry fires SkrModuleRegistryFailing and SkrModulesInError, never SkrUnreachable', async () => {
    await registry.stop();
    // The user enables a module in skr1: its descriptor has to come from the registry.
    const skrKymas = system.skr('skr1').kubeConfig().makeApiClient(CustomObjectsApi);
    const current = (await skrKymas.getNamespacedCustomObject(SKR_KYMA)) as {
      spec?: { modules?: unknown[] };
    };
    await mergePatchCustomObject(skrKymas, SKR_KYMA, {
      spec: { modules: [...(current.spec?.modules ?? []), { name: GREETER.module }] },
    });
    const failing = await waitFiring('SkrModuleRegistryFailing', poker('skr1'));
    expect(failing.value).to.equal('1e+00');
    await waitFiring('SkrModulesInError', poker('skr1'));

    // The module says the registry, the SKR stays connected, and nothing points on-call at the SKR.
    const kyma = (await system.kcp
      .makeApiClient(CustomObjectsApi)
      .getNamespacedCustomObject(kymaRef('skr1'))) as {
      status?: {
        modules?: { name: string; state?: string; message?: string }[];
        conditions?: { type: string; status: string }[];
      };
    };
    const greeter = kyma.status?.modules?.find((module) => module.name === GREETER.module);
    expect(greeter?.state).to.equal('Error');
    expect(greeter?.message).to.include(`registry ${registry.registry.host} is unreachable`);
    expect(kyma.status?.conditions?.find((c) => c.type === 'SKRConnected')?.status).to.equal('True');
    const [unreachable] = await prometheus.query('sum(skr_agent_kymas_skr_unreachable)');
    expect(unreachable?.value[1]).to.equal('0');
    expect((await alerts()).filter((alert) => alert.labels['alertname'] === 'SkrUnreachable')).to.deep.equal(
      [],
    );
  });
});
