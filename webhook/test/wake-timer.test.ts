// The dispatcher's one timer on an injected clock: it fires once at the moment set, is set again only when that
// moment moves, and Infinity or clear leaves no timer behind.
import { expect } from 'chai';
import { WakeTimer } from '../src/dispatch/wake-timer.js';
import { ManualClock } from '../../test/support/manual-clock.js';

function setup() {
  const clock = new ManualClock();
  const woken: number[] = [];
  const timer = new WakeTimer(clock, () => void woken.push(clock.now()));
  return { clock, woken, timer };
}

describe('WakeTimer', () => {
  it('wakes once at the moment set', async () => {
    const { clock, woken, timer } = setup();
    timer.setFor(250);
    await clock.advance(1_000);
    expect(woken).to.deep.equal([250]);
    expect(clock.pendingTimers).to.equal(0);
  });

  it('keeps one timer when set again for the same moment, and moves it when the moment moves', async () => {
    const { clock, woken, timer } = setup();
    timer.setFor(500);
    timer.setFor(500);
    expect(clock.pendingTimers).to.equal(1);
    timer.setFor(200);
    expect(clock.pendingTimers).to.equal(1);
    await clock.advance(1_000);
    expect(woken).to.deep.equal([200]);
  });

  it('wakes at once for a moment already past', async () => {
    const { clock, woken, timer } = setup();
    await clock.advance(100);
    timer.setFor(50);
    await clock.advance(0);
    expect(woken).to.deep.equal([100]);
  });

  it('leaves no timer for Infinity or after clear, and can be set again after firing', async () => {
    const { clock, woken, timer } = setup();
    timer.setFor(300);
    timer.setFor(Infinity);
    expect(clock.pendingTimers).to.equal(0);
    timer.setFor(300);
    timer.clear();
    expect(clock.pendingTimers).to.equal(0);
    timer.setFor(400);
    await clock.advance(500);
    timer.setFor(400 + 100);
    await clock.advance(500);
    expect(woken).to.deep.equal([400, 500]);
  });
});
