// Shard membership under a KCP that answers late (decision 012), on a real KCP: the requests of one replica pass a
// gate the test holds, as when its process is starved or the KCP is slow for it. A renewal overdue past the renew
// deadline suspends the replica instead of ending it; it resumes when the renewal lands before any peer fenced its
// Lease, and is lost when a peer fenced it first or when its work was still running when peers may. Renewals do
// not wait behind a slow list of the ring.
import { expect } from 'chai';
import { CoordinationV1Api, CoreV1Api, V1MicroTime } from '@kubernetes/client-node';
import { startEnvironment, type Environment } from '@skr-watcher/testenv';
import { waitUntil } from '../../test/support/eventually.js';
import { ManualClock } from '../../test/support/manual-clock.js';
import { createMembership, type Membership } from '../src/sharding/index.js';
import { GatedKubeConfig, fence, renewal, ringList } from './support/gates.js';

describe('shard membership when the KCP answers late', function () {
  this.timeout(120_000);
  let env: Environment;
  const namespace = 'membership';
  const started: Membership[] = [];
  const gates: GatedKubeConfig[] = [];
  let ring = 0;

  before(async () => {
    env = await startEnvironment({ planes: ['kcp'] });
    await env
      .plane('kcp')
      .kubeConfig()
      .makeApiClient(CoreV1Api)
      .createNamespace({ body: { metadata: { name: namespace } } });
  });
  after(async () => {
    for (const gate of gates) gate.releaseAll();
    await Promise.all(started.map((m) => m.release()));
    await env?.stop();
  });

  /** Two members of a fresh ring: `slow` behind a gate, `peer` not. */
  async function pair(options: { idle?: () => boolean } = {}) {
    ring += 1;
    const gate = new GatedKubeConfig();
    gate.loadFromFile(env.plane('kcp').kubeconfigPath);
    gates.push(gate);
    const lost: string[] = [];
    // Renew deadline 2 s, lease 8 s: a held renewal suspends after 2 s; peers may fence after 8 s, so a renewal
    // released once suspension is seen lands well before that even on a loaded machine.
    const timing = { leaseDurationMs: 8_000, renewDeadlineMs: 2_000, retryPeriodMs: 300 };
    const slow = createMembership({
      kubeConfig: gate,
      namespace,
      ring: `ring-${ring}`,
      identity: `slow-${ring}`,
      ...timing,
      onChange: () => {},
      onLost: (reason) => lost.push(reason),
      ...(options.idle ? { idle: options.idle } : {}),
    });
    const peer = createMembership({
      kubeConfig: env.plane('kcp').kubeConfig(),
      namespace,
      ring: `ring-${ring}`,
      identity: `peer-${ring}`,
      ...timing,
      onChange: () => {},
      onLost: () => {},
    });
    started.push(slow, peer);
    await slow.start();
    await peer.start();
    await waitUntil('both members see each other', async () => peer.members().length === 2, 20_000, 50);
    return { gate, slow, peer, lost };
  }

  it('suspends when a renewal is overdue and resumes when it lands before a peer fenced the Lease', async () => {
    const { gate, slow, peer, lost } = await pair();
    gate.hold(renewal);
    await waitUntil('the slow replica suspends', async () => !slow.isActive(), 20_000, 20);
    expect(lost, 'suspended, not lost').to.deep.equal([]);
    gate.releaseAll();
    await waitUntil('the slow replica resumes', async () => slow.isActive(), 20_000, 20);
    expect(lost).to.deep.equal([]);
    expect(peer.isGone(slow.identity), 'the peer never took it over').to.equal(false);
  });

  it('is lost when its late renewal finds its Lease fenced by a peer', async () => {
    const { gate, slow, peer, lost } = await pair();
    gate.hold(renewal);
    await waitUntil('the peer fences the expired Lease', async () => peer.isGone(slow.identity), 30_000, 50);
    expect(slow.isActive(), 'suspended meanwhile').to.equal(false);
    expect(lost).to.deep.equal([]);
    gate.releaseAll();
    await waitUntil('the slow replica learns it was taken over', async () => lost.length > 0, 20_000, 20);
    expect(lost[0]).to.match(/fenced/);
    expect(slow.isActive()).to.equal(false);
  });

  it('a peer whose fence lost the race to another peer sees the Lease released at once, not at its next look', async () => {
    ring += 1;
    const timing = { leaseDurationMs: 8_000, renewDeadlineMs: 2_000, retryPeriodMs: 300 };
    const member = (identity: string) => {
      const gate = new GatedKubeConfig();
      gate.loadFromFile(env.plane('kcp').kubeconfigPath);
      gates.push(gate);
      const membership = createMembership({
        kubeConfig: gate,
        namespace,
        ring: `ring-${ring}`,
        identity: `${identity}-${ring}`,
        ...timing,
        onChange: () => {},
        onLost: () => {},
      });
      started.push(membership);
      return { gate, membership };
    };
    const [slow, first, second] = [member('slow'), member('first'), member('second')];
    for (const { membership } of [slow, first, second]) await membership.start();
    await waitUntil(
      'the peers see the slow one',
      async () => second.membership.members().length === 3,
      20_000,
      50,
    );
    first.gate.hold(fence);
    second.gate.hold(fence);
    slow.gate.hold(renewal);
    await waitUntil(
      'both peers try to fence the expired Lease',
      async () => first.gate.heldCount() > 0 && second.gate.heldCount() > 0,
      30_000,
      20,
    );
    first.gate.releaseAll();
    await waitUntil(
      'the first peer fences it',
      async () => first.membership.isGone(slow.membership.identity),
      20_000,
      20,
    );
    expect(second.membership.isGone(slow.membership.identity), 'not released in its view yet').to.equal(
      false,
    );
    // The second peer's fence goes now and meets a conflict; its lists of the ring no longer answer.
    second.gate.releaseAll();
    second.gate.hold(ringList);
    await waitUntil(
      'the second peer sees the Lease released',
      async () => second.membership.isGone(slow.membership.identity),
      20_000,
      20,
    );
  });

  it('looks at the ring when a peer’s Lease expires on its clock, not only every retry period', async () => {
    ring += 1;
    const gate = new GatedKubeConfig();
    gate.loadFromFile(env.plane('kcp').kubeconfigPath);
    gates.push(gate);
    // A peer whose Lease lasts 2 s, and whose renewals stop.
    const slow = createMembership({
      kubeConfig: gate,
      namespace,
      ring: `ring-${ring}`,
      identity: `slow-${ring}`,
      leaseDurationMs: 2_000,
      renewDeadlineMs: 1_000,
      retryPeriodMs: 300,
      onChange: () => {},
      onLost: () => {},
    });
    started.push(slow);
    await slow.start();
    gate.hold(renewal);
    await waitUntil('a renewal of the slow peer is held', async () => gate.heldCount() > 0, 20_000, 20);
    // An observer that looks every 4 s, on a clock the test moves: 2.1 s on, the peer's Lease has expired there.
    const clock = new ManualClock();
    const observer = createMembership({
      kubeConfig: env.plane('kcp').kubeConfig(),
      namespace,
      ring: `ring-${ring}`,
      identity: `observer-${ring}`,
      leaseDurationMs: 30_000,
      renewDeadlineMs: 5_000,
      retryPeriodMs: 4_000,
      clock,
      onChange: () => {},
      onLost: () => {},
    });
    started.push(observer);
    await observer.start();
    expect(observer.members().map((m) => m.identity)).to.include(slow.identity);
    await clock.advance(2_100);
    await waitUntil(
      'the observer fences the expired Lease',
      async () => observer.isGone(slow.identity),
      20_000,
      20,
    );
  });

  it('a recheck for a callback sees a Lease a peer fenced at once, where its view still had it live', async () => {
    ring += 1;
    const gate = new GatedKubeConfig();
    gate.loadFromFile(env.plane('kcp').kubeconfigPath);
    gates.push(gate);
    const member = (identity: string, kubeConfig = env.plane('kcp').kubeConfig(), clock?: ManualClock) => {
      const membership = createMembership({
        kubeConfig,
        namespace,
        ring: `ring-${ring}`,
        identity: `${identity}-${ring}`,
        leaseDurationMs: 2_000,
        renewDeadlineMs: 1_000,
        retryPeriodMs: 300,
        ...(clock ? { clock } : {}),
        onChange: () => {},
        onLost: () => {},
      });
      started.push(membership);
      return membership;
    };
    const slow = member('slow', gate);
    const fencer = member('fencer');
    // On a clock the test never moves, the slow peer's Lease never expires and no timed look comes: the view of a
    // replica whose clock saw the last renewal later than the fencer's did.
    const clock = new ManualClock();
    const lagging = member('lagging', env.plane('kcp').kubeConfig(), clock);
    for (const membership of [slow, fencer, lagging]) await membership.start();
    await waitUntil('the fencer sees the slow peer', async () => fencer.members().length === 3, 20_000, 50);
    gate.hold(renewal);
    await waitUntil('the fencer fences the slow peer', async () => fencer.isGone(slow.identity), 20_000, 20);
    expect(lagging.isGone(slow.identity), 'the lagging view still has it live').to.equal(false);
    expect(lagging.members().map((m) => m.identity)).to.include(slow.identity);
    expect(await lagging.recheck(slow.identity), 'gone after a recheck').to.equal(true);
    expect(lagging.members().map((m) => m.identity)).not.to.include(slow.identity);
    // A live peer stays live: a recheck does not take a Lease away.
    expect(await lagging.recheck(fencer.identity)).to.equal(false);
  });

  it('is lost when its work is still running at the point where peers may take over', async () => {
    const { gate, slow, lost } = await pair({ idle: () => false });
    gate.hold(renewal);
    await waitUntil('the slow replica gives up', async () => lost.length > 0, 30_000, 20);
    expect(lost[0]).to.match(/in flight/);
    expect(slow.isActive()).to.equal(false);
  });

  it('keeps renewing while a list of the ring hangs', async () => {
    const { gate, slow, lost } = await pair();
    const before = gate.passed.filter(renewal).length;
    gate.hold(ringList);
    await waitUntil(
      'five renewals pass while the ring list is held',
      async () => gate.passed.filter(renewal).length >= before + 5,
      20_000,
      20,
    );
    expect(slow.isActive()).to.equal(true);
    expect(lost).to.deep.equal([]);
    gate.releaseAll();
  });

  describe('a fixed --shard-identity that starts again', () => {
    /** A member of a fresh ring, or of the last one (`again`: a second process with the same identity). */
    const member = (name: string, again = false) => {
      if (!again) ring += 1;
      const membership = createMembership({
        kubeConfig: env.plane('kcp').kubeConfig(),
        namespace,
        ring: `fixed-${ring}`,
        identity: name,
        leaseDurationMs: 3_000,
        renewDeadlineMs: 2_000,
        retryPeriodMs: 300,
        onChange: () => {},
        onLost: () => {},
      });
      started.push(membership);
      return membership;
    };

    it('takes its own Lease back once the process killed -9 left it unrenewed for its duration', async () => {
      const restarted = member('fixed-a');
      // What the killed process left: our Lease, held, renewed a moment ago, never to be renewed again.
      await env
        .plane('kcp')
        .kubeConfig()
        .makeApiClient(CoordinationV1Api)
        .createNamespacedLease({
          namespace,
          body: {
            metadata: { name: `fixed-${ring}-fixed-a` },
            spec: {
              holderIdentity: 'fixed-a',
              leaseDurationSeconds: 3,
              acquireTime: new V1MicroTime(),
              renewTime: new V1MicroTime(),
            },
          },
        });
      const startedAt = Date.now();
      await restarted.start();
      expect(restarted.isActive(), 'active with its Lease back').to.equal(true);
      expect(Date.now() - startedAt, 'waited for the left Lease to expire').to.be.at.least(2_900);
    });

    it('refuses to start, with a reason, while another process renews the same identity', async () => {
      const first = member('fixed-b');
      await first.start();
      const second = member('fixed-b', true);
      const outcome = await second.start().then(
        () => 'started',
        (error: Error) => error.message,
      );
      expect(outcome).to.contain('is being renewed by another process');
      expect(first.isActive(), 'the running one is untouched').to.equal(true);
    });
  });
});
