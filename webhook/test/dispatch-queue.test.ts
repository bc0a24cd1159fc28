// The dispatcher's entries alone: the due-time heap gives entries back earliest first, and the queue keeps one
// entry per key, skips slots of entries removed or moved on, and counts resyncs apart from users' objects.
import { expect } from 'chai';
import fc from 'fast-check';
import { RESYNC_EVENT, type WatchEventV2 } from '@skr-watcher/api';
import { DueQueue } from '../src/dispatch/due-queue.js';
import { DispatchQueue, dispatchKey, type NewEntry } from '../src/dispatch/queue.js';

function event(name: string): WatchEventV2 {
  return {
    watched: { Namespace: 'kyma-system', Name: name },
    watchedGvk: { group: 'operator.kyma-project.io', version: 'v1alpha1', kind: 'Sample' },
  };
}

function change(name: string, manager = 'lifecycle-manager'): NewEntry {
  const watched = event(name);
  return { key: dispatchKey(manager, watched), manager, event: watched, uid: undefined, resync: false };
}

function resyncChange(manager: string): NewEntry {
  return {
    key: dispatchKey(manager, RESYNC_EVENT),
    manager,
    event: RESYNC_EVENT,
    uid: undefined,
    resync: true,
  };
}

/** Takes every live ready entry, in order, and returns their names. */
function drainReady(queue: DispatchQueue): string[] {
  const names: string[] = [];
  for (let entry = queue.peekReady(); entry; entry = queue.peekReady()) {
    queue.takeReady();
    entry.state = 'in-flight';
    names.push(entry.event.watched.Name);
  }
  return names;
}

describe('DueQueue', () => {
  it('gives back whatever was pushed in the order of its due times', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: 0, max: 1_000 }), { maxLength: 200 }), (dues) => {
        const heap = new DueQueue<{ dueAt: number }>();
        for (const dueAt of dues) heap.push({ dueAt });
        expect(heap.size).to.equal(dues.length);
        expect(heap.peek()?.dueAt).to.equal(dues.length ? Math.min(...dues) : undefined);
        const out: number[] = [];
        for (let item = heap.pop(); item; item = heap.pop()) out.push(item.dueAt);
        expect(out).to.deep.equal([...dues].sort((a, b) => a - b));
      }),
    );
  });

  it('is empty after clear', () => {
    const heap = new DueQueue<{ dueAt: number }>();
    heap.push({ dueAt: 5 });
    heap.push({ dueAt: 1 });
    heap.clear();
    expect(heap.size).to.equal(0);
    expect(heap.pop()).to.equal(undefined);
  });
});

describe('DispatchQueue', () => {
  it('hands out new entries in arrival order, each once', () => {
    const queue = new DispatchQueue();
    for (const name of ['a', 'b', 'c']) queue.add(change(name), 0);
    expect(queue.depth).to.equal(3);
    expect(drainReady(queue)).to.deep.equal(['a', 'b', 'c']);
    expect(queue.peekReady()).to.equal(undefined);
    expect(queue.depth, 'in flight entries are still held').to.equal(3);
  });

  it('starts an entry as one never sent, at the time of its change', () => {
    const queue = new DispatchQueue();
    const entry = queue.add(change('a'), 1_234);
    expect(entry).to.deep.include({
      changedAt: 1_234,
      attempts: 0,
      state: 'ready',
      changedDuringSend: false,
    });
    expect(queue.get(change('a').key)).to.equal(entry);
  });

  it('skips the ready slot of an entry removed before its turn', () => {
    const queue = new DispatchQueue();
    queue.add(change('a'), 0);
    const b = queue.add(change('b'), 0);
    queue.add(change('c'), 0);
    expect(queue.remove(b)).to.equal(false);
    expect(drainReady(queue)).to.deep.equal(['a', 'c']);
  });

  it('a new entry for a removed key is not mistaken for the old one', () => {
    const queue = new DispatchQueue();
    const old = queue.add(change('a'), 0);
    queue.remove(old);
    const again = queue.add(change('a'), 10);
    expect(queue.holds(old)).to.equal(false);
    expect(queue.holds(again)).to.equal(true);
    expect(drainReady(queue)).to.deep.equal(['a']);
  });

  it('reports empty once the last entry goes, and forgets stale slots with it', () => {
    const queue = new DispatchQueue();
    const a = queue.add(change('a'), 0);
    const b = queue.add(change('b'), 0);
    queue.wait(b, 500);
    expect(queue.remove(a)).to.equal(false);
    expect(queue.remove(b)).to.equal(true);
    expect(queue.size).to.equal(0);
    expect(queue.hasReadySlots).to.equal(false);
    expect(queue.nextDueAt).to.equal(Infinity);
  });

  it('releases waiting entries once due, earliest first, and leaves the rest waiting', () => {
    const queue = new DispatchQueue();
    const late = queue.add(change('late'), 0);
    const early = queue.add(change('early'), 0);
    const later = queue.add(change('later'), 0);
    drainReady(queue);
    queue.wait(late, 300);
    queue.wait(early, 100);
    queue.wait(later, 900);
    expect(queue.nextDueAt).to.equal(100);
    queue.releaseDue(300);
    expect(drainReady(queue)).to.deep.equal(['early', 'late']);
    expect(queue.nextDueAt).to.equal(900);
    queue.releaseAllWaiting();
    expect(drainReady(queue)).to.deep.equal(['later']);
    expect(queue.nextDueAt).to.equal(Infinity);
  });

  it('does not release an entry that was made ready again while it waited', () => {
    const queue = new DispatchQueue();
    const a = queue.add(change('a'), 0);
    drainReady(queue);
    queue.wait(a, 100);
    queue.makeReady(a);
    queue.releaseDue(100);
    expect(drainReady(queue), 'one slot, not two').to.deep.equal(['a']);
  });

  it('takes the ready entries a predicate picks and keeps the others in order', () => {
    const queue = new DispatchQueue();
    for (const name of ['a', 'old-b', 'c', 'old-d', 'e']) queue.add(change(name), 0);
    const taken = queue.takeReadyWhere((entry) => entry.event.watched.Name.startsWith('old-'));
    expect(taken.map((entry) => entry.event.watched.Name)).to.deep.equal(['old-b', 'old-d']);
    expect(queue.holds(taken[0]!), 'taken off the ready list, still held').to.equal(true);
    expect(drainReady(queue)).to.deep.equal(['a', 'c', 'e']);
  });

  it('compacts the ready list under a long backlog without losing, repeating or reordering an entry', () => {
    const queue = new DispatchQueue();
    for (let i = 0; i < 1_500; i++) queue.add(change(`obj-${i}`), i);
    const sent: string[] = [];
    // Take 2,000 one by one while as many come: the taken head outgrows the rest, which compacts the list.
    for (let i = 1_500; i < 3_500; i++) {
      const entry = queue.peekReady()!;
      queue.takeReady();
      entry.state = 'in-flight';
      sent.push(entry.event.watched.Name);
      queue.add(change(`obj-${i}`), i);
    }
    sent.push(...drainReady(queue));
    expect(sent).to.deep.equal(Array.from({ length: 3_500 }, (_, i) => `obj-${i}`));
  });

  it('counts resyncs apart from the depth, and leaves them out of what clear returns', () => {
    const queue = new DispatchQueue();
    queue.add(change('a'), 0);
    queue.add(resyncChange('lifecycle-manager'), 0);
    const marked = queue.add(change('b', 'other-manager'), 0);
    queue.markResync(marked);
    queue.markResync(marked);
    expect(queue.size).to.equal(3);
    expect(queue.resyncsPending).to.equal(2);
    expect(queue.depth).to.equal(1);
    const left = queue.clear();
    expect(left.map((entry) => entry.event.watched.Name)).to.deep.equal(['a']);
    expect(queue.size).to.equal(0);
    expect(queue.resyncsPending).to.equal(0);
    expect(queue.peekReady()).to.equal(undefined);
  });
});
