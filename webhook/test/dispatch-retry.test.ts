// When a callback KCP did not take goes again: a jittered exponential backoff, or KCP's Retry-After kept inside
// the backoff's range, so a KCP can neither make an entry spin nor park it past the backoff's maximum.
import { expect } from 'chai';
import fc from 'fast-check';
import { backoffDelay } from '@skr-watcher/api';
import { retryDelay } from '../src/dispatch/retry.js';

const RANGE = { backoffInitialMs: 100, backoffMaxMs: 10_000 };

describe('retryDelay', () => {
  it('without Retry-After is the backoff for the attempts made', () => {
    for (const attempts of [1, 2, 5, 20]) {
      expect(retryDelay(attempts, undefined, RANGE, () => 0.5)).to.equal(
        backoffDelay(attempts, 100, 10_000, () => 0.5),
      );
    }
  });

  it('with Retry-After is that delay, however many attempts came before', () => {
    expect(retryDelay(1, 2_500, RANGE, () => 0.5)).to.equal(2_500);
    expect(retryDelay(30, 2_500, RANGE, () => 0.5)).to.equal(2_500);
  });

  it('bounds a Retry-After of 0 by the initial backoff and one past the maximum by the maximum', () => {
    expect(retryDelay(1, 0, RANGE, () => 0.5)).to.equal(100);
    expect(retryDelay(1, 3_600_000, RANGE, () => 0.5)).to.equal(10_000);
  });

  it('is always within the backoff range', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 100 }),
        fc.option(fc.integer({ min: 0, max: 10_000_000 }), { nil: undefined }),
        fc.double({ min: 0, max: 0.999_999, noNaN: true }),
        (attempts, retryAfterMs, jitter) => {
          const delay = retryDelay(attempts, retryAfterMs, RANGE, () => jitter);
          expect(delay).to.be.at.least(RANGE.backoffInitialMs / 2);
          expect(delay).to.be.at.most(RANGE.backoffMaxMs);
        },
      ),
    );
  });
});
