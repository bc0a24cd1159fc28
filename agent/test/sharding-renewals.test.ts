// Renewal bookkeeping on a manual clock: the renew deadline suspends, a renewal that lands resumes, work still
// running at the drain deadline is reported, and what the pacer is told of each attempt.
import { expect } from 'chai';
import { ManualClock } from '../../test/support/manual-clock.js';
import { Renewals } from '../src/sharding/renewals.js';

const timing = { leaseDurationMs: 8_000, renewDeadlineMs: 2_000, retryPeriodMs: 300 };

function renewals(options: { idle?: () => boolean } = {}) {
  const clock = new ManualClock();
  const events: string[] = [];
  const tracker = new Renewals({
    timing,
    clock,
    onSuspended: () => events.push(`suspended@${clock.now()}`),
    onResumed: () => events.push(`resumed@${clock.now()}`),
    onWorkOverdue: () => events.push(`overdue@${clock.now()}`),
    idle: options.idle ?? (() => true),
  });
  return { clock, events, tracker };
}

/** One attempt that takes `latencyMs` and lands. */
async function renewOnce(clock: ManualClock, tracker: Renewals, latencyMs = 0) {
  const attempt = tracker.begin();
  await clock.advance(latencyMs);
  tracker.end(attempt);
  tracker.landed(attempt);
  return attempt;
}

describe('membership renewals', () => {
  it('suspends at the renew deadline counted from the start of the last renewal that landed', async () => {
    const { clock, events, tracker } = renewals();
    await clock.advance(1_000);
    await renewOnce(clock, tracker, 400);
    await clock.advance(1_599);
    expect(tracker.suspended).to.equal(false);
    await clock.advance(1);
    expect(tracker.suspended).to.equal(true);
    expect(events).to.deep.equal(['suspended@3000']);
  });

  it('resumes when a renewal lands while suspended, and a renewal in time keeps it from suspending', async () => {
    const { clock, events, tracker } = renewals();
    await renewOnce(clock, tracker);
    for (let i = 0; i < 10; i++) {
      await clock.advance(1_500);
      await renewOnce(clock, tracker);
    }
    expect(events, 'renewed every 1.5 s').to.deep.equal([]);
    await clock.advance(2_500);
    await renewOnce(clock, tracker, 100);
    expect(events).to.deep.equal(['suspended@17000', 'resumed@17600']);
    expect(tracker.suspended).to.equal(false);
  });

  it('reports work still running at the drain deadline, halfway from renew deadline to lease duration', async () => {
    let idle = false;
    const { clock, events, tracker } = renewals({ idle: () => idle });
    await renewOnce(clock, tracker);
    await clock.advance(4_999);
    expect(events).to.deep.equal(['suspended@2000']);
    await clock.advance(1);
    expect(events).to.deep.equal(['suspended@2000', 'overdue@5000']);

    const second = renewals({ idle: () => idle });
    await renewOnce(second.clock, second.tracker);
    idle = true;
    await second.clock.advance(10_000);
    expect(second.events, 'idle at the drain deadline').to.deep.equal(['suspended@2000']);
  });

  it('does not report overdue work once a renewal landed in between', async () => {
    const { clock, events, tracker } = renewals({ idle: () => false });
    await renewOnce(clock, tracker);
    await clock.advance(3_000);
    await renewOnce(clock, tracker);
    await clock.advance(1_000);
    expect(events).to.deep.equal(['suspended@2000', 'resumed@3000']);
  });

  it('fires nothing once stopped', async () => {
    const { clock, events, tracker } = renewals({ idle: () => false });
    await renewOnce(clock, tracker);
    tracker.stop();
    await clock.advance(20_000);
    expect(events).to.deep.equal([]);
    expect(clock.pendingTimers).to.equal(0);
  });

  it('tells the pacer the latency and whether the attempt was on time', async () => {
    const { clock, tracker } = renewals();
    await clock.advance(1_000);
    const first = tracker.begin();
    expect(tracker.inFlight()).to.equal(true);
    await clock.advance(150);
    tracker.end(first);
    expect(tracker.inFlight()).to.equal(false);
    expect(tracker.report(first, true)).to.deep.equal({ ok: true, onTime: true, latencyMs: 150 });
    expect(tracker.report(first, false), 'not landed').to.deep.equal({
      ok: false,
      onTime: false,
      latencyMs: 150,
    });

    await clock.advance(300);
    const second = tracker.begin();
    expect(second.sincePreviousMs).to.equal(450);
    await clock.advance(151);
    tracker.end(second);
    expect(tracker.report(second, true), 'over half a retry period').to.include({
      onTime: false,
      latencyMs: 151,
    });
  });

  it('says when the next attempt is due, counted from the start of the last', async () => {
    const { clock, tracker } = renewals();
    await clock.advance(1_000);
    const attempt = tracker.begin();
    await clock.advance(100);
    tracker.end(attempt);
    expect(tracker.dueInMs(300)).to.equal(200);
    await clock.advance(500);
    expect(tracker.dueInMs(300)).to.equal(0);
  });

  it('calls a renewal late past half the renew deadline, and diagnoses what it waited on', async () => {
    const { clock, tracker } = renewals();
    await clock.advance(1_000);
    expect(tracker.isLate(), 'no renewal landed yet').to.equal(false);
    await renewOnce(clock, tracker);
    await clock.advance(1_000);
    expect(tracker.isLate()).to.equal(false);
    await clock.advance(1);
    expect(tracker.isLate()).to.equal(true);
    tracker.begin();
    await clock.advance(250);
    expect(tracker.diagnosis()).to.deep.equal({
      sinceLastRenewalMs: 1_251,
      renewalPendingMs: 250,
      lastRenewLatencyMs: 0,
    });
  });
});
