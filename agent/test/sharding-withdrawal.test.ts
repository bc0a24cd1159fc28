// Withdrawal reaches the reconciler's own clients (decision 012, "Withdrawal"): the sharding tests in
// sharding-work.test.ts run work of their own on clients built the way the reconciler builds them; here the work is
// the reconciler itself, on a real KCP and a real SKR, so a reconciler that built its KCP client without the run's
// abort signal (or lost it on the way to a request) would be caught. The replica's KCP requests pass a gate the
// test holds: the reconcile's status write waits there while the replica withdraws the run.
import { expect } from 'chai';
import { CustomObjectsApi, type KubeConfig } from '@kubernetes/client-node';
import { GROUP, KINDS, type Kyma } from '@skr-watcher/api';
import { startEnvironment, type Environment } from '@skr-watcher/testenv';
import { waitUntil } from '../../test/support/eventually.js';
import { seedKcp } from '../../test/support/kcp-seed.js';
import { createManager, type Manager } from '../src/manager/index.js';
import {
  createAssignment,
  createMembership,
  type Assignment,
  type Membership,
} from '../src/sharding/index.js';
import { GatedKubeConfig, type GatedRequest } from './support/gates.js';

const NAMESPACE = 'withdrawal';
const SKR = 'skr';
const KEY = `${NAMESPACE}/${SKR}`;

describe('a withdrawn reconcile (the reconciler under a sharded replica)', function () {
  this.timeout(180_000);
  let env: Environment;
  let kcp: KubeConfig;
  let gate: GatedKubeConfig;
  let membership: Membership;
  let assignment: Assignment;
  let manager: Manager;

  before(async () => {
    env = await startEnvironment({ planes: ['kcp', SKR] });
    kcp = env.plane('kcp').kubeConfig();
    await seedKcp(env, NAMESPACE, [SKR]);
    membership = createMembership({
      kubeConfig: kcp,
      namespace: NAMESPACE,
      ring: 'withdrawal',
      identity: 'replica-a',
      leaseDurationMs: 10_000,
      renewDeadlineMs: 4_000,
      retryPeriodMs: 1_000,
      onChange: (members) => assignment?.setMembers(members),
      onLost: () => {},
      idle: () => assignment?.idle() ?? true,
    });
    await membership.start();
    assignment = createAssignment({
      kubeConfig: kcp,
      namespace: NAMESPACE,
      membership,
      onAcquired: () => {},
    });
    assignment.setMembers(membership.members());
    await assignment.start();
    await waitUntil('the replica owns the Kyma', () => assignment.ownedKeys().includes(KEY), 60_000, 50);
    // Only the reconciler's requests pass the gate; membership and assignment talk to the KCP directly.
    gate = new GatedKubeConfig();
    gate.loadFromFile(env.plane('kcp').kubeconfigPath);
    manager = createManager({ kcp: gate, namespace: NAMESPACE });
  });
  after(async () => {
    gate?.releaseAll();
    await manager?.close();
    assignment?.withdrawAll('test over');
    assignment?.stopStarting();
    await assignment?.stop();
    await membership?.release();
    await env?.stop();
  });

  it('never sends a KCP request the reconciler had not sent when the run was withdrawn', async () => {
    const statusWrite = (request: GatedRequest) =>
      request.method === 'PATCH' && request.url.includes(`/kymas/${SKR}/status`);
    gate.hold(statusWrite);
    const run = assignment.guard(KEY, () => manager.reconciler.reconcile(KEY), false);
    // Everything before it went through: the SKR Kyma exists, the finalizer is on the KCP Kyma.
    await waitUntil('the status write waits at the gate', () => gate.heldCount() === 1, 90_000, 20);

    assignment.withdrawAll('handed over (test)');
    // The held write may go now, after the withdrawal: a client that ignored the run's signal would send it. (The
    // gate holds a request before the client attaches the run's signal, so it is released here, not raced.)
    gate.releaseAll();
    expect(await run, 'the run ends as withdrawn, not as a failure').to.equal(undefined);
    expect(assignment.idle(), 'nothing in flight once withdrawn').to.equal(true);
    expect(gate.passed.some(statusWrite), 'the held request left the gate').to.equal(true);
    // Time for a request sent on release to land before the Kyma is read (loopback answers in milliseconds).
    await new Promise((resolve) => setTimeout(resolve, 500));
    const kyma = (await kcp.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({
      group: GROUP,
      version: KINDS.kyma.version,
      plural: KINDS.kyma.plural,
      namespace: NAMESPACE,
      name: SKR,
    })) as Kyma;
    expect(kyma.metadata.finalizers ?? [], 'the run got as far as the finalizer').to.not.deep.equal([]);
    expect(kyma.status, 'no status written by the withdrawn run').to.equal(undefined);
  });
});
