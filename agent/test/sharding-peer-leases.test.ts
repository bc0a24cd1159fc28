// Peers' Leases as one replica judges them on its own (manual) clock: who is live and a member, who is gone, whose
// expired Lease is to be fenced, and which Leases are left over long enough to delete.
import { expect } from 'chai';
import type { V1Lease } from '@kubernetes/client-node';
import { ANNOTATIONS, LABELS, SHARDING } from '@skr-watcher/api';
import { ManualClock } from '../../test/support/manual-clock.js';
import { PeerLeases, membersSignature } from '../src/sharding/peer-leases.js';

const DURATION_MS = 6_000;

function lease(
  who: string,
  options: { renewTime?: string; holder?: boolean; seconds?: number; rv?: string; peer?: string } = {},
): V1Lease {
  return {
    metadata: {
      name: `ring-${who}`,
      resourceVersion: options.rv ?? '1',
      labels: { [LABELS.shardRing]: 'ring', [LABELS.shardOwner]: who },
      annotations: {
        [ANNOTATIONS.shardPlacement]: 'buckets',
        ...(options.peer ? { [ANNOTATIONS.peerAddress]: options.peer } : {}),
      },
    },
    spec: {
      ...(options.holder === false ? {} : { holderIdentity: who }),
      leaseDurationSeconds: options.seconds ?? DURATION_MS / 1000,
      renewTime: (options.renewTime ?? '2026-01-01T00:00:00.000000Z') as unknown as Date,
    },
  };
}

function peers() {
  const clock = new ManualClock();
  return { clock, peers: new PeerLeases('me', DURATION_MS, clock) };
}

describe('peer leases', () => {
  it('names the peers of the Leases it takes in, never this replica, and lists live ones as members', () => {
    const { peers: view } = peers();
    const seen = view.observe([
      lease('b', { peer: '10.0.0.2:8443' }),
      lease('me'),
      lease('a'),
      { metadata: {} },
    ]);
    expect([...seen].sort()).to.deep.equal(['a', 'b']);
    expect(view.members({ identity: 'me', placement: 'buckets' })).to.deep.equal([
      { identity: 'a', placement: 'buckets' },
      { identity: 'b', peerAddress: '10.0.0.2:8443', placement: 'buckets' },
      { identity: 'me', placement: 'buckets' },
    ]);
  });

  it('judges expiry from when it saw a renewal: the same renewTime seen again does not extend the Lease', async () => {
    const { clock, peers: view } = peers();
    view.observe([lease('a')]);
    await clock.advance(5_000);
    view.observe([lease('a', { rv: '2' })]);
    expect(view.expiresInMs('a')).to.equal(1_000);
    await clock.advance(1_000);
    expect(
      view.members({ identity: 'me' }).map((m) => m.identity),
      'expired',
    ).to.deep.equal(['me']);
    view.observe([lease('a', { renewTime: '2026-01-01T00:00:02.000000Z', rv: '3' })]);
    expect(view.expiresInMs('a'), 'a new renewal').to.equal(DURATION_MS);
    expect(view.expiresInMs('nobody')).to.equal(undefined);
  });

  it('calls a peer gone only once its Lease has no holder, not when it merely expired', async () => {
    const { clock, peers: view } = peers();
    view.observe([lease('a')]);
    await clock.advance(60_000);
    expect(view.isGone('a'), 'expired, not fenced').to.equal(false);
    view.observe([lease('a', { holder: false, rv: '2' })]);
    expect(view.isGone('a')).to.equal(true);
    expect(view.expiresInMs('a')).to.equal(0);
  });

  it('calls a peer without any Lease gone a lease duration after it was first asked about', async () => {
    const { clock, peers: view } = peers();
    await clock.advance(10_000);
    expect(view.isGone('ghost'), 'first asked').to.equal(false);
    await clock.advance(DURATION_MS - 1);
    expect(view.isGone('ghost')).to.equal(false);
    await clock.advance(1);
    expect(view.isGone('ghost')).to.equal(true);
    view.observe([lease('ghost')]);
    expect(view.isGone('ghost'), 'its Lease showed up').to.equal(false);
  });

  it('lists held Leases that expired on its clock for fencing, and takes a fence as a release', async () => {
    const { clock, peers: view } = peers();
    view.observe([lease('a', { seconds: 2 }), lease('b', { seconds: 10 }), lease('c', { holder: false })]);
    expect([...view.expired()]).to.deep.equal([]);
    expect(view.untilFirstExpiryMs()).to.equal(2_000);
    await clock.advance(2_000);
    const expired = [...view.expired()];
    expect(expired.map(([who]) => who)).to.deep.equal(['a']);
    const [who, record] = expired[0] as [string, Parameters<PeerLeases['fenced']>[1]];
    view.fenced(who, record, '7');
    expect(view.isGone('a')).to.equal(true);
    expect([...view.expired()]).to.deep.equal([]);
    expect(view.untilFirstExpiryMs()).to.equal(8_000);
    await clock.advance(8_000);
    expect(view.untilFirstExpiryMs(), 'none live').to.equal(Infinity);
  });

  it('deletes a released Lease a lease duration after the release, an unrenewed one after several durations', async () => {
    const { clock, peers: view } = peers();
    view.observe([lease('released', { holder: false }), lease('silent')]);
    const garbage = () => [...view.garbage(new Set(['released', 'silent']))].map((r) => r.leaseName);
    expect(garbage()).to.deep.equal([]);
    await clock.advance(DURATION_MS);
    expect(garbage()).to.deep.equal(['ring-released']);
    expect([...view.garbage(new Set(['silent']))], 'only Leases the last list showed').to.deep.equal([]);
    await clock.advance(DURATION_MS * (SHARDING.leaseGarbageAfterDurations - 1) - 1);
    expect(garbage()).to.deep.equal(['ring-released']);
    await clock.advance(1);
    expect(garbage()).to.deep.equal(['ring-released', 'ring-silent']);
  });

  it('signs a member set so that a change of identity, address or placement shows', () => {
    const members = [{ identity: 'a', peerAddress: '10.0.0.1:1', placement: 'buckets' }, { identity: 'b' }];
    expect(membersSignature(members)).to.equal('a@10.0.0.1:1/buckets,b@/');
    expect(membersSignature([{ identity: 'a', placement: 'buckets' }, { identity: 'b' }])).not.to.equal(
      membersSignature(members),
    );
  });
});
