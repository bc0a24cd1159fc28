// The order in which free workers take queued keys: urgent keys first, then keys whose cluster answered (proven)
// but never forever, then the rest, where keys whose last run failed or went slow (suspect) leave the last worker
// free. It also keeps what each key's last run said about its cluster.
export class RunOrder {
  /** Keys ready to run, in order; each key appears at most once. */
  private readonly queue: string[] = [];
  /**
   * Keys whose last run failed or went slow. They may hold all workers but one, so N hung clusters cannot make
   * a healthy key wait behind them (client-go has no such rule; its keys are assumed to cost the same).
   */
  private readonly suspect = new Set<string>();
  /**
   * Keys whose last run succeeded within slowAfterMs: their cluster answers. A free worker takes them before keys
   * queued earlier whose cluster is unknown (never run, e.g. Kymas just added) or suspect, so a healthy Kyma's edit
   * does not wait behind a wave of new hung clusters, each of which holds a worker for slowAfterMs.
   */
  private readonly proven = new Set<string>();
  /** Proven keys in `queue`, so picking needs no scan while there are none. */
  private provenQueued = 0;
  /**
   * Proven keys taken in a row while a key that is not proven waited in the queue. After `workers` of them the next
   * free worker takes the oldest key that is not proven (within the suspect cap): proven keys go first, but never
   * forever. A busy replica's resyncs and Ready requeues keep proven keys queued at all times (1,750 Kymas on one
   * replica of a 5,000-Kyma fleet), and the retry of a Kyma whose pass failed in the start-up burst waited behind
   * them for 46 minutes, its Kyma in state Error all along.
   */
  private provenInARow = 0;
  /**
   * Keys added urgently whose run has not started yet: a free worker takes them before everything else
   * (proven keys included). A Kyma this replica just took over from a dead one is reconciled by nobody until
   * its first run here; routine work (a resync's thousand keys) must not queue ahead of it.
   */
  private readonly urgent = new Set<string>();
  /** Urgent keys in `queue`. */
  private urgentQueued = 0;

  /** `workers`: how many keys run at once, the number of proven keys taken in a row before another's turn. */
  constructor(private readonly workers: number) {}

  /** Keys queued. */
  get length(): number {
    return this.queue.length;
  }

  /** Queues a key at the back; the caller queues each key at most once. */
  push(key: string): void {
    this.queue.push(key);
    if (this.proven.has(key)) this.provenQueued += 1;
    if (this.urgent.has(key)) this.urgentQueued += 1;
  }

  /** Marks a key urgent until its run starts: queued already, it moves up now; otherwise once pushed. */
  markUrgent(key: string, queued: boolean): void {
    if (this.urgent.has(key)) return;
    this.urgent.add(key);
    if (queued) this.urgentQueued += 1;
  }

  /**
   * Takes the next key a free worker may run out of the queue; undefined when none may run now. `suspectMayRun`:
   * whether a suspect key may take the free worker (suspect runs hold fewer than all workers but one).
   */
  take(suspectMayRun: boolean): string | undefined {
    const index = this.nextRunnable(suspectMayRun);
    if (index < 0) return undefined;
    const key = this.queue.splice(index, 1)[0] as string;
    const urgent = this.urgent.delete(key);
    if (urgent) this.urgentQueued -= 1;
    if (this.proven.has(key)) {
      this.provenQueued -= 1;
      if (!urgent && this.queue.length > this.provenQueued) this.provenInARow += 1;
    } else if (!urgent) this.provenInARow = 0;
    return key;
  }

  /** Empties the queue (and forgets urgency); returns the keys it held. */
  clear(): string[] {
    const dropped = this.queue.splice(0);
    this.provenQueued = 0;
    this.urgent.clear();
    this.urgentQueued = 0;
    return dropped;
  }

  isSuspect(key: string): boolean {
    return this.suspect.has(key);
  }

  /** The key's run went slow: its cluster does not answer. */
  noteSlow(key: string): void {
    this.suspect.add(key);
  }

  /** The key's run ended; `healthy` when it succeeded without going slow. */
  noteRunEnded(key: string, healthy: boolean): void {
    if (healthy) {
      this.suspect.delete(key);
      this.proven.add(key);
    } else {
      this.suspect.add(key);
      this.proven.delete(key);
    }
  }

  /** Forgets that the key's last run failed. */
  forgetFailure(key: string): void {
    this.suspect.delete(key);
  }

  /**
   * Index of the next queued key a free worker may take: urgent keys first, then proven keys (each in order) but
   * the oldest other key after `workers` proven ones in a row, then the others in order, where suspect keys leave
   * the last worker to the rest.
   */
  private nextRunnable(suspectMayRun: boolean): number {
    const mayRun = (key: string) => suspectMayRun || !this.suspect.has(key);
    if (this.urgentQueued > 0) {
      const urgent = this.queue.findIndex((key) => this.urgent.has(key) && mayRun(key));
      if (urgent >= 0) return urgent;
    }
    if (this.provenQueued > 0) {
      const proven = this.queue.findIndex((key) => this.proven.has(key));
      if (proven >= 0) {
        if (this.provenInARow < this.workers) return proven;
        const turn = this.queue.findIndex((key) => !this.proven.has(key) && mayRun(key));
        return turn >= 0 ? turn : proven;
      }
    }
    return this.queue.findIndex(mayRun);
  }
}
