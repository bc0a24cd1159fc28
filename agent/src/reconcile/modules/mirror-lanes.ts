// Mirror lanes (decision 010): the writes of one ModuleConfig run one at a time, each reading its Module CR inside
// the lane, so the last writer always read the newest Module CR and no mirror of an older read lands after a newer
// one. A lane is one Module CR of one Kyma: a targeted mirror waits only for other mirrors of that object (the
// full reconcile's mirror step of it included), never for a whole full reconcile of its Kyma. Targeted mirrors
// of one object that wait coalesce: under a flood of callbacks a lane holds at most one waiting targeted mirror,
// and that one waits for the newest write announced (it reads the object when it runs anyway).
import type { ChangeFingerprint } from '@skr-watcher/api';
import type { MirroredObject } from '../context.js';

/** The SKR object a callback named, and what its webhook said about the write. */
export interface ModuleCrChange {
  gvk: { group: string; version: string; kind: string };
  namespace: string;
  name: string;
  fingerprint: ChangeFingerprint;
  /** When the listener accepted the callback (epoch ms), for the debug log of where the time went. */
  receivedAtMs?: number;
}

/**
 * mirrored / unchanged: the ModuleConfig shows the Module CR as read (written now, or already);
 * not-a-module: no module of the Kyma has this object (a Kyma edit, an unmanaged module, or not yet reconciled
 * once), or the module has no ModuleConfig (yet): it was only waited for;
 * absent: the Module CR is gone (the full reconcile handles that); not-shown: the write never showed within
 * the bound (it may have been refused after admission), so nothing was written.
 */
export type ModuleMirrorOutcome = 'mirrored' | 'unchanged' | 'not-a-module' | 'absent' | 'not-shown';

export interface ModuleMirrorResult {
  outcome: ModuleMirrorOutcome;
  /** SKR reads of the Module CR; more than one means the write had not landed at the first read. */
  reads: number;
  /**
   * mirrored / unchanged: whether the Kyma's status (as just read) shows another state for the module than the Module
   * CR's, so the Kyma's full pass has something to write. False: a spec edit the status already covers; no pass
   * needs to follow it.
   */
  kymaStatusChanged?: boolean;
}

interface WaitingMirror {
  change: ModuleCrChange;
  result: Promise<unknown>;
}

/** Of two fingerprints of one object, the one a read must show last: the higher generation, else the later. */
function newer(current: ChangeFingerprint, next: ChangeFingerprint): ChangeFingerprint {
  if (current.uid !== next.uid) return next;
  return (current.generation ?? 0) > (next.generation ?? 0) ? current : next;
}

/** A Module CR's address (apiVersion group/version, or a core version) as a lane names it. */
export function mirroredObjectOf(ref: {
  apiVersion: string;
  kind: string;
  namespace?: string;
  name: string;
}): MirroredObject {
  const slash = ref.apiVersion.indexOf('/');
  return {
    group: slash < 0 ? '' : ref.apiVersion.slice(0, slash),
    kind: ref.kind,
    namespace: ref.namespace ?? '',
    name: ref.name,
  };
}

/** The lane of one Module CR of the Kyma `kymaKey` (namespace/name). */
export function mirrorLaneKey(kymaKey: string, object: MirroredObject): string {
  return [kymaKey, object.group, object.kind, object.namespace, object.name].join('\0');
}

export class MirrorLanes {
  /** The last work queued in each lane; a lane with nothing queued has no entry. */
  private readonly tails = new Map<string, Promise<unknown>>();
  /** Targeted mirrors queued (not yet started), by lane. */
  private readonly waiting = new Map<string, WaitingMirror>();

  /** Runs `work` in the lane `key`, after everything queued there before. */
  run<T>(key: string, work: () => Promise<T>): Promise<T> {
    const before = this.tails.get(key) ?? Promise.resolve();
    const result = before.catch(() => undefined).then(work);
    const settled = result.catch(() => undefined);
    this.tails.set(key, settled);
    void settled.then(() => {
      if (this.tails.get(key) === settled) this.tails.delete(key);
    });
    return result;
  }

  /**
   * Queues a targeted mirror of `change` in the lane of its object, or merges it into the one that waits there
   * already (both callers then get that mirror's result). `superseded()` tells the running work whether another
   * targeted mirror of the object waits behind it: that one reads the object and the ModuleConfig again and writes
   * what this one would only have written a moment earlier (the ModuleConfig status).
   */
  mirror<R>(
    kymaKey: string,
    change: ModuleCrChange,
    work: (change: ModuleCrChange, superseded: () => boolean) => Promise<R>,
  ): Promise<R> {
    const key = mirrorLaneKey(kymaKey, {
      group: change.gvk.group,
      kind: change.gvk.kind,
      namespace: change.namespace,
      name: change.name,
    });
    const queued = this.waiting.get(key);
    if (queued) {
      queued.change = { ...queued.change, fingerprint: newer(queued.change.fingerprint, change.fingerprint) };
      // One lane, one kind of work: every caller of `mirror` passes work of the same result type.
      return queued.result as Promise<R>;
    }
    const entry = { change } as WaitingMirror;
    const result = this.run(key, () => {
      this.waiting.delete(key);
      return work(entry.change, () => this.waiting.has(key));
    });
    entry.result = result;
    this.waiting.set(key, entry);
    return result;
  }

  /** Resolves once everything queued so far in the lanes of the Kyma `kymaKey` has run. */
  async drain(kymaKey: string): Promise<void> {
    const prefix = `${kymaKey}\0`;
    const tails = [...this.tails].filter(([key]) => key.startsWith(prefix)).map(([, tail]) => tail);
    await Promise.all(tails);
  }

  /** Lanes with work queued or running, and targeted mirrors waiting (for benchmarks and metrics). */
  get size(): { lanes: number; waitingMirrors: number } {
    return { lanes: this.tails.size, waitingMirrors: this.waiting.size };
  }
}
