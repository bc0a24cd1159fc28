// Reconciles and targeted mirrors of this replica in flight, per Kyma. A run is registered before its first await,
// so a handover decided from then on waits for it, and is withdrawn (every request of it aborted, sent or not) when
// its Kyma is handed over or membership is suspended.
import { appendFileSync } from 'node:fs';
import { abortableBy } from '@skr-watcher/kube';

/** What the requests of a run withdrawn by this replica are aborted with. */
export class WorkWithdrawnError extends Error {
  constructor(kymaKey: string, reason: string) {
    super(`work on Kyma ${kymaKey} withdrawn: ${reason}`);
    // Not AbortError or TimeoutError: those mean a cluster that does not answer and would trip its circuit.
    this.name = 'WorkWithdrawnError';
  }
}

/** Told of every run's start and end. */
export type Journal = (kymaKey: string, phase: 'start' | 'end') => void;

/** Appends `{kyma, replica, phase, t}` lines to `file` (tests prove with it that two replicas never overlap). */
export function fileJournal(file: string, replica: string): Journal {
  return (kymaKey, phase) =>
    // Synchronous, so a SIGKILL loses nothing written before it; hrtime is CLOCK_MONOTONIC, shared by processes.
    appendFileSync(
      file,
      `${JSON.stringify({ kyma: kymaKey, replica, phase, t: process.hrtime.bigint().toString() })}\n`,
    );
}

interface Run {
  /** Resolves when the run has ended, however. */
  settled: Promise<unknown>;
  abort: AbortController;
}

export class Runs {
  private readonly inFlight = new Map<string, Set<Run>>();

  constructor(private readonly journal: Journal = () => {}) {}

  /**
   * Starts `work`, registered as in flight before its first await. Resolves undefined when it was withdrawn: that
   * ends like a run for a Kyma that is not ours, no failure to back off; the new owner, or this replica once it
   * resumes, runs it again.
   */
  start<T>(kymaKey: string, work: () => Promise<T>): Promise<T | undefined> {
    this.journal(kymaKey, 'start');
    const runs = this.inFlight.get(kymaKey) ?? new Set<Run>();
    this.inFlight.set(kymaKey, runs);
    const abort = new AbortController();
    const run = abortableBy(abort.signal, work).finally(() => {
      this.journal(kymaKey, 'end');
      runs.delete(entry);
      if (runs.size === 0 && this.inFlight.get(kymaKey) === runs) this.inFlight.delete(kymaKey);
    });
    const entry: Run = { settled: run.catch(() => undefined), abort };
    runs.add(entry);
    return run.catch((error: unknown) => {
      if (abort.signal.aborted) return undefined;
      throw error;
    });
  }

  /** Resolves once every run of the key in flight now has ended. */
  settled(kymaKey: string): Promise<unknown> {
    return Promise.all([...(this.inFlight.get(kymaKey) ?? [])].map((run) => run.settled));
  }

  /** Aborts every run of the key with a WorkWithdrawnError. */
  withdraw(kymaKey: string, reason: string): void {
    for (const run of this.inFlight.get(kymaKey) ?? [])
      run.abort.abort(new WorkWithdrawnError(kymaKey, reason));
  }

  withdrawAll(reason: string): void {
    for (const key of this.inFlight.keys()) this.withdraw(key, reason);
  }

  /** Keys with a run in flight. */
  keys(): IterableIterator<string> {
    return this.inFlight.keys();
  }

  /** True when nothing runs. */
  get idle(): boolean {
    return this.inFlight.size === 0;
  }
}
