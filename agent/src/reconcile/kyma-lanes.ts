// One lane per Kyma (decision 010): its full reconciles and its targeted Module CR mirrors run one at a time, so a
// full pass that read a Module CR before an edit never writes its older mirror over the targeted one. Mirrors of
// one object that wait in a lane coalesce: under a flood of callbacks a lane holds at most one waiting mirror per
// object, and that one waits for the newest write announced (it reads the object when it runs anyway).
import type { ChangeFingerprint } from '@skr-watcher/api';
import type { ModuleCrChange, ModuleMirrorResult } from './module-mirror.js';

interface WaitingMirror {
  change: ModuleCrChange;
  result: Promise<ModuleMirrorResult>;
}

/** Of two fingerprints of one object, the one a read must show last: the higher generation, else the later. */
function newer(current: ChangeFingerprint, next: ChangeFingerprint): ChangeFingerprint {
  if (current.uid !== next.uid) return next;
  return (current.generation ?? 0) > (next.generation ?? 0) ? current : next;
}

export class KymaLanes {
  /** The last work queued in each lane; a lane with nothing queued has no entry. */
  private readonly tails = new Map<string, Promise<unknown>>();
  /** Targeted mirrors queued (not yet started), by Kyma and object. */
  private readonly waiting = new Map<string, WaitingMirror>();

  /** Runs `work` in the lane of `kymaKey`, after everything queued there before. */
  run<T>(kymaKey: string, work: () => Promise<T>): Promise<T> {
    const before = this.tails.get(kymaKey) ?? Promise.resolve();
    const result = before.catch(() => undefined).then(work);
    const settled = result.catch(() => undefined);
    this.tails.set(kymaKey, settled);
    void settled.then(() => {
      if (this.tails.get(kymaKey) === settled) this.tails.delete(kymaKey);
    });
    return result;
  }

  /**
   * Queues a targeted mirror of `change` in the lane of `kymaKey`, or merges it into the one of the same object
   * that waits there already (both callers then get that mirror's result).
   */
  mirror(
    kymaKey: string,
    change: ModuleCrChange,
    work: (change: ModuleCrChange) => Promise<ModuleMirrorResult>,
  ): Promise<ModuleMirrorResult> {
    const { group, version, kind } = change.gvk;
    const objectKey = [kymaKey, group, version, kind, change.namespace, change.name].join('\0');
    const queued = this.waiting.get(objectKey);
    if (queued) {
      queued.change = { ...queued.change, fingerprint: newer(queued.change.fingerprint, change.fingerprint) };
      return queued.result;
    }
    const entry = { change } as WaitingMirror;
    entry.result = this.run(kymaKey, () => {
      this.waiting.delete(objectKey);
      return work(entry.change);
    });
    this.waiting.set(objectKey, entry);
    return entry.result;
  }

  /** Lanes with work queued or running, and targeted mirrors waiting (for benchmarks and metrics). */
  get size(): { lanes: number; waitingMirrors: number } {
    return { lanes: this.tails.size, waitingMirrors: this.waiting.size };
  }
}
