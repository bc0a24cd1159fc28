// A sharded replica's work under load (decision 012), on a real KCP: the replica's membership renewals pass a gate
// the test holds, and its runs wait on an SKR endpoint that holds every request until the test lets it answer.
// Reconciles are paced (none starts while a renewal is in flight; a small limit that widens with renewals on
// time), and a run is aborted when the replica is suspended or hands its Kyma over: its SKR request ends at once
// and the KCP write after it never happens.
import { expect } from 'chai';
import {
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  setHeaderOptions,
  type KubeConfig,
} from '@kubernetes/client-node';
import { GROUP, KINDS, LABELS, SHARDING, type Kyma } from '@skr-watcher/api';
import { createClusterClient, workQueueRunHooks, type ClusterClient } from '@skr-watcher/kube';
import { startEnvironment, type Environment } from '@skr-watcher/testenv';
import { waitUntil } from '../../test/support/eventually.js';
import { seedKyma } from '../../test/support/kcp-seed.js';
import {
  createAssignment,
  createHashRing,
  createMembership,
  shardKeyOf,
  type Assignment,
  type Membership,
  type Renewal,
} from '../src/sharding/index.js';
import { GatedKubeConfig, renewal, startHeldSkr, type HeldSkr } from './support/gates.js';

const WRITTEN = 'test.skr-watcher.io/written-by-run';
const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

describe('a sharded replica’s work under load', function () {
  this.timeout(180_000);
  let env: Environment;
  let kcp: KubeConfig;
  let kcpClient: ClusterClient;
  let skr: HeldSkr;
  let skrClient: ClusterClient;
  let round = 0;
  const cleanups: (() => Promise<void> | void)[] = [];

  before(async () => {
    env = await startEnvironment({ planes: ['kcp'] });
    kcp = env.plane('kcp').kubeConfig();
  });
  beforeEach(async () => {
    // A fresh SKR endpoint per test: one test's held requests never answer another's.
    skr = await startHeldSkr();
    // As the reconciler builds them: requests bound by the run's deadline and abort signal, answers told to the run.
    skrClient = await createClusterClient(skr.kubeConfig, {
      name: 'held skr',
      boundByDeadline: true,
      runs: workQueueRunHooks,
    });
    kcpClient = await createClusterClient(kcp, {
      name: 'kcp',
      boundByDeadline: true,
      runs: workQueueRunHooks,
    });
  });
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
    skr?.answerAll();
    await skrClient?.close();
    await kcpClient?.close();
    await skr?.close();
  });
  after(async () => {
    await env?.stop();
  });

  /** A namespace with `count` Kymas and one replica (behind a gate) that owns them all. */
  async function replicaOwningAll(count: number, pacing?: { initial: number; max: number }) {
    round += 1;
    const namespace = `work-${round}`;
    const identity = `slow-${round}`;
    await kcp.makeApiClient(CoreV1Api).createNamespace({ body: { metadata: { name: namespace } } });
    const api = kcp.makeApiClient(CustomObjectsApi);
    const keys: string[] = [];
    for (let i = 0; i < count; i++) {
      // Its kubeconfig is never read: the runs here use the held SKR endpoint.
      await seedKyma(kcp, namespace, `kyma-${round}-${i}`, '');
      keys.push(`${namespace}/kyma-${round}-${i}`);
    }
    const gate = new GatedKubeConfig();
    gate.loadFromFile(env.plane('kcp').kubeconfigPath);
    const lost: string[] = [];
    const acquired: string[] = [];
    const renewals: (Renewal & { started: number })[] = [];
    const late: { assignment?: Assignment } = {};
    const started: string[] = [];
    // Renewals every second; a held renewal suspends after 4 s, and peers may fence after 10 s.
    const timing = { leaseDurationMs: 10_000, renewDeadlineMs: 4_000, retryPeriodMs: 1_000 };
    const membership: Membership = createMembership({
      kubeConfig: gate,
      namespace,
      ring: `ring-${round}`,
      identity,
      ...timing,
      onChange: (members) => late.assignment?.setMembers(members),
      onLost: (reason) => lost.push(reason),
      onResumed: () => late.assignment?.resumed(),
      onSuspended: () => late.assignment?.suspended(),
      onRenewal: (r) => {
        late.assignment?.renewed(r);
        // Counted once the runs the renewal let start have started (they start in microtasks).
        setImmediate(() => renewals.push({ ...r, started: started.length }));
      },
      idle: () => late.assignment?.idle() ?? true,
    });
    await membership.start();
    const assignment = createAssignment({
      kubeConfig: gate,
      namespace,
      membership,
      onAcquired: (key) => acquired.push(key),
      ...(pacing ? { pacing } : {}),
    });
    late.assignment = assignment;
    assignment.setMembers(membership.members());
    await assignment.start();
    cleanups.push(async () => {
      gate.releaseAll();
      assignment.withdrawAll('test over');
      assignment.stopStarting();
      await assignment.stop();
      await membership.release();
    });
    await waitUntil('the replica owns every Kyma', () => assignment.ownedKeys().length === count, 60_000, 50);

    /** A run as a reconcile goes: an SKR read (held by the test), then a KCP write that says it happened. */
    const run = (key: string) => async () => {
      started.push(key);
      await skrClient.core.listNamespace();
      const [kymaNamespace, name] = key.split('/') as [string, string];
      await kcpClient.custom.patchNamespacedCustomObject(
        {
          group: GROUP,
          version: KINDS.kyma.version,
          plural: KINDS.kyma.plural,
          namespace: kymaNamespace,
          name,
          body: { metadata: { annotations: { [WRITTEN]: identity } } },
        },
        mergePatch,
      );
      return 'written' as const;
    };
    const kyma = async (key: string) => {
      const [kymaNamespace, name] = key.split('/') as [string, string];
      return (await api.getNamespacedCustomObject({
        group: GROUP,
        version: KINDS.kyma.version,
        plural: KINDS.kyma.plural,
        namespace: kymaNamespace,
        name,
      })) as Kyma;
    };
    return {
      namespace,
      identity,
      keys,
      gate,
      membership,
      assignment,
      lost,
      acquired,
      renewals,
      started,
      run,
      kyma,
    };
  }

  it('starts no reconcile while a renewal is in flight, then a few, widening while renewals stay on time', async () => {
    const { keys, gate, membership, assignment, renewals, started, run } = await replicaOwningAll(10);
    gate.hold(renewal);
    await waitUntil('a renewal waits at the gate', () => membership.renewalInFlight(), 20_000, 10);
    // What the work queue hears from a run: waiting while it has no slot, working once it has one.
    const phases = new Map<string, string[]>(keys.map((key) => [key, []]));
    const phaseOf = (key: string) => ({
      waiting: () => phases.get(key)?.push('waiting'),
      working: () => phases.get(key)?.push('working'),
    });
    const results = keys.map((key) => assignment.guard(key, run(key), true, phaseOf(key)));
    for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
    expect(started, 'no run starts while the renewal is in flight').to.deep.equal([]);
    expect([...phases.values()], 'each run told the queue it waits').to.deep.equal(
      keys.map(() => ['waiting']),
    );

    const before = renewals.length;
    gate.releaseAll();
    await waitUntil('the held renewal lands', () => renewals.length > before, 20_000, 10);
    const first = renewals[before]!;
    expect(first.ok).to.equal(true);
    // Counted when the renewal was reported: at most the initial limit widened by one step.
    expect(first.started, 'runs started right after the renewal').to.be.at.most(
      SHARDING.pacing.initialRuns + SHARDING.pacing.widenBy,
    );
    expect(first.started).to.be.greaterThan(0);

    await waitUntil(
      'every run starts as renewals keep landing on time',
      () => started.length === keys.length,
      60_000,
      50,
    );
    const widening = renewals.slice(before + 1).filter((r) => r.onTime);
    expect(widening.length, 'on-time renewals that widened the limit').to.be.greaterThan(0);
    expect([...phases.values()]).to.deep.equal(keys.map(() => ['waiting', 'working']));
    skr.answerAll();
    expect(await Promise.all(results)).to.deep.equal(keys.map(() => 'written'));
  });

  it('gives the slot of a run waiting on a hung SKR to the next run after a second, so hung SKRs do not stall the rest', async () => {
    // The limit stays at 2: only slots given back let more than two runs start.
    const { keys, assignment, started, run } = await replicaOwningAll(6, { initial: 2, max: 2 });
    const results = keys.map((key) => assignment.guard(key, run(key), true));
    await waitUntil(
      'every run starts while the SKR holds the requests of the first ones',
      () => started.length === keys.length,
      30_000,
      50,
    );
    await waitUntil(
      'the SKR holds a request of every run',
      async () => skr.held() === keys.length,
      20_000,
      20,
    );
    skr.answerAll();
    expect(await Promise.all(results)).to.deep.equal(keys.map(() => 'written'));
  });

  it('keeps the slots of slow runs while renewals land late: slow may mean overloaded then, not a hung SKR', async () => {
    const { keys, gate, assignment, renewals, started, run } = await replicaOwningAll(6, {
      initial: 2,
      max: 2,
    });
    // Every renewal waits 700 ms, longer than half the retry period: each lands, late.
    gate.delay(renewal, 700);
    cleanups.push(() => gate.delay(undefined));
    const lateFrom = renewals.length;
    await waitUntil(
      'a late renewal lands',
      () => renewals.slice(lateFrom).some((r) => r.ok && !r.onTime),
      20_000,
      20,
    );
    const results = keys.map((key) => assignment.guard(key, run(key), true));
    await waitUntil('two runs start', () => started.length === 2, 20_000, 20);
    const from = renewals.length;
    await waitUntil('three more late renewals land', () => renewals.length >= from + 3, 30_000, 20);
    expect(renewals.slice(from).every((r) => r.ok && !r.onTime)).to.equal(true);
    expect(started, 'no slot given back while renewals are late').to.have.length(2);
    // Renewals on time again: the slow runs give their slots back.
    gate.delay(undefined);
    await waitUntil('every run starts', () => started.length === keys.length, 30_000, 50);
    skr.answerAll();
    expect(await Promise.all(results)).to.deep.equal(keys.map(() => 'written'));
  });

  it('aborts a run when the replica is suspended: no KCP write after, no exit, the run again on resumption', async () => {
    const { keys, gate, membership, assignment, lost, acquired, run, kyma } = await replicaOwningAll(1);
    const key = keys[0]!;
    const result = assignment.guard(key, run(key), false);
    await waitUntil('the run waits on the SKR', () => skr.held() === 1, 20_000, 10);
    gate.hold(renewal);
    await waitUntil('the replica suspends', () => !membership.isActive(), 30_000, 10);
    // The SKR answers now: a run still going would go on to its KCP write.
    skr.answerAll();
    expect(await result, 'the run was withdrawn').to.equal(undefined);
    expect(assignment.idle(), 'nothing in flight when peers may take over').to.equal(true);
    expect((await kyma(key)).metadata.annotations?.[WRITTEN], 'no KCP write after suspension').to.equal(
      undefined,
    );
    expect(lost).to.deep.equal([]);

    const acquiredBefore = acquired.length;
    gate.releaseAll();
    await waitUntil('the replica resumes', () => membership.isActive(), 30_000, 10);
    await waitUntil(
      'the withdrawn Kyma is run again',
      () => acquired.slice(acquiredBefore).includes(key),
      20_000,
      10,
    );
    expect(lost).to.deep.equal([]);
  });

  it('aborts the runs of Kymas it hands over: the handover does not wait for a hung SKR, and they write nothing', async () => {
    const { namespace, identity, keys, assignment, run, kyma } = await replicaOwningAll(12);
    const results = new Map(keys.map((key) => [key, assignment.guard(key, run(key), false)]));
    await waitUntil('every run waits on the SKR', () => skr.held() === keys.length, 20_000, 10);

    const peer = createMembership({
      kubeConfig: kcp,
      namespace,
      ring: `ring-${round}`,
      identity: `peer-${round}`,
      leaseDurationMs: 10_000,
      renewDeadlineMs: 4_000,
      retryPeriodMs: 1_000,
      onChange: () => {},
      onLost: () => {},
    });
    await peer.start();
    cleanups.push(() => peer.release());
    const ring = createHashRing([identity, peer.identity]);
    const owners = new Map<string, string | undefined>();
    for (const key of keys) {
      const read = await kyma(key);
      owners.set(key, ring.ownerOf(shardKeyOf(read)));
    }
    const moving = keys.filter((key) => owners.get(key) === peer.identity);
    expect(moving.length, 'the ring moves some Kymas to the peer').to.be.greaterThan(0);
    // The SKR still holds every request: a handover that waited for the runs would never be written.
    await waitUntil(
      'the moved Kymas are labelled for the peer',
      async () => {
        for (const key of moving) {
          if ((await kyma(key)).metadata.labels?.[LABELS.shardOwner] !== peer.identity) return false;
        }
        return true;
      },
      30_000,
      50,
    );
    skr.answerAll();
    for (const key of keys) {
      const expected = moving.includes(key) ? undefined : 'written';
      expect(await results.get(key), key).to.equal(expected);
      expect((await kyma(key)).metadata.annotations?.[WRITTEN], key).to.equal(
        moving.includes(key) ? undefined : identity,
      );
    }
  });
});
