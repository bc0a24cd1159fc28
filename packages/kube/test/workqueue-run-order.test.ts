// The order in which free workers take queued keys, on its own: urgent keys first, proven keys next but never
// forever, suspect keys kept off the last worker, and what each run's end says about its key.
import { expect } from 'chai';
import { RunOrder } from '../src/workqueue/run-order.js';

/** Takes keys until none may run; every suspect key may run unless `suspectMayRun` says otherwise. */
function drain(order: RunOrder, suspectMayRun = true): string[] {
  const taken: string[] = [];
  for (let key = order.take(suspectMayRun); key !== undefined; key = order.take(suspectMayRun))
    taken.push(key);
  return taken;
}

function orderWith(workers: number, proven: string[] = [], suspect: string[] = []): RunOrder {
  const order = new RunOrder(workers);
  for (const key of proven) order.noteRunEnded(key, true);
  for (const key of suspect) order.noteRunEnded(key, false);
  return order;
}

describe('RunOrder', () => {
  it('gives keys whose cluster is unknown out in the order they were queued', () => {
    const order = orderWith(2);
    for (const key of ['a', 'b', 'c']) order.push(key);
    expect(order.length).to.equal(3);
    expect(drain(order)).to.deep.equal(['a', 'b', 'c']);
    expect(order.length).to.equal(0);
  });

  it('gives a proven key out before unknown keys queued earlier', () => {
    const order = orderWith(4, ['p']);
    for (const key of ['a', 'b', 'p']) order.push(key);
    expect(drain(order)).to.deep.equal(['p', 'a', 'b']);
  });

  it('gives the oldest other key its turn after `workers` proven keys in a row', () => {
    const order = orderWith(2, ['p1', 'p2', 'p3', 'p4']);
    for (const key of ['u', 'p1', 'p2', 'p3', 'p4']) order.push(key);
    expect(drain(order)).to.deep.equal(['p1', 'p2', 'u', 'p3', 'p4']);
  });

  it('counts no proven run in a row while no other key waits', () => {
    const order = orderWith(1, ['p1', 'p2']);
    order.push('p1');
    expect(order.take(true)).to.equal('p1');
    order.push('p2');
    order.push('u');
    // p1 ran while nothing else waited, so p2 is the first in a row and still goes before u.
    expect(drain(order)).to.deep.equal(['p2', 'u']);
  });

  it('gives urgent keys out before everything, proven keys included, in the order they became urgent', () => {
    const order = orderWith(4, ['p']);
    for (const key of ['p', 'a', 'b']) order.push(key);
    order.markUrgent('b', true);
    order.markUrgent('c', false);
    order.push('c');
    expect(drain(order)).to.deep.equal(['b', 'c', 'p', 'a']);
    // Urgency ends with the run that started: queued again, the key waits its turn.
    order.push('a');
    order.push('b');
    expect(drain(order)).to.deep.equal(['a', 'b']);
  });

  it('keeps suspect keys, urgent ones too, off a worker they may not take, and gives out the others', () => {
    const order = orderWith(2, [], ['s1', 's2']);
    for (const key of ['s1', 'h', 's2']) order.push(key);
    order.markUrgent('s2', true);
    expect(drain(order, false)).to.deep.equal(['h']);
    expect(order.length).to.equal(2);
    expect(drain(order, true)).to.deep.equal(['s2', 's1']);
  });

  it('marks a key suspect when its run fails or goes slow, proven when it succeeds, and forgets a failure', () => {
    const order = orderWith(2);
    order.noteRunEnded('a', false);
    expect(order.isSuspect('a')).to.equal(true);
    order.noteRunEnded('a', true);
    expect(order.isSuspect('a')).to.equal(false);
    order.noteSlow('a');
    expect(order.isSuspect('a')).to.equal(true);
    order.forgetFailure('a');
    expect(order.isSuspect('a')).to.equal(false);
    // A failed run also ends the key's proven standing: it waits behind an older unknown key again.
    order.noteRunEnded('a', false);
    order.forgetFailure('a');
    order.push('u');
    order.push('a');
    expect(drain(order)).to.deep.equal(['u', 'a']);
  });

  it('clears to the keys it held, in order, and forgets their urgency', () => {
    const order = orderWith(2, ['p']);
    for (const key of ['a', 'p', 'b']) order.push(key);
    order.markUrgent('b', true);
    expect(order.clear()).to.deep.equal(['a', 'p', 'b']);
    expect(order.length).to.equal(0);
    order.push('a');
    order.push('b');
    expect(drain(order)).to.deep.equal(['a', 'b']);
  });
});
