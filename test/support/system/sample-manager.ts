// The sample module's manager (examples/sample-manager) as a process of the local system, and the two watches
// that time the second half of a round trip: the manager's SyncResource in KCP and the ConfigMap it renders,
// applied by the agent, in each SKR.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { fileURLToPath } from 'node:url';
import { CoreV1Api, type KubeConfig, type V1ConfigMap } from '@kubernetes/client-node';
import { DEFAULTS, GROUP, KINDS, LABELS } from '@skr-watcher/api';
import { ResilientInformer, customResourceSource, type InformerSource } from '@skr-watcher/kube';
import { freePort } from '@skr-watcher/testenv';
import { SAMPLE_CONFIG_MAP, SAMPLE_MANAGER } from '@skr-watcher/sample-manager';
import { startChild, type Child } from './children.js';

const ENTRY = fileURLToPath(new URL('../../../examples/sample-manager/src/main.ts', import.meta.url));
const GO_MANAGER_DIR = fileURLToPath(new URL('../../../examples/go-manager/', import.meta.url));
const run = promisify(execFile);

/** What a watch saw: the greeting a Kyma's rendered ConfigMap carries, and when this process saw it. */
export interface RenderedSeen {
  kyma: string;
  greeting: string | undefined;
  atMs: number;
}

type Listener = (seen: RenderedSeen) => void;

/** Latest value per Kyma, and listeners for every change of it. */
class Latest {
  private readonly values = new Map<string, RenderedSeen>();
  private readonly listeners = new Set<Listener>();

  consider(seen: RenderedSeen): void {
    if (this.values.get(seen.kyma)?.greeting === seen.greeting && this.values.has(seen.kyma)) return;
    this.values.set(seen.kyma, seen);
    for (const listener of this.listeners) listener(seen);
  }

  current(kyma: string): RenderedSeen | undefined {
    return this.values.get(kyma);
  }

  subscribe(listener: Listener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }
}

export interface SampleManagerProcess {
  readonly child: Child;
  readonly metricsPort: number;
  /** The greeting in the sample-manager's SyncResource for each Kyma (KCP). */
  readonly syncResources: Latest;
  /** The greeting of kyma-system/sample-config in each SKR. */
  readonly configMaps: Latest;
  stop(): Promise<void>;
}

interface SyncResourceShape {
  metadata?: { name?: string; namespace?: string; resourceVersion?: string };
  spec?: { kyma?: string; items?: { resource?: { kind?: string; data?: Record<string, string> } }[] };
}

function configMapSource(kubeConfig: KubeConfig): InformerSource<V1ConfigMap> {
  const api = kubeConfig.makeApiClient(CoreV1Api);
  const fieldSelector = `metadata.name=${SAMPLE_CONFIG_MAP.name}`;
  return {
    resource: 'configmaps',
    path: `/api/v1/namespaces/${SAMPLE_CONFIG_MAP.namespace}/configmaps`,
    fieldSelector,
    list: async ({ limit, continueToken }) => {
      const page = await api.listNamespacedConfigMap({
        namespace: SAMPLE_CONFIG_MAP.namespace,
        fieldSelector,
        limit,
        _continue: continueToken,
      });
      const rv = page.metadata?.resourceVersion;
      return { items: page.items, metadata: rv ? { resourceVersion: rv } : {} };
    },
  };
}

/** Go ships outside PATH on some machines; $GO, then /usr/local/go, then `go` on PATH. */
function goCommand(): string {
  if (process.env['GO']) return process.env['GO'];
  return existsSync('/usr/local/go/bin/go') ? '/usr/local/go/bin/go' : 'go';
}

let goManagerBuild: Promise<string> | undefined;

/**
 * Builds examples/go-manager (the sample module's manager in Go) into the cache, once per process; Go's build cache
 * makes every build after the first a link at most. Resolves with the binary's path.
 */
export function buildGoManager(): Promise<string> {
  goManagerBuild ??= (async () => {
    const dir = join(process.env['XDG_CACHE_HOME'] ?? join(homedir(), '.cache'), 'skr-watcher', 'go-manager');
    await mkdir(dir, { recursive: true });
    const binary = join(dir, 'go-manager');
    await run(goCommand(), ['build', '-o', binary, '.'], {
      cwd: GO_MANAGER_DIR,
      env: { ...process.env, GOTOOLCHAIN: 'local' },
    }).catch((error: unknown) => {
      const { stderr } = error as { stderr?: string };
      throw new Error(`go build examples/go-manager: ${stderr ?? String(error)}`, { cause: error });
    });
    return binary;
  })();
  return goManagerBuild;
}

/**
 * Starts sample-manager against the KCP (its own process, as a module team would run it) and the watches that see
 * its output. Resolves once it is ready and every SKR holds its rendered ConfigMap.
 */
export async function startSampleManager(options: {
  /** examples/go-manager built (buildGoManager), to run instead of examples/sample-manager. */
  executable?: string;
  dir: string;
  kcp: KubeConfig;
  kcpKubeconfigPath: string;
  namespace: string;
  skrs: { name: string; kubeConfig(): KubeConfig }[];
  deadline: number;
}): Promise<SampleManagerProcess> {
  const metricsPort = await freePort();
  const child = startChild({
    name: SAMPLE_MANAGER.name,
    entry: ENTRY,
    ...(options.executable ? { executable: options.executable } : {}),
    logFile: join(options.dir, `${SAMPLE_MANAGER.name}.log`),
    args: [
      '--kubeconfig',
      options.kcpKubeconfigPath,
      '--namespace',
      options.namespace,
      '--metrics-address',
      `127.0.0.1:${metricsPort}`,
    ],
  });
  const syncResources = new Latest();
  const configMaps = new Latest();
  const informers: { stop(): Promise<void> }[] = [];
  const stop = async () => {
    await child.stop();
    await Promise.all(informers.map((informer) => informer.stop()));
  };
  try {
    const syncInformer = new ResilientInformer<SyncResourceShape>({
      kubeConfig: options.kcp,
      source: customResourceSource(options.kcp, {
        group: GROUP,
        version: KINDS.syncResource.version,
        plural: KINDS.syncResource.plural,
        namespace: options.namespace,
        labelSelector: `${LABELS.managedBy}=${SAMPLE_MANAGER.name}`,
      }),
      watchdogMs: 60_000,
    });
    const onSync = (sync: SyncResourceShape) => {
      const kyma = sync.spec?.kyma;
      const map = sync.spec?.items?.find((item) => item.resource?.kind === 'ConfigMap')?.resource;
      if (kyma) syncResources.consider({ kyma, greeting: map?.data?.['greeting'], atMs: Date.now() });
    };
    syncInformer.addHandler({ onAdd: onSync, onUpdate: (_previous, sync) => onSync(sync) });
    informers.push(syncInformer);
    syncInformer.start();
    for (const skr of options.skrs) {
      const kubeConfig = skr.kubeConfig();
      const informer = new ResilientInformer<V1ConfigMap>({
        kubeConfig,
        source: configMapSource(kubeConfig),
        watchdogMs: 60_000,
      });
      const onMap = (map: V1ConfigMap) =>
        configMaps.consider({ kyma: skr.name, greeting: map.data?.['greeting'], atMs: Date.now() });
      informer.addHandler({ onAdd: onMap, onUpdate: (_previous, map) => onMap(map) });
      informers.push(informer);
      informer.start();
    }
    while (Date.now() < options.deadline) {
      if (!child.isRunning()) throw new Error(`${SAMPLE_MANAGER.name} exited; see ${child.logFile}`);
      const ready = await fetch(`http://127.0.0.1:${metricsPort}/readyz`).then(
        (answer) => answer.status === 200,
        () => false,
      );
      if (ready && options.skrs.every((skr) => configMaps.current(skr.name))) {
        return { child, metricsPort, syncResources, configMaps, stop };
      }
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    throw new Error(
      `timed out waiting for ${SAMPLE_MANAGER.name} to be ready and its ConfigMap ${SAMPLE_CONFIG_MAP.namespace}/${SAMPLE_CONFIG_MAP.name} in every SKR; see ${child.logFile}`,
    );
  } catch (error) {
    await stop();
    throw error;
  }
}

/** When the manager's SyncResource and the SKR's ConfigMap carry `greeting`, for the round-trip timeline. */
export interface RoundTripMarks {
  syncResourceAtMs?: number;
  appliedAtMs?: number;
}

/**
 * Marks the two steps after the ModuleConfig for one edit: call before sending it; `done` resolves when the SKR's
 * ConfigMap carries the greeting (or never: race it with a timeout), `stop` ends the subscriptions.
 */
export function markRoundTrip(
  manager: SampleManagerProcess,
  kyma: string,
  greeting: string,
): { marks: RoundTripMarks; done: Promise<void>; stop(): void } {
  const marks: RoundTripMarks = {};
  let resolve: () => void = () => {};
  const done = new Promise<void>((r) => (resolve = r));
  const unsubscribe = [
    manager.syncResources.subscribe((seen) => {
      if (seen.kyma === kyma && seen.greeting === greeting) marks.syncResourceAtMs ??= seen.atMs;
    }),
    manager.configMaps.subscribe((seen) => {
      if (seen.kyma === kyma && seen.greeting === greeting) {
        marks.appliedAtMs ??= seen.atMs;
        resolve();
      }
    }),
  ];
  return { marks, done, stop: () => unsubscribe.forEach((off) => off()) };
}

/** Timeline lines for the two steps, in the shape formatTimeline prints. */
export function roundTripSteps(
  marks: RoundTripMarks,
  skr: string,
): { atMs: number | undefined; what: string }[] {
  return [
    {
      atMs: marks.syncResourceAtMs,
      what: `${SAMPLE_MANAGER.name}'s SyncResource updated in KCP (ConfigMap ${SAMPLE_CONFIG_MAP.name} rendered)`,
    },
    {
      atMs: marks.appliedAtMs,
      what: `ConfigMap ${DEFAULTS.skrNamespace}/${SAMPLE_CONFIG_MAP.name} updated in ${skr} (applied by skr-agent)`,
    },
  ];
}

/**
 * Runs `edit` (the demo's timed edit) and, when the system runs the sample manager, follows it on into the SKR: the
 * manager's SyncResource and the ConfigMap the agent applied. `roundTripMs` is edit sent → ConfigMap updated.
 */
export async function timeRoundTrip<T extends { sentAtMs: number }>(
  system: { manager?: SampleManagerProcess },
  skr: string,
  greeting: string,
  timeoutMs: number,
  edit: () => Promise<T>,
): Promise<{ timeline: T; later: { atMs: number | undefined; what: string }[]; roundTripMs?: number }> {
  if (!system.manager) return { timeline: await edit(), later: [] };
  const roundTrip = markRoundTrip(system.manager, skr, greeting);
  let timer: NodeJS.Timeout | undefined;
  try {
    const timeline = await edit();
    const left = Math.max(0, timeline.sentAtMs + timeoutMs - Date.now());
    await Promise.race([roundTrip.done, new Promise<void>((resolve) => (timer = setTimeout(resolve, left)))]);
    const { appliedAtMs } = roundTrip.marks;
    return {
      timeline,
      later: roundTripSteps(roundTrip.marks, skr),
      ...(appliedAtMs !== undefined ? { roundTripMs: appliedAtMs - timeline.sentAtMs } : {}),
    };
  } finally {
    clearTimeout(timer);
    roundTrip.stop();
  }
}
