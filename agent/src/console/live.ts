// Live updates for the console's pages, as server-sent events: each callback the listener accepts (from the agent's
// event stream) and each change of a Kyma or Manifest in KCP (a watch held only while someone is looking), so a page
// shows a module's new state as soon as the agent writes it. Pages re-read their data when told what changed.
import { Watch, type KubeConfig } from '@kubernetes/client-node';
import { GROUP, KINDS, LABELS } from '@skr-watcher/api';
import type { Logger } from '@skr-watcher/telemetry';
import type { EventStream, StreamedEvent } from '../event-stream.js';

/** Changes within this are sent as one message, so a burst of status writes is one re-read per page. */
const CHANGE_COALESCE_MS = 250;
/** A watch that ended is opened again after this. */
const REWATCH_MS = 1_000;

export interface LiveChange {
  /** Names of the Kymas that changed (their own object or one of their Manifests). */
  kymas: string[];
}

export type LiveMessage = { type: 'callback'; event: StreamedEvent } | { type: 'change'; change: LiveChange };

export interface LiveFeed {
  /** Calls `viewer` with every message from now on; returns the unsubscribe. */
  subscribe(viewer: (message: LiveMessage) => void): () => void;
  viewers(): number;
  close(): void;
}

interface WatchedObject {
  metadata?: { name?: string; labels?: Record<string, string> };
}

export function createLiveFeed(options: {
  kubeConfig: KubeConfig;
  namespace: string;
  events: EventStream;
  logger: Logger;
}): LiveFeed {
  const { namespace, logger } = options;
  const viewers = new Set<(message: LiveMessage) => void>();
  const send = (message: LiveMessage) => {
    for (const viewer of viewers) viewer(message);
  };
  let pending = new Set<string>();
  let flush: NodeJS.Timeout | undefined;
  const changed = (kyma: string) => {
    pending.add(kyma);
    flush ??= setTimeout(() => {
      flush = undefined;
      const kymas = [...pending].sort();
      pending = new Set();
      send({ type: 'change', change: { kymas } });
    }, CHANGE_COALESCE_MS);
  };

  // Watches and the event-stream tap exist only while a page is open.
  let stop: (() => void) | undefined;
  const start = () => {
    let stopped = false;
    const aborts = new Set<AbortController>();
    const watcher = new Watch(options.kubeConfig);
    const watch = (kind: 'kyma' | 'manifest', kymaOf: (object: WatchedObject) => string | undefined) => {
      const path = `/apis/${GROUP}/${KINDS[kind].version}/namespaces/${namespace}/${KINDS[kind].plural}`;
      const again = () => {
        if (!stopped) setTimeout(open, REWATCH_MS).unref();
      };
      const open = () => {
        if (stopped) return;
        watcher
          .watch(
            path,
            { allowWatchBookmarks: false },
            (_phase: string, object: WatchedObject) => {
              const kyma = kymaOf(object);
              if (kyma) changed(kyma);
            },
            (error: unknown) => {
              if (error && !stopped)
                logger.debug({ err: error, path }, 'console watch ended; opening it again');
              again();
            },
          )
          .then((abort) => {
            if (stopped) abort.abort();
            else aborts.add(abort);
          })
          .catch((error: unknown) => {
            logger.warn({ err: error, path }, 'console watch could not be opened; trying again');
            again();
          });
      };
      open();
    };
    watch('kyma', (object) => object.metadata?.name);
    watch('manifest', (object) => object.metadata?.labels?.[LABELS.kymaName]);
    const untap = options.events.subscribe((event) => send({ type: 'callback', event }));
    stop = () => {
      stopped = true;
      untap();
      for (const abort of aborts) abort.abort();
      aborts.clear();
    };
  };

  return {
    subscribe(viewer) {
      viewers.add(viewer);
      if (!stop) start();
      return () => {
        viewers.delete(viewer);
        if (viewers.size === 0 && stop) {
          stop();
          stop = undefined;
        }
      };
    },
    viewers: () => viewers.size,
    close() {
      viewers.clear();
      stop?.();
      stop = undefined;
      if (flush) clearTimeout(flush);
    },
  };
}
