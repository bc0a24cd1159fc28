// The production path on real nodes: the agent and the webhook run only as Pods, from the image the
// repository's Dockerfile builds, pulled by kubelets from the run's registry (decision 014).
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import {
  AdmissionregistrationV1Api,
  ApiextensionsV1Api,
  AppsV1Api,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubernetesObjectApi,
  NetworkingV1Api,
  RbacAuthorizationV1Api,
  Watch,
  loadAllYaml,
  type KubeConfig,
  type KubernetesObject,
  type V1Deployment,
  type V1Pod,
} from '@kubernetes/client-node';
import { DEFAULTS, GROUP, KINDS } from '@skr-watcher/api';
import { applyObject, mergePatchCustomObject } from '@skr-watcher/kube';
import { nodeSupportProblem } from '@skr-watcher/testenv';
import { SAMPLE_MODULE } from '../support/system/index.js';
import {
  AGENT_DEPLOYMENT,
  WEBHOOK_DEPLOYMENT,
  deploymentRolledOut,
  startPodSystem,
  type PodSystem,
} from '../support/system/pods.js';
import { disableModule, timeModuleInstall } from '../support/system/module-timeline.js';
import {
  GREETER,
  createCatalog,
  greeterModule,
  publishModules,
  sampleModules,
} from '../support/system/modules.js';
import { eventually } from '../support/eventually.js';

const CERTS_MAIN = fileURLToPath(new URL('../../certs/src/main.ts', import.meta.url));
const SAMPLE_MANAGER_DEPLOY = fileURLToPath(
  new URL('../../examples/sample-manager/deploy/sample-manager.yaml', import.meta.url),
);
/** Generous: two busy cores, image pulls, pod starts and the webhook's backoff all add up. */
const CONVERGE_MS = 180_000;
const { module: _module, ...MODULE_CR } = SAMPLE_MODULE;

const running = (pod: V1Pod) =>
  !pod.metadata?.deletionTimestamp &&
  !!pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');

/** Runs a command without blocking this process (the edits go on meanwhile). */
function run(
  command: string,
  args: string[],
): Promise<{ status: number | null; stdout: string; stderr: string }> {
  const child = spawn(command, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  child.stderr.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}

/**
 * GET of the agent's /metrics as a scraper does it: HTTPS (the agent's certificate is self-signed, the token is what
 * is checked), with a bearer token or without one.
 */
function scrapeAgent(pod: V1Pod, token?: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: pod.status?.podIP,
        port: 8080,
        path: '/metrics',
        rejectUnauthorized: false,
        headers: token ? { authorization: `Bearer ${token}` } : {},
        timeout: 30_000,
      },
      (response) => {
        let text = '';
        response.on('data', (chunk: Buffer) => (text += chunk.toString()));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, text }));
      },
    );
    req.on('timeout', () => req.destroy(new Error(`scrape of ${pod.metadata?.name} timed out`)));
    req.on('error', reject);
    req.end();
  });
}

/**
 * Follows the greeter operator's Pods from a list onwards: which are Ready (and not terminating) after every
 * change, and the fewest seen at once. Every state change arrives as a watch event, so a moment without a Ready
 * Pod cannot fall between two samples.
 */
async function followOperatorPods(config: KubeConfig) {
  const namespace = GREETER.namespace;
  const labelSelector = `app.kubernetes.io/name=${GREETER.deployment}`;
  const listed = await config.makeApiClient(CoreV1Api).listNamespacedPod({ namespace, labelSelector });
  const ready = new Map<string, string>();
  const record = (pod: V1Pod, gone: boolean) => {
    const name = pod.metadata?.name ?? '';
    if (!gone && running(pod)) ready.set(name, pod.metadata?.labels?.['app.kubernetes.io/version'] ?? '');
    else ready.delete(name);
  };
  for (const pod of listed.items) record(pod, false);
  let fewest = ready.size;
  let failure: unknown;
  let stopped = false;
  const request = await new Watch(config).watch(
    `/api/v1/namespaces/${namespace}/pods`,
    { labelSelector, resourceVersion: listed.metadata?.resourceVersion, allowWatchBookmarks: false },
    (type: string, pod: V1Pod) => {
      record(pod, type === 'DELETED');
      fewest = Math.min(fewest, ready.size);
    },
    (error: unknown) => {
      if (!stopped) failure = error ?? new Error('the watch of the operator Pods ended early');
    },
  );
  return {
    /** Versions of the Pods Ready now. */
    readyVersions: () => [...ready.values()].sort(),
    stop: () => {
      stopped = true;
      request.abort();
      if (failure) throw new Error('watching the operator Pods failed', { cause: failure });
      return { fewest };
    },
  };
}

/** Counter value from a Prometheus text exposition (sum over label sets). */
function counter(text: string, name: string): number {
  return text
    .split('\n')
    .filter((line) => line.startsWith(name) && !line.startsWith('#'))
    .reduce((sum, line) => sum + Number(line.split(' ').pop()), 0);
}

describe('in pods on real nodes: agent Deployment in KCP, in-cluster webhook in the SKR', function () {
  // A cold machine builds kubelet and friends first (≈ 20 min), then the image.
  this.timeout(3_600_000);
  let parent: string;
  let system: PodSystem;
  /** A token of the ServiceAccount bound to skr-watcher-metrics-reader. */
  let scraperToken = '';
  let registryHost = '';
  let operatorImage = '';
  const SCRAPER = 'metrics-scraper';
  const problem = nodeSupportProblem();

  before(async function () {
    if (problem) {
      // Only machines that cannot run nodes at all skip; everything else that fails is a failure.
      process.stderr.write(`skipping the pod tests: ${problem}\n`);
      this.skip();
    }
    parent = await mkdtemp(join(tmpdir(), 'skr-pods-'));
    system = await startPodSystem({
      dir: parent,
      progress: (line) => process.stderr.write(`  ${line}\n`),
      // Periodic work far apart: only callbacks explain what arrives within a test.
      agentArgs: ['--requeue-ready=1h', '--requeue-warning=1h', '--resync-interval=1h'],
      // Modules from the run's registry (the one kubelets pull the image from); the greeter operator runs that
      // image. The sample module (the Module CR the edits go to) then goes through a Manifest too.
      prepareAgent: async (env) => {
        const nodes = env.nodes;
        if (!nodes) throw new Error('the pod system started without nodes');
        registryHost = `http://${nodes.registry}`;
        operatorImage = nodes.images.app;
        const [greeter] = await publishModules(registryHost, [
          greeterModule({ operatorImage }),
          ...sampleModules(),
        ]);
        if (greeter) await createCatalog(env.plane('kcp').kubeConfig(), DEFAULTS.kcpNamespace, greeter);
        return [`--oci-registry-host=${registryHost}`];
      },
    });
    process.stderr.write(`  start-up figures (s): ${JSON.stringify(system.timings)}\n`);
    // A scraper as an operator sets one up: a ServiceAccount bound to the reader ClusterRole manifests/kcp ships.
    const core = system.kcp.makeApiClient(CoreV1Api);
    await core.createNamespacedServiceAccount({
      namespace: system.namespace,
      body: { metadata: { name: SCRAPER } },
    });
    await system.kcp.makeApiClient(RbacAuthorizationV1Api).createClusterRoleBinding({
      body: {
        metadata: { name: SCRAPER },
        roleRef: {
          apiGroup: 'rbac.authorization.k8s.io',
          kind: 'ClusterRole',
          name: 'skr-watcher-metrics-reader',
        },
        subjects: [{ kind: 'ServiceAccount', name: SCRAPER, namespace: system.namespace }],
      },
    });
    const issued = await core.createNamespacedServiceAccountToken({
      name: SCRAPER,
      namespace: system.namespace,
      body: { spec: { audiences: [], expirationSeconds: 7200 } },
    });
    scraperToken = issued.status?.token ?? '';
  });
  after(async function () {
    this.timeout(120_000);
    await system?.stop();
    if (parent) await rm(parent, { recursive: true, force: true });
  });

  const skr = () => system.env.plane('skr1').kubeConfig();
  const edit = (greeting: string) =>
    mergePatchCustomObject(skr().makeApiClient(CustomObjectsApi), MODULE_CR, { spec: { greeting } });
  /** Edits every 300 ms until stop(), which answers the last edit sent and the edits that failed. */
  const editContinuously = (label: string) => {
    let editing = true;
    let last = '';
    const failures: string[] = [];
    const done = (async () => {
      for (let i = 0; editing; i++) {
        last = `${label} ${i} ${Date.now()}`;
        await edit(last).catch((error: unknown) => failures.push(String(error)));
        await new Promise((resolve) => setTimeout(resolve, 300));
      }
    })();
    return {
      stop: async () => {
        editing = false;
        await done;
        return { last, failures };
      },
    };
  };
  const arrives = (greeting: string, what: string) =>
    eventually(
      what,
      async () =>
        system.moduleConfigs.current('skr1', 'sample')?.spec['greeting'] === greeting ? true : undefined,
      CONVERGE_MS,
    );
  const metricsOf = async (pod: V1Pod) => {
    // Pod IPs are routed to the SKR's node from the host (run network).
    const response = await fetch(`http://${pod.status?.podIP}:2112/metrics`);
    return response.text();
  };

  it('an SKR edit reaches its ModuleConfig through the webhook Pod, its Service and the agent Pod', async () => {
    const configuration = await skr()
      .makeApiClient(AdmissionregistrationV1Api)
      .readValidatingWebhookConfiguration({ name: 'skr-webhook' });
    for (const hook of configuration.webhooks ?? []) {
      expect(hook.clientConfig.url, hook.name).to.equal(undefined);
      expect(hook.clientConfig.service?.name, hook.name).to.equal(WEBHOOK_DEPLOYMENT);
    }
    // Created, but not enforced on these nodes: Debian's bridge CNI plugin has no policy engine (decision 014).
    const policy = await skr()
      .makeApiClient(NetworkingV1Api)
      .readNamespacedNetworkPolicy({ name: WEBHOOK_DEPLOYMENT, namespace: DEFAULTS.skrNamespace });
    expect(policy.spec?.podSelector?.matchLabels).to.deep.equal({
      'app.kubernetes.io/name': WEBHOOK_DEPLOYMENT,
    });
    const agents = (await system.agentPods()).filter(running);
    expect(agents.length).to.be.greaterThan(0);
    for (const pod of agents) {
      expect(pod.spec?.serviceAccountName).to.equal('skr-agent');
      expect(pod.spec?.containers[0]?.image).to.equal(system.image);
    }
    const greeting = `pods ${Date.now()}`;
    await edit(greeting);
    await arrives(greeting, 'the edit mirrored into the ModuleConfig');
    // Every running webhook Pod: the registration may have rolled the Deployment since the callback.
    const pods = (await system.webhookPods('skr1')).filter(running);
    const metrics = await Promise.all(pods.map(metricsOf));
    const sum = (name: string) => metrics.reduce((total, text) => total + counter(text, name), 0);
    expect(
      sum('skr_webhook_events_delivered_total'),
      `delivered by ${pods.length} webhook Pod(s)`,
    ).to.be.greaterThan(0);
    // The image's chrt made each dispatch thread SCHED_IDLE under the Pod's RuntimeDefault seccomp, non-root, no
    // capabilities.
    expect(sum('skr_webhook_dispatch_thread_sched_idle')).to.equal(pods.length);
  });

  it("the agent Pods serve /metrics over HTTPS to a reader's ServiceAccount token only (manifests/kcp: --metrics-secure)", async () => {
    const agents = (await system.agentPods()).filter(running);
    expect(agents.length).to.be.greaterThan(0);
    // The agent's own ServiceAccount exists but is not bound to the reader role: a valid token, no right.
    const stranger = await system.kcp.makeApiClient(CoreV1Api).createNamespacedServiceAccountToken({
      name: 'skr-agent',
      namespace: system.namespace,
      body: { spec: { audiences: [], expirationSeconds: 600 } },
    });
    for (const pod of agents) {
      const none = await scrapeAgent(pod);
      expect(none.status, `${pod.metadata?.name} without a token`).to.equal(401);
      expect(none.text).not.to.include('skr_agent');
      const forbidden = await scrapeAgent(pod, stranger.status?.token ?? '');
      expect(forbidden.status, `${pod.metadata?.name} with a token lacking the reader role`).to.equal(403);
      const reader = await scrapeAgent(pod, scraperToken);
      expect(reader.status, `${pod.metadata?.name} with the reader's token`).to.equal(200);
      expect(reader.text).to.include('skr_agent_build_info');
    }
  });

  it('the example module manager runs as a Pod from the same image, and an SKR edit comes back into the SKR as its ConfigMap', async () => {
    // examples/sample-manager/deploy: ServiceAccount, Role, RoleBinding and Deployment in KCP; the image is this run's.
    const manifests = loadAllYaml(await readFile(SAMPLE_MANAGER_DEPLOY, 'utf8')) as KubernetesObject[];
    const objects = KubernetesObjectApi.makeApiClient(system.kcp);
    for (const object of manifests) {
      if (object.kind === 'Deployment') {
        const spec = (object as V1Deployment).spec?.template.spec;
        for (const container of spec?.containers ?? []) container.image = system.image;
      }
      await applyObject(objects, object, { fieldManager: 'pods-test', force: true });
    }
    await eventually(
      'the sample-manager Deployment rolled out',
      async () =>
        (await deploymentRolledOut(system.kcp, system.namespace, 'sample-manager')) ? true : undefined,
      CONVERGE_MS,
    );
    const greeting = `manager pod ${Date.now()}`;
    await edit(greeting);
    await eventually(
      "sample-manager's ConfigMap in skr1 carries the edit",
      async () => {
        const map = await skr()
          .makeApiClient(CoreV1Api)
          .readNamespacedConfigMap({ namespace: DEFAULTS.skrNamespace, name: 'sample-config' });
        return map.data?.['greeting'] === greeting ? true : undefined;
      },
      CONVERGE_MS,
    );
    const pods = await system.kcp.makeApiClient(CoreV1Api).listNamespacedPod({
      namespace: system.namespace,
      labelSelector: 'app.kubernetes.io/name=sample-manager',
    });
    expect(pods.items.filter(running).map((pod) => pod.spec?.containers[0]?.image)).to.deep.equal([
      system.image,
    ]);
  });

  it('installs a module whose operator becomes available on a node, upgrades it with an operator Pod Ready throughout, and removes it', async () => {
    const kcp = system.kcp;
    const greeterOf = async () => {
      const kyma = (await kcp.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({
        group: GROUP,
        version: KINDS.kyma.version,
        plural: KINDS.kyma.plural,
        namespace: system.namespace,
        name: 'skr1',
      })) as { status?: { modules?: { name?: string; version?: string; state?: string }[] } };
      return kyma.status?.modules?.find((entry) => entry.name === GREETER.module);
    };
    // Install: Ready means every workload of the set is available, here the operator Pod on skr1's node.
    const installed = await timeModuleInstall({
      kcp,
      skrConfig: skr(),
      namespace: system.namespace,
      skr: 'skr1',
      timeoutMs: CONVERGE_MS,
    });
    expect(installed.readyAtMs, `greeter Ready (last state ${installed.lastState})`).to.not.equal(undefined);
    const pods = await skr()
      .makeApiClient(CoreV1Api)
      .listNamespacedPod({
        namespace: GREETER.namespace,
        labelSelector: `app.kubernetes.io/name=${GREETER.deployment}`,
      });
    const ready = pods.items.filter(running);
    expect(ready.map((pod) => pod.spec?.containers[0]?.image)).to.deep.equal([operatorImage]);
    expect(ready[0]?.spec?.nodeName, 'scheduled on a node').to.be.a('string').and.not.equal('');

    // Upgrade to 1.1.0 (a new Pod template): the Deployment rolls, the old Pod stops only once the new one is Ready.
    const follow = await followOperatorPods(skr());
    const [next] = await publishModules(registryHost, [greeterModule({ operatorImage, version: '1.1.0' })]);
    if (!next) throw new Error('publishing greeter 1.1.0 answered nothing');
    const catalog = kcp.makeApiClient(CustomObjectsApi);
    await catalog.createNamespacedCustomObject({
      group: GROUP,
      version: KINDS.moduleTemplate.version,
      plural: KINDS.moduleTemplate.plural,
      namespace: system.namespace,
      body: {
        ...next.moduleTemplate,
        metadata: { ...next.moduleTemplate.metadata, namespace: system.namespace },
      },
    });
    await mergePatchCustomObject(
      catalog,
      {
        group: GROUP,
        version: KINDS.moduleReleaseMeta.version,
        plural: KINDS.moduleReleaseMeta.plural,
        namespace: system.namespace,
        name: next.moduleReleaseMeta.metadata.name,
      },
      { spec: { channels: [{ channel: 'regular', version: '1.1.0' }] } },
    );
    await eventually(
      'greeter 1.1.0 Ready and only 1.1.0 operator Pods Ready',
      async () => {
        const entry = await greeterOf();
        const versions = follow.readyVersions();
        return entry?.version === '1.1.0' &&
          entry.state === 'Ready' &&
          versions.length > 0 &&
          versions.every((v) => v === '1.1.0')
          ? true
          : undefined;
      },
      CONVERGE_MS,
    );
    const { fewest } = follow.stop();
    expect(fewest, 'Ready operator Pods at the worst moment of the upgrade').to.be.greaterThan(0);

    // Remove: the Manifest goes, and with it the module's objects in the SKR.
    const took = await disableModule({
      kcp,
      skrConfig: skr(),
      namespace: system.namespace,
      skr: 'skr1',
      module: { module: GREETER.module, ocmComponentName: GREETER.ocmComponentName },
      timeoutMs: CONVERGE_MS,
    });
    expect(took, 'greeter removed from the Kyma and its Manifest deleted').to.not.equal(undefined);
    const apps = skr().makeApiClient(AppsV1Api);
    const crds = skr().makeApiClient(ApiextensionsV1Api);
    await eventually(
      "greeter's Deployment and CRD gone from skr1",
      async () => {
        const deployments = await apps.listNamespacedDeployment({
          namespace: GREETER.namespace,
          fieldSelector: `metadata.name=${GREETER.deployment}`,
        });
        const definitions = await crds.listCustomResourceDefinition({
          fieldSelector: `metadata.name=${GREETER.plural}.${GREETER.group}`,
        });
        return deployments.items.length === 0 && definitions.items.length === 0 ? true : undefined;
      },
      CONVERGE_MS,
    );
  });

  it('a CA rotation under continuous edits, followed by kubelets refreshing the Secret volumes, drops nothing', async () => {
    // Edits every 300 ms while `skr-certs rotate-ca --wait` trusts the new CA, re-issues every leaf and drops the
    // old CA; the listener (agent Pod) and the webhook (SKR Pod) read their certificates from Secret volumes,
    // which the kubelet refreshes every second here (syncFrequency: 1s).
    const editor = editContinuously('rotation');
    const rotation = await run(process.execPath, [
      '--import',
      'tsx',
      '--conditions=source',
      CERTS_MAIN,
      'rotate-ca',
      '--kubeconfig',
      system.env.plane('kcp').kubeconfigPath,
      '--propagation-delay',
      '8s',
      '--grace-period',
      '8s',
      '--wait',
      '--key-bits',
      '2048',
      '-o',
      'json',
    ]);
    const { last, failures } = await editor.stop();
    expect(rotation.status, `rotate-ca failed:\n${rotation.stderr}`).to.equal(0);
    expect((JSON.parse(rotation.stdout) as { state: { phase: string } }).state.phase).to.equal('complete');
    expect(failures).to.deep.equal([]);
    await arrives(last, 'the last edit made during the rotation mirrored');
    let rejected = 0;
    for (const pod of (await system.agentPods()).filter(running)) {
      const { text } = await scrapeAgent(pod, scraperToken);
      rejected += counter(text, 'skr_listener_requests_total{code="401"}');
    }
    expect(rejected, 'listener 401 answers').to.equal(0);
  });

  it('deleting the leading agent Pod in the middle of a burst of edits converges on the last edit', async () => {
    const core = system.kcp.makeApiClient(CoreV1Api);
    const leases = await system.kcp
      .makeApiClient(CoordinationV1Api)
      .listNamespacedLease({ namespace: system.namespace });
    const holder = leases.items.map((lease) => lease.spec?.holderIdentity ?? '').find(Boolean) ?? '';
    const agents = (await system.agentPods()).filter(running);
    const leader = agents.find((pod) => holder.includes(pod.metadata?.name ?? '\0')) ?? agents[0];
    let last = '';
    for (let i = 0; i < 20; i++) {
      last = `burst ${i} ${Date.now()}`;
      await edit(last);
      if (i === 7) {
        await core.deleteNamespacedPod({ name: leader?.metadata?.name ?? '', namespace: system.namespace });
      }
    }
    await arrives(last, 'the last edit of the burst mirrored after the leader Pod was deleted');
  });

  it('a rolling update of the agent Deployment under continuous edits loses no callback', async () => {
    // A template change (as `kubectl rollout restart` makes) replaces every agent Pod while edits go on every
    // 300 ms. The webhook Pod stays: its counters cover every callback of the rollout. Requeues and resyncs are
    // an hour apart here, so an edit made after the new leader's first list arrives only through a callback.
    const apps = system.kcp.makeApiClient(AppsV1Api);
    // A CA rotation before this test re-issues the SKR certificate, which rolls the webhook Deployment: wait
    // until one webhook Pod is left, then count on that Pod alone.
    const webhook = await eventually(
      'the webhook Deployment settled on one Ready Pod',
      async () => {
        const pods = await system.webhookPods('skr1');
        const [pod] = pods;
        return pods.length === 1 &&
          pod &&
          running(pod) &&
          (await deploymentRolledOut(skr(), DEFAULTS.skrNamespace, WEBHOOK_DEPLOYMENT))
          ? pod
          : undefined;
      },
      CONVERGE_MS,
    );
    const before = await metricsOf(webhook);
    const oldPods = new Set((await system.agentPods()).map((pod) => pod.metadata?.name));
    const editor = editContinuously('rollout');
    try {
      await apps.patchNamespacedDeployment({
        name: AGENT_DEPLOYMENT,
        namespace: system.namespace,
        // JSON patch (client-node's default); the template carries no annotations of its own.
        body: [
          {
            op: 'add',
            path: '/spec/template/metadata/annotations',
            value: { 'skr-watcher.test/rollout': `${Date.now()}` },
          },
        ],
      });
      await eventually(
        'the rollout replaced every agent Pod and a new one leads (Ready)',
        async () => {
          const pods = await system.agentPods();
          return pods.every((pod) => !oldPods.has(pod.metadata?.name)) &&
            pods.some(running) &&
            (await deploymentRolledOut(system.kcp, system.namespace, AGENT_DEPLOYMENT, 1))
            ? true
            : undefined;
        },
        CONVERGE_MS,
      );
      // A few more edits on the new leader alone.
      await new Promise((resolve) => setTimeout(resolve, 3_000));
    } finally {
      await editor.stop();
    }
    const { last, failures } = await editor.stop();
    expect(failures).to.deep.equal([]);
    await arrives(last, 'the last edit made during and after the rollout mirrored');
    await eventually(
      'the webhook has nothing left to deliver',
      async () => (counter(await metricsOf(webhook), 'skr_webhook_queue_depth') === 0 ? true : undefined),
      CONVERGE_MS,
    );
    // The agent's new Pods change nothing in the SKR: the same webhook Pod served the whole rollout.
    expect((await system.webhookPods('skr1')).map((pod) => pod.metadata?.name)).to.deep.equal([
      webhook.metadata?.name,
    ]);
    const after = await metricsOf(webhook);
    const delta = (name: string) => counter(after, name) - counter(before, name);
    expect(delta('skr_webhook_events_dropped_total'), 'callbacks the webhook gave up').to.equal(0);
    expect(delta('skr_webhook_events_delivered_total'), 'callbacks delivered').to.be.greaterThan(0);
  });

  it('a webhook Pod killed while the listener is down comes back and the edits made meanwhile arrive', async () => {
    const apps = system.kcp.makeApiClient(AppsV1Api);
    const scale = (replicas: number) =>
      apps.patchNamespacedDeploymentScale({
        name: AGENT_DEPLOYMENT,
        namespace: system.namespace,
        body: [{ op: 'replace', path: '/spec/replicas', value: replicas }],
      });
    await scale(0);
    try {
      await eventually(
        'no agent Pod left',
        async () => ((await system.agentPods()).length === 0 ? true : undefined),
        CONVERGE_MS,
      );
      await edit(`while down ${Date.now()}`);
      const [webhook] = (await system.webhookPods('skr1')).filter(running);
      await skr()
        .makeApiClient(CoreV1Api)
        .deleteNamespacedPod({
          name: webhook?.metadata?.name ?? '',
          namespace: DEFAULTS.skrNamespace,
          gracePeriodSeconds: 0,
        });
      await eventually(
        'a new webhook Pod is Ready',
        async () =>
          (await system.webhookPods('skr1')).some(
            (pod) => running(pod) && pod.metadata?.name !== webhook?.metadata?.name,
          )
            ? true
            : undefined,
        CONVERGE_MS,
      );
    } finally {
      await scale(2);
    }
    const last = `after the outage ${Date.now()}`;
    await edit(last);
    await arrives(last, 'the edit made after the outage mirrored');
  });
});
