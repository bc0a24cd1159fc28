// An event the dispatcher lets go of without KCP taking it: counted by reason, told to the observer, and written
// as a warn line naming the object, at most one a second per reason.
import type { Clock, WatchEventV2 } from '@skr-watcher/api';
import type { Logger } from '@skr-watcher/telemetry';
import { LogThrottle } from '../log-throttle.js';
import { DROP_MESSAGES, type DispatchObserver, type DispatchStats, type DropReason } from './observer.js';
import { identity } from './queue.js';

/**
 * Drops can come once per event (a full queue, junk from a client, the end of a long outage, a shutdown with
 * thousands queued): one line per second per reason says enough; the counters have the totals.
 */
const DROP_LOG_INTERVAL_MS = 1000;

/** The change a drop is about. */
export interface DroppedChange {
  manager: string;
  event: WatchEventV2;
  uid?: string | undefined;
}

export interface DropReportOptions {
  /** Counted into `dropped` by reason. */
  stats: DispatchStats;
  observer?: DispatchObserver | undefined;
  logger: Logger;
  clock: Clock;
  /** The queue's bound, written on `queue_full` lines. */
  maxQueue: number;
}

export class DropReport {
  private readonly log: LogThrottle;

  constructor(private readonly options: DropReportOptions) {
    this.log = new LogThrottle(options.logger, DROP_LOG_INTERVAL_MS, options.clock);
  }

  /** One dropped change after `attempts` sends; `extra` goes into its log line (`why`, `status`). */
  report(
    reason: DropReason,
    what: DroppedChange,
    attempts: number,
    extra: Record<string, unknown> = {},
  ): void {
    this.options.stats.dropped[reason]++;
    this.options.observer?.dropped(reason);
    const fields = { ...identity(what.manager, what.event), uid: what.uid, reason, attempts, ...extra };
    this.log.warn(
      reason,
      reason === 'queue_full' ? { ...fields, maxQueue: this.options.maxQueue } : fields,
      DROP_MESSAGES[reason],
    );
  }

  /** Writes the counts of lines left out since each reason's last line (at the end of a shutdown). */
  flush(): void {
    this.log.flush();
  }
}
