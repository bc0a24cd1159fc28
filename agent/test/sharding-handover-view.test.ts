// A callback forwarded to the replica a Kyma was just handed to, before that replica's view shows the handover
// (decision 012): the peer that forwarded it saw the old owner's new label first. On a real KCP, two live
// memberships share a ring; the test writes the label as the old owner would, and only replica B runs an assignment.
import { expect } from 'chai';
import { CoreV1Api, CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { GROUP, KINDS, LABELS } from '@skr-watcher/api';
import { mergePatchCustomObject } from '@skr-watcher/kube';
import { sharedEnvironment } from '@skr-watcher/testenv';
import { waitUntil } from '../../test/support/eventually.js';
import { seedKyma } from '../../test/support/kcp-seed.js';
import {
  createAssignment,
  createMembership,
  type Assignment,
  type Membership,
} from '../src/sharding/index.js';

const A = 'hand-a';
const B = 'hand-b';
const KYMAS = 8;

describe('a replica waits briefly for its view to show a Kyma handed to it', function () {
  this.timeout(300_000);
  const namespace = `handover-view-${process.pid}`;
  let kcp: KubeConfig;
  const memberships: Membership[] = [];
  let assignment: Assignment;

  const join = async (identity: string, onChange?: () => void) => {
    const membership = createMembership({
      kubeConfig: kcp,
      namespace,
      ring: 'handover-view',
      identity,
      leaseDurationMs: 10_000,
      renewDeadlineMs: 4_000,
      retryPeriodMs: 500,
      onChange: () => onChange?.(),
      onLost: () => {},
      idle: () => true,
    });
    await membership.start();
    memberships.push(membership);
    return membership;
  };
  const keys = Array.from({ length: KYMAS }, (_, i) => `${namespace}/kyma-${i}`);
  /** Writes the owner label as the old owner does when it hands a Kyma over. */
  const label = (key: string, owner: string) =>
    mergePatchCustomObject(
      kcp.makeApiClient(CustomObjectsApi),
      {
        group: GROUP,
        version: KINDS.kyma.version,
        plural: KINDS.kyma.plural,
        namespace,
        name: key.split('/')[1] as string,
      },
      { metadata: { labels: { [LABELS.shardOwner]: owner } } },
    );

  before(async () => {
    kcp = (await sharedEnvironment()).plane('kcp').kubeConfig();
    await kcp.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } });
    // Every Kyma is A's: A is alive, so B claims none of them; only A could hand them over.
    for (const key of keys) {
      await seedKyma(kcp, namespace, key.split('/')[1] as string, '');
      await label(key, A);
    }
    await join(A);
    const b = await join(B, () => assignment?.setMembers(b.members()));
    assignment = createAssignment({ kubeConfig: kcp, namespace, membership: b, onAcquired: () => {} });
    assignment.setMembers(b.members());
    await assignment.start();
    await waitUntil('B sees both members', () => b.members().length === 2, 30_000, 50);
    await waitUntil(
      'B sees every Kyma',
      () => keys.every((key) => assignment.ownerOf(key) === A),
      30_000,
      50,
    );
  });
  after(async () => {
    await assignment?.stop();
    for (const membership of memberships) await membership.release();
    await kcp?.makeApiClient(CoreV1Api).deleteNamespace({ name: namespace });
  });

  const ringPicks = (identity: string) => keys.filter((key) => assignment.targetOf(key) === identity);

  it('takes a Kyma the ring gives it once the handover label reaches its view', async () => {
    const key = ringPicks(B)[0];
    expect(key, 'a Kyma the ring gives B').to.be.a('string');
    const waiting = assignment.awaitHandover(key as string);
    await label(key as string, B);
    expect(await waiting).to.equal(true);
    expect(assignment.ownedKeys()).to.include(key);
  });

  it('answers no at once for a Kyma the ring gives the live owner, and after the wait when no handover comes', async () => {
    const kept = ringPicks(A)[0];
    expect(kept, 'a Kyma the ring gives A').to.be.a('string');
    expect(await assignment.awaitHandover(kept as string)).to.equal(false);
    const pending = ringPicks(B).find((key) => assignment.ownerOf(key) === A);
    expect(pending, 'a second Kyma the ring gives B, still A’s').to.be.a('string');
    expect(await assignment.awaitHandover(pending as string)).to.equal(false);
    expect(assignment.ownerOf(pending as string)).to.equal(A);
  });
});
