// Warnings that can come once per event (drops at shutdown, events KCP refuses, a full queue) would flood the
// log in a burst: one line per message key and interval, the next one carrying how many were left out.
import type { Logger } from '@skr-watcher/telemetry';
import { systemClock, type Clock } from '@skr-watcher/api';

interface KeyState {
  lastAt: number;
  suppressed: number;
  /** Fields of the last line left out, for the summary that `flush` writes. */
  lastFields: Record<string, unknown>;
  msg: string;
}

export class LogThrottle {
  private readonly keys = new Map<string, KeyState>();

  constructor(
    private readonly logger: Logger,
    private readonly intervalMs: number,
    private readonly clock: Clock = systemClock,
  ) {}

  /** Writes `msg` at warn unless a line with the same key was written less than the interval ago. */
  warn(key: string, fields: Record<string, unknown>, msg: string): void {
    const now = this.clock.now();
    let state = this.keys.get(key);
    if (state && now - state.lastAt < this.intervalMs) {
      state.suppressed++;
      state.lastFields = fields;
      state.msg = msg;
      return;
    }
    const suppressed = state?.suppressed ?? 0;
    state ??= { lastAt: now, suppressed: 0, lastFields: fields, msg };
    state.lastAt = now;
    state.suppressed = 0;
    this.keys.set(key, state);
    this.logger.warn({ ...fields, suppressed }, msg);
  }

  /** One line per key with lines left out since its last line (e.g. at the end of a shutdown). */
  flush(): void {
    for (const state of this.keys.values()) {
      if (state.suppressed === 0) continue;
      this.logger.warn(
        { ...state.lastFields, suppressed: state.suppressed },
        `${state.msg}: ${state.suppressed} more not logged one by one (fields of the last)`,
      );
      state.suppressed = 0;
    }
  }
}
