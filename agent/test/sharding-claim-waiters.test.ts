// Callbacks waiting for our view to show the claim they wrote, on a manual clock: released when the view names us,
// or when the wait ends; either way the waiter is gone after.
import { expect } from 'chai';
import { ManualClock } from '../../test/support/manual-clock.js';
import { ClaimWaiters } from '../src/sharding/claim-waiters.js';

describe('claim waiters', () => {
  it('releases every waiter of a key once our view names us its owner, not the waiters of other keys', async () => {
    const clock = new ManualClock();
    const waiters = new ClaimWaiters(clock);
    const done: string[] = [];
    const first = waiters.add('ns/a');
    const second = waiters.add('ns/a');
    const other = waiters.add('ns/b');
    void first.until(1_500).then(() => done.push('a1'));
    void second.until(1_500).then(() => done.push('a2'));
    void other.until(1_500).then(() => done.push('b'));
    waiters.owned('ns/a');
    await clock.advance(0);
    expect(done.sort()).to.deep.equal(['a1', 'a2']);
    expect(waiters.size).to.equal(1);
    await clock.advance(1_500);
    expect(done).to.include('b');
    expect(waiters.size).to.equal(0);
    expect(clock.pendingTimers).to.equal(0);
  });

  it('counts a view that named us between add and until: the write’s own answer is not missed', async () => {
    const clock = new ManualClock();
    const waiters = new ClaimWaiters(clock);
    const waiter = waiters.add('ns/a');
    waiters.owned('ns/a');
    let done = false;
    void waiter.until(1_500).then(() => (done = true));
    await clock.advance(0);
    expect(done).to.equal(true);
  });

  it('gives up after the wait and leaves the other waiters of the key in place', async () => {
    const clock = new ManualClock();
    const waiters = new ClaimWaiters(clock);
    const early = waiters.add('ns/a');
    let earlyDone = false;
    void early.until(500).then(() => (earlyDone = true));
    const late = waiters.add('ns/a');
    let lateDone = false;
    void late.until(1_500).then(() => (lateDone = true));
    await clock.advance(499);
    expect(earlyDone).to.equal(false);
    await clock.advance(1);
    expect([earlyDone, lateDone]).to.deep.equal([true, false]);
    expect(waiters.size, 'the late one still waits').to.equal(1);
    waiters.owned('ns/a');
    await clock.advance(0);
    expect(lateDone).to.equal(true);
  });
});
