// This replica's own Lease on a real KCP: created with what peers read from it, renewed conditional on our last write
// (a fence or a delete shows as lost), released, and taken back from an earlier process of the same identity; the
// waits run on a manual clock.
import { expect } from 'chai';
import { CoordinationV1Api, PatchStrategy, setHeaderOptions, type V1Lease } from '@kubernetes/client-node';
import { ANNOTATIONS, LABELS } from '@skr-watcher/api';
import { ManualClock } from '../../test/support/manual-clock.js';
import { OwnLease, renewedByAnother, takeBackWaitMs } from '../src/sharding/own-lease.js';
import { kcpNamespaceForSuite } from './support/suite-namespace.js';

const timing = { leaseDurationMs: 6_000, retryPeriodMs: 500 };
let api: CoordinationV1Api;
let namespace: string;
let counter = 0;

function ownLease(clock = new ManualClock(), identity = `agent-${++counter}`) {
  return {
    clock,
    identity,
    lease: new OwnLease({
      api,
      namespace,
      ring: 'ring',
      identity,
      peerAddress: '10.0.0.1:8443',
      ...timing,
      clock,
    }),
  };
}

const read = (name: string) => api.readNamespacedLease({ name, namespace });

/** Advances `clock` one retry period at a time, letting the KCP answer in between, until `work` settles. */
async function drive<T>(clock: ManualClock, work: Promise<T>): Promise<T> {
  let settled = false;
  const watched = work.finally(() => (settled = true));
  watched.catch(() => {});
  for (let i = 0; i < 400 && !settled; i++) {
    await new Promise((resolve) => setTimeout(resolve, 10));
    if (clock.pendingTimers > 0) await clock.advance(timing.retryPeriodMs);
  }
  return watched;
}

describe('own membership Lease', function () {
  this.timeout(120_000);
  const suite = kcpNamespaceForSuite('own-lease');
  before(() => {
    api = suite.kcp.makeApiClient(CoordinationV1Api);
    namespace = suite.name;
  });

  it('is created saying ring, owner, placement and peer address, and renewed keeping its acquire time', async () => {
    const { lease, identity } = ownLease();
    expect(lease.held).to.equal(false);
    await lease.createOrTakeBack();
    expect(lease.held).to.equal(true);
    const created = await read(lease.name);
    expect(created.metadata?.labels).to.include({
      [LABELS.shardRing]: 'ring',
      [LABELS.shardOwner]: identity,
    });
    expect(created.metadata?.annotations).to.include({
      [ANNOTATIONS.shardPlacement]: 'buckets',
      [ANNOTATIONS.peerAddress]: '10.0.0.1:8443',
    });
    expect(created.spec).to.include({ holderIdentity: identity, leaseDurationSeconds: 6 });
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(await lease.renew()).to.equal(undefined);
    const renewed = await read(lease.name);
    expect(renewed.metadata?.resourceVersion).not.to.equal(created.metadata?.resourceVersion);
    expect(String(renewed.spec?.acquireTime)).to.equal(String(created.spec?.acquireTime));
    expect(String(renewed.spec?.renewTime)).not.to.equal(String(created.spec?.renewTime));
  });

  it('says it is lost when a peer fenced it, or someone deleted it, since our last write', async () => {
    const fencedOne = ownLease().lease;
    await fencedOne.createOrTakeBack();
    await api.patchNamespacedLease(
      { name: fencedOne.name, namespace, body: { spec: { holderIdentity: null } } },
      setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
    );
    expect(await fencedOne.renew()).to.equal('own Lease fenced or written by someone else');

    const deletedOne = ownLease().lease;
    await deletedOne.createOrTakeBack();
    await api.deleteNamespacedLease({ name: deletedOne.name, namespace });
    // The replace carries our resourceVersion, so the API server answers a deleted Lease with a conflict too.
    expect(await deletedOne.renew()).to.match(/^own Lease (deleted|fenced or written) by someone else$/);
  });

  it('is released with no holder and a one-second duration, so peers need not wait it out', async () => {
    const { lease } = ownLease();
    await lease.createOrTakeBack();
    await lease.release();
    const released = await read(lease.name);
    expect(released.spec?.holderIdentity).to.equal(undefined);
    expect(released.spec?.leaseDurationSeconds).to.equal(1);
  });

  it('takes back at once a Lease of its identity that no one holds', async () => {
    const first = ownLease();
    await first.lease.createOrTakeBack();
    await first.lease.release();
    const again = ownLease(new ManualClock(), first.identity);
    await again.lease.createOrTakeBack();
    expect((await read(again.lease.name)).spec?.holderIdentity).to.equal(first.identity);
    expect(again.clock.pendingTimers, 'no wait').to.equal(0);
  });

  it('takes back a held Lease of its identity once it went unrenewed for its duration on our clock', async () => {
    const earlier = ownLease();
    await earlier.lease.createOrTakeBack();
    const seenBefore = await read(earlier.lease.name);
    const again = ownLease(new ManualClock(), earlier.identity);
    await drive(again.clock, again.lease.createOrTakeBack());
    expect(again.clock.now(), 'waited a lease duration').to.be.at.least(timing.leaseDurationMs);
    const taken = await read(again.lease.name);
    expect(taken.metadata?.resourceVersion).not.to.equal(seenBefore.metadata?.resourceVersion);
    expect(await again.lease.renew(), 'renews what it took back').to.equal(undefined);
  });

  it('refuses to take back a Lease another process goes on renewing under the same identity', async () => {
    const other = ownLease();
    await other.lease.createOrTakeBack();
    const again = ownLease(new ManualClock(), other.identity);
    const taking = again.lease.createOrTakeBack();
    taking.catch(() => {});
    for (let i = 0; i < 400 && again.clock.pendingTimers === 0; i++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    await new Promise((resolve) => setTimeout(resolve, 5));
    expect(await other.lease.renew()).to.equal(undefined);
    const refusal = await drive(again.clock, taking).then(
      () => undefined,
      (error: Error) => error.message,
    );
    expect(refusal).to.match(
      /is being renewed by another process; give every replica its own --shard-identity/,
    );
  });

  it('waits for a held Lease until its duration is over, a retry period at a time', () => {
    const held: V1Lease = { spec: { holderIdentity: 'a', leaseDurationSeconds: 6 } };
    expect(takeBackWaitMs(held, 0, timing)).to.equal(500);
    expect(takeBackWaitMs(held, 5_800, timing), 'up to the expiry and a little').to.equal(210);
    expect(takeBackWaitMs(held, 6_000, timing)).to.equal(0);
    expect(takeBackWaitMs({ spec: { leaseDurationSeconds: 6 } }, 0, timing), 'no holder').to.equal(0);
    expect(takeBackWaitMs({ spec: { holderIdentity: 'a' } }, 5_999, timing), 'our duration').to.equal(11);
  });

  it('tells a renewal by another process from a fence or a release', () => {
    const seen: V1Lease = { spec: { holderIdentity: 'a', renewTime: 't1' as unknown as Date } };
    expect(
      renewedByAnother(seen, { spec: { holderIdentity: 'a', renewTime: 't2' as unknown as Date } }, 'a'),
    ).to.equal(true);
    expect(renewedByAnother(seen, { spec: { renewTime: 't2' as unknown as Date } }, 'a'), 'fenced').to.equal(
      false,
    );
    expect(
      renewedByAnother(seen, { spec: { holderIdentity: 'a', renewTime: 't1' as unknown as Date } }, 'a'),
    ).to.equal(false);
  });
});
