// The shipped monitoring against the running system (decision 023): a real Prometheus (built from the Go module
// proxy by testenv) scrapes the real agent (sharded, one replica) and the real SKR webhooks on real planes, and
// evaluates the shipped PrometheusRules, KCP's and the SKR webhook's. Only the `for` durations are shortened to 3 s
// (their semantics are covered by promtool's unit tests): a stopped webhook fires SkrWebhookSilent and
// SkrWebhookNotScraped, a broken kubeconfig Secret fires SkrUnreachable (and SkrKymasInError), and both resolve when
// fixed; a stopped module registry fires SkrModuleRegistryFailing and SkrModulesInError, never SkrUnreachable; a
// stopped agent fires SkrAgentNotScraped; agents with --leader-elect of which none leads fire
// SkrAgentReplicaWithoutLease. Every metric the KCP rules and dashboards name is one the agent exports (a KCP
// Prometheus scrapes nothing else), every metric the SKR ones name is one the webhooks export and has a series from
// the start, and every metric and flag a runbook names exists (names parsed by Prometheus itself).
// The agent installs modules from a registry of this suite's own (so the suite can stop it).
import { mkdtemp, readFile, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { stringify } from 'yaml';
import {
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  V1MicroTime,
  setHeaderOptions,
} from '@kubernetes/client-node';
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
import { ENTRY_POINTS, startChild, type Child } from '../support/system/children.js';
import {
  DASHBOARD_DIR,
  ROOT,
  SKR_DASHBOARD_DIR,
  SKR_RULE_FILE,
  shippedRules,
  type RuleGroups,
} from '../support/monitoring.js';

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

/** Rules with every `for` shortened to 3 s. */
function quickRules(rules: RuleGroups): RuleGroups {
  for (const group of rules.groups) for (const rule of group.rules) if (rule.for) rule.for = '3s';
  return rules;
}

/** Every query of a side of the monitoring: its rules' expressions and its dashboards' panel targets. */
async function queriesOf(rules: RuleGroups, dashboardDir: string) {
  const exprs: { where: string; expr: string }[] = [];
  for (const group of rules.groups)
    for (const rule of group.rules)
      exprs.push({ where: `rule ${rule.alert ?? rule.record}`, expr: rule.expr });
  for (const file of await readdir(dashboardDir)) {
    const dashboard = JSON.parse(await readFile(join(dashboardDir, file), 'utf8')) as unknown;
    for (const expr of dashboardExprs(dashboard)) exprs.push({ where: `dashboard ${file}`, expr });
  }
  return exprs;
}

describe('shipped monitoring: a real Prometheus scraping the agent and webhooks on real planes', function () {
  this.timeout(900_000);
  let parent: string;
  let system: LocalSystem;
  let prometheus: RunningPrometheus;
  let registry: ModuleRegistry;
  let standby: Child | undefined;
  let standbyPrometheus: RunningPrometheus | undefined;
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
    const rules = quickRules(await shippedRules());
    const skrRules = quickRules(await shippedRules(SKR_RULE_FILE));
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
      ruleFiles: {
        'skr-watcher.rules.yaml': stringify(rules),
        'skr-webhook.rules.yaml': stringify(skrRules),
      },
    });
  });
  after(async () => {
    await standbyPrometheus?.stop();
    await standby?.stop();
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
    // With `for` at 3 s the not-scraped alerts fire in the moment before the first scrapes; one evaluation later
    // they are gone.
    await eventually(
      'no alert firing',
      async () => ((await alerts()).some((alert) => alert.state === 'firing') ? undefined : true),
      30_000,
      1_000,
    ).catch(async (error: unknown) => {
      throw new Error(`${(error as Error).message}: ${JSON.stringify(await alerts())}`);
    });
  });

  /** Names each process declares on its /metrics: the agent's, and the webhooks' together. */
  const exported = async () => {
    const names = async (port: number) =>
      exportedNames(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text());
    const webhook = new Set<string>();
    for (const skr of system.skrs) for (const name of await names(skr.webhookMetricsPort)) webhook.add(name);
    return { agent: await names(system.agentMetricsPort), webhook };
  };

  it('every metric the KCP rules and dashboards name is exported by the agent, the SKR ones by the webhooks', async () => {
    const { agent, webhook } = await exported();
    // `up` is Prometheus's own: the not-scraped alerts read it for their job.
    const sides = [
      { what: 'KCP', exprs: await queriesOf(await shippedRules(), DASHBOARD_DIR), names: agent },
      {
        what: 'SKR',
        exprs: await queriesOf(await shippedRules(SKR_RULE_FILE), SKR_DASHBOARD_DIR),
        names: webhook,
      },
    ];
    const missing: string[] = [];
    const seriesless: string[] = [];
    let checked = 0;
    for (const side of sides) {
      expect(side.exprs.length, side.what).to.be.at.least(side.what === 'KCP' ? 40 : 10);
      for (const { where, expr } of side.exprs) {
        const names = await metricNamesIn(prometheus, expr);
        expect(names.length, `${where}: ${expr} names a metric`).to.be.greaterThan(0);
        for (const name of names) {
          checked++;
          if (name === 'up') continue;
          if (!side.names.has(name)) missing.push(`${side.what} ${where}: ${name}`);
          // The webhook's panels and alerts have data from the start: no series waits for its first event.
          else if (side.what === 'SKR' && (await prometheus.query(`count(${name})`)).length === 0)
            seriesless.push(`${where}: ${name}`);
        }
      }
    }
    console.log(
      `      ${sides.map((side) => `${side.what} ${side.exprs.length}`).join(', ')} queries, ${checked} metric ` +
        `references; exported: agent ${agent.size}, webhooks ${webhook.size} names`,
    );
    expect(missing, 'metrics named but not exported by what that side scrapes').to.deep.equal([]);
    expect(seriesless, 'SKR metrics named that have no series yet').to.deep.equal([]);
  });

  // The documents they link are checked with every other link of docs/ (test/integration/docs.test.ts).
  it('every metric and flag a runbook names exists', async () => {
    const { agent, webhook } = await exported();
    // Flags of every binary, as the reference generated from their --help lists them.
    const configuration = await readFile(join(ROOT, 'docs/configuration.md'), 'utf8');
    const problems: string[] = [];
    const runbooks = join(ROOT, 'docs/runbooks');
    let references = 0;
    for (const file of await readdir(runbooks)) {
      const text = await readFile(join(runbooks, file), 'utf8');
      for (const [, span] of text.matchAll(/`([^`]+)`/g)) {
        const code = (span as string).replace(/\s+/g, ' ');
        // A shell command line: its flags are kubectl's, jq's or curl's; only skr-* commands' flags are ours.
        const command = /^(\S+)/.exec(code)?.[1] ?? '';
        for (const [metric] of code.matchAll(/\b(?:skr|workqueue|leader_election)_[a-z0-9_]+\b/g)) {
          references++;
          if (!agent.has(metric) && !webhook.has(metric)) problems.push(`${file}: metric ${metric}`);
        }
        if (command.startsWith('-') || command.startsWith('skr-'))
          for (const [flag] of code.matchAll(/(?:^|\s)(--[a-z][a-z0-9-]*)/g)) {
            references++;
            const name = (flag as string).trim();
            if (!configuration.includes(`\`${name}`)) problems.push(`${file}: flag ${name}`);
          }
      }
    }
    console.log(`      ${references} references checked`);
    expect(references).to.be.at.least(40);
    expect(problems).to.deep.equal([]);
  });

  it('a stopped webhook fires SkrWebhookSilent; it resolves once the webhook is back', async () => {
    const skr = system.skr('skr1');
    await skr.webhook.stop();
    try {
      const alert = await waitFiring('SkrWebhookSilent', poker('skr1'));
      expect(alert.value).to.equal('1e+00');
      // The SKR's Prometheus sees it too: its scrapes of that webhook fail.
      const notScraped = await waitFiring('SkrWebhookNotScraped');
      expect(notScraped.labels['instance']).to.equal(`127.0.0.1:${skr.webhookMetricsPort}`);
    } finally {
      await skr.restartWebhook();
    }
    await waitResolved('SkrWebhookSilent', poker('skr1'));
    await waitResolved('SkrWebhookNotScraped');
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

  it('agents with --leader-elect of which none holds the Lease fire SkrAgentReplicaWithoutLease', async () => {
    // Another replica holds the Lease and keeps it fresh for an hour: this one waits as a standby.
    const lease = 'monitoring-test-leader';
    const now = new V1MicroTime();
    await system.kcp.makeApiClient(CoordinationV1Api).createNamespacedLease({
      namespace: system.namespace,
      body: {
        metadata: { name: lease },
        spec: {
          holderIdentity: 'a-replica-elsewhere',
          leaseDurationSeconds: 3600,
          acquireTime: now,
          renewTime: now,
        },
      },
    });
    const port = await freePort();
    standby = startChild({
      name: 'skr-agent (standby)',
      entry: ENTRY_POINTS.agent,
      logFile: join(parent, 'standby-agent.log'),
      args: [
        'run',
        '--kubeconfig',
        system.kcpKubeconfigPath,
        '--namespace',
        system.namespace,
        '--leader-elect',
        '--lease-name',
        lease,
        '--leader-identity',
        'monitoring-standby',
        '--metrics-address',
        `127.0.0.1:${port}`,
        // It never leads, so it never serves callbacks.
        '--no-listener',
        '--events-address',
        `127.0.0.1:${await freePort()}`,
      ],
    });
    // A KCP Prometheus whose agents are this standby only (the suite's own agent is sharded).
    standbyPrometheus = await startPrometheus({
      dir: join(parent, 'prometheus-standby'),
      config: {
        global: { scrape_interval: '2s', scrape_timeout: '2s', evaluation_interval: '1s' },
        scrape_configs: [{ job_name: 'skr-agent', static_configs: [{ targets: [`127.0.0.1:${port}`] }] }],
      },
      ruleFiles: { 'skr-watcher.rules.yaml': stringify(quickRules(await shippedRules())) },
    });
    const fired = await eventually(
      'SkrAgentReplicaWithoutLease firing for the standby fleet',
      async () => {
        if (!standby?.isRunning()) throw new Error(`the standby agent exited; see ${standby?.logFile}`);
        const { alerts } = await standbyPrometheus!.api<{ alerts: Alert[] }>('alerts');
        return alerts.find(
          (a) => a.labels['alertname'] === 'SkrAgentReplicaWithoutLease' && a.state === 'firing',
        );
      },
      180_000,
      1_000,
    );
    console.log(`      SkrAgentReplicaWithoutLease fired for the standby (${seconds()} s into the test)`);
    expect(fired.labels['instance']).to.equal(undefined);
    const [up] = await standbyPrometheus.query('up');
    expect(up?.value[1], 'the standby is scraped').to.equal('1');
  });

  // Last: the agent does not come back.
  it('a stopped agent fires SkrAgentNotScraped', async () => {
    await system.agent.stop();
    const alert = await waitFiring('SkrAgentNotScraped');
    expect(alert.labels['instance']).to.equal(`127.0.0.1:${system.agentMetricsPort}`);
  });
});
