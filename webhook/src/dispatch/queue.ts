// The dispatcher's entries, one per manager and object: each is ready (due now, kept in arrival order), in flight,
// or waiting (backing off, in a heap by due time). Slots of entries removed or moved on are skipped when met.
import type { WatchEventV2 } from '@skr-watcher/api';
import { DueQueue } from './due-queue.js';

export interface Entry {
  readonly key: string;
  readonly manager: string;
  event: WatchEventV2;
  /** Admission uid of the latest change, for log lines. */
  uid: string | undefined;
  /** Time of the latest change this entry stands for. */
  changedAt: number;
  attempts: number;
  state: 'ready' | 'in-flight' | 'waiting';
  /** A change arrived while a send was in flight: send once more after it. */
  changedDuringSend: boolean;
  /** When the latest send of this entry started. */
  sentAt: number;
  /** When a waiting entry is due again. */
  dueAt: number;
  /** The "look at everything" event (RESYNC_EVENT): kept until delivered, whatever its age or the queue's size. */
  resync: boolean;
}

/** What a new entry is made from; the rest starts out as for an entry never sent. */
export type NewEntry = Pick<Entry, 'key' | 'manager' | 'event' | 'uid' | 'resync'>;

/** The coalescing key: one pending callback per object and manager. */
export function dispatchKey(manager: string, event: WatchEventV2): string {
  const { group, version, kind } = event.watchedGvk;
  return `${manager}\n${group}/${version}/${kind}\n${event.watched.Namespace}\n${event.watched.Name}`;
}

/** Log fields naming the object an event is about. */
export function identity(manager: string, event: WatchEventV2): Record<string, string> {
  const { group, version, kind } = event.watchedGvk;
  return {
    manager,
    gvk: `${group}/${version}/${kind}`,
    namespace: event.watched.Namespace,
    name: event.watched.Name,
  };
}

/** Taken slots at the head of the ready list past which it is compacted, once they are half of it. */
const READY_COMPACT_AFTER = 1024;

export class DispatchQueue {
  private readonly entries = new Map<string, Entry>();
  /** Entries due now, in order; `readyHead` is the next one (the array is compacted now and then). */
  private ready: Entry[] = [];
  private readyHead = 0;
  private readonly waiting = new DueQueue<Entry>();
  /** Entries in `entries` that are resyncs. */
  private resyncs = 0;

  /** Every entry, resyncs included. */
  get size(): number {
    return this.entries.size;
  }

  /** Objects with an event waiting, in flight or backing off (resync callbacks are not counted). */
  get depth(): number {
    return this.entries.size - this.resyncs;
  }

  /** Resync entries held (one per manager at most). */
  get resyncsPending(): number {
    return this.resyncs;
  }

  /** Whether the ready list has slots left, live or stale. */
  get hasReadySlots(): boolean {
    return this.readyHead < this.ready.length;
  }

  /** When the earliest waiting entry is due; Infinity when none waits. */
  get nextDueAt(): number {
    return this.waiting.peek()?.dueAt ?? Infinity;
  }

  get(key: string): Entry | undefined {
    return this.entries.get(key);
  }

  /** Whether `entry` is still the one held for its key (not removed, nor replaced after a removal). */
  holds(entry: Entry): boolean {
    return this.entries.get(entry.key) === entry;
  }

  /** Holds a new entry for `change` (made at `changedAt`), ready to be sent. */
  add(change: NewEntry, changedAt: number): Entry {
    const entry: Entry = {
      ...change,
      changedAt,
      attempts: 0,
      state: 'ready',
      changedDuringSend: false,
      sentAt: 0,
      dueAt: 0,
    };
    this.entries.set(entry.key, entry);
    if (entry.resync) this.resyncs++;
    this.makeReady(entry);
    return entry;
  }

  /** Makes a held entry stand for a resync too (it is then kept until delivered). */
  markResync(entry: Entry): void {
    if (!entry.resync) this.resyncs++;
    entry.resync = true;
  }

  /** Puts `entry` at the end of the ready list. */
  makeReady(entry: Entry): void {
    entry.state = 'ready';
    this.ready.push(entry);
  }

  /** Parks `entry` until `dueAt`. */
  wait(entry: Entry, dueAt: number): void {
    entry.state = 'waiting';
    entry.dueAt = dueAt;
    this.waiting.push(entry);
  }

  /** Lets go of `entry`; true when nothing is held afterwards (stale slots then go with it). */
  remove(entry: Entry): boolean {
    if (this.holds(entry)) {
      this.entries.delete(entry.key);
      if (entry.resync) this.resyncs--;
    }
    if (this.entries.size > 0) return false;
    this.waiting.clear();
    this.ready = [];
    this.readyHead = 0;
    return true;
  }

  /** The next live ready entry, without taking it; stale slots are skipped and the array compacted. */
  peekReady(): Entry | undefined {
    while (this.readyHead < this.ready.length) {
      const entry = this.ready[this.readyHead] as Entry;
      if (this.isReady(entry)) return entry;
      this.readyHead++;
    }
    if (this.readyHead > 0) {
      this.ready = [];
      this.readyHead = 0;
    }
    return undefined;
  }

  /** Takes the entry `peekReady` returned off the ready list. */
  takeReady(): void {
    this.readyHead++;
    if (this.readyHead > READY_COMPACT_AFTER && this.readyHead * 2 > this.ready.length) {
      this.ready = this.ready.slice(this.readyHead);
      this.readyHead = 0;
    }
  }

  /** Takes the live ready entries that `expired` picks off the ready list and returns them; the rest keep order. */
  takeReadyWhere(expired: (entry: Entry) => boolean): Entry[] {
    const kept: Entry[] = [];
    const taken: Entry[] = [];
    for (let i = this.readyHead; i < this.ready.length; i++) {
      const entry = this.ready[i] as Entry;
      if (!this.isReady(entry)) continue;
      if (expired(entry)) taken.push(entry);
      else kept.push(entry);
    }
    this.ready = kept;
    this.readyHead = 0;
    return taken;
  }

  /** Moves the waiting entries due by `now` to the ready list, earliest first. */
  releaseDue(now: number): void {
    for (let top = this.waiting.peek(); top && top.dueAt <= now; top = this.waiting.peek()) {
      this.waiting.pop();
      if (this.isWaiting(top)) this.makeReady(top);
    }
  }

  /** Moves every waiting entry to the ready list, earliest first, whatever its due time. */
  releaseAllWaiting(): void {
    for (let entry = this.waiting.pop(); entry; entry = this.waiting.pop()) {
      if (this.isWaiting(entry)) this.makeReady(entry);
    }
  }

  /** Lets go of everything; returns the entries that stood for users' changes (resyncs left out). */
  clear(): Entry[] {
    const left = [...this.entries.values()].filter((entry) => !entry.resync);
    this.entries.clear();
    this.resyncs = 0;
    this.waiting.clear();
    this.ready = [];
    this.readyHead = 0;
    return left;
  }

  private isReady(entry: Entry): boolean {
    return this.holds(entry) && entry.state === 'ready';
  }

  private isWaiting(entry: Entry): boolean {
    return this.holds(entry) && entry.state === 'waiting';
  }
}
