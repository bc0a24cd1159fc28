// The periods of a membership Lease and what follows from them: the drain deadline and on-time renewals.
import { expect } from 'chai';
import { LEADER_ELECTION_DEFAULTS } from '@skr-watcher/kube';
import {
  drainDeadlineMs,
  leaseDurationSeconds,
  leaseTiming,
  renewalOnTime,
} from '../src/sharding/lease-timing.js';

describe('membership lease timing', () => {
  it('takes the leader-election defaults for periods not given', () => {
    expect(leaseTiming()).to.deep.equal({
      leaseDurationMs: LEADER_ELECTION_DEFAULTS.leaseDurationMs,
      renewDeadlineMs: LEADER_ELECTION_DEFAULTS.renewDeadlineMs,
      retryPeriodMs: LEADER_ELECTION_DEFAULTS.retryPeriodMs,
    });
    expect(leaseTiming({ retryPeriodMs: 500, leaseDurationMs: undefined })).to.include({
      retryPeriodMs: 500,
      leaseDurationMs: LEADER_ELECTION_DEFAULTS.leaseDurationMs,
    });
  });

  it('refuses periods out of order: retry period < renew deadline < lease duration', () => {
    expect(() =>
      leaseTiming({ leaseDurationMs: 6_000, renewDeadlineMs: 6_000, retryPeriodMs: 500 }),
    ).to.throw(/retry period \(500 ms\) < renew deadline \(6000 ms\) < lease duration \(6000 ms\)/);
    expect(() =>
      leaseTiming({ leaseDurationMs: 6_000, renewDeadlineMs: 4_000, retryPeriodMs: 4_000 }),
    ).to.throw();
    expect(() =>
      leaseTiming({ leaseDurationMs: 6_000, renewDeadlineMs: 4_000, retryPeriodMs: 500 }),
    ).not.to.throw();
  });

  it('ends a suspended replica’s work halfway between renew deadline and lease duration', () => {
    expect(drainDeadlineMs({ leaseDurationMs: 8_000, renewDeadlineMs: 2_000, retryPeriodMs: 300 })).to.equal(
      5_000,
    );
    expect(drainDeadlineMs(leaseTiming())).to.equal(12_500);
  });

  it('counts a renewal on time when it landed within half a retry period, sent within one and a half', () => {
    const timing = { leaseDurationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 };
    expect(renewalOnTime(timing, 1_000, 3_000)).to.equal(true);
    expect(renewalOnTime(timing, 1_001, 2_000), 'slow answer').to.equal(false);
    expect(renewalOnTime(timing, 10, 3_001), 'sent late').to.equal(false);
    expect(renewalOnTime(timing, 0, 0), 'the first').to.equal(true);
  });

  it('writes whole seconds on the Lease, rounded up', () => {
    expect(leaseDurationSeconds(15_000)).to.equal(15);
    expect(leaseDurationSeconds(6_500)).to.equal(7);
    expect(leaseDurationSeconds(1)).to.equal(1);
  });
});
