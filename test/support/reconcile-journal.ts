// Reads the journals `skr-agent run --reconcile-journal` writes (one line per reconcile start and end, with the
// replica and CLOCK_MONOTONIC nanoseconds shared by all processes of the machine) and finds overlaps.
import { existsSync, readFileSync } from 'node:fs';

export interface JournalSource {
  identity: string;
  journal: string;
  /** hrtime (ns) once the process is known dead: its open reconciles ended by then at the latest. */
  deadAt?: bigint;
}

export interface ReconcileInterval {
  replica: string;
  start: bigint;
  end: bigint;
  /** No end in the journal: it runs still (or ran until its process died). */
  open?: boolean;
}

/** Reconcile intervals per Kyma; a start without end lasts until its process died (or until now). */
export function reconcileIntervals(sources: JournalSource[]): Map<string, ReconcileInterval[]> {
  const byKyma = new Map<string, ReconcileInterval[]>();
  const add = (kyma: string, interval: ReconcileInterval) => {
    const list = byKyma.get(kyma) ?? [];
    list.push(interval);
    byKyma.set(kyma, list);
  };
  for (const source of sources) {
    if (!existsSync(source.journal)) continue;
    const open = new Map<string, bigint>();
    for (const line of readFileSync(source.journal, 'utf8').split('\n')) {
      if (!line) continue;
      const entry = JSON.parse(line) as { kyma: string; replica: string; phase: string; t: string };
      if (entry.phase === 'start') {
        open.set(entry.kyma, BigInt(entry.t));
        continue;
      }
      const start = open.get(entry.kyma);
      open.delete(entry.kyma);
      if (start !== undefined) add(entry.kyma, { replica: entry.replica, start, end: BigInt(entry.t) });
    }
    const end = source.deadAt ?? process.hrtime.bigint();
    for (const [kyma, start] of open) add(kyma, { replica: source.identity, start, end, open: true });
  }
  return byKyma;
}

/** `kyma: a and b` for every two intervals of one Kyma, from different replicas, that overlap in time. */
export function overlaps(byKyma: Map<string, ReconcileInterval[]>): string[] {
  const found: string[] = [];
  for (const [kyma, intervals] of byKyma) {
    const sorted = [...intervals].sort((a, b) => (a.start < b.start ? -1 : a.start > b.start ? 1 : 0));
    for (let i = 0; i < sorted.length; i++) {
      for (let j = i + 1; j < sorted.length; j++) {
        const a = sorted[i] as ReconcileInterval;
        const b = sorted[j] as ReconcileInterval;
        if (b.start >= a.end) break;
        if (a.replica !== b.replica) found.push(`${kyma}: ${a.replica} and ${b.replica}`);
      }
    }
  }
  return found;
}
