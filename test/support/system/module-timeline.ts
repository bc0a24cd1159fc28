// One module enabled in an SKR Kyma, followed to Ready: the write, the webhook's callback, the Manifest the agent
// writes in KCP, the objects it applies in the SKR (the Manifest's status.synced), the default CR, the Manifest's
// state and the module's state in the Kyma status, each with its time. Watches, not polls: each time is when this
// process received the change.
import { ApiextensionsV1Api, CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { DEFAULTS, GROUP, KINDS, LABELS, manifestName } from '@skr-watcher/api';
import { customResourceSource, mergePatchCustomObject, ResilientInformer } from '@skr-watcher/kube';
import { z } from 'zod';
import type { LiveEvent } from './live-events.js';
import { GREETER, GREETER_DEFAULT_CR } from './modules.js';
import { formatSteps, type EdgeObservations } from './observations.js';
import { SKR_KYMA } from './index.js';

const manifestShape = z.looseObject({
  metadata: z.looseObject({ name: z.string() }),
  spec: z.looseObject({ version: z.string().optional() }).optional(),
  status: z
    .looseObject({
      state: z.string().optional(),
      synced: z.array(z.looseObject({ kind: z.string(), name: z.string() })).optional(),
      conditions: z.array(z.looseObject({ type: z.string(), status: z.string() })).optional(),
    })
    .optional(),
});

const kymaShape = z.looseObject({
  metadata: z.looseObject({ name: z.string() }),
  status: z
    .looseObject({
      modules: z.array(z.looseObject({ name: z.string(), state: z.string().optional() })).optional(),
    })
    .optional(),
});

export interface ModuleTimeline {
  skr: string;
  module: string;
  manifest: string;
  sentAtMs: number;
  writeReturnedAtMs?: number;
  /** Whether callbacks were watched (the live event stream); without it the step is left out. */
  callbacksWatched: boolean;
  callbackAtMs?: number;
  manifestAtMs?: number;
  /** status.synced first listed objects: the set was applied in the SKR. */
  appliedAtMs?: number;
  applied?: string[];
  /** `Kind namespace/name` of the module's default CR (none: the step is left out). */
  defaultCr?: string;
  /** The ModuleCR condition turned True: the default CR was created. */
  defaultCrAtMs?: number;
  /** The Manifest's status.state became Ready. */
  readyAtMs?: number;
  /** The module's entry in the KCP Kyma's status.modules became Ready. */
  kymaReadyAtMs?: number;
  /** The last state seen (for a report when Ready was not reached). */
  lastState?: string;
}

/** A module as a Kyma names it, and its OCM component (which names its Manifest). */
export interface ModuleRef {
  module: string;
  ocmComponentName: string;
  /** `Kind namespace/name` of its default CR, if it has one. */
  defaultCr?: string;
}

const GREETER_REF: ModuleRef = {
  module: GREETER.module,
  ocmComponentName: GREETER.ocmComponentName,
  defaultCr: `${GREETER_DEFAULT_CR.kind} ${GREETER_DEFAULT_CR.metadata.namespace}/${GREETER_DEFAULT_CR.metadata.name}`,
};

/**
 * Enables a module (default: greeter) in the SKR Kyma of `skr` and follows it until the Kyma reports it Ready (or
 * `timeoutMs`).
 */
export async function timeModuleInstall(options: {
  kcp: KubeConfig;
  skrConfig: KubeConfig;
  namespace: string;
  skr: string;
  observations?: EdgeObservations;
  timeoutMs: number;
  module?: ModuleRef;
}): Promise<ModuleTimeline> {
  const { kcp, skr } = options;
  const { module, ocmComponentName, defaultCr } = options.module ?? GREETER_REF;
  const timeline: ModuleTimeline = {
    skr,
    module,
    manifest: manifestName(ocmComponentName, skr, module),
    sentAtMs: 0,
    callbacksWatched: options.observations !== undefined,
    ...(defaultCr ? { defaultCr } : {}),
  };
  let done: () => void = () => {};
  const finished = new Promise<void>((resolve) => (done = resolve));
  const started = () => timeline.sentAtMs > 0;

  const onManifest = (object: unknown) => {
    const atMs = Date.now();
    const parsed = manifestShape.safeParse(object);
    if (!started() || !parsed.success || parsed.data.metadata.name !== timeline.manifest) return;
    const status = parsed.data.status;
    timeline.manifestAtMs ??= atMs;
    if (status?.synced && status.synced.length > 0 && timeline.appliedAtMs === undefined) {
      timeline.appliedAtMs = atMs;
      timeline.applied = status.synced.map((entry) => `${entry.kind} ${entry.name}`);
    }
    if (status?.conditions?.some((c) => c.type === 'ModuleCR' && c.status === 'True'))
      timeline.defaultCrAtMs ??= atMs;
    if (status?.state) timeline.lastState = status.state;
    if (status?.state === 'Ready') timeline.readyAtMs ??= atMs;
    if (timeline.kymaReadyAtMs !== undefined && timeline.readyAtMs !== undefined) done();
  };
  const onKyma = (object: unknown) => {
    const atMs = Date.now();
    const parsed = kymaShape.safeParse(object);
    if (!started() || !parsed.success || parsed.data.metadata.name !== skr) return;
    const entry = parsed.data.status?.modules?.find((m) => m.name === module);
    if (entry?.state === 'Ready' && timeline.readyAtMs !== undefined) {
      timeline.kymaReadyAtMs ??= atMs;
      done();
    }
  };
  const watches = kcpWatches(kcp, options.namespace, skr, {
    manifest: (object, deleted) => {
      if (!deleted) onManifest(object);
    },
    kyma: onKyma,
  });

  const unsubscribe = options.observations?.onEvent((event: LiveEvent) => {
    const atMs = Date.parse(event.time);
    if (started() && event.runtimeId === skr && event.kind === 'Kyma' && atMs >= timeline.sentAtMs - 1)
      timeline.callbackAtMs ??= atMs;
  });

  let timer: NodeJS.Timeout | undefined;
  try {
    await watches.synced();
    const skrKyma = SKR_KYMA;
    const api = options.skrConfig.makeApiClient(CustomObjectsApi);
    const current = (await api.getNamespacedCustomObject(skrKyma)) as { spec?: { modules?: unknown[] } };
    const modules = [...(current.spec?.modules ?? []), { name: module, channel: 'regular' }];
    timeline.sentAtMs = Date.now();
    await mergePatchCustomObject(api, skrKyma, { spec: { modules } }).catch((cause: unknown) => {
      throw new Error(`enable module ${module} in the Kyma of ${skr}`, { cause });
    });
    timeline.writeReturnedAtMs = Date.now();
    await Promise.race([
      finished,
      new Promise<void>((resolve) => (timer = setTimeout(resolve, options.timeoutMs))),
    ]);
    return timeline;
  } finally {
    clearTimeout(timer);
    unsubscribe?.();
    await watches.stop();
  }
}

/**
 * Watches of the Manifests of `skr` and of the Kymas in the KCP namespace; each change is handed over as it arrives,
 * so a time taken in a handler is when this process learnt of it (no polling interval in it).
 */
function kcpWatches(
  kcp: KubeConfig,
  namespace: string,
  skr: string,
  handlers: { manifest(object: unknown, deleted: boolean): void; kyma(object: unknown): void },
): { synced(): Promise<void>; stop(): Promise<void> } {
  const manifests = new ResilientInformer<{ metadata?: { name?: string } }>({
    kubeConfig: kcp,
    source: customResourceSource(kcp, {
      group: GROUP,
      version: KINDS.manifest.version,
      plural: KINDS.manifest.plural,
      namespace,
      labelSelector: `${LABELS.kymaName}=${skr}`,
    }),
    watchdogMs: 60_000,
  });
  manifests.addHandler({
    onAdd: (object) => handlers.manifest(object, false),
    onUpdate: (_, object) => handlers.manifest(object, false),
    onDelete: (object) => handlers.manifest(object, true),
  });
  const kymas = new ResilientInformer<{ metadata?: { name?: string } }>({
    kubeConfig: kcp,
    source: customResourceSource(kcp, {
      group: GROUP,
      version: KINDS.kyma.version,
      plural: KINDS.kyma.plural,
      namespace,
    }),
    watchdogMs: 60_000,
  });
  kymas.addHandler({ onAdd: handlers.kyma, onUpdate: (_, object) => handlers.kyma(object) });
  manifests.start();
  kymas.start();
  return {
    synced: async () => {
      await Promise.all([manifests.waitForSync(), kymas.waitForSync()]);
    },
    stop: async () => {
      await Promise.all([manifests.stop(), kymas.stop()]);
    },
  };
}

/** The timeline as lines, in time order, offsets from the moment the module was enabled. */
export function formatModuleTimeline(timeline: ModuleTimeline): string[] {
  const { skr } = timeline;
  const steps: { atMs: number | undefined; what: string }[] = [
    {
      atMs: timeline.sentAtMs,
      what: `module ${timeline.module} enabled: added to spec.modules of Kyma ${DEFAULTS.skrNamespace}/${DEFAULTS.skrKymaName} in ${skr}`,
    },
    { atMs: timeline.writeReturnedAtMs, what: `edit accepted by the ${skr} API server (write returned)` },
    ...(timeline.callbacksWatched
      ? [{ atMs: timeline.callbackAtMs, what: `callback accepted by the KCP listener (Kyma of ${skr})` }]
      : []),
    { atMs: timeline.manifestAtMs, what: `Manifest ${timeline.manifest} written in KCP` },
    {
      atMs: timeline.appliedAtMs,
      what: `objects applied in ${skr} (Manifest status.synced: ${timeline.applied?.join(', ') ?? '…'})`,
    },
    ...(timeline.defaultCr
      ? [{ atMs: timeline.defaultCrAtMs, what: `default CR ${timeline.defaultCr} created in ${skr}` }]
      : []),
    { atMs: timeline.readyAtMs, what: 'Manifest Ready' },
    {
      atMs: timeline.kymaReadyAtMs,
      what: `module ${timeline.module} Ready in the status of Kyma ${skr} (KCP)`,
    },
  ];
  return formatSteps(timeline.sentAtMs, steps);
}

/** What the module put into the SKR, read back from its API server (proof beyond the Manifest's word). */
export async function moduleObjectsIn(skrConfig: KubeConfig): Promise<string[]> {
  const found: string[] = [];
  const crd = await skrConfig
    .makeApiClient(ApiextensionsV1Api)
    .readCustomResourceDefinition({ name: `${GREETER.plural}.${GREETER.group}` })
    .catch(() => undefined);
  if (crd) found.push(`CustomResourceDefinition ${crd.metadata?.name}`);
  const configMap = await skrConfig
    .makeApiClient(CoreV1Api)
    .readNamespacedConfigMap({ name: GREETER.configMap, namespace: GREETER.namespace })
    .catch(() => undefined);
  if (configMap) found.push(`ConfigMap ${GREETER.namespace}/${GREETER.configMap}`);
  const cr = await skrConfig
    .makeApiClient(CustomObjectsApi)
    .getNamespacedCustomObject({
      group: GREETER.group,
      version: GREETER.crdVersion,
      plural: GREETER.plural,
      namespace: GREETER_DEFAULT_CR.metadata.namespace,
      name: GREETER_DEFAULT_CR.metadata.name,
    })
    .catch(() => undefined);
  if (cr)
    found.push(
      `${GREETER.kind} ${GREETER_DEFAULT_CR.metadata.namespace}/${GREETER_DEFAULT_CR.metadata.name}`,
    );
  return found;
}

/**
 * Removes a module from the SKR Kyma of `skr` and waits until its Manifest is gone from KCP and the Kyma status no
 * longer lists it (both watched); answers how long that took (ms), or undefined on timeout.
 */
export async function disableModule(options: {
  kcp: KubeConfig;
  skrConfig: KubeConfig;
  namespace: string;
  skr: string;
  module: ModuleRef;
  timeoutMs: number;
}): Promise<number | undefined> {
  const { module, ocmComponentName } = options.module;
  const name = manifestName(ocmComponentName, options.skr, module);
  const api = options.skrConfig.makeApiClient(CustomObjectsApi);
  let manifestPresent = false;
  let listed = false;
  let sent = 0;
  let goneAtMs: number | undefined;
  let done: () => void = () => {};
  const finished = new Promise<void>((resolve) => (done = resolve));
  const check = () => {
    if (sent === 0 || manifestPresent || listed) return;
    goneAtMs ??= Date.now();
    done();
  };
  const watches = kcpWatches(options.kcp, options.namespace, options.skr, {
    manifest: (object, deleted) => {
      if (manifestShape.safeParse(object).data?.metadata.name !== name) return;
      manifestPresent = !deleted;
      check();
    },
    kyma: (object) => {
      const parsed = kymaShape.safeParse(object).data;
      if (parsed?.metadata.name !== options.skr) return;
      listed = parsed.status?.modules?.some((m) => m.name === module) ?? false;
      check();
    },
  });
  let timer: NodeJS.Timeout | undefined;
  try {
    await watches.synced();
    const current = (await api.getNamespacedCustomObject(SKR_KYMA)) as {
      spec?: { modules?: { name?: string }[] };
    };
    const modules = (current.spec?.modules ?? []).filter((m) => m.name !== module);
    sent = Date.now();
    await mergePatchCustomObject(api, SKR_KYMA, { spec: { modules } }).catch((cause: unknown) => {
      throw new Error(`disable module ${module} in the Kyma of ${options.skr}`, { cause });
    });
    check();
    await Promise.race([
      finished,
      new Promise<void>((resolve) => (timer = setTimeout(resolve, options.timeoutMs))),
    ]);
    return goneAtMs === undefined ? undefined : goneAtMs - sent;
  } finally {
    clearTimeout(timer);
    await watches.stop();
  }
}

/** The greeter operator's Pods in the SKR (with `--pods`): name, phase, readiness and the node each runs on. */
export async function operatorPods(skrConfig: KubeConfig): Promise<string[]> {
  const pods = await skrConfig.makeApiClient(CoreV1Api).listNamespacedPod({
    namespace: GREETER.namespace,
    labelSelector: `app.kubernetes.io/name=${GREETER.deployment}`,
  });
  return pods.items.map((pod) => {
    const ready = pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True');
    return `Pod ${GREETER.namespace}/${pod.metadata?.name} ${pod.status?.phase}${ready ? ', Ready' : ''} on node ${pod.spec?.nodeName}`;
  });
}
