// Where the ring places a Kyma (by bucket, or by runtime-id while a member does not announce bucket placement) and
// the assignment rule of who writes its owner label.
import { expect } from 'chai';
import { LABELS, SHARDING } from '@skr-watcher/api';
import {
  Placement,
  ownerStep,
  placesByBucket,
  runtimeIdShardKeyOf,
  shardKeyOf,
} from '../src/sharding/placement.js';
import { bucketKey, bucketOf, createHashRing } from '../src/sharding/ring.js';

const kyma = (name: string, runtimeId?: string) => {
  const labels: Record<string, string> = runtimeId ? { [LABELS.runtimeId]: runtimeId } : {};
  return { metadata: { name, namespace: 'kcp-system', labels }, bucket: bucketOf(name) };
};

describe('shard placement', () => {
  it('keys a Kyma by its bucket, or by runtime-id (else its key) as members that place by runtime-id do', () => {
    expect(shardKeyOf(kyma('kyma-a'))).to.equal(bucketKey(bucketOf('kyma-a')));
    expect(runtimeIdShardKeyOf(kyma('kyma-a', 'runtime-a'))).to.equal('runtime-a');
    expect(runtimeIdShardKeyOf(kyma('kyma-a'))).to.equal('kcp-system/kyma-a');
  });

  it('places by bucket only while every member announces it', () => {
    expect(
      placesByBucket([
        { identity: 'a', placement: 'buckets' },
        { identity: 'b', placement: 'buckets' },
      ]),
    ).to.equal(true);
    expect(placesByBucket([{ identity: 'a', placement: 'buckets' }, { identity: 'b' }])).to.equal(false);
  });

  it('follows the members: the ring picks among them, by the key the placement says', () => {
    const placement = new Placement('a');
    const subject = kyma('kyma-7', 'runtime-7');
    expect(placement.targetOf(subject), 'alone').to.equal('a');
    expect(
      placement.setMembers([
        { identity: 'a', placement: 'buckets' },
        { identity: 'b', placement: 'buckets' },
      ]),
    ).to.equal(false);
    const ring = createHashRing(['a', 'b']);
    expect(placement.keyOf(subject)).to.equal(bucketKey(subject.bucket));
    expect(placement.targetOf(subject)).to.equal(ring.ownerOf(bucketKey(subject.bucket)));
    expect(
      placement.setMembers([{ identity: 'a', placement: 'buckets' }, { identity: 'b' }]),
      'changed',
    ).to.equal(true);
    expect(placement.byBucket).to.equal(false);
    expect(placement.keyOf(subject)).to.equal('runtime-7');
    expect(placement.targetOf(subject)).to.equal(ring.ownerOf('runtime-7'));
  });

  it('knows the buckets the ring gives this replica, the same set every time for one ring', () => {
    const placement = new Placement('a');
    expect(placement.bucketsOfRing()).to.have.length(SHARDING.buckets);
    placement.setMembers([
      { identity: 'a', placement: 'buckets' },
      { identity: 'b', placement: 'buckets' },
    ]);
    const ring = createHashRing(['a', 'b']);
    const mine = placement.bucketsOfRing();
    expect(placement.bucketsOfRing()).to.equal(mine);
    expect(mine.length / SHARDING.buckets).to.be.within(0.4, 0.6);
    for (const bucket of [0, 1, 2, 4095]) {
      expect(placement.ownsBucket(bucket)).to.equal(ring.ownerOf(bucketKey(bucket)) === 'a');
      expect(mine.includes(bucket)).to.equal(placement.ownsBucket(bucket));
    }
  });

  it('lets the owner hand over to the ring’s pick and the ring’s pick claim from no owner or a gone one', () => {
    const gone = new Set(['dead']);
    const asked: string[] = [];
    const isGone = (who: string) => {
      asked.push(who);
      return gone.has(who);
    };
    expect(ownerStep('me', 'me', 'other', isGone)).to.deep.equal({ step: 'hand-over', to: 'other' });
    expect(ownerStep('me', 'me', 'me', isGone)).to.deep.equal({ step: 'keep' });
    expect(ownerStep('me', 'me', undefined, isGone), 'an empty ring moves nothing').to.deep.equal({
      step: 'keep',
    });
    expect(ownerStep('me', undefined, 'me', isGone)).to.deep.equal({ step: 'claim' });
    expect(ownerStep('me', 'dead', 'me', isGone)).to.deep.equal({ step: 'claim' });
    expect(ownerStep('me', 'alive', 'me', isGone), 'its owner lives').to.deep.equal({ step: 'none' });
    expect(ownerStep('me', 'dead', 'other', isGone), 'another replica’s to claim').to.deep.equal({
      step: 'none',
    });
    expect(ownerStep('me', undefined, 'other', isGone)).to.deep.equal({ step: 'none' });
    expect(asked, 'membership asked only where the answer matters').to.deep.equal(['dead', 'alive']);
  });
});
