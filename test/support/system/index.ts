// A whole skr-watcher system on this machine: a KCP and SKR control planes (real kube-apiservers from
// testenv), the skr-agent with its mTLS listener, and one skr-webhook process per SKR that the agent
// registers in URL mode. What the demo (demo/run.ts), the end-to-end suites and the benchmarks run on.
import { mkdir, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import {
  AdmissionregistrationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
} from '@kubernetes/client-node';
import { DEFAULTS, GROUP, KINDS } from '@skr-watcher/api';
import { CA_BUNDLE_SECRET_NAME } from '@skr-watcher/pki';
import { ensureBinaries, freePort, startEnvironment, type Environment } from '@skr-watcher/testenv';
import { ENTRY_POINTS, startChild, type Child } from './children.js';
import { LISTENER_TLS_SECRET_NAME, initKcpPki } from './kcp-pki.js';
import { buildGoManager, startSampleManager, type SampleManagerProcess } from './sample-manager.js';
import { watchModuleConfigs, type ModuleConfigWatch } from './module-configs.js';
import {
  agentInstallsModules,
  createCatalog,
  greeterModule,
  publishModules,
  sampleModules,
  startModuleRegistry,
} from './modules.js';
import { applySamples } from './samples.js';
import { syncSecretToFiles, type SecretFiles } from './secret-files.js';

/** What the agent writes into every SKR (registration): the webhook's certificate and its configuration. */
export const SKR_WEBHOOK_TLS_SECRET = 'skr-webhook-tls';
export const SKR_WEBHOOK_CONFIGURATION = 'skr-webhook';
const SKR_TLS_KEYS = ['ca.crt', 'tls.crt', 'tls.key'];

/** The sample module's Module CR in every SKR (from ModuleTemplate sample-1.0.0). */
export const SAMPLE_MODULE = {
  module: 'sample',
  group: GROUP,
  version: KINDS.sample.version,
  plural: KINDS.sample.plural,
  namespace: DEFAULTS.skrNamespace,
  name: 'sample',
} as const;

/** The Kyma in every SKR (the user's side: spec.modules is what they enable). */
export const SKR_KYMA = {
  group: GROUP,
  version: KINDS.kyma.version,
  plural: KINDS.kyma.plural,
  namespace: DEFAULTS.skrNamespace,
  name: DEFAULTS.skrKymaName,
} as const;

/** A relevant change the webhook logged (debug level): when admission saw it. */
export interface AdmissionSeen {
  skr: string;
  atMs: number;
  kind: string;
  namespace: string;
  name: string;
  operation: string;
}

export interface LocalSystemOptions {
  /** Scratch directory: planes, certificates, logs. Emptied first. */
  dir: string;
  skrs?: string[];
  /** One line per startup step, for people watching. */
  progress?: (line: string) => void;
  /** Runs the webhooks at debug level and reports each relevant change they log. */
  onAdmission?: (seen: AdmissionSeen) => void;
  /** Extra flags for `skr-agent run`. */
  agentArgs?: string[];
  /** Flags for the agent's node process (e.g. `--cpu-prof`), before its entry point. */
  agentNodeArgs?: string[];
  /**
   * Runs the agent as the image does (test/support/shipped-agent.ts): this script, with this environment (its
   * NODE_OPTIONS), instead of its source through tsx; `agentNodeArgs` do not apply.
   */
  shippedAgent?: { script: string; env: Record<string, string> };
  /**
   * Runs the agent at debug level and passes on its log entries whose message is one of `messages` (parsed), e.g.
   * the per-step timestamps of each targeted mirror for bench:e2e.
   */
  onAgentLog?: { messages: string[]; handle: (entry: Record<string, unknown>) => void };
  /** Bound of the startup, counted once kube-apiserver and etcd are at hand (a first build takes minutes). */
  startupTimeoutMs?: number;
  /**
   * Also runs examples/sample-manager (sample-manager.ts): Module CR → ModuleConfig → SyncResource → SKR; `'go'` runs
   * its Go twin, examples/go-manager, instead.
   */
  sampleManager?: boolean | 'go';
  /**
   * Starts an OCI registry, publishes the modules (modules.ts) and, when this skr-agent has the flags, points the
   * agent at the registry so it installs modules through Manifests.
   */
  modules?: boolean;
  /** With `modules`: the sample module's raw manifest padded to this many bytes (modules.ts, sampleModules). */
  sampleManifestBytes?: number;
  /**
   * Each webhook watches its own ValidatingWebhookConfiguration with a token of the ServiceAccount the agent
   * installs in its SKR, as the in-cluster webhook does with its mounted token.
   */
  watchWebhookConfiguration?: boolean;
  /**
   * Gives every plane a node (testenv: kubelet, containerd, controller-manager with the garbage collector), so the
   * workloads modules install run; `env.nodes` then holds the registry kubelets pull from and its images.
   */
  nodes?: boolean;
}

/** The module registry of a local system (option `modules`). */
export interface LocalModules {
  /** host:port of the registry (plain HTTP). */
  registryHost: string;
  /** Whether the agent was started with --oci-registry-host (false: this skr-agent does not have it yet). */
  agentInstalls: boolean;
}

export interface LocalSkr {
  name: string;
  kubeconfigPath: string;
  kubeConfig(): KubeConfig;
  webhookPort: number;
  webhookMetricsPort: number;
  readonly webhook: Child;
  /** Stops the webhook process (if it runs) and starts it again on the same ports and files. */
  restartWebhook(): Promise<void>;
  /** The SKR Secret skr-webhook-tls mirrored to files, as a Secret volume would be. */
  certificates: SecretFiles;
}

export interface LocalSystem {
  dir: string;
  /** The control planes and their etcd, for fault tests. */
  env: Environment;
  namespace: string;
  kcpKubeconfigPath: string;
  kcp: KubeConfig;
  skrs: LocalSkr[];
  skr(name: string): LocalSkr;
  agent: Child;
  listenerPort: number;
  agentMetricsPort: number;
  agentEventsPort: number;
  /** ws:// URL of the agent's live stream of accepted callbacks. */
  eventsUrl: string;
  moduleConfigs: ModuleConfigWatch;
  /** With `sampleManager`: the manager process and the watches of what it renders. */
  manager?: SampleManagerProcess;
  /** With `modules`: the registry and whether the agent installs modules from it. */
  modules?: LocalModules;
  /** Stops every process and plane; removes `dir` unless `keepDir`. Safe to call twice. */
  stop(options?: { keepDir?: boolean }): Promise<void>;
}

/** Polls `check` until it is true or `deadline` (epoch ms) passes; the last error seen is the cause. */
export async function waitFor(what: string, check: () => Promise<boolean>, deadline: number): Promise<void> {
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      if (await check()) return;
    } catch (error) {
      lastError = error;
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  throw new Error(`timed out waiting for ${what}`, lastError ? { cause: lastError } : undefined);
}

/** The last lines of a child's log, for error messages. */
export async function tailOf(file: string, lines = 15): Promise<string> {
  const text = await readFile(file, 'utf8').catch(() => '');
  return text.trimEnd().split('\n').slice(-lines).join('\n');
}

async function ensureNamespace(kubeConfig: KubeConfig, name: string): Promise<void> {
  await kubeConfig
    .makeApiClient(CoreV1Api)
    .createNamespace({ body: { metadata: { name } } })
    .catch((error: unknown) => {
      if ((error as { code?: unknown }).code !== 409)
        throw new Error(`create namespace ${name}`, { cause: error });
    });
}

function readyz(port: number): Promise<boolean> {
  return fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(2_000) }).then(
    (res) => res.status === 200,
    () => false,
  );
}

/**
 * A token of the webhook's ServiceAccount (which the agent installs) and the API server's CA, as files, and the
 * webhook's variables that point its configuration watch at them.
 */
async function webhookIdentityFiles(
  kubeConfig: KubeConfig,
  dir: string,
  deadline: number,
): Promise<Record<string, string>> {
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const namespace = DEFAULTS.skrNamespace;
  const name = SKR_WEBHOOK_CONFIGURATION;
  let token = '';
  await waitFor(
    `the agent to install ServiceAccount ${namespace}/${name}`,
    async () => {
      const request = await core.createNamespacedServiceAccountToken({
        name,
        namespace,
        body: { spec: { audiences: [], expirationSeconds: 86_400 } },
      });
      token = request.status?.token ?? '';
      return token !== '';
    },
    deadline,
  );
  const cluster = kubeConfig.getCurrentCluster();
  if (!cluster?.caData) throw new Error('the plane kubeconfig has no certificate-authority-data');
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, 'token'), token, { mode: 0o600 });
  await writeFile(join(dir, 'ca.crt'), Buffer.from(cluster.caData, 'base64'));
  return {
    WATCH_CONFIGURATION: SKR_WEBHOOK_CONFIGURATION,
    SKR_API_SERVER: cluster.server,
    SKR_TOKEN_FILE: join(dir, 'token'),
    SKR_CA_FILE: join(dir, 'ca.crt'),
  };
}

/** AdmissionReviews the webhook answered with 200 so far (from its /metrics). */
async function admissionsAnswered(metricsPort: number): Promise<number> {
  const text = await (
    await fetch(`http://127.0.0.1:${metricsPort}/metrics`, { signal: AbortSignal.timeout(2_000) })
  ).text();
  const line = text
    .split('\n')
    .find((l) => l.startsWith('skr_webhook_admission_requests_total{code="200"} '));
  const value = Number(line?.split(' ')[1]);
  if (!Number.isFinite(value))
    throw new Error(`webhook metrics on :${metricsPort} lack skr_webhook_admission_requests_total`);
  return value;
}

/** The webhook's debug line for a relevant change, or undefined for any other line. */
function admissionOf(skr: string, line: string): AdmissionSeen | undefined {
  if (!line.includes('"relevant change"')) return undefined;
  try {
    const entry = JSON.parse(line) as Record<string, unknown>;
    const atMs = Date.parse(String(entry['time']));
    if (entry['msg'] !== 'relevant change' || Number.isNaN(atMs)) return undefined;
    return {
      skr,
      atMs,
      kind:
        String(entry['gvk'] ?? '')
          .split('/')
          .pop() ?? '',
      namespace: String(entry['namespace'] ?? ''),
      name: String(entry['name'] ?? ''),
      operation: String(entry['operation'] ?? ''),
    };
  } catch {
    return undefined;
  }
}

/** Child options that run the agent at debug level and pass on the entries `onAgentLog` asks for. */
function agentLogOptions({
  messages,
  handle,
}: NonNullable<LocalSystemOptions['onAgentLog']>): Pick<Parameters<typeof startChild>[0], 'env' | 'onLine'> {
  const quoted = messages.map((message) => JSON.stringify(message));
  return {
    env: { LOG_LEVEL: 'debug' },
    onLine: (line) => {
      if (!quoted.some((message) => line.includes(message))) return;
      try {
        const entry = JSON.parse(line) as Record<string, unknown>;
        if (messages.includes(String(entry['msg']))) handle(entry);
      } catch {
        // Not a JSON log line: nothing to pass on.
      }
    },
  };
}

const SCRATCH_MARKER = '.skr-watcher-local-system';

/** The scratch directory cannot be used; nothing was started and nothing in it was touched. */
export class ScratchDirError extends Error {}

/** Whether the process that wrote a scratch marker is still alive (then its system is still running). */
async function ownerAlive(marker: string): Promise<number | undefined> {
  const pid = Number(/^pid (\d+)$/m.exec(await readFile(marker, 'utf8').catch(() => ''))?.[1]);
  if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid) return undefined;
  try {
    process.kill(pid, 0);
    return pid;
  } catch {
    return undefined;
  }
}

/**
 * The subdirectory of the scratch directory that `npm run demo -- --pods` uses (demo/run.ts). The process demo
 * neither claims nor empties it: it may hold what a pods run left (its planes, node state, even mounts), and
 * that run may still be going.
 */
export const PODS_SUBDIR = 'pods';

/** Removes what a local system wrote into `dir`, leaving the pods demo's subdirectory; `dir` itself if then empty. */
async function emptyScratchDir(dir: string, removeDir: boolean): Promise<void> {
  const entries: string[] = await readdir(dir).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return [];
    throw error;
  });
  for (const entry of entries) {
    if (entry === PODS_SUBDIR) continue;
    await rm(join(dir, entry), { recursive: true, force: true });
  }
  if (removeDir && !entries.includes(PODS_SUBDIR)) await rm(dir, { recursive: true, force: true });
}

/**
 * Empties `dir` for a new run, but only if it is empty, absent, holds only the pods demo's subdirectory, or is
 * the scratch directory of an earlier run that has ended: never a directory the user cares about, never the planes
 * of a demo that is still running.
 */
async function claimScratchDir(dir: string): Promise<void> {
  const entries: string[] = await readdir(dir).catch((error: NodeJS.ErrnoException) => {
    if (error.code === 'ENOENT') return [];
    throw new ScratchDirError(`read scratch directory ${dir}`, { cause: error });
  });
  const ours = entries.filter((entry) => entry !== PODS_SUBDIR);
  if (ours.length > 0 && !ours.includes(SCRATCH_MARKER)) {
    throw new ScratchDirError(
      `${dir} is not empty and was not made by an earlier run; choose another directory`,
    );
  }
  const owner = await ownerAlive(join(dir, SCRATCH_MARKER));
  if (owner !== undefined) {
    throw new ScratchDirError(
      `${dir} belongs to a local system that is still running (pid ${owner}); stop it or choose another directory`,
    );
  }
  await emptyScratchDir(dir, false);
  await mkdir(dir, { recursive: true });
  await writeFile(
    join(dir, SCRATCH_MARKER),
    `scratch directory of a local skr-watcher system; emptied on each run (except ${PODS_SUBDIR}/)\npid ${process.pid}\n`,
  );
}

export async function startLocalSystem(options: LocalSystemOptions): Promise<LocalSystem> {
  const skrNames = options.skrs ?? ['skr1', 'skr2'];
  const progress = options.progress ?? (() => {});
  const namespace = DEFAULTS.kcpNamespace;
  const { dir } = options;
  await claimScratchDir(dir);
  // The first run builds the binaries (many minutes on 2 cores); the startup bound starts after that.
  const binaries = await ensureBinaries({ log: progress });
  progress(`kube-apiserver and etcd from ${binaries.source}: ${binaries.kubeApiserver}, ${binaries.etcd}`);
  const deadline = Date.now() + (options.startupTimeoutMs ?? 240_000);

  // Undone in reverse order, on failure during startup and by stop().
  const cleanups: { name: string; run: () => Promise<void> }[] = [];
  const cleanUp = async () => {
    for (const step of cleanups.splice(0).reverse()) {
      await step
        .run()
        .catch((error: unknown) => progress(`cleanup of ${step.name} failed: ${String(error)}`));
    }
  };

  try {
    progress(`starting control planes kcp, ${skrNames.join(', ')} (real kube-apiserver + etcd)`);
    const env: Environment = await startEnvironment({
      planes: ['kcp', ...skrNames],
      dir: join(dir, 'planes'),
      ...(options.nodes ? { nodes: true, log: progress } : {}),
    });
    cleanups.push({ name: 'control planes', run: () => env.stop() });
    const kcpPlane = env.plane('kcp');
    const kcp = kcpPlane.kubeConfig();
    await ensureNamespace(kcp, namespace);
    await Promise.all(
      skrNames.map((skr) => ensureNamespace(env.plane(skr).kubeConfig(), DEFAULTS.skrNamespace)),
    );

    progress(
      `creating the KCP CA (Secrets skr-watcher-ca, skr-watcher-ca-bundle) and the listener certificate (${LISTENER_TLS_SECRET_NAME})`,
    );
    await initKcpPki(kcp, namespace);
    // The listener reads its certificate and its trust bundle from files that follow the KCP Secrets, so a
    // CA rotation reaches it as it reaches the webhooks.
    const listenerTls = syncSecretToFiles({
      kubeConfig: kcp,
      namespace,
      name: LISTENER_TLS_SECRET_NAME,
      keys: ['tls.crt', 'tls.key'],
      dir: join(dir, 'listener', 'tls'),
      onError: (error) => progress(`listener certificate files: ${error.message}`),
    });
    cleanups.push({ name: 'listener certificate sync', run: () => listenerTls.stop() });
    const listenerBundle = syncSecretToFiles({
      kubeConfig: kcp,
      namespace,
      name: CA_BUNDLE_SECRET_NAME,
      keys: ['ca-bundle.crt'],
      dir: join(dir, 'listener', 'ca-bundle'),
      onError: (error) => progress(`listener CA bundle: ${error.message}`),
    });
    cleanups.push({ name: 'listener CA bundle sync', run: () => listenerBundle.stop() });
    const left = () => Math.max(1_000, deadline - Date.now());
    await listenerTls.firstWrite(left());
    await listenerBundle.firstWrite(left());

    const extraAgentArgs: string[] = [];
    const listenerPort = await freePort();
    const agentMetricsPort = await freePort();
    const agentEventsPort = await freePort();
    const ports = new Map<string, { webhook: number; metrics: number }>();
    for (const skr of skrNames) ports.set(skr, { webhook: await freePort(), metrics: await freePort() });

    progress(
      'applying the samples: ModuleTemplates, ModuleReleaseMeta, Watcher, a Kyma and kubeconfig Secret per SKR',
    );
    await applySamples(
      kcp,
      await Promise.all(
        skrNames.map(async (skr) => ({
          name: skr,
          kubeconfig: await readFile(env.plane(skr).kubeconfigPath, 'utf8'),
          webhookUrl: `https://127.0.0.1:${ports.get(skr)?.webhook}`,
        })),
      ),
      namespace,
    );

    let modules: LocalModules | undefined;
    if (options.modules) {
      progress('starting an OCI registry (go-containerregistry, testenv) for modules');
      const registry = await startModuleRegistry(dir, progress);
      cleanups.push({ name: 'OCI registry', run: () => registry.stop() });
      progress(
        `publishing modules greeter 1.0.0 and sample 1.0.0/1.1.0 to ${registry.registryHost} (skr-modules publishModule, modulectl's layout)`,
      );
      const [greeter] = await publishModules(registry.registryHost, [
        greeterModule(),
        ...sampleModules({ manifestBytes: options.sampleManifestBytes ?? 0 }),
      ]);
      if (greeter) await createCatalog(kcp, namespace, greeter);
      const agentInstalls = agentInstallsModules();
      if (!agentInstalls) {
        progress('this skr-agent has no --oci-registry-host: it runs without the module flags');
      }
      modules = { registryHost: registry.registryHost, agentInstalls };
      if (agentInstalls) extraAgentArgs.push(...registry.agentArgs);
    }

    progress(
      `starting skr-agent (listener 127.0.0.1:${listenerPort}, metrics 127.0.0.1:${agentMetricsPort}, events 127.0.0.1:${agentEventsPort})`,
    );
    const agent = startChild({
      name: 'skr-agent',
      entry: ENTRY_POINTS.agent,
      logFile: join(dir, 'skr-agent.log'),
      ...(options.agentNodeArgs ? { nodeArgs: options.agentNodeArgs } : {}),
      ...(options.onAgentLog ? agentLogOptions(options.onAgentLog) : {}),
      ...(options.shippedAgent ? { executable: process.execPath, env: options.shippedAgent.env } : {}),
      args: [
        ...(options.shippedAgent ? [options.shippedAgent.script] : []),
        'run',
        '--kubeconfig',
        kcpPlane.kubeconfigPath,
        '--namespace',
        namespace,
        '--listen-address',
        `127.0.0.1:${listenerPort}`,
        '--tls-cert',
        listenerTls.path('tls.crt'),
        '--tls-key',
        listenerTls.path('tls.key'),
        '--ca-bundle',
        listenerBundle.path('ca-bundle.crt'),
        '--metrics-address',
        `127.0.0.1:${agentMetricsPort}`,
        '--events-address',
        `127.0.0.1:${agentEventsPort}`,
        // The agent installs the webhook in every SKR; URL mode comes from the Kymas' skr-webhook-url annotation.
        '--register-skr-webhook',
        '--skr-webhook-kcp-address',
        `127.0.0.1:${listenerPort}`,
        // Periodic work far apart: within a demo run only a callback explains a ModuleConfig update.
        '--requeue-ready',
        '1h',
        '--requeue-warning',
        '1h',
        '--resync-interval',
        '1h',
        ...extraAgentArgs,
        ...(options.agentArgs ?? []),
      ],
    });
    cleanups.push({ name: 'skr-agent', run: () => agent.stop() });
    const agentAlive = () => {
      if (!agent.isRunning()) throw new Error(`skr-agent exited; see ${agent.logFile}`);
    };
    await waitFor(
      'skr-agent to be ready',
      async () => {
        agentAlive();
        return readyz(agentMetricsPort);
      },
      deadline,
    ).catch(async (error: unknown) => {
      throw new Error(
        `${(error as Error).message}\n--- ${agent.logFile} ---\n${await tailOf(agent.logFile)}`,
        {
          cause: error,
        },
      );
    });

    const skrs: LocalSkr[] = [];
    for (const skr of skrNames) {
      const plane = env.plane(skr);
      const skrPorts = ports.get(skr) as { webhook: number; metrics: number };
      progress(
        `${skr}: waiting for the agent to register the webhook (Secret ${DEFAULTS.skrNamespace}/${SKR_WEBHOOK_TLS_SECRET})`,
      );
      const certificates = syncSecretToFiles({
        kubeConfig: plane.kubeConfig(),
        namespace: DEFAULTS.skrNamespace,
        name: SKR_WEBHOOK_TLS_SECRET,
        keys: SKR_TLS_KEYS,
        dir: join(dir, skr, 'webhook-tls'),
        onError: (error) => progress(`${skr}: ${error.message}`),
      });
      cleanups.push({ name: `${skr} certificate sync`, run: () => certificates.stop() });
      await certificates.firstWrite(Math.max(1_000, deadline - Date.now())).catch(async (error: unknown) => {
        agentAlive();
        throw new Error(
          `${(error as Error).message}: the agent did not register the webhook in ${skr}\n--- ${agent.logFile} ---\n${await tailOf(agent.logFile)}`,
          { cause: error },
        );
      });
      const watchEnv = options.watchWebhookConfiguration
        ? await webhookIdentityFiles(plane.kubeConfig(), join(dir, skr, 'webhook-identity'), deadline)
        : {};
      progress(
        `${skr}: starting skr-webhook on https://127.0.0.1:${skrPorts.webhook} (metrics :${skrPorts.metrics})`,
      );
      const onAdmission = options.onAdmission;
      const launchWebhook = () =>
        startChild({
          name: `skr-webhook (${skr})`,
          entry: ENTRY_POINTS.webhook,
          logFile: join(dir, skr, 'skr-webhook.log'),
          env: {
            WEBHOOK_HOST: '127.0.0.1',
            WEBHOOK_PORT: String(skrPorts.webhook),
            METRICS_PORT: String(skrPorts.metrics),
            TLS_CERT: certificates.path('tls.crt'),
            TLS_KEY: certificates.path('tls.key'),
            CA_CERT: certificates.path('ca.crt'),
            KCP_ADDR: `127.0.0.1:${listenerPort}`,
            SHUTDOWN_DRAIN_MS: '2000',
            LOG_LEVEL: onAdmission ? 'debug' : 'info',
            ...watchEnv,
          },
          onLine: onAdmission
            ? (line) => {
                const seen = admissionOf(skr, line);
                if (seen) onAdmission(seen);
              }
            : undefined,
        });
      let webhook = launchWebhook();
      cleanups.push({ name: `skr-webhook (${skr})`, run: () => webhook.stop() });
      skrs.push({
        name: skr,
        kubeconfigPath: plane.kubeconfigPath,
        kubeConfig: () => plane.kubeConfig(),
        webhookPort: skrPorts.webhook,
        webhookMetricsPort: skrPorts.metrics,
        get webhook() {
          return webhook;
        },
        async restartWebhook() {
          await webhook.stop();
          webhook = launchWebhook();
          await waitFor('skr-webhook to be ready again', () => readyz(skrPorts.metrics), Date.now() + 30_000);
        },
        certificates,
      });
    }

    const moduleConfigs = watchModuleConfigs(kcp, namespace);
    cleanups.push({ name: 'ModuleConfig watch', run: () => moduleConfigs.stop() });
    for (const skr of skrs) {
      progress(
        `${skr.name}: waiting for the sample module, its ModuleConfig, and the API server calling the webhook`,
      );
      const api = skr.kubeConfig().makeApiClient(CustomObjectsApi);
      const admission = skr.kubeConfig().makeApiClient(AdmissionregistrationV1Api);
      await waitFor(
        `${skr.name}: skr-webhook ready, ValidatingWebhookConfiguration ${SKR_WEBHOOK_CONFIGURATION}, Module CR ${SAMPLE_MODULE.namespace}/${SAMPLE_MODULE.name}, its ModuleConfig in KCP, a dry-run write answered by the webhook`,
        async () => {
          agentAlive();
          if (!skr.webhook.isRunning()) throw new Error(`skr-webhook exited; see ${skr.webhook.logFile}`);
          if (!(await readyz(skr.webhookMetricsPort))) return false;
          const configuration = await admission.readValidatingWebhookConfiguration({
            name: SKR_WEBHOOK_CONFIGURATION,
          });
          if (
            !configuration.webhooks?.some((hook) => hook.clientConfig.url?.includes(`:${skr.webhookPort}/`))
          )
            return false;
          await api.getNamespacedCustomObject(SAMPLE_MODULE);
          if (moduleConfigs.current(skr.name, SAMPLE_MODULE.module) === undefined) return false;
          // A dry-run write reaches the webhook (sideEffects NoneOnDryRun) but sends no callback: once the
          // webhook has answered one, the API server routes this SKR's writes to it.
          const answeredBefore = await admissionsAnswered(skr.webhookMetricsPort);
          await api.patchNamespacedCustomObject({
            ...SAMPLE_MODULE,
            body: [{ op: 'add', path: '/metadata/labels', value: { 'skr-watcher.demo/dry-run': 'probe' } }],
            dryRun: 'All',
          });
          return (await admissionsAnswered(skr.webhookMetricsPort)) > answeredBefore;
        },
        deadline,
      ).catch(async (error: unknown) => {
        throw new Error(
          `${(error as Error).message}\n--- ${agent.logFile} ---\n${await tailOf(agent.logFile)}\n--- ${skr.webhook.logFile} ---\n${await tailOf(skr.webhook.logFile)}`,
          { cause: error },
        );
      });
    }

    let manager: SampleManagerProcess | undefined;
    if (options.sampleManager) {
      progress(
        options.sampleManager === 'go'
          ? 'starting sample-manager in Go (examples/go-manager): renders each sample ModuleConfig into a SyncResource'
          : 'starting sample-manager (examples/sample-manager): renders each sample ModuleConfig into a SyncResource',
      );
      manager = await startSampleManager({
        ...(options.sampleManager === 'go' ? { executable: await buildGoManager() } : {}),
        dir,
        kcp,
        kcpKubeconfigPath: kcpPlane.kubeconfigPath,
        namespace,
        skrs,
        deadline,
      });
      const started = manager;
      cleanups.push({ name: 'sample-manager', run: () => started.stop() });
    }

    let stopping: Promise<void> | undefined;
    return {
      dir,
      env,
      namespace,
      kcpKubeconfigPath: kcpPlane.kubeconfigPath,
      kcp,
      skrs,
      skr(name) {
        const found = skrs.find((s) => s.name === name);
        if (!found) throw new Error(`no SKR named ${name} (have ${skrNames.join(', ')})`);
        return found;
      },
      agent,
      listenerPort,
      agentMetricsPort,
      agentEventsPort,
      eventsUrl: `ws://127.0.0.1:${agentEventsPort}/events`,
      moduleConfigs,
      ...(manager ? { manager } : {}),
      ...(modules ? { modules } : {}),
      stop(stopOptions = {}) {
        stopping ??= (async () => {
          await cleanUp();
          if (!stopOptions.keepDir) await emptyScratchDir(dir, true);
        })();
        return stopping;
      },
    };
  } catch (error) {
    await cleanUp();
    throw error;
  }
}
