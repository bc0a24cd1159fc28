// Drift put back at once: a user edits an object a module installed in an SKR (the greeter module's
// ConfigMap); skr-webhook sees the write (its label-selected rule), calls back, and skr-agent applies the object
// again from its Manifest. Followed with a watch on the object, so "put back" is when the SKR stored the revert.
import { CoreV1Api, PatchStrategy, Watch, setHeaderOptions, type KubeConfig } from '@kubernetes/client-node';
import { GREETER } from './modules.js';
import { formatSteps, type EdgeObservations } from './observations.js';

/** The greeter ConfigMap's key the demo edits, and the value the module installs. */
export const DRIFT_KEY = 'greeting';
export const INSTALLED_GREETING = 'hello';

export interface DriftTimeline {
  skr: string;
  sentAtMs: number;
  writeReturnedAtMs: number;
  admissionAtMs?: number;
  callbackAtMs?: number;
  /** The watch showed the ConfigMap as installed again. */
  revertedAtMs?: number;
}

/**
 * A watch of one ConfigMap: `shows(value)` resolves with the time of the first event after the call whose
 * data[key] === value (undefined after `timeoutMs`).
 */
export interface ConfigMapWatch {
  shows(value: string, timeoutMs: number): Promise<number | undefined>;
  stop(): void;
}

export async function watchConfigMap(
  skrConfig: KubeConfig,
  namespace: string,
  name: string,
  key: string,
): Promise<ConfigMapWatch> {
  let current: string | undefined;
  const waiters = new Set<{ value: string; resolve: (atMs: number) => void }>();
  let ready: () => void = () => {};
  const listed = new Promise<void>((resolve) => (ready = resolve));
  const request = await new Watch(skrConfig).watch(
    `/api/v1/namespaces/${namespace}/configmaps`,
    { fieldSelector: `metadata.name=${name}`, allowWatchBookmarks: false },
    (_type: string, object: { data?: Record<string, string> }) => {
      const atMs = Date.now();
      current = object.data?.[key];
      ready();
      for (const waiter of waiters)
        if (waiter.value === current) {
          waiters.delete(waiter);
          waiter.resolve(atMs);
        }
    },
    () => {},
  );
  await Promise.race([listed, new Promise((resolve) => setTimeout(resolve, 5_000))]);
  return {
    shows(value, timeoutMs) {
      return new Promise<number | undefined>((resolve) => {
        const timer = setTimeout(() => {
          waiters.delete(waiter);
          resolve(undefined);
        }, timeoutMs);
        const waiter = {
          value,
          resolve: (atMs: number) => {
            clearTimeout(timer);
            resolve(atMs);
          },
        };
        waiters.add(waiter);
      });
    },
    stop: () => request.abort(),
  };
}

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/**
 * Edits data.greeting of the greeter ConfigMap in `skr` as a user would (their own field manager) and waits, on
 * `watch`, until the ConfigMap carries the installed value again.
 */
export async function timeDriftRevert(options: {
  skrConfig: KubeConfig;
  skr: string;
  watch: ConfigMapWatch;
  observations?: EdgeObservations;
  edit: string;
  timeoutMs: number;
}): Promise<DriftTimeline> {
  const { skr } = options;
  const timeline: DriftTimeline = { skr, sentAtMs: 0, writeReturnedAtMs: 0 };
  const isOurs = (kind: string, namespace: string, name: string) =>
    kind === 'ConfigMap' && namespace === GREETER.namespace && name === GREETER.configMap;
  const afterSend = (atMs: number) => timeline.sentAtMs > 0 && atMs >= timeline.sentAtMs - 1;
  const unsubscribe = options.observations
    ? [
        options.observations.onAdmission((seen) => {
          if (seen.skr === skr && isOurs(seen.kind, seen.namespace, seen.name) && afterSend(seen.atMs))
            timeline.admissionAtMs ??= seen.atMs;
        }),
        options.observations.onEvent((event) => {
          const atMs = Date.parse(event.time);
          if (event.runtimeId === skr && isOurs(event.kind, event.namespace, event.name) && afterSend(atMs))
            timeline.callbackAtMs ??= atMs;
        }),
      ]
    : [];
  try {
    // Both before the write: one chunk of the watch may carry the edit and its revert together.
    const edited = options.watch.shows(options.edit, options.timeoutMs);
    const reverted = options.watch.shows(INSTALLED_GREETING, options.timeoutMs);
    timeline.sentAtMs = Date.now();
    await options.skrConfig
      .makeApiClient(CoreV1Api)
      .patchNamespacedConfigMap(
        {
          name: GREETER.configMap,
          namespace: GREETER.namespace,
          fieldManager: 'demo-user',
          body: { data: { [DRIFT_KEY]: options.edit } },
        },
        mergePatch,
      )
      .catch((cause: unknown) => {
        throw new Error(`edit ConfigMap ${GREETER.namespace}/${GREETER.configMap} in ${skr}`, { cause });
      });
    timeline.writeReturnedAtMs = Date.now();
    // The watch shows the edit, then the revert (the first event with the installed value after the write).
    if ((await edited) !== undefined) timeline.revertedAtMs = await reverted;
    // The callback is streamed a moment after it is accepted; give the stream a short grace.
    if (options.observations && timeline.revertedAtMs !== undefined && timeline.callbackAtMs === undefined)
      await new Promise((resolve) => setTimeout(resolve, 500));
    return timeline;
  } finally {
    for (const stop of unsubscribe) stop();
  }
}

export function formatDriftTimeline(timeline: DriftTimeline): string[] {
  const what = `ConfigMap ${GREETER.namespace}/${GREETER.configMap}`;
  return formatSteps(timeline.sentAtMs, [
    {
      atMs: timeline.sentAtMs,
      what: `edit of ${what} sent to the ${timeline.skr} API server (a user's write)`,
    },
    { atMs: timeline.admissionAtMs, what: `admission: skr-webhook (${timeline.skr}) saw the change` },
    {
      atMs: timeline.writeReturnedAtMs,
      what: `edit accepted by the ${timeline.skr} API server (write returned)`,
    },
    {
      atMs: timeline.callbackAtMs,
      what: `callback accepted by the KCP listener (runtime-id ${timeline.skr})`,
    },
    { atMs: timeline.revertedAtMs, what: `${what} put back in ${timeline.skr} (applied by skr-agent)` },
  ]);
}
