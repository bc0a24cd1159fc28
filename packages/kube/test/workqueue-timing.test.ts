// The work queue's per-key backoff and delayed keys on their own, with a manual clock.
import { expect } from 'chai';
import { ManualClock } from '../../../test/support/manual-clock.js';
import { DelayedKeys } from '../src/workqueue/delayed-keys.js';
import { KeyBackoff } from '../src/workqueue/key-backoff.js';

describe('KeyBackoff', () => {
  it('doubles the delay of a key per consecutive failure up to the max, without jitter, per key', () => {
    const backoff = new KeyBackoff(5_000, 30_000);
    const delays = [1, 2, 3, 4, 5].map(() => backoff.failed('a').delayMs);
    expect(delays).to.deep.equal([5_000, 10_000, 20_000, 30_000, 30_000]);
    expect(backoff.failuresOf('a')).to.equal(5);
    expect(backoff.failed('b')).to.deep.equal({ failures: 1, delayMs: 5_000 });
  });

  it('starts from the base delay again once a key is forgotten', () => {
    const backoff = new KeyBackoff(5_000, 30_000);
    backoff.failed('a');
    backoff.failed('a');
    backoff.forget('a');
    expect(backoff.failuresOf('a')).to.equal(0);
    expect(backoff.failed('a')).to.deep.equal({ failures: 1, delayMs: 5_000 });
  });
});

describe('DelayedKeys', () => {
  /** Delayed keys on a manual clock; `fired` lists each key handed back, with the time it was. */
  function delayedKeys() {
    const clock = new ManualClock();
    const fired: string[] = [];
    const delayed = new DelayedKeys(clock, (key) => fired.push(`${key}@${clock.now()}`));
    return { clock, delayed, fired };
  }

  it('hands each key back when its delay has passed', async () => {
    const { clock, delayed, fired } = delayedKeys();
    delayed.schedule('a', 300);
    delayed.schedule('b', 100);
    expect(delayed.size).to.equal(2);
    await clock.advance(1_000);
    expect(fired).to.deep.equal(['b@100', 'a@300']);
    expect(delayed.size).to.equal(0);
  });

  it('keeps the earlier schedule of a key when a later one is asked for', async () => {
    const { clock, delayed, fired } = delayedKeys();
    delayed.schedule('a', 500);
    delayed.schedule('a', 900);
    expect(delayed.size).to.equal(1);
    await clock.advance(1_000);
    expect(fired).to.deep.equal(['a@500']);
  });

  it('moves the schedule of a key forward when an earlier one is asked for, and hands it back once', async () => {
    const { clock, delayed, fired } = delayedKeys();
    delayed.schedule('a', 500);
    delayed.schedule('a', 200);
    expect(delayed.size).to.equal(1);
    await clock.advance(1_000);
    expect(fired).to.deep.equal(['a@200']);
    expect(clock.pendingTimers).to.equal(0);
  });

  it('cancels every schedule', async () => {
    const { clock, delayed, fired } = delayedKeys();
    delayed.schedule('a', 100);
    delayed.schedule('b', 200);
    delayed.cancelAll();
    expect(delayed.size).to.equal(0);
    expect(clock.pendingTimers).to.equal(0);
    await clock.advance(1_000);
    expect(fired).to.deep.equal([]);
  });
});
