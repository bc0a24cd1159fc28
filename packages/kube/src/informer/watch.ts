// One watch of a collection, from a resourceVersion until it ends: the watchdog that ends a silent one, the resync
// timer that runs while it lasts, and the outcome it ends with (closed, timed out, gone, silent, stopped, or failed).
import type { KubeConfig } from '@kubernetes/client-node';
import type { Clock, TimerHandle } from '@skr-watcher/api';
import { WatchFailure, statusCodeOf } from './failure.js';

export type WatchOutcome = 'closed' | 'timeout' | 'gone' | 'watchdog' | 'stopped';

/** client-node's Watch, as far as a watch here uses it. */
export interface Watcher {
  watch(
    path: string,
    query: Record<string, string | number | boolean | undefined>,
    onEvent: (type: string, object: unknown) => void,
    onDone: (error: unknown) => void,
  ): Promise<{ abort(): void }>;
}

export interface WatchRequest {
  /** Names the resource in errors. */
  resource: string;
  path: string;
  labelSelector?: string;
  fieldSelector?: string;
  resourceVersion: string;
}

export interface WatchTimers {
  clock: Clock;
  /** Ends the watch as 'watchdog' when no event (bookmarks count) came for this long. */
  watchdogMs: number;
  /** A resync while the watch lasts: first after `firstInMs`, then every `everyMs`. */
  resync?: { firstInMs: number; everyMs: number; run(): void };
}

export interface OpenWatch {
  /** Settles once with how the watch ended; rejects with a WatchFailure. */
  readonly ended: Promise<WatchOutcome>;
  /** Ends the watch as 'stopped'; a no-op once it ended. */
  stop(): void;
}

/**
 * Opens a watch; `onEvent` is told every event, ERROR ones included (they then end the watch: a 410 as 'gone',
 * others as a WatchFailure).
 */
export function openWatch(
  watcher: Watcher,
  request: WatchRequest,
  timers: WatchTimers,
  onEvent: (type: string, object: unknown) => void,
): OpenWatch {
  const { clock } = timers;
  let stop: () => void = () => {};
  const ended = new Promise<WatchOutcome>((resolve, reject) => {
    let finished = false;
    let controller: { abort(): void } | undefined;
    let watchdog: TimerHandle | undefined;
    let resync: TimerHandle | undefined;
    const finish = (outcome: WatchOutcome | Error) => {
      if (finished) return;
      finished = true;
      if (watchdog !== undefined) clock.clearTimeout(watchdog);
      if (resync !== undefined) clock.clearTimeout(resync);
      controller?.abort();
      if (outcome instanceof Error) reject(outcome);
      else resolve(outcome);
    };
    const armWatchdog = () => {
      if (watchdog !== undefined) clock.clearTimeout(watchdog);
      watchdog = clock.setTimeout(() => finish('watchdog'), timers.watchdogMs);
    };
    stop = () => finish('stopped');
    armWatchdog();
    const replay = timers.resync;
    if (replay) {
      // A resync is a replay of the cache: the watch goes on meanwhile, and no new one is opened for it.
      const again = () => {
        replay.run();
        resync = clock.setTimeout(again, replay.everyMs);
      };
      resync = clock.setTimeout(again, replay.firstInMs);
    }

    const event = (type: string, object: unknown) => {
      if (finished) return;
      armWatchdog();
      onEvent(type, object);
      if (type === 'ERROR') finish(errorEventOutcome(request.resource, object));
    };
    const done = (error: unknown) => {
      if (!error) return finish('closed');
      if (statusCodeOf(error) === 410) return finish('gone');
      // client-node aborts a watch that received no bytes for its silence bound (the informer sets it past the
      // watchdog): a silent connection, not a failure.
      if ((error as { name?: unknown }).name === 'TimeoutError') return finish('timeout');
      if ((error as { name?: unknown }).name === 'AbortError' && finished) return;
      finish(new WatchFailure(`watch ${request.resource}`, statusCodeOf(error), { cause: error }));
    };

    const query: Record<string, string | number | boolean | undefined> = {
      resourceVersion: request.resourceVersion,
      allowWatchBookmarks: true,
      labelSelector: request.labelSelector,
      fieldSelector: request.fieldSelector,
      // The server closes the watch after 5 to 10 min so connections move between replicas.
      timeoutSeconds: 300 + Math.floor(Math.random() * 300),
    };
    watcher.watch(request.path, query, event, done).then(
      (abort) => {
        controller = abort;
        if (finished) abort.abort();
      },
      (error: unknown) =>
        finish(new WatchFailure(`watch ${request.resource}`, statusCodeOf(error), { cause: error })),
    );
  });
  return { ended, stop: () => stop() };
}

/** How an ERROR event ends a watch: 410 means the resourceVersion is gone, anything else is a failure. */
function errorEventOutcome(resource: string, object: unknown): WatchOutcome | WatchFailure {
  const code = (object as { code?: unknown } | null)?.code;
  if (code === 410) return 'gone';
  const message = (object as { message?: unknown } | null)?.message;
  return new WatchFailure(
    `watch ${resource}: error event ${typeof code === 'number' ? code : ''} ${typeof message === 'string' ? message : ''}`.trim(),
    typeof code === 'number' ? code : undefined,
  );
}

/**
 * `kubeConfig` as client-node's Watch uses it (current cluster, request authentication), with `accept` set on every
 * request it authenticates. A view: the KubeConfig itself, and any authentication hook set on it, stay as they are.
 */
export function accepting(kubeConfig: KubeConfig, accept: string): KubeConfig {
  const view = Object.create(kubeConfig) as KubeConfig;
  view.applySecurityAuthentication = async (context) => {
    await kubeConfig.applySecurityAuthentication(context);
    context.setHeaderParam('Accept', accept);
  };
  return view;
}
