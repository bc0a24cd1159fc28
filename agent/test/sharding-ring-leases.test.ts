// Peers' Leases on a real KCP, judged on a manual clock: an expired one is fenced (its holder cleared, conditional on
// the version seen), one renewed meanwhile or fenced by another peer first is read again at once, and a Lease left
// over long enough is deleted unless it changed.
import { expect } from 'chai';
import { CoordinationV1Api, V1MicroTime, type V1Lease } from '@kubernetes/client-node';
import { LABELS, SHARDING } from '@skr-watcher/api';
import { ManualClock } from '../../test/support/manual-clock.js';
import { PeerLeases } from '../src/sharding/peer-leases.js';
import { RingLeases } from '../src/sharding/ring-leases.js';
import { kcpNamespaceForSuite } from './support/suite-namespace.js';

const DURATION_MS = 4_000;
let api: CoordinationV1Api;
let namespace: string;
let ringCount = 0;

function peerLeaseBody(ring: string, who: string): V1Lease {
  return {
    metadata: { name: `${ring}-${who}`, labels: { [LABELS.shardRing]: ring, [LABELS.shardOwner]: who } },
    spec: {
      holderIdentity: who,
      leaseDurationSeconds: DURATION_MS / 1000,
      renewTime: new V1MicroTime(Date.now()),
    },
  };
}

/** A fresh ring with peer Leases for `peers`, seen by replica `me` on a manual clock. */
async function ring(...peers: string[]) {
  const name = `ring-${++ringCount}`;
  for (const who of peers) await api.createNamespacedLease({ namespace, body: peerLeaseBody(name, who) });
  const clock = new ManualClock();
  const view = new PeerLeases('me', DURATION_MS, clock);
  let fencings = 0;
  const leases = new RingLeases({
    api,
    namespace,
    ring: name,
    peers: view,
    clock,
    metrics: { fencing: () => (fencings += 1), handover: () => {}, takeover: () => {} },
  });
  const look = async () => view.observe(await leases.list());
  return { name, clock, view, leases, look, fencings: () => fencings };
}

describe('ring leases', function () {
  this.timeout(120_000);
  const suite = kcpNamespaceForSuite('ring-leases');
  before(() => {
    api = suite.kcp.makeApiClient(CoordinationV1Api);
    namespace = suite.name;
  });

  it('lists the Leases of its ring only', async () => {
    const first = await ring('a', 'b');
    await ring('c');
    expect([...(await first.look())].sort()).to.deep.equal(['a', 'b']);
  });

  it('fences a Lease that expired on our clock: holder cleared on the KCP, the peer gone in our view', async () => {
    const { name, clock, view, leases, look, fencings } = await ring('a', 'b');
    await look();
    await leases.fenceExpired();
    expect(fencings(), 'nothing expired yet').to.equal(0);
    await clock.advance(DURATION_MS);
    await leases.fenceExpired();
    expect(fencings()).to.equal(2);
    const fenced = await api.readNamespacedLease({ name: `${name}-a`, namespace });
    expect(fenced.spec?.holderIdentity).to.equal(undefined);
    expect(view.isGone('a')).to.equal(true);
    expect(view.members({ identity: 'me' }).map((m) => m.identity)).to.deep.equal(['me']);
  });

  it('does not fence a Lease renewed since we saw it, and sees the renewal at once', async () => {
    const { name, clock, view, leases, look, fencings } = await ring('a');
    await look();
    const current = await api.readNamespacedLease({ name: `${name}-a`, namespace });
    await api.replaceNamespacedLease({
      name: `${name}-a`,
      namespace,
      body: { ...current, spec: { ...current.spec, renewTime: new V1MicroTime(Date.now() + 1_000) } },
    });
    await clock.advance(DURATION_MS);
    await leases.fenceExpired();
    expect(fencings()).to.equal(0);
    expect((await api.readNamespacedLease({ name: `${name}-a`, namespace })).spec?.holderIdentity).to.equal(
      'a',
    );
    expect(view.isGone('a')).to.equal(false);
    expect(view.expiresInMs('a'), 'live again for a duration').to.equal(DURATION_MS);
  });

  it('sees at once a Lease another peer fenced first', async () => {
    const { name, clock, view, leases, look, fencings } = await ring('a');
    await look();
    const other = await ring();
    const otherView = new PeerLeases('other', DURATION_MS, other.clock);
    otherView.observe([await api.readNamespacedLease({ name: `${name}-a`, namespace })]);
    await other.clock.advance(DURATION_MS);
    await new RingLeases({ api, namespace, ring: name, peers: otherView, clock: other.clock }).fenceExpired();
    await clock.advance(DURATION_MS);
    await leases.fenceExpired();
    expect(fencings(), 'ours met a conflict').to.equal(0);
    expect(view.isGone('a')).to.equal(true);
  });

  it('deletes a Lease released a lease duration ago, and keeps one that changed since we saw it', async () => {
    const { name, clock, leases, look } = await ring('a', 'b');
    for (const who of ['a', 'b']) {
      const current = await api.readNamespacedLease({ name: `${name}-${who}`, namespace });
      await api.replaceNamespacedLease({
        name: `${name}-${who}`,
        namespace,
        body: { ...current, spec: { ...current.spec, holderIdentity: undefined } },
      });
    }
    const seen = await look();
    const b = await api.readNamespacedLease({ name: `${name}-b`, namespace });
    await api.replaceNamespacedLease({
      name: `${name}-b`,
      namespace,
      body: { ...b, metadata: { ...b.metadata, annotations: { changed: 'yes' } } },
    });
    await clock.advance(DURATION_MS * SHARDING.leaseGarbageAfterDurations);
    await leases.collectGarbage(seen);
    const left = (await leases.list()).map((lease) => lease.metadata?.name);
    expect(left).to.deep.equal([`${name}-b`]);
  });
});
