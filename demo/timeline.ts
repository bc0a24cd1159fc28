// One scripted Module CR edit in an SKR, followed through the system: the write, the webhook's admission,
// the listener's accepted callback, and the ModuleConfig in KCP, each with its time.
import { CustomObjectsApi } from '@kubernetes/client-node';
import { SAMPLE_MODULE, type LocalSystem } from '../test/support/system/index.js';
import type { MirroredModule } from '../test/support/system/module-configs.js';
import { formatSteps, type EdgeObservations } from '../test/support/system/observations.js';

export interface EditTimeline {
  skr: string;
  greeting: string;
  sentAtMs: number;
  writeReturnedAtMs: number;
  /** The webhook logged the relevant change (undefined: not observed). */
  admissionAtMs?: number;
  /** The KCP listener accepted the callback with the SKR's identity. */
  callbackAtMs?: number;
  /** KCP's ModuleConfig carries the new greeting. */
  moduleConfigAtMs?: number;
}

/** Sets spec.greeting of the sample Module CR in `skr` and waits until KCP's ModuleConfig shows it. */
export async function timeEdit(
  system: LocalSystem,
  observations: EdgeObservations,
  skr: string,
  greeting: string,
  timeoutMs: number,
): Promise<EditTimeline> {
  const isOurs = (kind: string, namespace: string, name: string) =>
    kind === 'Sample' && namespace === SAMPLE_MODULE.namespace && name === SAMPLE_MODULE.name;
  const timeline: EditTimeline = { skr, greeting, sentAtMs: 0, writeReturnedAtMs: 0 };
  let mirrored: () => void = () => {};
  const arrived = new Promise<void>((resolve) => (mirrored = resolve));
  // Log lines carry whole milliseconds; allow for that truncation when comparing with the send time.
  const afterSend = (atMs: number) => timeline.sentAtMs > 0 && atMs >= timeline.sentAtMs - 1;
  const unsubscribe = [
    observations.onAdmission((seen) => {
      if (seen.skr === skr && isOurs(seen.kind, seen.namespace, seen.name) && afterSend(seen.atMs))
        timeline.admissionAtMs ??= seen.atMs;
    }),
    observations.onEvent((event) => {
      const atMs = Date.parse(event.time);
      if (event.runtimeId === skr && isOurs(event.kind, event.namespace, event.name) && afterSend(atMs))
        timeline.callbackAtMs ??= atMs;
    }),
    system.moduleConfigs.subscribe((mirror: MirroredModule) => {
      if (
        mirror.kyma === skr &&
        mirror.module === SAMPLE_MODULE.module &&
        mirror.spec['greeting'] === greeting
      ) {
        timeline.moduleConfigAtMs ??= mirror.seenAtMs;
        mirrored();
      }
    }),
  ];
  const api = system.skr(skr).kubeConfig().makeApiClient(CustomObjectsApi);
  let timer: NodeJS.Timeout | undefined;
  try {
    timeline.sentAtMs = Date.now();
    await api
      .patchNamespacedCustomObject({
        ...SAMPLE_MODULE,
        body: [{ op: 'replace', path: '/spec/greeting', value: greeting }],
      })
      .catch((cause: unknown) => {
        throw new Error(`edit Sample ${SAMPLE_MODULE.namespace}/${SAMPLE_MODULE.name} in ${skr}`, { cause });
      });
    timeline.writeReturnedAtMs = Date.now();
    await Promise.race([arrived, new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
    // The callback is streamed a moment after it is accepted; give the stream a short grace.
    if (timeline.moduleConfigAtMs !== undefined && timeline.callbackAtMs === undefined)
      await new Promise((resolve) => setTimeout(resolve, 500));
    return timeline;
  } finally {
    clearTimeout(timer);
    for (const stop of unsubscribe) stop();
  }
}

/** The timeline as lines, in time order, with offsets from the moment the edit was sent; `later`: steps after KCP. */
export function formatTimeline(
  timeline: EditTimeline,
  later: { atMs: number | undefined; what: string }[] = [],
): string[] {
  const steps: { atMs: number | undefined; what: string }[] = [
    { atMs: timeline.sentAtMs, what: `edit sent to the ${timeline.skr} API server` },
    { atMs: timeline.admissionAtMs, what: `admission: skr-webhook (${timeline.skr}) saw the change` },
    {
      atMs: timeline.writeReturnedAtMs,
      what: `edit accepted by the ${timeline.skr} API server (write returned)`,
    },
    {
      atMs: timeline.callbackAtMs,
      what: `callback accepted by the KCP listener (runtime-id ${timeline.skr})`,
    },
    { atMs: timeline.moduleConfigAtMs, what: 'ModuleConfig updated in KCP (spec.resource.spec.greeting)' },
    ...later,
  ];
  return formatSteps(timeline.sentAtMs, steps);
}
