// How often the object-set engine re-reads a CRD that is not Established yet: soon at first (the API server sets the
// condition within tens of milliseconds, and a module's install waits for it), backing off to one read per 250 ms.
import { expect } from 'chai';
import { ESTABLISH_POLL, nextEstablishPollMs } from '../src/index.js';

describe('object-set: re-reads of a CRD not yet Established', function () {
  const schedule = (reads: number) => {
    const waits: number[] = [];
    for (let wait = 0; waits.length < reads;) waits.push((wait = nextEstablishPollMs(wait)));
    return waits;
  };

  it('re-reads within 10 ms at first, so an install waits at most about as long again as the API server took', function () {
    expect(schedule(5)).to.deep.equal([10, 20, 40, 80, 160]);
    // Each wait is at most the time already waited (plus the first 10 ms): Established at t is seen by about 2t.
    const waits = schedule(5);
    for (let index = 1; index < waits.length; index++)
      expect(waits[index]).to.be.at.most(
        ESTABLISH_POLL.firstMs + waits.slice(0, index).reduce((a, b) => a + b),
      );
  });

  it('backs off to one read per 250 ms for a CRD that takes long', function () {
    const waits = schedule(12);
    expect(waits.slice(6)).to.deep.equal([250, 250, 250, 250, 250, 250]);
    expect(Math.max(...waits)).to.equal(ESTABLISH_POLL.maxMs);
    // Ten seconds of waiting (the default bound) cost about 45 reads, not hundreds.
    let elapsed = 0;
    let reads = 0;
    for (let wait = 0; elapsed < 10_000; reads++) elapsed += wait = nextEstablishPollMs(wait);
    expect(reads).to.be.below(50);
  });
});
