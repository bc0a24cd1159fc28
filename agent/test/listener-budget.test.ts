// What one SKR may cost, on an injected clock: the per-runtime-id token bucket behind the listener's
// 429, and the per-Kyma interval that merges a flood's callbacks into one full reconcile per interval.
import { expect } from 'chai';
import { CallbackBudget } from '../src/listener/callback-budget.js';
import { ReconcileWakes } from '../src/listener/index.js';
import { ManualClock } from '../../test/support/manual-clock.js';

describe('listener: callback budget per runtime-id', () => {
  it('spends the burst, then refuses with the seconds until the next token, per runtime-id', async () => {
    const clock = new ManualClock();
    const budget = new CallbackBudget({ perSecond: 2, burst: 3, clock });
    const spent = Array.from({ length: 4 }, () => budget.spend('runtime-a'));
    expect(spent.map((s) => s.ok)).to.deep.equal([true, true, true, false]);
    expect(spent[3]).to.deep.equal({ ok: false, retryAfterSeconds: 1 });
    expect(budget.spend('runtime-b').ok, 'another SKR has its own bucket').to.equal(true);
    await clock.advance(500);
    expect(budget.spend('runtime-a').ok, 'one token after 1/perSecond').to.equal(true);
    expect(budget.spend('runtime-a').ok).to.equal(false);
  });

  it('asks for a longer wait when the rate is below one a second', () => {
    const budget = new CallbackBudget({ perSecond: 0.25, burst: 1, clock: new ManualClock() });
    expect(budget.spend('runtime-a').ok).to.equal(true);
    expect(budget.spend('runtime-a')).to.deep.equal({ ok: false, retryAfterSeconds: 4 });
  });

  it('forgets buckets that have filled up again', async () => {
    const clock = new ManualClock();
    const budget = new CallbackBudget({ perSecond: 10, burst: 10, clock });
    for (let i = 0; i < 100; i++) budget.spend(`runtime-${i}`);
    expect(budget.size).to.equal(100);
    await clock.advance(61_000);
    budget.spend('runtime-x');
    expect(budget.size).to.equal(1);
  });

  it('refuses a budget that would refuse everything', () => {
    expect(() => new CallbackBudget({ perSecond: 0, burst: 5 })).to.throw(/perSecond > 0/);
  });
});

describe('listener: full reconciles woken by callbacks, one per interval per Kyma', () => {
  it('wakes the first at once, merges the rest into one wake at the end of the interval', async () => {
    const clock = new ManualClock();
    const woken: string[] = [];
    const wakes = new ReconcileWakes(1_000, (key) => woken.push(key), clock);
    wakes.request('kcp/a');
    expect(woken).to.deep.equal(['kcp/a']);
    for (let i = 0; i < 500; i++) wakes.request('kcp/a');
    wakes.request('kcp/b');
    expect(woken, 'another Kyma is not held back').to.deep.equal(['kcp/a', 'kcp/b']);
    await clock.advance(1_000);
    expect(woken).to.deep.equal(['kcp/a', 'kcp/b', 'kcp/a']);
    // The merged wake opened a new interval; nothing came in it, so it ends without a wake.
    await clock.advance(1_000);
    expect(woken).to.have.length(3);
    expect(wakes.size).to.equal(0);
    wakes.request('kcp/a');
    expect(woken, 'a quiet Kyma is woken at once again').to.have.length(4);
  });

  it('wakes the merged ones at close and stops timing', () => {
    const clock = new ManualClock();
    const woken: string[] = [];
    const wakes = new ReconcileWakes(1_000, (key) => woken.push(key), clock);
    wakes.request('kcp/a');
    wakes.request('kcp/a');
    wakes.request('kcp/b');
    wakes.close();
    expect(woken).to.deep.equal(['kcp/a', 'kcp/b', 'kcp/a']);
    expect(clock.pendingTimers).to.equal(0);
  });
});
