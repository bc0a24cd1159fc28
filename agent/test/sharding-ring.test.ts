// The hash ring (decision 012): every replica computes the same owner from the same members, shares are even,
// and a join moves only the keys the newcomer takes.
import { expect } from 'chai';
import { createHashRing } from '../src/sharding/ring.js';

const KEYS = Array.from({ length: 5_000 }, (_, i) => `runtime-${i}`);

describe('shard hash ring', () => {
  it('gives every key the same owner whatever order the members are listed in', () => {
    const one = createHashRing(['agent-a', 'agent-b', 'agent-c']);
    const other = createHashRing(['agent-c', 'agent-a', 'agent-b', 'agent-a']);
    for (const key of KEYS) expect(other.ownerOf(key)).to.equal(one.ownerOf(key));
  });

  it('spreads 5,000 keys over three members within a tenth of a third each', () => {
    const ring = createHashRing(['agent-a', 'agent-b', 'agent-c']);
    const counts = new Map<string, number>();
    for (const key of KEYS)
      counts.set(ring.ownerOf(key) as string, (counts.get(ring.ownerOf(key) as string) ?? 0) + 1);
    expect([...counts.keys()].sort()).to.deep.equal(['agent-a', 'agent-b', 'agent-c']);
    for (const count of counts.values()) expect(count / KEYS.length).to.be.within(0.3, 0.37);
  });

  it('moves about a quarter of the keys, all to the newcomer, when a fourth member joins', () => {
    const before = createHashRing(['agent-a', 'agent-b', 'agent-c']);
    const after = createHashRing(['agent-a', 'agent-b', 'agent-c', 'agent-d']);
    const moved = KEYS.filter((key) => before.ownerOf(key) !== after.ownerOf(key));
    expect(moved.length / KEYS.length).to.be.within(0.18, 0.32);
    for (const key of moved) expect(after.ownerOf(key)).to.equal('agent-d');
  });

  it('has no owner on an empty ring', () => {
    expect(createHashRing([]).ownerOf('runtime-1')).to.equal(undefined);
  });
});
