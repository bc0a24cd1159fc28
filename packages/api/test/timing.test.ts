// The one retry backoff and the one period jitter every app uses.
import { expect } from 'chai';
import { backoffDelay, jittered } from '../src/timing.js';

describe('backoffDelay', function () {
  it('doubles from the initial delay up to the cap; with random = 1 it is the plain capped doubling', function () {
    const delays = [0, 1, 2, 3, 4, 5, 6].map((attempt) => backoffDelay(attempt, 500, 5_000, () => 1));
    expect(delays).to.deep.equal([500, 500, 1_000, 2_000, 4_000, 5_000, 5_000]);
  });

  it('draws from the upper half of the ceiling ("equal jitter")', function () {
    expect(backoffDelay(3, 500, 5_000, () => 0)).to.equal(1_000);
    expect(backoffDelay(3, 500, 5_000, () => 0.5)).to.equal(1_500);
  });

  it('does not overflow for a very large attempt number', function () {
    expect(backoffDelay(10_000, 500, 5_000, () => 1)).to.equal(5_000);
  });
});

describe('jittered', function () {
  it('stretches a period by up to the fraction, in whole milliseconds', function () {
    expect(jittered(2_000, 0.2, () => 0)).to.equal(2_000);
    expect(jittered(2_000, 0.2, () => 0.999)).to.equal(2_400);
    expect(jittered(1_001, 0.1, () => 0.5)).to.equal(1_051);
  });
});
